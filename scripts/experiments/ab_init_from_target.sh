#!/usr/bin/env bash
# Issue 29, item 6: does initialising the drafters' backbone from the target's last layers
# (--init-from-target; SmolLM2-135M's layers 28-29 have exactly the draft layers' shapes) beat a
# random backbone at equal training time? Two from-scratch block-8 runs, identical otherwise (the
# soft arm's losses, seed 0, lr 1e-3 cosine, Domino's base-loss floor 0.5), judged by the
# trainer's held-out chain acceptance (the same 64 held-out sequences as every stage).
#
#   scripts/experiments/ab_init_from_target.sh [MINUTES_PER_ARM]      # default 18
#
# Writes data/ab-init/{target,random}/ (weights, not committed) and
# results/train-issue29/ab-init/{target,random}/ (logs and summaries).
set -euo pipefail
cd "$(dirname "$0")/../.."
MIN=${1:-18}
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1
source scripts/experiments/record_machine.sh
for ARM in target random; do
  OUT=results/train-issue29/ab-init/$ARM
  FT=data/ab-init/$ARM
  mkdir -p "$OUT" "$FT"
  record_machine "$OUT/README.md"
  init=()
  [ "$ARM" = target ] && init=(--init-from-target)
  flock /tmp/cpu.lock "$PY" -m dominotree.train.trainer --data assets/distill --seed 0 --block-size 8 \
      --out-dflash "$FT/smollm2-dflash-b8" --out-domino "$FT/smollm2-domino-b8" \
      --heldout-shards 24 --head-vocab 8192 --anchors 64 --batch 2 --warmup 0.05 \
      --lr 1e-3 --lam-floor 0.5 --time-budget-min "$MIN" --threads 2 \
      --n-eval 64 --eval-anchors 16 --eval-every-min 60 --save-every-min 60 --feat-cache-gb 8 --log-every 10 \
      --no-auto-resume --log "$OUT/train_log.txt" --summary-md "$OUT/README.md" \
      --soft-k 32 --loop-weight 0.25 --topm-loss 64 --topm-weight 1.0 "${init[@]}"
done
