#!/usr/bin/env bash
# Runs train_issue29.sh in chunks of CHUNK minutes until its schedule of SCHEDULE minutes is done,
# releasing the CPU lock between chunks so that other timed work on a shared 2-core machine can
# run in between (each chunk resumes the saved training state; the schedule is unchanged). Other
# work goes first: a chunk starts only when no process matching YIELD_TO (default: commands
# waiting for or holding `flock /tmp/heavy.lock`) is left.
#
#   ARM=soft TAG=soft4 TRAIN_ARGS="--no-amp --target-dtype float32" \
#     scripts/experiments/train_chunks.sh 15 80
set -euo pipefail
cd "$(dirname "$0")/../.."
CHUNK=${1:-15}
SCHEDULE=${2:-80}
TAG=${TAG:-${ARM:-soft}}
done_file=results/train-issue29/$TAG/README.md
YIELD_TO=${YIELD_TO:-flock /tmp/heavy.lock}
until [ -f "$done_file" ] && grep -q "## Final results" "$done_file"; do
  while pgrep -f "$YIELD_TO" >/dev/null; do sleep 15; done
  scripts/experiments/train_issue29.sh "$CHUNK" "$SCHEDULE"
  sleep 20
done
