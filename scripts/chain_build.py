"""Build-stage ms a round per method (the Domino chain against DominoTree and DFlash), embedded pair.

    flock /tmp/heavy.lock .venv/bin/python scripts/chain_build.py --prompts 4

Decodes the first ``--prompts`` held-out prompts (``assets/prompts/eval.jsonl``) with each method,
interleaved, ``--passes`` times, and prints the median of the traces' ``stage_ms["build"]`` over
all rounds, per method, then one JSON line. Figures for issue 40 in docs/amx.md.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dominotree.config import DecodeConfig  # noqa: E402
from dominotree.decode import Decoder  # noqa: E402
from dominotree.models.cpuext import cpu_model  # noqa: E402
from dominotree.presets import load_pair  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--new", type=int, default=48, help="new tokens per decode")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--methods", default="domino,dominotree,dflash")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    lines = (ROOT / "assets/prompts/eval.jsonl").read_text().splitlines()
    prompts = [json.loads(line)["prompt"] for line in lines[:a.prompts]]
    dec = Decoder(load_pair("smollm2"), annotate=False)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    builds: dict[str, list[float]] = {m: [] for m in methods}
    for _ in range(a.passes):
        for p in prompts:
            ids = dec.encode_prompt(p)
            for m in methods:
                tr = dec.generate(ids, DecodeConfig(method=m, max_new_tokens=a.new))
                builds[m] += [r.stage_ms.get("build", 0.0) for r in tr.rounds]
    med = {m: statistics.median(v) for m, v in builds.items()}
    print(f"CPU: {cpu_model()}, {a.threads} threads; {len(prompts)} prompts x {a.passes} passes, {a.new} new tokens")
    for m, v in med.items():
        print(f"  {m:<12} build {v:6.2f} ms a round (median of {len(builds[m])} rounds)")
    print(json.dumps({"cpu": cpu_model(), "build_ms": med}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
