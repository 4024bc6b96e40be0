#!/usr/bin/env bash
# The committed CPU benchmark of the embedded pair (SmolLM2-135M-Instruct + the drafters in
# assets/drafters), run with nothing else on the machine. Writes results/smollm2-cpu-T*/.
#   bash scripts/bench_embedded.sh [max_new_tokens] [T=1 prompts per category]
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
PY=.venv/bin/python
N=${1:-48}
L1=${2:-2}
COMMON=(--preset smollm2 --dtype bfloat16 --builder graph --max-new-tokens "$N")
[ -f results/cost_model_smollm2_cpu.json ] || \
  $PY -m dominotree profile-cost --preset smollm2 --dtype bfloat16 --contexts 64,256,512 --nodes 0,1,2,4,8,16,32 \
    --repeats 5 --out results/cost_model_smollm2_cpu.json
# T = 0: all 36 held-out prompts, every method
$PY -m dominotree bench "${COMMON[@]}" --dataset eval --cost-model results/cost_model_smollm2_cpu.json \
  --methods ar,dflash,ddtree,caddtree,domino,dominotree,marg,condstatic,condadaptive \
  --temperatures 0 --out results/smollm2-cpu-T0 --overwrite
# T = 1: the first prompts of each category (time on this 2-core machine), the seven fixed-budget methods
$PY -m dominotree bench "${COMMON[@]}" --dataset chat,math,code --limit "$L1" \
  --methods ar,dflash,ddtree,domino,dominotree,marg,condstatic \
  --temperatures 1 --out results/smollm2-cpu-T1 --overwrite
