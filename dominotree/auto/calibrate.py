"""The calibration behind ``--budget auto``: measure what each budget would accept and cost here.

One greedy (T = 0) run of the method at a large budget on the calibration prompts (the first
``per_category`` of each category of ``assets/prompts/calibrate.jsonl``: 48 prompts written for
this, sharing no 8-word n-gram with the 36 evaluation prompts the benches decode nor with any
training request, so that the budget is not chosen on the prompts a bench then measures), recording per round
the acceptance every smaller budget would have had (``budget.prefix_accept``), the draft and
commit times, and the build time at a grid of budgets (each round's block rebuilt at every grid
budget, timed, outside the round's own stage times), and the draft time at the same grid (the
round's draft, less its LM head, plus the head timed again on the ``min(b, depth)`` rows a
budget-``b`` tree can use). With the verify-cost profile of ``profile-cost`` this predicts
tokens/s against the budget; ``--budget auto`` picks the best (``auto.budget``).

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
from ..models.target import cache_truncate
from ..observe import Observer, RoundState, StageClock
from ..tree import accept_walk
from ..verify import TreeRows, verify_tree

BUILD_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
VERIFY_GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)   # the kernels' cost is step-shaped at few rows


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


class _PerRound(Observer):
    """What a calibration measures in each round beside its own stages, off the round's clock:
    the round's block built again at every grid budget (each timed alone), the draft's LM head
    timed again on the rows a budget-``b`` tree can use (per grid budget: that head's ms less the
    full head's), and the verify stage of the tree's budget-``b`` prefix at every verify-grid
    budget (the target's forward over its rows at this round's position, the LM head on the rows
    the accept walk reads, the walk; then the cache is cut back). Reads every tree row's target
    token (``prefix_accept`` needs them)."""
    reads_all_rows = True

    def __init__(self, grid: list[int], verify_grid: list[int]):
        self.grid, self.verify_grid = grid, verify_grid
        self.build_ms: dict[int, list[float]] = {b: [] for b in grid}
        self.head_ms: dict[int, list[float]] = {b: [] for b in grid}
        self.verify_ms: dict[int, list[float]] = {b: [] for b in verify_grid}

    def clear(self) -> None:
        for v in (*self.build_ms.values(), *self.head_ms.values(), *self.verify_ms.values()):
            v.clear()

    def after_draft(self, dec, s: RoundState) -> None:
        head = dec.target.logits if s.vocab is None else s.vocab.logits
        rows = s.block.z.to(dec.target.dtype)
        times = {}
        for n in sorted({min(b, rows.shape[0]) for b in self.grid} | {rows.shape[0]}):
            c = StageClock(dec.target.device)
            t = c.now()
            head(rows[:n])
            times[n] = (c.now() - t) * 1e3
        for b in self.grid:
            self.head_ms[b].append(times[min(b, rows.shape[0])] - times[rows.shape[0]])

    def after_build(self, dec, s: RoundState) -> None:
        if s.block is None:
            return
        for b in self.grid:
            c = StageClock(dec.target.device)
            cfg = replace(s.cfg, tree=replace(s.cfg.tree, budget=b), ab_builder=None)
            dec.build(cfg, s.drafter, s.block, s.root, s.start, s.builder, None, c, s.vocab)
            self.build_ms[b].append(c.ms["build"])
        if s.cache is None or s.cfg.temperature > 0:
            return
        tree, tgt = s.built.tree, dec.target
        for b in self.verify_grid:
            prefix = tree.prefix(min(b, tree.num_nodes))
            c = StageClock(tgt.device)
            t = c.now()
            vout = verify_tree(tgt, s.cache, prefix, s.start, s.taps, lazy_head=True)
            accept_walk(prefix, TreeRows(tgt, prefix, vout, 0.0, None))
            self.verify_ms[b].append((c.now() - t) * 1e3)
            cache_truncate(s.cache, s.start)


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
    per_round = _PerRound(grid, verify_grid)
    starts, accept, draft, commit, verify, ar_starts, ar_ms = [], [], [], [], [], [], []
    for m in ("ar", method):
        dec.generate("Warm-up", DecodeConfig(method=m, max_new_tokens=16, builder=builder, tree=tree,
                                             draft_vocab=draft_vocab), observers=[per_round])
    per_round.clear()
    for pi, p in enumerate(tqdm(prompts, desc="calibrate", file=sys.stderr, disable=not progress)):
        # ar on the same prompt, interleaved: budget 0, what a tree must beat on this machine
        tr = dec.generate(p, DecodeConfig(method="ar", max_new_tokens=max_new_tokens, seed=1000 + 100 * pi))
        ar_starts += [rt.start for rt in tr.rounds]
        ar_ms += [sum(rt.stage_ms.values()) for rt in tr.rounds]
        tr = dec.generate(p, DecodeConfig(method=method, max_new_tokens=max_new_tokens, seed=1000 + 100 * pi,
                                          builder=builder, tree=tree, draft_vocab=draft_vocab), observers=[per_round])
        for rt in tr.rounds:
            starts.append(rt.start)
            accept.append(prefix_accept(rt.tree, rt.target_tokens, budget_max))
            draft.append(rt.stage_ms["draft"])
            verify.append(rt.stage_ms["verify"])
            commit.append(rt.stage_ms["commit"])
    build_ms, head_ms = per_round.build_ms, per_round.head_ms
    from ..machine import hardware_info, versions_info
    meta = {"preset": dec.pair.name, "dtype": str(dec.target.dtype).replace("torch.", ""),
            "weights": dec.target.weights, "drafters": drafters_id(dec.pair.name), "builder": builder,
            "corr_topm": tree.corr_topm, "node_topk": tree.node_topk, "draft_vocab": draft_vocab, "prompts": len(prompts),
            "max_new_tokens": max_new_tokens, "prompt_source": prompt_source, "rounds": len(starts), "hardware": hardware_info(dec.target.device),
            "versions": versions_info(), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    draft_ms = statistics.median(draft)
    timed = per_round.verify_ms
    vgrid = verify_grid if all(timed[b] for b in verify_grid) else None
    return Calibration(method, budget_max, starts, accept, draft_ms, statistics.median(commit),
                       grid, [statistics.median(build_ms[b]) for b in grid], meta,
                       [max(0.0, draft_ms + statistics.median(head_ms[b])) for b in grid], verify, ar_starts, ar_ms,
                       vgrid, None if vgrid is None else [statistics.median(timed[b]) for b in vgrid])


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
