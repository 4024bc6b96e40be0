"""A/B of the fast forward's product and attention paths on the embedded target, interleaved.

    python scripts/ab_forward.py [--dtypes float32,bfloat16] [--reps 7] [--threads 2]

Per dtype: the `ar` step (1 row after a 256-token prefix), a 17-row tree verify and the drafter's
16-row LM head, each with today's paths ("new": column-blocked float32 products, grouped one-row
attention) and the previous ones ("old": one F.linear per product, GQA-expanded SDPA), in
rotating order after warm-up; medians in ms and old/new ratios. ONE JSON line last.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from dominotree.bench.machine import hardware_info  # noqa: E402
import dominotree.models.fast as fast  # noqa: E402
from dominotree.models.smollm2 import ensure_smollm2  # noqa: E402
from dominotree.presets import load_target  # noqa: E402
from dominotree.tree import Tree, position_ids, tree_mask  # noqa: E402


def old_attention(q, keys, values, attn_mask=None, is_causal=False, enable_gqa=False):
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_mask, is_causal=is_causal,
                                          enable_gqa=True)


class Paths:
    """Switch between the old and new paths by patching the module's two entry points."""
    def __init__(self):
        self.chunk, self.sdpa = fast.COLUMN_CHUNK, F.scaled_dot_product_attention

    def use(self, which: str):
        fast.COLUMN_CHUNK = self.chunk if which == "new" else 1 << 30
        # the one-row branch calls SDPA without enable_gqa; "old" sends every call through GQA
        fast.F.scaled_dot_product_attention = self.sdpa if which == "new" else _gqa_always(self.sdpa)


def _gqa_always(sdpa):
    def call(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
        if not enable_gqa and attn_mask is None and not is_causal and q.shape[2] > 1:
            kvh, group, hd = k.shape[1], q.shape[2], q.shape[3]   # the grouped one-row call: unfold
            o = sdpa(q.reshape(1, kvh * group, 1, hd), k, v, enable_gqa=True)
            return o.reshape(1, kvh, group, hd)
        return sdpa(q, k, v, attn_mask=attn_mask, is_causal=is_causal, enable_gqa=enable_gqa)
    return call


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    paths = Paths()
    out = {"command": "python scripts/ab_forward.py " + " ".join(argv or sys.argv[1:]),
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
        tree = Tree([1] * 17, parents, depths, [0.0] * 17, [0.0] * 17)
        rows = torch.randn(16, fm.head.shape[1]).to(tgt.dtype)
        ms = {f"{k}/{w}": [] for k in ("ar_step", "verify17", "draft_head16") for w in ("old", "new")}

        def one(which):
            paths.use(which)
            c = fm.new_cache()
            fm.forward(prefix, torch.arange(256)[None], c, rows=slice(-1, None))
            t = time.perf_counter()
            fm.forward(prefix[:, :1], torch.tensor([[256]]), c)
            ms[f"ar_step/{which}"].append((time.perf_counter() - t) * 1e3)
            c.truncate(256)
            mask = tree_mask(tree, 256, tgt.dtype)
            ids = torch.tensor([tree.tokens])
            pos = position_ids(tree, 256)
            t = time.perf_counter()
            fm.forward(ids, pos, c, mask)
            ms[f"verify17/{which}"].append((time.perf_counter() - t) * 1e3)
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
        for k in ("ar_step", "verify17", "draft_head16"):
            o, n = med[f"{k}/old"], med[f"{k}/new"]
            print(f"  {k:14s} old {o:8.2f}  new {n:8.2f}  old/new {o / n:5.2f}x")
    paths.use("new")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
