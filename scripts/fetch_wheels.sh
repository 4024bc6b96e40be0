#!/usr/bin/env bash
# Download the pinned transformers and tokenizers wheels (requirements.txt) for the GPU machine's
# Python 3.12 into wheels/ (git-ignored). scripts/gpu_check.sh installs them into a temporary
# folder when they are carried: run(..., carry=["wheels"]). They are 16.1 MiB: carry them only
# while tracked files + wheels stay under the 64 MiB transfer (README, "On a GPU").
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
pins=$(grep -E '^(transformers|tokenizers)==' requirements.txt | sed 's/ .*//')
"$PY" -m pip download $pins --no-deps --only-binary=:all: --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d wheels
du -ch wheels/*.whl | tail -1
