"""Does a cheaper draft cost acceptance? tau of small trees with the drafter's block cut to fewer
rows and with its backbone on 8-bit blocks, on held-out prompts (embedded pair, int4 target,
T = 0, draft vocabulary 8192). Each variant decodes the same prompts; tau is deterministic.

    HF_HUB_OFFLINE=1 flock /tmp/cpu.lock .venv/bin/python scripts/experiments/draft_rows_tau.py --prompts 18 \
        > results/cheap-rounds/draft_rows_tau.txt

Variants: ``rows=N`` the block's minimum rows (``methods.DRAFT_MIN_ROWS``; 16 = the whole block),
``backbone=float32|q8`` the drafters' backbone products (q8 is what an int4 target loads).
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from dominotree import methods  # noqa: E402
from dominotree.bench.datasets import load_assets  # noqa: E402
from dominotree.machine import hardware_info  # noqa: E402
from dominotree.config import DecodeConfig, TreeConfig  # noqa: E402
from dominotree.decode import Decoder  # noqa: E402
from dominotree.models.linear import onednn_products  # noqa: E402
from dominotree.models.quantcpu import q8_products  # noqa: E402
from dominotree.presets import load_pair  # noqa: E402

METHODS = [("dominotree", 2), ("dominotree", 3), ("ddtree", 3)]
VARIANTS = [(16, "float32"), (8, "float32"), (8, "q8"), (1, "q8")]   # (1: the depths alone)


def set_backbone(pair, kind: str) -> None:
    """Route the drafters' backbone products to 8-bit blocks (q8, what an int4 target loads) or to
    float32 through oneDNN."""
    products = q8_products if kind == "q8" else onednn_products
    for d in pair.drafters.values():
        products(d.fc)
        products(d.layers)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=18)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    a = ap.parse_args()
    torch.set_num_threads(2)
    pair = load_pair("smollm2", dtype="float32", weights="int4")
    dec = Decoder(pair, annotate=False)
    prompts = load_assets("eval")[:a.prompts]
    print(f"# {hardware_info(pair.target.device)}; {len(prompts)} held-out prompts x {a.max_new_tokens} tokens, "
          f"int4 target, T=0, draft vocabulary 8192", flush=True)
    rows = []
    for method, budget in METHODS:
        for min_rows, backbone in VARIANTS:
            methods.DRAFT_MIN_ROWS = min_rows
            set_backbone(pair, backbone)
            acc = rounds = 0
            for p in prompts:
                cfg = DecodeConfig(method=method, max_new_tokens=a.max_new_tokens, draft_vocab=8192,
                                   tree=replace(TreeConfig(), budget=budget))
                tr = dec.generate(p.turns[0], cfg)
                acc += sum(len(r.accepted) for r in tr.rounds)
                rounds += len(tr.rounds)
            row = {"method": f"{method}@{budget}", "min_rows": min_rows, "backbone": backbone,
                   "block_rows": methods.block_rows(pair.drafter_for(method).cfg, budget),
                   "tau": round(acc / rounds, 3), "rounds": rounds}
            rows.append(row)
            print(f"{row['method']:14s} block rows {row['block_rows']:2d}  backbone {backbone:7s}  tau {row['tau']:.3f}",
                  flush=True)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
