#!/usr/bin/env bash
# Issue 12's float32 measurements after the cheaper build and the budget-limited draft (session 8),
# embedded pair, CPU, nothing else running (run each part under the lock):
#   BEFORE=35051ee flock /tmp/cpu.lock bash scripts/cheap_rounds_float32.sh rounds  # profile-rounds before/after (~8 min)
#   flock /tmp/cpu.lock bash scripts/cheap_rounds_float32.sh bench     # profile-cost, calibrations, one bench (~20 min)
# "before" runs the same command in a git worktree of $BEFORE (made in /tmp if missing) with this venv.
# The bench's auto variants each read their own calibration from $R/ (made there when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python
export HF_HUB_OFFLINE=1
R=results/cheap-rounds/float32
mkdir -p "$R"
M=(--preset smollm2 --dtype float32 --weights float32 --threads 2)
machine() { grep -m1 "model name" /proc/cpuinfo; grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' '; echo; }
case "${1:-}" in
  rounds)
    B=${BEFORE:?set BEFORE=<commit> to compare with}
    W=/tmp/dominotree-before-$B
    [[ -d $W ]] || git worktree add -q "$W" "$B"
    machine | tee "$R/machine.txt"
    for budget in 16 5; do
      (cd "$W" && $PY -m dominotree profile-rounds "${M[@]}" --dtypes float32 --methods ddtree,dominotree \
        --prompts 3 --max-new-tokens 48 --budget $budget --json-out "$OLDPWD/$R/profile_rounds_b${budget}_before.json") \
        | tee "$R/profile_rounds_b${budget}_before.txt"
      $PY -m dominotree profile-rounds "${M[@]}" --dtypes float32 --methods ddtree,dominotree --prompts 3 \
        --max-new-tokens 48 --budget $budget --json-out "$R/profile_rounds_b${budget}_after.json" \
        | tee "$R/profile_rounds_b${budget}_after.txt"
    done ;;
  bench)
    machine | tee "$R/machine.txt"
    $PY -m dominotree profile-cost "${M[@]}" --contexts 64,256 --nodes 0,1,2,4,8,16 --repeats 3 \
      --out "$R/cost_model.json" | tee "$R/profile_cost.txt"
    $PY -m dominotree bench "${M[@]}" --dataset chat,math,code --limit 4 --max-new-tokens 48 \
      --methods "${METHODS:-ar,hf-generate,ddtree,dominotree,dominotree@auto,dominotree/v8192,dominotree@auto/v8192}" \
      --cost-model "$R/cost_model.json" --calibration "$R" --out "$R/bench" --overwrite --no-progress \
      | tee "$R/bench.txt" ;;
  *) echo "usage: $0 rounds|bench" >&2; exit 2 ;;
esac
