#!/usr/bin/env bash
# Training step speed of the ablation configs (issue 10): a dozen steps each, no evaluation to
# speak of, so the choice between bf16 autocast and float32, the full LM head and a candidate
# vocabulary, anchors per sequence and draft layers starts from measured rows/s on the machine
# at hand. Acceptance per CPU-hour needs the longer scripts/train_ablation.sh.
#
#   scripts/train_speed.sh [STEPS] [DATA]      # default 12 steps, assets/distill
#   ONLY="f32-full f32-vocab8k" scripts/train_speed.sh     # just these configs
#   OUT=results/train-ablation/speed-zen4 scripts/train_speed.sh   # another machine's figures
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-12}
DATA=${2:-assets/distill}
OUT=${OUT:-results/train-ablation/speed}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1
echo "\`scripts/train_speed.sh $STEPS $DATA\` ($STEPS steps per config, one config at a time under flock)" > "$OUT/MADE_BY"
source scripts/train_configs.sh
record_machine "$OUT/machine.txt"
for entry in "${TRAIN_CONFIGS[@]}"; do
  name=${entry%%|*}; extra=${entry#*|}
  if [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]]; then continue; fi
  rm -f "$OUT/$name.log"
  echo "== $name: $extra"
  # shellcheck disable=SC2086
  flock /tmp/cpu.lock "$PY" -m dominotree.train.trainer --data "$DATA" --seed 0 --max-steps "$STEPS" \
      --time-budget-min 60 --threads 2 --n-eval 4 --eval-anchors 2 --eval-every-min 1000 --log-every 1 \
      --lam-floor 0.5 --save-every-min 1000 --out-dflash "/tmp/speed/$name/dflash" \
      --out-domino "/tmp/speed/$name/domino" --log "$OUT/$name.log" $extra > "$OUT/$name.stdout.txt" 2>&1
done
"$PY" scripts/train_ablation_summary.py "$OUT"
