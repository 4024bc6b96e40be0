#!/usr/bin/env bash
# One target-weights setting of the embedded pair, end to end on this CPU: the verify-cost profile,
# then one interleaved bench of ar, hf-generate (transformers generate, bf16), ddtree, dominotree
# (budget 16) and the --budget auto variants on 12 held-out prompts x 48 tokens. Each auto variant
# reads (or makes, on the held-out calibration prompts) its own calibration in the results folder.
#   flock /tmp/cpu.lock bash scripts/bench_lean.sh int4        # ~25 min on 2 idle cores
#   flock /tmp/cpu.lock bash scripts/bench_lean.sh float32
#   METHODS=ar,hf-generate,dominotree@auto/v8192 flock /tmp/cpu.lock bash scripts/bench_lean.sh int4
#   OUT=results/lean-int4-zen4 flock /tmp/cpu.lock bash scripts/bench_lean.sh int4    # another machine's folder
# int4 and float32 run float32 activations (int4 on the C++ kernel; bf16 where it cannot build),
# bf16 runs bfloat16. Writes results/lean-<weights>/ or $OUT (machine, cost model, calibrations, bench).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:?usage: $0 int4|float32|bf16}
case "$W" in bf16) DT=bfloat16 ;; *) DT=float32 ;; esac
PY=.venv/bin/python
export HF_HUB_OFFLINE=1
R=${OUT:-results/lean-$W}
mkdir -p "$R"
M=(--preset smollm2 --dtype "$DT" --weights "$W" --threads 2)
{ grep -m1 "model name" /proc/cpuinfo; grep -o -w -E "avx2|avx512f|avx512_bf16|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' '; echo; } \
  | tee "$R/cpu.txt"
rm -f "$R"/budget_*.json     # calibrations belong to this run's profile
$PY -m dominotree profile-cost "${M[@]}" --contexts 64,256 --nodes 0,1,2,4,8,16 --repeats 3 \
  --out "$R/cost_model.json" | tee "$R/profile_cost.txt"
$PY -m dominotree bench "${M[@]}" --dataset chat,math,code --limit 4 --max-new-tokens 48 \
  --methods "${METHODS:-ar,hf-generate,ddtree,dominotree,dominotree@auto,dominotree/v8192,dominotree@auto/v8192}" \
  --cost-model "$R/cost_model.json" --calibration "$R" --out "$R/bench" --overwrite --no-progress \
  | tee "$R/bench.txt"
