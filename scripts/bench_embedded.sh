#!/usr/bin/env bash
# The committed CPU benchmark of the embedded pair (SmolLM2-135M-Instruct + the drafters in
# assets/drafters), run with nothing else on the machine. Writes results/smollm2-cpu*/.
#   bash scripts/bench_embedded.sh [max_new_tokens]
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
PY=.venv/bin/python
N=${1:-96}
COMMON=(--preset smollm2 --dtype bfloat16 --builder graph --dataset eval --max-new-tokens "$N")
$PY -m dominotree profile-cost --preset smollm2 --dtype bfloat16 --contexts 64,256,512 --nodes 0,1,2,4,8,16,32 \
  --repeats 5 --out results/cost_model_smollm2_cpu.json
$PY -m dominotree bench "${COMMON[@]}" --cost-model results/cost_model_smollm2_cpu.json \
  --methods ar,dflash,ddtree,caddtree,domino,dominotree,marg,condstatic,condadaptive \
  --temperatures 0,1 --out results/smollm2-cpu --overwrite
