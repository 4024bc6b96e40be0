#!/usr/bin/env bash
# Issue 12's measurements (embedded pair, CPU, nothing else running: run each part under the lock).
#   flock /tmp/cpu.lock bash scripts/cheap_rounds.sh build   # bench-build + profile-rounds before/after (~4 min)
#   flock /tmp/cpu.lock bash scripts/cheap_rounds.sh calibrate  # profile-cost + calibrate-budget (~5 min)
#   flock /tmp/cpu.lock bash scripts/cheap_rounds.sh bench      # ar, ddtree, dominotree, dominotree@auto: 12 prompts x 48 tokens (~8 min)
# "before" = the reference builder with every depth prepared up front (the build of main before this
# issue: DOMINOTREE_EAGER_DEPTHS=1 --builder python); "after" = lazy depths and the device's default builder.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export HF_HUB_OFFLINE=1
R=results/cheap-rounds
CM=$R/cost_model_smollm2_cpu_amd.json
CAL=$R/budget_smollm2_cpu_dominotree.json
mkdir -p "$R"
case "${1:-}" in
  build)
    $PY -m dominotree bench-build --device cpu --shapes embedded --rounds 50 --json-out $R/bench_build_cpu.json \
      | tee $R/bench_build_cpu.txt
    DOMINOTREE_EAGER_DEPTHS=1 $PY -m dominotree profile-rounds --preset smollm2 --builder python \
      --json-out $R/profile_rounds_before.json | tee $R/profile_rounds_before.txt
    $PY -m dominotree profile-rounds --preset smollm2 --json-out $R/profile_rounds_after.json \
      | tee $R/profile_rounds_after.txt ;;
  calibrate)
    $PY -m dominotree profile-cost --preset smollm2 --dtype bfloat16 --contexts 64,256,512 \
      --nodes 0,1,2,4,8,16,32 --repeats 3 --out $CM | tee $R/profile_cost.txt
    $PY -m dominotree calibrate-budget --preset smollm2 --dtype bfloat16 --method dominotree --budget-max 32 \
      --per-category 2 --max-new-tokens 48 --cost-model $CM --out $CAL | tee $R/calibrate_budget.txt ;;
  bench)
    $PY -m dominotree bench --preset smollm2 --dtype bfloat16 --dataset chat,math,code --limit 4 \
      --max-new-tokens 48 --methods ar,ddtree,dominotree,dominotree@auto --cost-model $CM --calibration $CAL \
      --out $R/bench --overwrite --no-progress | tee $R/bench.txt ;;
  *) echo "usage: $0 build|calibrate|bench" >&2; exit 2 ;;
esac
