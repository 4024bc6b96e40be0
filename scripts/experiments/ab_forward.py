"""A/B of the fast forward's float32 product paths on the embedded target, interleaved.

    python scripts/experiments/ab_forward.py [--dtypes float32] [--reps 7] [--threads 2]

Per dtype: the `ar` step (1 row after a 256-token prefix), tree verifies of 9 and 17 rows and the
drafter's 16-row LM head (full vocabulary), each with the oneDNN products on weights reordered once
("new", `models/linear.py`) and the previous MKL products in column blocks ("old"), in rotating
order after warm-up; medians in ms and old/new ratios. ONE JSON line last.

(The session-5 A/B of column blocks and grouped one-row attention, results/fast-forward/ab_forward.txt,
ran this script at commit 87b9e7e.)
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from dominotree.machine import hardware_info  # noqa: E402
import dominotree.models.linear as lin  # noqa: E402
from dominotree.models.smollm2 import ensure_smollm2  # noqa: E402
from dominotree.presets import load_target  # noqa: E402
from dominotree.tree import Tree, position_ids, tree_mask  # noqa: E402


class Paths:
    """Switch between the old and new product paths (``models/linear.py``'s module switch)."""

    def use(self, which: str):
        lin.ONEDNN = which == "new"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    paths = Paths()
    out = {"command": "python scripts/experiments/ab_forward.py " + " ".join(argv or sys.argv[1:]),
           "hardware": hardware_info("cpu"), "ms": {}}
    gen = torch.Generator().manual_seed(0)
    for dt in args.dtypes.split(","):
        tgt = load_target(ensure_smollm2(), getattr(torch, dt), "cpu")
        fm = tgt.fast
        prefix = torch.randint(0, 49152, (1, 256), generator=gen)
        parents = [-1] + [max(0, i - 2) for i in range(16)]
        depths = [0]
        for p in parents[1:]:
            depths.append(depths[p] + 1)
        trees = {n: Tree([1] * n, parents[:n], depths[:n], [0.0] * n, [0.0] * n) for n in (9, 17)}
        rows = torch.randn(16, fm.head.shape[1]).to(tgt.dtype)
        ms = {f"{k}/{w}": [] for k in ("ar_step", "verify9", "verify17", "draft_head16") for w in ("old", "new")}

        def one(which):
            paths.use(which)
            c = fm.new_cache()
            fm.forward(prefix, torch.arange(256)[None], c, rows=slice(-1, None))
            t = time.perf_counter()
            fm.forward(prefix[:, :1], torch.tensor([[256]]), c)
            ms[f"ar_step/{which}"].append((time.perf_counter() - t) * 1e3)
            for n, tree in trees.items():
                c.truncate(256)
                mask = tree_mask(tree, 256, tgt.dtype)
                ids = torch.tensor([tree.tokens])
                pos = position_ids(tree, 256)
                t = time.perf_counter()
                fm.forward(ids, pos, c, mask)
                ms[f"verify{n}/{which}"].append((time.perf_counter() - t) * 1e3)
            t = time.perf_counter()
            tgt.logits(rows)
            ms[f"draft_head16/{which}"].append((time.perf_counter() - t) * 1e3)

        with torch.inference_mode():
            for w in ("old", "new", "old", "new"):
                one(w)
            for k in ms:
                ms[k].clear()
            for r in range(args.reps):
                for w in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    one(w)
        med = {k: round(statistics.median(v), 2) for k, v in ms.items()}
        out["ms"][dt] = med
        print(f"{dt} ({args.threads} threads, {args.reps} reps, median ms)")
        for k in ("ar_step", "verify9", "verify17", "draft_head16"):
            o, n = med[f"{k}/old"], med[f"{k}/new"]
            print(f"  {k:14s} old {o:8.2f}  new {n:8.2f}  old/new {o / n:5.2f}x")
    paths.use("new")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
