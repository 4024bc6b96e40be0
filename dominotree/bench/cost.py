"""``python -m dominotree profile-cost``: profile this machine's verify latency against tree nodes
and context length, and the draft cost per round, then fit the verify-cost model
(``dominotree.auto.costmodel``) for caddtree / condadaptive and ``--budget auto``."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import pairargs
from ..auto.costmodel import CostModel, default_path, device_slug
from ..auto.profile import DEFAULT_CONTEXTS, DEFAULT_NODES, profile
from ..errors import UserError


def format_table(cm: CostModel) -> str:
    head = "| ctx \\ n | " + " | ".join(str(n) for n in cm.nodes) + " |"
    sep = "|---|" + "---|" * len(cm.nodes)
    rows = []
    for i, c in enumerate(cm.contexts):
        fit = cm.verify_ms[i]
        raw = cm.raw_ms[i] if cm.raw_ms else fit
        rows.append(f"| {c} | " + " | ".join(f"{f:.2f} ({r:.2f})" for f, r in zip(fit, raw)) + " |")
    return "\n".join([f"verify ms, fitted (measured); draft {cm.draft_ms:.2f} ms", head, sep, *rows])


def _ints(s: str, name: str) -> list[int]:
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{name} must be a comma-separated list of integers, got {s!r}") from None
    if not out or any(x < 0 for x in out):
        raise UserError(f"{name} must list non-negative integers, got {s!r}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dominotree profile-cost",
                                description="Profile verify latency vs tree nodes and context length on this "
                                            "machine; fit it monotone + convex for caddtree / condadaptive.")
    pairargs.add_model_args(p)
    p.add_argument("--contexts", default=",".join(map(str, DEFAULT_CONTEXTS)), help="context lengths to profile")
    p.add_argument("--nodes", default=",".join(map(str, DEFAULT_NODES)), help="tree node counts to profile")
    p.add_argument("--repeats", type=int, default=5, help="timed forwards per (context, nodes) cell; median kept")
    p.add_argument("--draft-ms", type=float, default=None, help="use this draft cost instead of measuring it")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", default=None, help="output JSON (default results/cost_model_<preset>_<device>.json)")
    p.add_argument("--json", action="store_true", help="print only the JSON line")
    a = p.parse_args(argv)
    if a.repeats < 1:
        raise UserError("--repeats must be >= 1")
    contexts, nodes = _ints(a.contexts, "--contexts"), _ints(a.nodes, "--nodes")
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    pair = pairargs.load_pair_from_args(a)
    cm = profile(pair, contexts, nodes, a.repeats, a.draft_ms)
    out = Path(a.out) if a.out else default_path(pair.name, pair.target.device)
    cm.save(out)
    if not a.json:
        print(format_table(cm))
        print(f"saved {out}", file=sys.stderr)
    print(json.dumps({"cost_model": str(out), "preset": pair.name, "device": device_slug(pair.target.device),
                      "contexts": cm.contexts, "nodes": cm.nodes, "draft_ms": round(cm.draft_ms, 4),
                      "verify_ms": [[round(x, 4) for x in r] for r in cm.verify_ms]}))
    return 0
