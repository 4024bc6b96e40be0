#!/usr/bin/env bash
# The cheaper verify rows on AVX2 (attention 8 keys at a time, activation blocks quantized 8 lanes
# at a time): base = the commit before (BASE_DIR, a worktree of it), new = this tree (NEW_DIR),
# alternating, each alone under the heavy lock. 1. one target forward of n rows (fast_curves.py);
# 2. the default-weights bench.
#   BASE_DIR=/work/wtk0 NEW_DIR=/work/main OUT=/tmp/abv bash results/verify-rows-zen3/ab.sh
set -u
OUT=${OUT:-/tmp/abv}; mkdir -p "$OUT"
for rep in 1 2 3; do
  for side in base new; do
    dir=$BASE_DIR; [ $side = new ] && dir=$NEW_DIR
    ( cd "$dir" && HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python scripts/fast_curves.py --configs "int4-q8 / fast" \
        --rows 1,2,4,8,17 --skip-ar --reps 5 --out "$OUT/curve-$side-$rep" ) > "$OUT/curve-$side-$rep.log" 2>&1
  done
done
for rep in 1 2; do
  for side in base new; do
    dir=$BASE_DIR; [ $side = new ] && dir=$NEW_DIR
    ( cd "$dir" && HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python -m dominotree bench --preset smollm2 \
        --max-new-tokens 48 --dataset eval --limit 6 --methods ar,dominotree@3,ddtree@3,dominotree \
        --temperatures 0 --out "$OUT/bench-$side-$rep" ) > "$OUT/bench-$side-$rep.log" 2>&1
    echo "bench-$side-$rep rc=$? $(date +%T)" >> "$OUT/progress.txt"
  done
done
