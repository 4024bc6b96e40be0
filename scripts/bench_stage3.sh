#!/usr/bin/env bash
# The stage-3 drafters against the shipped ones, end to end on this CPU: one interleaved bench
# per pair (ar, ddtree, dominotree at budget 16, float32, T = 0; for stage 3 also with draft
# vocabularies of 8192 and 16384 tokens) on the same 12 held-out prompts
# x 48 new tokens as results/lean-float32 (the first 4 of chat, math and code).
#   flock /tmp/cpu.lock bash scripts/bench_stage3.sh [NEW_DRAFTERS_FOLDER]   # ~10 min on 2 idle cores
# Writes results/train-stage3/bench-{shipped,stage3}/ and their .txt tables.
set -euo pipefail
cd "$(dirname "$0")/.."
NEW=${1:-data/ft3}      # needs draft-vocab.json beside its drafters (cp assets/drafters/draft-vocab.json)
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1
R=results/train-stage3
mkdir -p "$R"
TARGET=$($PY -c "from dominotree.models.smollm2 import ensure_smollm2; print(ensure_smollm2())")
for pair in ${PAIRS:-shipped stage3}; do   # PAIRS="stage3": one of them
  case $pair in
    shipped) D=assets/drafters; METHODS=ar,ddtree,dominotree ;;
    stage3) D=$NEW; METHODS=ar,ddtree,dominotree,ddtree/v8192,dominotree/v8192,dominotree/v16384 ;;
  esac
  $PY -m dominotree bench --target "$TARGET" --drafter "$D/smollm2-dflash-b16" --drafter "$D/smollm2-domino-b16" \
    --dtype float32 --dataset chat,math,code --limit 4 --max-new-tokens 48 --methods "$METHODS" \
    --out "$R/bench-$pair" --overwrite --no-progress | tee "$R/bench-$pair.txt"
done
