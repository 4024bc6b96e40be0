#!/usr/bin/env bash
# The bfloat16 CPU benchmark of the embedded pair (SmolLM2-135M-Instruct + the drafters in
# assets/drafters), run with nothing else on the machine. Writes:
#   results/cost_model_smollm2_cpu.json   verify-cost profile for caddtree / condadaptive (this machine)
#   results/smollm2-cpu/                  all 9 methods, the 36 held-out prompts, T = 0, 0.5, 1
#   results/smollm2-cpu-budget/           budget sweep (ddtree and dominotree, T = 0, the first P
#                                         prompts per category)
#   bash scripts/experiments/bench_embedded.sh [max_new_tokens=48] [sweep prompts per category=4]
#                                  [parts=main,budget; add "profile" to re-profile]
# The committed folders ran on the retired block-16 stage-7 drafters (2026-12-03); a rerun today
# uses the shipped block-8 pair and replaces the folder, the committed run's packed answers.jsonl
# included. The Top-M and head-to-head parts went in issue 41 (their folders, results/smollm2-cpu-topm/
# and -headtohead/, in issue 33): git show 8f4bfaf:scripts/bench_embedded.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export HF_HUB_OFFLINE=1
PY=${PY:-.venv/bin/python}
N=${1:-48}
P=${2:-4}
PARTS=${3:-main,budget}
CM=results/cost_model_smollm2_cpu.json
COMMON=(--preset smollm2 --dtype bfloat16 --builder graph --max-new-tokens "$N")
has() { [[ ",$PARTS," == *",$1,"* ]]; }

if [ ! -f "$CM" ] || has profile; then
  $PY -m dominotree profile-cost --preset smollm2 --dtype bfloat16 --contexts 64,256,512 --nodes 0,1,2,4,8,16,32 \
    --repeats 5 --out "$CM"
fi
if has main; then
  rm -f results/smollm2-cpu/answers.jsonl
  $PY -m dominotree bench "${COMMON[@]}" --dataset eval --cost-model "$CM" \
    --methods ar,dflash,ddtree,caddtree,domino,dominotree,marg,condstatic,condadaptive \
    --temperatures 0,0.5,1 --out results/smollm2-cpu --overwrite
fi
if has budget; then
  rm -f results/smollm2-cpu-budget/answers.jsonl
  $PY -m dominotree bench "${COMMON[@]}" --dataset chat,math,code --limit "$P" \
    --ablation budget --methods ddtree,dominotree --budgets 4,8,16,32,64 --temperatures 0 \
    --out results/smollm2-cpu-budget --overwrite
fi
