"""How long the embedded target takes to become usable on a warm cache (a benchmark, not a test).

    .venv/bin/python scripts/bench_warm_load.py [--repeats 5]

Prints the median of: ``ensure_smollm2()`` (marker check only), tokenizer load, and model load
(float32 safetensors), each in a fresh call, with the CPU named; one JSON line last.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dominotree.models.smollm2 import ensure_smollm2
    path = ensure_smollm2(verbose=True)           # the first call may convert; not timed
    t = {"ensure_ms": [], "tokenizer_ms": [], "model_ms": []}
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        ensure_smollm2()
        t1 = time.perf_counter()
        AutoTokenizer.from_pretrained(path, local_files_only=True)
        t2 = time.perf_counter()
        AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True)
        t3 = time.perf_counter()
        for k, v in zip(t, (t1 - t0, t2 - t1, t3 - t2)):
            t[k].append(v * 1e3)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    med = {k: round(statistics.median(v), 1) for k, v in t.items()}
    print(f"warm load on {cpu}, {torch.get_num_threads()} threads, median of {a.repeats}:")
    for k, v in med.items():
        print(f"  {k:14s} {v:8.1f}")
    print(json.dumps({"cpu": cpu, "repeats": a.repeats, **med}))


if __name__ == "__main__":
    main()
