#!/usr/bin/env bash
# Issue 29's first experiment: block-8 DFlash and Domino drafters fine-tuned from the shipped
# block-16 pair (stage 7, assets/drafters) on assets/distill, the stage-7 recipe otherwise (bf16,
# loss over the 8192 most frequent answer tokens + each step's labels, lr 2e-4, Domino's base-loss
# floor 0.5), judged on the acceptance yardstick (python -m dominotree acceptance).
#
#   ARM=soft scripts/experiments/train_issue29.sh [RUN_MINUTES] [SCHEDULE_MINUTES]
#     soft: the target's top-32 as the label (KL + CE on its argmax), loop positions at weight 0.25,
#           Domino's Top-64 restricted loss (weight 1)
#     hard: the data tokens as labels, no loop weight, no Top-M loss (the block-8 change alone)
#
# Resumable: the full training state goes to data/ft29-$ARM/state.pt (not committed: ~12 bytes per
# parameter) and a rerun resumes it automatically; on a fresh machine, rerun from the committed
# block-8 checkpoints by pointing FROM_DFLASH / FROM_DOMINO at them (fresh optimizer moments). The soft labels are made
# with each sequence's features in the process that needs them (a restart recomputes them).
# Checkpoints land in data/ft29-$TAG/; logs in results/train-issue29/$TAG/ (TAG defaults to ARM).
# TRAIN_ARGS adds trainer flags (on a CPU without native bf16: TRAIN_ARGS="--no-amp --target-dtype float32").
# A later stage continues an arm's weights with a fresh optimizer and schedule on the sequences the
# arm had not reached:
#   ARM=soft TAG=soft2 FROM_DFLASH=data/ft29-soft/smollm2-dflash-b8 \
#     FROM_DOMINO=data/ft29-soft/smollm2-domino-b8 SKIP=2446 scripts/experiments/train_issue29.sh 75 75
set -euo pipefail
cd "$(dirname "$0")/../.."
RUN=${1:-25}
SCHEDULE=${2:-25}
ARM=${ARM:-soft}
TAG=${TAG:-$ARM}
SKIP=${SKIP:-0}
# default: continue the shipped block-8 pair (the first experiment started from the block-16 pair
# that assets/drafters shipped until 2026-12-04: git show 5c1d333:assets/drafters/...)
FROM_DFLASH=${FROM_DFLASH:-assets/drafters/smollm2-dflash-b8}
FROM_DOMINO=${FROM_DOMINO:-assets/drafters/smollm2-domino-b8}
OUT=results/train-issue29/$TAG
FT=data/ft29-$TAG
PY=${PY:-.venv/bin/python}
case "$ARM" in
  soft) extra=(--soft-k 32 --loop-weight 0.25 --topm-loss 64 --topm-weight 1.0) ;;
  hard) extra=() ;;
  *) echo "ARM must be soft or hard" >&2; exit 2 ;;
esac
mkdir -p "$OUT" "$FT"
export HF_HUB_OFFLINE=1
source scripts/experiments/record_machine.sh
record_machine "$OUT/README.md"
flock /tmp/cpu.lock "$PY" -m dominotree.train.trainer --data assets/distill --seed 0 --block-size 8 \
    --resume-dflash "$FROM_DFLASH" --resume-domino "$FROM_DOMINO" \
    --out-dflash "$FT/smollm2-dflash-b8" --out-domino "$FT/smollm2-domino-b8" \
    --heldout-shards 24 --skip-seqs "$SKIP" --head-vocab 8192 --anchors 64 --batch 2 --warmup 0.05 \
    --lr 2e-4 --decay-ratio 0 --lam-floor 0.5 --time-budget-min "$SCHEDULE" --run-minutes "$RUN" --threads 2 \
    --n-eval 64 --eval-anchors 16 --eval-every-min 60 --save-every-min 5 --feat-cache-gb 8 --log-every 10 \
    --state "$FT/state.pt" --log "$OUT/train_log.txt" --summary-md "$OUT/README.md" "${extra[@]}" \
    ${TRAIN_ARGS:-}
