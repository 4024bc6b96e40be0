"""The calibration behind ``--budget auto``: measure what each budget would accept and cost here.

One greedy (T = 0) run of the method at a large budget on the calibration prompts (the first
``per_category`` of each category of ``assets/prompts/calibrate.jsonl``: 48 prompts written for
this, sharing no 8-word n-gram with the 36 evaluation prompts the benches decode nor with any
training request, so that the budget is not chosen on the prompts a bench then measures), recording per round
the acceptance every smaller budget would have had (``budget.prefix_accept``); then the price of
a round at each grid budget, every stage's median
over plain decodes of the first ``TIMING_PROMPTS`` prompts at that budget, and of an ``ar`` round
(budget 0) decoded beside them on the same clock (``stage_ms_by_budget``).
This predicts tokens/s against the budget; ``--budget auto`` picks the best (``auto.budget``).

``resolve_auto`` is ``--budget auto`` for ``generate`` and ``bench``; ``calibrate_here`` is the
explorer's "Calibrate this machine"; ``python -m dominotree calibrate-budget`` (``bench/calibrate_budget.py``)
runs ``calibrate`` from the command line.
"""
from __future__ import annotations

import statistics
import sys
import time
from dataclasses import replace

from .budget import AUTO_METHODS, Calibration, auto_choice, check_auto_method, prefix_accept, require_profile
from .files import auto_paths, calibration_name, drafters_id, stale
from ..config import DecodeConfig, TreeConfig, default_builder
from ..observe import Observer

BUILD_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
VERIFY_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)   # the kernels' cost is step-shaped at few rows


TIMING_PROMPTS = 6        # the first 6 calibration prompts (two a category) price each budget's round

# 24 prompts (~410 rounds): auto's choice matched all 48's in 96 % of bootstrap draws, 88 % at 3 a
# category (results/calibration-size-xeon, docs/auto.md)
PER_CATEGORY = 8


def calibration_source(per_category: int = PER_CATEGORY) -> str:
    """What a calibration on ``calibration_prompts(per_category)`` records as its prompts."""
    return f"calibration set, first {per_category} per category"


def calibration_prompts(per_category: int = PER_CATEGORY) -> list[str]:
    """The first ``per_category`` prompts of each category of the calibration set, categories
    interleaved (so a prefix keeps the mix)."""
    from ..promptfiles import load_assets
    by_cat: dict[str, list] = {}
    for q in load_assets("calibrate"):
        by_cat.setdefault(q.category, []).append(q.turns[0])
    most = min(len(v) for v in by_cat.values())
    if not 1 <= per_category <= most:
        from ..errors import UserError
        raise UserError(f"the calibration set has {most} prompts per category: ask for 1 to {most}, "
                        f"not {per_category} (or calibrate on your own with --prompts FILE)")
    picks = [by_cat[c][:per_category] for c in sorted(by_cat)]
    return [p for group in zip(*picks) for p in group]


class _ReadsAllRows(Observer):
    """Makes the calibration's rounds read every tree row's target token (``prefix_accept`` needs
    them), off the round's clock."""
    reads_all_rows = True


def stage_ms_by_budget(dec, prompts: list[str], method: str, budgets: list[int], max_new_tokens: int,
                       builder: str, tree: TreeConfig, draft_vocab: int = 0) -> dict[int, dict[str, float]]:
    """Per budget, the median ms of each stage over the rounds of plain decodes of ``prompts`` at
    that budget (no observer, each prompt's budgets one after another; budget 0 is ``ar``): a
    round's price as the decoder pays it. The calibration's own run at ``budget_max`` cannot give it: its draft and
    commit are a large tree's, and stages re-timed beside a round (warm or cold caches) drifted
    from what the decodes measured (2.10 against 1.86 ``ar`` steps at budget 3 on a Zen 5,
    results/soft22-zen5)."""
    ms: dict[int, dict[str, list[float]]] = {b: {} for b in budgets}
    for pi, p in enumerate(prompts):
        for b in budgets:
            seed = 1000 + 100 * pi
            cfg = DecodeConfig(method=method, max_new_tokens=max_new_tokens, seed=seed, builder=builder,
                               tree=replace(tree, budget=b), draft_vocab=draft_vocab) if b else \
                DecodeConfig(method="ar", max_new_tokens=max_new_tokens, seed=seed)
            for rt in dec.generate(p, cfg).rounds:
                for stage, t in rt.stage_ms.items():
                    ms[b].setdefault(stage, []).append(t)
    if any(not m for m in ms.values()):
        raise ValueError("the timing prompts gave no round at some budget: use longer prompts or more tokens")
    return {b: {stage: statistics.median(t) for stage, t in m.items()} for b, m in ms.items()}


def calibrate(dec, prompts: list[str], method: str, budget_max: int, max_new_tokens: int = 48,
              builder: str | None = None, tree: TreeConfig | None = None, progress: bool = True,
              draft_vocab: int = 0, prompt_source: str = "") -> Calibration:
    """Run the calibration (see the module docstring) and return it; ``prompt_source`` (what the
    prompts are) goes into its meta."""
    from tqdm import tqdm
    if method not in AUTO_METHODS:
        raise ValueError(f"--budget auto is for the fixed-budget tree methods ({', '.join(AUTO_METHODS)}), "
                         f"not {method!r}")
    builder = builder or default_builder(dec.target.device)
    tree = replace(tree or TreeConfig(), budget=budget_max)
    grid = [b for b in BUILD_GRID if b < budget_max] + [budget_max]
    verify_grid = [b for b in VERIFY_GRID if b < budget_max] + [budget_max]
    reads_all = _ReadsAllRows()
    starts, accept, draft, commit, verify = [], [], [], [], []
    for m in ("ar", method):
        dec.generate("Warm-up", DecodeConfig(method=m, max_new_tokens=16, builder=builder, tree=tree,
                                             draft_vocab=draft_vocab), observers=[reads_all])
    for pi, p in enumerate(tqdm(prompts, desc="calibrate", file=sys.stderr, disable=not progress)):
        tr = dec.generate(p, DecodeConfig(method=method, max_new_tokens=max_new_tokens, seed=1000 + 100 * pi,
                                          builder=builder, tree=tree, draft_vocab=draft_vocab), observers=[reads_all])
        for rt in tr.rounds:
            starts.append(rt.start)
            accept.append(prefix_accept(rt.tree, rt.target_tokens, budget_max))
            draft.append(rt.stage_ms["draft"])
            verify.append(rt.stage_ms["verify"])
            commit.append(rt.stage_ms["commit"])
    timed = stage_ms_by_budget(dec, prompts[:TIMING_PROMPTS], method, sorted({0} | set(grid) | set(verify_grid)),
                               max_new_tokens, builder, tree, draft_vocab)
    from ..machine import hardware_info, versions_info
    meta = {"preset": dec.pair.name, "dtype": str(dec.target.dtype).replace("torch.", ""),
            "weights": dec.target.weights, "drafters": drafters_id(dec.pair.name), "builder": builder,
            "corr_topm": tree.corr_topm, "node_topk": tree.node_topk, "draft_vocab": draft_vocab, "prompts": len(prompts),
            "max_new_tokens": max_new_tokens, "prompt_source": prompt_source, "rounds": len(starts), "hardware": hardware_info(dec.target.device),
            "versions": versions_info(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return Calibration(method, budget_max, starts, accept, statistics.median(draft), statistics.median(commit),
                       grid, [timed[b]["build"] for b in grid], meta, [timed[b]["draft"] for b in grid], verify,
                       None, None, verify_grid, [timed[b]["verify"] for b in verify_grid],
                       [timed[b]["commit"] for b in verify_grid], sum(timed[0].values()))


def resolve_auto(pair, method: str, cost_model_path=None, calibration_path=None, tree: TreeConfig | None = None,
                 builder: str | None = None, budget_max: int = 32, per_category: int = PER_CATEGORY, progress: bool = True,
                 draft_vocab: int = 0):
    """``(budget, info)`` for ``--budget auto``: this machine's profile and calibration for the
    pair's weights and dtype (``files.auto_paths``), each measured now and cached when
    missing (progress on stderr), and the choice with its reason and curve; budget 0 is plain
    decoding."""
    check_auto_method(method)
    dtype = str(pair.target.dtype).replace("torch.", "")
    dev, weights = pair.target.device, pair.target.weights
    cpath, kpath = auto_paths(pair.name, dev, method, cost_model_path, calibration_path, draft_vocab, weights, dtype)
    old = stale(cpath, dev, weights, dtype) if cost_model_path is None else []
    if cost_model_path is not None:
        require_profile(cpath, pair.name, dtype)
    elif not cpath.is_file() or old:
        why = f"the one at {cpath} was made with {'; '.join(old)}" if old else "none"
        print(f"--budget auto: no verify-cost profile of this machine for {pair.name} ({weights or dtype} weights; "
              f"{why}): measuring one now (once; cached at {cpath})", file=sys.stderr)
        from .profile import profile
        profile(pair, contexts=(64, 256, 1024), nodes=(0, 1, 2, 4, 8, 16, 32), repeats=3,
                progress=progress).save(cpath)
    old = stale(kpath, dev, weights, dtype, drafters_id(pair.name)) if calibration_path is None else []
    if kpath.is_file() and not old:
        print(f"using budget calibration {kpath}", file=sys.stderr)
    else:
        why = f" (the one there was made with {'; '.join(old)})" if old else ""
        print(f"--budget auto: no {method} budget calibration of this machine at {kpath}{why}: calibrating now (once; "
              f"python -m dominotree calibrate-budget does it separately)", file=sys.stderr)
        from ..decode import Decoder
        cal = calibrate(Decoder(pair, annotate=False), calibration_prompts(per_category), method, budget_max,
                        builder=builder, tree=tree, progress=progress, draft_vocab=draft_vocab,
                        prompt_source=calibration_source(per_category))
        cal.save(kpath)
        print(f"saved {kpath}", file=sys.stderr)
    ch = auto_choice(pair.name, dev, method, dtype, cpath, kpath, draft_vocab, weights=weights)
    for w in ch.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return ch.budget, ch.to_dict()


def calibrate_here(decoder, method: str = "dominotree", draft_vocab: int = 0, per_category: int = PER_CATEGORY,
                   budget_max: int = 32, on_stage=None):
    """Everything ``--budget auto`` needs for the loaded pair on this machine, made now and saved
    at the default paths (what ``profile-cost`` and ``calibrate-budget`` write): the verify-cost
    profile of this dtype, then the budget calibration of ``method`` (for ``draft_vocab``). The
    explorer's "Calibrate this machine" button; about two minutes for the embedded pair on a 2-core
    CPU (120 s on a Xeon, the calibration's 24 prompts 80 s of it). ``on_stage(text)`` is told what
    runs. Returns ``(cost model, auto choice)``."""
    from .files import machine_dir
    from ..decode import Decoder
    from .profile import profile
    pair = decoder.pair
    dev, dtype, weights = pair.target.device, str(pair.target.dtype).replace("torch.", ""), pair.target.weights
    check_auto_method(method)
    say = on_stage or (lambda text: None)
    say("measuring the verify cost of trees of 0 to 32 nodes")
    cm = profile(pair, contexts=(64, 256, 1024), nodes=(0, 1, 2, 4, 8, 16, 32), repeats=3, progress=False)
    here = machine_dir(pair.name, dev, weights, dtype)
    cpath = cm.save(here / "cost_model.json")
    say(f"timing ar and {method} at budgets 1 to {budget_max} on {3 * per_category} calibration prompts")
    cal = calibrate(Decoder(pair, annotate=False), calibration_prompts(per_category), method, budget_max,
                    progress=False, draft_vocab=draft_vocab, prompt_source=calibration_source(per_category))
    kpath = cal.save(here / calibration_name(method, draft_vocab, pair.name))
    return cm, auto_choice(pair.name, dev, method, dtype, cpath, kpath, draft_vocab, weights=weights)
