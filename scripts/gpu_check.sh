#!/usr/bin/env bash
# The prepared GPU check (issue 34): one command, under 9 minutes, every step's result in $OUT as
# soon as the step ends (a timeout loses only the step it cut).
#
#   OUT=/some/dir bash scripts/gpu_check.sh              # on the GPU machine (python3 from PATH)
#   OUT=/tmp/gc bash scripts/gpu_check.sh --cpu-only     # the same plumbing on the CPU, small shapes
#
# For one NVIDIA GPU, no network, its own Python with torch + transformers (no gradio, no installs
# beyond the carried wheels). Steps and their time limits (seconds; 535 in all, under the 540 s
# budget; each limit shrinks to what is left of the budget):
#   0 env        15  env.txt: Python, torch, CUDA, transformers, GPU, nvidia-smi
#   1 wheels     30  wheels/*.whl (pinned transformers/tokenizers, if carried) into a temporary
#                    --target folder, used only if they import; env.txt says which ran
#   2 tests     170  tests/test_cuda.py (-m cuda): graphs captured and replayed == reference; the
#                    serving adapter on CUDA and against sgl_kernel when installed (test_serving.py)
#   3 bench     110  bench-build, embedded + Qwen3-4B head shapes, random weights: bench_build.json
#   4 curve      80  scripts/gpu_curve.py, fast vs transformers forward, Qwen3-4B shapes: fast_curve.json
#   5 decode    130  scripts/gpu_decode.py: random-tiny and the embedded drafters, every method at T = 0
#                    against ar, tie-aware, graph capture required: decode.json
# Files in $OUT (7): env.txt, steps.log (every step's output), cuda_tests.xml, bench_build.json,
# fast_curve.json, decode.json, gpu_check.json (the summary, rewritten after every step).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-results/gpu}"
PY="${PYTHON:-python3}"
CPU_ONLY=0
[ "${1:-}" = "--cpu-only" ] && CPU_ONLY=1
BUDGET=535
export DOMINOTREE_CACHE="${DOMINOTREE_CACHE:-$(mktemp -d)}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
after_step() { summarize; }     # after every step (scripts/lib_steps.sh's run): the summary rewritten
KILL_AFTER=3
. scripts/lib_steps.sh

summarize() {
  "$PY" - "$OUT" "$CPU_ONLY" $STEPS <<'EOF'
import json, os, sys
import xml.etree.ElementTree as ET
out, cpu_only, steps = sys.argv[1], sys.argv[2] == "1", sys.argv[3:]
def js(name):
    p = os.path.join(out, name)
    try:
        return json.loads(open(p).read().strip().splitlines()[-1]) if name != "decode.json" else json.load(open(p))
    except Exception:
        return None
s = {"cpu_only": cpu_only, "steps": {}}
for item in steps:
    name, rc, sec = item.split(":")
    s["steps"][name] = {"rc": int(rc), "s": int(sec), "timed_out": rc in ("124", "137")}
xml = os.path.join(out, "cuda_tests.xml")
if os.path.isfile(xml):
    root = ET.parse(xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    s["tests"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    s["tests"]["failed"] = [c.get("name") for c in suite.iter("testcase")
                            if c.find("failure") is not None or c.find("error") is not None]
b = js("bench_build.json")
if b:
    s["bench"] = {n: {k: r.get(k) for k in ("python_ms", "graph_ms", "frontier_ms", "ddtree_ms", "identical", "capture")}
                  for n, r in b.get("shapes", {}).items()}
c = js("fast_curve.json")
if c:
    s["curve"] = {"ms": c.get("ms"), "max_logit_diff": c.get("max_logit_diff")}
d = js("decode.json")
if d:
    s["decode"] = {"ok": d.get("ok"), "bad": [f"{n}:{r['method']}/{r.get('builder')}:{r['verdict']}"
                                              for n, p in d.get("pairs", {}).items() for r in p.get("runs", [])
                                              if r["verdict"] not in ("equal", "tie")]
                   + [f"{n}: {p['error']}" for n, p in d.get("pairs", {}).items() if "error" in p],
                   "ties": sum(r["verdict"] == "tie" for p in d.get("pairs", {}).values() for r in p.get("runs", []))}
s["ok"] = bool(s["steps"]) and all(v["rc"] == 0 for v in s["steps"].values())
open(os.path.join(out, "gpu_check.json"), "w").write(json.dumps(s, indent=1) + "\n")
EOF
}

# 0. environment
run env 15 "$PY" -c 'import sys, torch, transformers, tokenizers; print(sys.version); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available()); print("transformers", transformers.__version__, "tokenizers", tokenizers.__version__); print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no gpu")'
{ date -u; sed -n '/^=== env (/,/^=== env:/p' "$OUT/steps.log"; nvidia-smi 2>/dev/null || echo "no nvidia-smi"; } > "$OUT/env.txt"

# 1. the carried wheels (scripts/fetch_wheels.sh), never the system's packages
if ls wheels/*.whl > /dev/null 2>&1 && [ "$CPU_ONLY" = 0 ]; then
  SITE="$(mktemp -d)"
  run wheels 30 bash -c "'$PY' -m pip install --no-deps --no-index --no-compile --quiet --target '$SITE' wheels/*.whl && PYTHONPATH='$SITE' '$PY' -c 'import transformers, tokenizers; from transformers import Qwen3ForCausalLM, LlamaForCausalLM; print(\"wheels:\", transformers.__version__, tokenizers.__version__)'"
  if [ "$LAST_RC" = 0 ]; then
    export PYTHONPATH="$SITE:$PYTHONPATH"; echo "using the carried wheels: $(ls wheels)" >> "$OUT/env.txt"
  else
    echo "carried wheels did not install or import: using the machine's transformers (steps.log)" >> "$OUT/env.txt"
  fi
else
  echo "no wheels carried (or --cpu-only): the machine's transformers" >> "$OUT/env.txt"
fi

# 2. the cuda-marked tests (pytest.ini deselects them by default; -m cuda selects them)
if "$PY" -c 'import pytest' 2>/dev/null; then
  run tests 170 "$PY" -m pytest -q -m cuda tests/test_cuda.py tests/test_serving.py -p no:cacheprovider --junitxml "$OUT/cuda_tests.xml"
else
  run tests 170 "$PY" tests/test_cuda.py
fi

if [ "$CPU_ONLY" = 1 ]; then
  run bench 110 "$PY" -m dominotree bench-build --device cpu --rounds 3 --warmup 1 --shapes embedded --json-out "$OUT/bench_build.json"
  run curve 80 "$PY" scripts/gpu_curve.py --tiny --device cpu --reps 3 --json-out "$OUT/fast_curve.json"
  run decode 130 "$PY" scripts/gpu_decode.py --device cpu --quick --pairs random-tiny --json-out "$OUT/decode.json"
else
  run bench 110 "$PY" -m dominotree bench-build --device cuda --rounds 30 --warmup 5 --shapes embedded,qwen3-4b --json-out "$OUT/bench_build.json"
  run curve 80 "$PY" scripts/gpu_curve.py --device cuda --json-out "$OUT/fast_curve.json"
  run decode 130 "$PY" scripts/gpu_decode.py --device cuda --json-out "$OUT/decode.json"
fi
echo "gpu_check: $(cat "$OUT/gpu_check.json" | tr -d '\n ' | cut -c1-400)"
"$PY" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$OUT/gpu_check.json"
