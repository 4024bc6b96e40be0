#!/usr/bin/env bash
# One weights setting of the embedded pair, end to end on this CPU: verify-cost profile, the
# --budget auto calibration, then one interleaved bench of ar, hf-generate (transformers generate,
# bf16), ddtree, dominotree (budget 16) and dominotree@auto on 12 held-out prompts x 48 tokens.
#   flock /tmp/cpu.lock bash scripts/bench_lean.sh float32     # ~12 min on 2 idle cores
#   flock /tmp/cpu.lock bash scripts/bench_lean.sh int4
#   METHODS=ar,ddtree/v8192,dominotree/v8192,dominotree@auto/v8192 ... bash scripts/bench_lean.sh float32
# Writes results/lean-<weights>/ (cost model, calibration, bench folder, logs).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:?usage: $0 float32|int4|bf16}
case "$W" in float32) DT=float32 ;; *) DT=bfloat16 ;; esac
PY=.venv/bin/python
export HF_HUB_OFFLINE=1
R=results/lean-$W
mkdir -p "$R"
M=(--preset smollm2 --dtype "$DT" --weights "$W")
grep -m1 "model name" /proc/cpuinfo | tee "$R/cpu.txt"
grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' ' | tee -a "$R/cpu.txt"; echo | tee -a "$R/cpu.txt"
$PY -m dominotree profile-cost "${M[@]}" --contexts 64,256 --nodes 0,1,2,4,8,16 --repeats 3 \
  --out "$R/cost_model.json" | tee "$R/profile_cost.txt"
$PY -m dominotree calibrate-budget "${M[@]}" --method dominotree --budget-max 16 --per-category 2 \
  --max-new-tokens 48 --cost-model "$R/cost_model.json" --out "$R/calibration.json" | tee "$R/calibrate_budget.txt"
$PY -m dominotree bench "${M[@]}" --dataset chat,math,code --limit 4 --max-new-tokens 48 \
  --methods "${METHODS:-ar,hf-generate,ddtree,dominotree,dominotree@auto}" --cost-model "$R/cost_model.json" \
  --calibration "$R/calibration.json" --out "$R/bench" --overwrite --no-progress | tee "$R/bench.txt"
