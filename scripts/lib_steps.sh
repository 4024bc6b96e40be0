# Sourced by scripts/gpu_train.sh and scripts/gpu_check.sh: the step runner both prepared GPU
# commands share. Before sourcing, the caller sets OUT (where steps.log goes) and BUDGET (seconds
# for all steps), and defines `after_step` (rewrites its summary after every step); KILL_AFTER
# (seconds between timeout's TERM and KILL, default 5) is optional. Sourcing clears steps.log.
#
#   run NAME LIMIT CMD...   the step under min(LIMIT, what is left of BUDGET), its output appended
#                           to steps.log, "NAME:RC:SECONDS" appended to STEPS, LAST_RC set, then
#                           after_step; a step with under 5 s left is skipped (rc 124)
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
: > "$OUT/steps.log"
STEPS=""
LAST_RC=0

run() {
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - SECONDS)); [ "$left" -lt "$limit" ] && limit=$left
  local t0=$SECONDS rc
  if [ "$limit" -lt 5 ]; then
    echo "=== $name: skipped, the time budget is spent" >> "$OUT/steps.log"; rc=124
  else
    echo "=== $name (limit ${limit}s): $*" >> "$OUT/steps.log"
    timeout -k "${KILL_AFTER:-5}" "$limit" "$@" >> "$OUT/steps.log" 2>&1; rc=$?
  fi
  echo "=== $name: rc=$rc in $((SECONDS - t0))s" >> "$OUT/steps.log"
  STEPS="$STEPS $name:$rc:$((SECONDS - t0))"
  LAST_RC=$rc
  after_step
}
