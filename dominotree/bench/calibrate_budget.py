"""``python -m dominotree calibrate-budget``: the calibration behind ``--budget auto``.

Runs ``dominotree.auto.calibrate.calibrate`` (one greedy run at a large budget on the calibration prompts; its
docstring says what each round records), saves it where ``--budget auto`` looks for it and prints
the predicted tokens/s against the budget, with the verify-cost profile of ``profile-cost``.

    python -m dominotree calibrate-budget [--preset smollm2] [--dtype bfloat16] [--method dominotree]
        [--budget-max 32] [--per-category 8 | --prompts FILE | --dataset NAME [--limit N]]
        [--max-new-tokens 48] [--cost-model FILE] [--out FILE]

The measuring lives in the library, ``dominotree.auto.calibrate`` (``generate --budget auto``, ``bench``
and the explorer use it too); its names are importable here, as before.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import pairargs
from ..auto.budget import AUTO_METHODS, choose, curve, require_profile
from ..auto.files import calibration_name, stale
from ..auto.calibrate import (BUILD_GRID, PER_CATEGORY, calibrate, calibrate_here,  # noqa: F401
                              calibration_prompts, calibration_source, resolve_auto)
from ..config import MAX_BUDGET, TreeConfig
from ..errors import UserError


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dominotree calibrate-budget", description=__doc__.split("\n\n")[0])
    pairargs.add_model_args(p)
    p.add_argument("--method", default="dominotree", choices=AUTO_METHODS)
    p.add_argument("--budget-max", type=int, default=32, help="the calibration run's budget (the largest b predicted)")
    p.add_argument("--per-category", type=int, default=PER_CATEGORY,
                   help="the first N prompts of each category of the calibration set (assets/prompts/calibrate.jsonl: "
                        "16 a category, disjoint from the eval prompts the benches decode)")
    p.add_argument("--prompts", default=None, help="calibrate on these prompts instead (JSONL as bench reads it): "
                   "--budget auto then fits that kind of text")
    p.add_argument("--dataset", default=None, help="or on a dataset's prompts (as bench's --dataset)")
    p.add_argument("--limit", type=int, default=None, help="with --prompts/--dataset: the first N of each")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--corr-topm", type=int, default=64)
    p.add_argument("--node-topk", type=int, default=8)
    p.add_argument("--builder", default=None)
    pairargs.add_draft_vocab_arg(p, "calibrate runs whose drafters score the N most frequent tokens (default: the "
                                    "pair's own, as generate and bench run it: 8192 for the embedded smollm2 pair, "
                                    "the full vocabulary for others; 0: the full vocabulary)")
    p.add_argument("--cost-model", default=None, help="verify-cost profile (default: this machine's, "
                   "measured now when it has none: autofiles.machine_dir)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None, help="default: this machine's budget_<method>[_v<N>].json "
                   "(auto.files.machine_dir, where --budget auto looks)")
    a = p.parse_args(argv)
    if not 1 <= a.budget_max <= MAX_BUDGET or a.per_category < 1 or a.max_new_tokens < 1 or \
            (a.limit is not None and a.limit < 1):
        raise UserError(f"--budget-max must be in [1, {MAX_BUDGET}]; --per-category, --max-new-tokens and --limit >= 1")
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    prompts, source = calibration_prompts(a.per_category), calibration_source(a.per_category)
    if a.prompts or a.dataset:
        from .datasets import load_prompts
        prompts = [q.turns[0] for q in load_prompts(a.prompts, a.dataset, a.limit)]
        source = a.prompts or f"dataset {a.dataset}"
    pair = pairargs.load_pair_from_args(a)
    a.draft_vocab = pair.resolve_draft_vocab(a.draft_vocab, a.method)     # None: the pair's default
    from ..auto.files import machine_dir
    from ..auto.costmodel import load_cost_model
    here = machine_dir(pair.name, pair.target.device, pair.target.weights, a.dtype)
    out = Path(a.out) if a.out else here / calibration_name(a.method, a.draft_vocab, pair.name)
    cpath = Path(a.cost_model) if a.cost_model else here / "cost_model.json"
    if a.cost_model or (cpath.is_file() and not stale(cpath, pair.target.device, pair.target.weights, a.dtype)):
        cm = require_profile(cpath, pair.name, a.dtype)
    else:
        from ..auto.profile import profile
        print(f"measuring this machine's verify-cost profile first ({cpath})", file=sys.stderr)
        cm = load_cost_model(profile(pair, contexts=(64, 256, 1024), nodes=(0, 1, 2, 4, 8, 16, 32),
                                     repeats=3).save(cpath))
    from ..decode import Decoder
    tree = TreeConfig(budget=a.budget_max, corr_topm=a.corr_topm, node_topk=a.node_topk)
    cal = calibrate(Decoder(pair, annotate=False), prompts, a.method, a.budget_max,
                    a.max_new_tokens, a.builder, tree, draft_vocab=a.draft_vocab, prompt_source=source)
    cal.save(out)
    rows = curve(cal, cm)
    b = choose(cal, cm)
    print(f"{'budget':>6} {'tau':>6} {'round ms':>9} {'ar steps':>9} {'pred tok/s':>11} {'x ar':>6}")
    for r in rows:
        print(f"{r['budget']:>6} {r['tau']:>6.2f} {r['round_ms']:>9.2f} {r['round_ar_steps']:>9.2f} "
              f"{r['predicted_tokens_per_s']:>11.2f} {r['speedup']:>6.2f}" + ("  <- auto" if r["budget"] == b else ""))
    from ..auto.budget import explain
    print(explain(rows, b))
    print(f"saved {out}", file=sys.stderr)
    if (a.prompts or a.dataset) and not a.out:
        print(f"--budget auto on this machine now follows {source}; calibrate-budget without --prompts/--dataset "
              "goes back to the calibration set", file=sys.stderr)
    print(json.dumps({"calibration": str(out), "method": a.method, "draft_vocab": a.draft_vocab, "auto_budget": b, "reason": explain(rows, b),
                      "rounds": len(cal.starts),
                      "curve": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
