"""``python -m dominotree calibrate-budget``: the calibration behind ``--budget auto``.

One greedy (T = 0) run of the method at a large budget on held-out prompts (the last prompts of
each category of ``assets/prompts/eval.jsonl``; the sweeps use the first ones), recording per round
the acceptance every smaller budget would have had (``autobudget.prefix_accept``), the draft and
commit times, and the build time at a grid of budgets (each round's block rebuilt at every grid
budget, timed, outside the round's own stage times), and the draft time at the same grid (the
round's draft, less its LM head, plus the head timed again on the ``min(b, depth)`` rows a
budget-``b`` tree can use). With the verify-cost profile of
``profile-cost`` this predicts tokens/s against the budget; ``--budget auto`` picks the best.

    python -m dominotree calibrate-budget [--preset smollm2] [--dtype bfloat16] [--method dominotree]
        [--budget-max 32] [--per-category 3] [--max-new-tokens 48] [--cost-model FILE] [--out FILE]
"""
from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from ..autobudget import (AUTO_METHODS, Calibration, auto_choice, auto_paths, check_auto_method, choose, curve,
                          default_path, prefix_accept, require_profile)
from ..config import DecodeConfig, TreeConfig, default_builder

BUILD_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)


def held_out_prompts(per_category: int) -> list[str]:
    """The last ``per_category`` prompts of each category of the held-out set, categories interleaved."""
    from .datasets import load_prompts
    by_cat: dict[str, list] = {}
    for q in load_prompts(None, "eval", None):
        by_cat.setdefault(q.category, []).append(q.turns[0])
    picks = [by_cat[c][-per_category:] for c in sorted(by_cat)]
    return [p for group in zip(*picks) for p in group]


def calibrate(dec, prompts: list[str], method: str, budget_max: int, max_new_tokens: int = 48,
              builder: str | None = None, tree: TreeConfig | None = None, progress: bool = True,
              draft_vocab: int = 0) -> Calibration:
    """Run the calibration (see the module docstring) and return it."""
    from tqdm import tqdm
    from ..decode import _Clock
    if method not in AUTO_METHODS:
        raise ValueError(f"--budget auto is for the fixed-budget tree methods ({', '.join(AUTO_METHODS)}), "
                         f"not {method!r}")
    builder = builder or default_builder(dec.target.device)
    tree = replace(tree or TreeConfig(), budget=budget_max)
    grid = [b for b in BUILD_GRID if b < budget_max] + [budget_max]
    build_ms = {b: [] for b in grid}
    real_build = dec.build
    params = inspect.signature(real_build)

    def timed_build(*args, **kwargs):
        out = real_build(*args, **kwargs)
        call = params.bind(*args, **kwargs).arguments      # by name: new build parameters pass through
        if call["block"] is not None:
            for b in grid:
                c = _Clock(dec.target.device)
                real_build(**{**call, "cfg": replace(call["cfg"], tree=replace(call["cfg"].tree, budget=b)),
                              "ab": None, "clock": c})
                build_ms[b].append(c.ms["build"])
        return out
    real_draft = dec.draft
    draft_params = inspect.signature(real_draft)
    head_ms: dict[int, list[float]] = {b: [] for b in grid}     # per grid budget: this round's head ms less the full head's

    def timed_draft(*args, **kwargs):
        block = real_draft(*args, **kwargs)
        vocab = draft_params.bind(*args, **kwargs).arguments.get("vocab")
        head = dec.target.logits if vocab is None else vocab.logits
        rows = block.z.to(dec.target.dtype)
        times = {}
        for n in sorted({min(b, rows.shape[0]) for b in grid} | {rows.shape[0]}):
            c = _Clock(dec.target.device)
            t = c.now()
            head(rows[:n])
            times[n] = (c.now() - t) * 1e3
        for b in grid:
            head_ms[b].append(times[min(b, rows.shape[0])] - times[rows.shape[0]])
        return block
    starts, accept, draft, commit = [], [], [], []
    dec.build, dec.draft = timed_build, timed_draft
    all_rows, dec.read_all_rows = dec.read_all_rows, True     # prefix_accept reads every row's token
    try:
        dec.generate("Warm-up", DecodeConfig(method=method, max_new_tokens=16, builder=builder, tree=tree,
                                             draft_vocab=draft_vocab))
        for v in (*build_ms.values(), *head_ms.values()):
            v.clear()
        for pi, p in enumerate(tqdm(prompts, desc="calibrate", file=sys.stderr, disable=not progress)):
            tr = dec.generate(p, DecodeConfig(method=method, max_new_tokens=max_new_tokens, seed=1000 + 100 * pi,
                                              builder=builder, tree=tree, draft_vocab=draft_vocab))
            for rt in tr.rounds:
                starts.append(rt.start)
                accept.append(prefix_accept(rt.tree, rt.target_tokens, budget_max))
                draft.append(rt.stage_ms["draft"])
                commit.append(rt.stage_ms["commit"])
    finally:
        dec.build, dec.draft, dec.read_all_rows = real_build, real_draft, all_rows
    from .machine import hardware_info, versions_info
    meta = {"preset": dec.pair.name, "dtype": str(dec.target.dtype).replace("torch.", ""),
            "weights": dec.target.weights, "builder": builder,
            "corr_topm": tree.corr_topm, "node_topk": tree.node_topk, "draft_vocab": draft_vocab, "prompts": len(prompts),
            "max_new_tokens": max_new_tokens, "rounds": len(starts), "hardware": hardware_info(dec.target.device),
            "versions": versions_info(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    draft_ms = statistics.median(draft)
    return Calibration(method, budget_max, starts, accept, draft_ms, statistics.median(commit),
                       grid, [statistics.median(build_ms[b]) for b in grid], meta,
                       [max(0.0, draft_ms + statistics.median(head_ms[b])) for b in grid])


def resolve_auto(pair, method: str, cost_model_path=None, calibration_path=None, tree: TreeConfig | None = None,
                 builder: str | None = None, budget_max: int = 32, per_category: int = 3, progress: bool = True,
                 draft_vocab: int = 0):
    """``(budget, info)`` for ``--budget auto``: the profile (required), the calibration (cached;
    made now when missing) and the choice with its curve (``autobudget.auto_choice``)."""
    check_auto_method(method)
    dtype = str(pair.target.dtype).replace("torch.", "")
    cpath, kpath = auto_paths(pair.name, pair.target.device, method, cost_model_path, calibration_path, draft_vocab)
    require_profile(cpath, pair.name, dtype)
    if kpath.is_file():
        print(f"using budget calibration {kpath}", file=sys.stderr)
    else:
        print(f"no budget calibration at {kpath}: calibrating now (python -m dominotree calibrate-budget does it "
              f"separately)", file=sys.stderr)
        from ..decode import Decoder
        cal = calibrate(Decoder(pair, annotate=False), held_out_prompts(per_category), method, budget_max,
                        builder=builder, tree=tree, progress=progress, draft_vocab=draft_vocab)
        cal.save(kpath)
        print(f"saved {kpath}", file=sys.stderr)
    ch = auto_choice(pair.name, pair.target.device, method, dtype, cpath, kpath, draft_vocab,
                     weights=pair.target.weights)
    for w in ch.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return ch.budget, {"method": method, "budget": ch.budget, "calibration": str(kpath), "cost_model": str(cpath),
                       "curve": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
                                 for r in ch.curve]}


def calibrate_here(decoder, method: str = "dominotree", draft_vocab: int = 0, per_category: int = 2,
                   budget_max: int = 32, on_stage=None):
    """Everything ``--budget auto`` needs for the loaded pair on this machine, made now and saved
    at the default paths (what ``profile-cost`` and ``calibrate-budget`` write): the verify-cost
    profile of this dtype, then the budget calibration of ``method`` (for ``draft_vocab``). The
    explorer's "Calibrate this machine" button; about two minutes for the embedded pair on a 2-core
    CPU. ``on_stage(text)`` is told what runs. Returns ``(cost model, auto choice)``."""
    from ..costmodel import default_path as cost_path
    from ..decode import Decoder
    from .cost import profile
    pair = decoder.pair
    dev, dtype = pair.target.device, str(pair.target.dtype).replace("torch.", "")
    check_auto_method(method)
    say = on_stage or (lambda text: None)
    say("measuring the verify cost of trees of 0 to 32 nodes")
    cm = profile(pair, contexts=(64, 256, 1024), nodes=(0, 1, 2, 4, 8, 16, 32), repeats=3, progress=False)
    cpath = cm.save(cost_path(pair.name, dev))
    say(f"timing {method} at budgets 1 to {budget_max} on {3 * per_category} held-out prompts")
    cal = calibrate(Decoder(pair, annotate=False), held_out_prompts(per_category), method, budget_max,
                    progress=False, draft_vocab=draft_vocab)
    kpath = cal.save(default_path(pair.name, dev, method, draft_vocab))
    return cm, auto_choice(pair.name, dev, method, dtype, cpath, kpath, draft_vocab, weights=pair.target.weights)


def main(argv=None) -> int:
    from ..cli import UserError, add_model_args, load_pair_from_args
    p = argparse.ArgumentParser(prog="python -m dominotree calibrate-budget", description=__doc__.split("\n\n")[0])
    add_model_args(p)
    p.add_argument("--method", default="dominotree", choices=AUTO_METHODS)
    p.add_argument("--budget-max", type=int, default=32, help="the calibration run's budget (the largest b predicted)")
    p.add_argument("--per-category", type=int, default=3, help="last N held-out prompts of each category")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--corr-topm", type=int, default=64)
    p.add_argument("--node-topk", type=int, default=8)
    p.add_argument("--builder", default=None)
    p.add_argument("--draft-vocab", type=int, default=0, metavar="N",
                   help="calibrate runs whose drafters score the N most frequent tokens (0: the full vocabulary)")
    p.add_argument("--cost-model", default=None, help="verify-cost profile (default results/cost_model_<preset>_<device>.json)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default=None, help="default results/budget_<preset>_<device>_<method>[_v<N>].json")
    a = p.parse_args(argv)
    if not 1 <= a.budget_max <= 256 or a.per_category < 1 or a.max_new_tokens < 1 or a.draft_vocab < 0:
        raise UserError("--budget-max must be in [1, 256]; --per-category and --max-new-tokens >= 1; "
                        "--draft-vocab >= 0")
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    pair = load_pair_from_args(a)
    out = Path(a.out) if a.out else default_path(pair.name, pair.target.device, a.method, a.draft_vocab)
    from ..costmodel import default_path as cost_path
    cm = require_profile(a.cost_model or cost_path(pair.name, pair.target.device), pair.name, a.dtype)
    from ..decode import Decoder
    tree = TreeConfig(budget=a.budget_max, corr_topm=a.corr_topm, node_topk=a.node_topk)
    cal = calibrate(Decoder(pair, annotate=False), held_out_prompts(a.per_category), a.method, a.budget_max,
                    a.max_new_tokens, a.builder, tree, draft_vocab=a.draft_vocab)
    cal.save(out)
    rows = curve(cal, cm)
    b = choose(cal, cm)
    print(f"{'budget':>6} {'tau':>6} {'round ms':>9} {'pred tok/s':>11}")
    for r in rows:
        print(f"{r['budget']:>6} {r['tau']:>6.2f} {r['round_ms']:>9.2f} {r['predicted_tokens_per_s']:>11.2f}"
              + ("  <- auto" if r["budget"] == b else ""))
    print(f"saved {out}", file=sys.stderr)
    print(json.dumps({"calibration": str(out), "method": a.method, "auto_budget": b, "rounds": len(cal.starts),
                      "curve": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
