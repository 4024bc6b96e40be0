"""``scripts/gpu_check.sh --cpu-only``: the GPU check's plumbing on the CPU (issue 34).

    .venv/bin/python -m pytest -q -m slow tests/test_gpu_check.py

Every step runs (small shapes; the CUDA tests skip), each step's result lands in $OUT as it
finishes, at most 8 files, and the per-step limits fit the 540 s budget.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_check.sh"


def test_step_limits_fit_the_budget():
    text = SCRIPT.read_text()
    budget = int(re.search(r"^BUDGET=(\d+)", text, re.M).group(1))
    assert budget < 540
    limits = {}
    for name, limit in re.findall(r"^\s*run (\w+) (\d+) ", text, re.M):
        limits[name] = max(limits.get(name, 0), int(limit))      # the GPU and CPU branches share names
    assert set(limits) == {"env", "wheels", "tests", "bench", "curve", "decode"}
    assert sum(limits.values()) <= budget, limits


def test_gpu_scripts_import_no_gradio():
    for f in ("scripts/gpu_decode.py", "scripts/gpu_curve.py", "tests/test_cuda.py"):
        assert not re.search(r"^\s*(import|from) (gradio|plotly|pandas)", (ROOT / f).read_text(), re.M), f


@pytest.mark.slow
def test_cpu_only_dry_run(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), PYTHON=sys.executable, HF_HUB_OFFLINE="1")
    r = subprocess.run(["bash", str(SCRIPT), "--cpu-only"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=540)
    files = sorted(p.name for p in out.iterdir())
    assert r.returncode == 0, (r.stdout[-2000:], (out / "steps.log").read_text()[-4000:])
    assert len(files) <= 8 and {"env.txt", "steps.log", "cuda_tests.xml", "bench_build.json", "fast_curve.json",
                                "decode.json", "gpu_check.json"} <= set(files), files
    summary = json.loads((out / "gpu_check.json").read_text())
    assert summary["ok"] and summary["cpu_only"]
    assert set(summary["steps"]) == {"env", "tests", "bench", "curve", "decode"}     # no wheels on --cpu-only
    assert summary["tests"]["skipped"] == summary["tests"]["tests"] > 0             # no GPU here
    assert summary["bench"]["embedded"]["identical"] is True
    # on CPU the graph builder's heap runs in C++ where the kernels are built (builders/native.py)
    from dominotree.models import cpuext
    want = "native" if cpuext.available(verbose=False) is None else "eager"
    assert summary["bench"]["embedded"]["capture"]["graph"][0]["mode"] == want
    assert summary["decode"] == {"ok": True, "bad": [], "ties": 0}
