#!/usr/bin/env bash
# Acceptance of two drafter pairs on the 36 held-out prompts (assets/prompts/eval.jsonl), T = 0:
# tau is deterministic at T = 0, so pairs compare exactly across runs (timing does not enter).
#   flock /tmp/cpu.lock bash scripts/experiments/tau_pairs.sh OUT PAIR_FOLDER [PAIR_FOLDER ...]   # ~4 min a pair
# Each PAIR_FOLDER holds smollm2-dflash-b<N>/, smollm2-domino-b<N>/ and draft-vocab.json; writes
# OUT/<folder name>/ (a bench folder) and OUT/<folder name>.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT PAIR_FOLDER [PAIR_FOLDER ...]}; shift
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1
mkdir -p "$OUT"
TARGET=$($PY -c "from dominotree.models.smollm2 import ensure_smollm2; print(ensure_smollm2())")
for D in "$@"; do
  name=$(basename "$D")
  DF=$(ls -d "$D"/smollm2-dflash-b* | head -1); DO=$(ls -d "$D"/smollm2-domino-b* | head -1)
  $PY -m dominotree bench --target "$TARGET" --drafter "$DF" --drafter "$DO" \
    --dtype float32 --dataset eval --max-new-tokens 48 --methods ddtree/v8192,dominotree/v8192 \
    --out "$OUT/$name" --overwrite --no-progress | tee "$OUT/$name.txt"
done
