#!/usr/bin/env bash
# Training ablations for the embedded drafters (issue 10): what raises held-out acceptance per
# CPU-hour. Every config trains both drafters from the same seed on the same data for the same
# wall-clock budget, alone on the machine, and logs held-out chain acceptance as it goes.
# Resumable: a config whose log already ends with "done:" is skipped, so a session that is
# stopped part-way reruns only the configs it had not finished (a partial one restarts).
#
#   scripts/train_ablation.sh [MINUTES] [DATA]          # default 15 minutes each, assets/distill
#   python scripts/train_ablation_summary.py            # the table, into results/train-ablation/
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-15}
DATA=${2:-assets/distill}
OUT=results/train-ablation
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
export HF_HUB_OFFLINE=1

source scripts/train_configs.sh
record_machine "$OUT/machine.txt"
for entry in "${TRAIN_CONFIGS[@]}"; do
  name=${entry%%|*}; extra=${entry#*|}
  log="$OUT/$name.log"
  if [[ -f $log ]] && tail -1 "$log" | grep -q "done:"; then
    echo "skip $name (done)"; continue
  fi
  rm -f "$log"
  echo "== $name: $extra ($MIN min)"
  # shellcheck disable=SC2086
  flock /tmp/cpu.lock "$PY" -m dominotree.train.trainer --data "$DATA" --seed 0 \
      --time-budget-min "$MIN" --threads 2 --n-eval 64 --eval-anchors 16 --eval-every-min 3 \
      --lam-floor 0.5 --save-every-min 1000 --out-dflash "/tmp/ablation/$name/dflash" --out-domino "/tmp/ablation/$name/domino" \
      --log "$log" $extra > "$OUT/$name.stdout.txt" 2>&1
done
"$PY" scripts/train_ablation_summary.py
