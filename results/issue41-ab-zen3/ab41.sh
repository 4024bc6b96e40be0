#!/usr/bin/env bash
# Issue 41 "performance must not move": the default-weights bench at 8f4bfaf (before) and at main
# (after), alternating, same machine, same session, under the heavy lock.
set -u
OUT=/tmp/ab41; mkdir -p $OUT
for rep in 1 2; do
  for side in base main; do
    dir=/work/wt-base; [ $side = main ] && dir=/work/wt-after
    ( cd $dir && HF_HUB_OFFLINE=1 flock /tmp/heavy.lock .venv/bin/python -m dominotree bench --preset smollm2 --dtype float32 \
        --builder graph --max-new-tokens 48 --dataset eval --limit 4 --methods ar,dominotree@3,ddtree@3,dominotree \
        --temperatures 0 --out $OUT/$side-$rep ) > $OUT/$side-$rep.log 2>&1
    echo "$side-$rep rc=$? $(date +%T)" >> $OUT/progress.txt
  done
done
