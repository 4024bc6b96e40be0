"""``--budget auto``: the fixed budget that maximises predicted tokens/s for a pair on a device.

The budget-prefix property: a best-first tree's nodes are in pop order, and the first ``b`` pops of
a budget-``B`` tree are exactly the budget-``b`` tree (the heap's pushes before pop ``b`` do not
depend on the budget). At T = 0 the target's token at a tree row depends only on the row's
ancestors, so one calibration run at a large budget ``B`` gives, for every ``b <= B``, the
acceptance the budget-``b`` tree would have had in that round: the accept walk over the first
``b + 1`` rows with the recorded target tokens (``prefix_accept``).

Per round ``r`` of the calibration the predicted round time at budget ``b`` is

    draft_ms(b) + build_ms(b) + C_v(b; start_r) + commit_ms(b)

with ``C_v`` the verify-cost model of ``profile-cost`` (``dominotree.auto.costmodel``), the build time
measured in the calibration at a grid of budgets (linear between them), the draft time likewise
(a budget-``b`` tree reaches depth ``b`` at most, so the drafter's LM head runs on ``min(b, depth)``
rows; older calibrations without that grid use one draft time) and the commit time the
calibration's median; predicted tokens/s(b) = sum_r accepted_r(b) / sum_r time_r(b).
The choice is the ``b`` with the highest prediction, the smaller on a tie: a pure function of the
profile and the calibration, hence deterministic. It is one fixed budget per pair, method and
device, not a per-round rule (CondAdaptive's per-round rule is what the paper shows failing).

Since version 3 the calibration also times the verify stage itself at a grid of budgets (the
target's forward over the round's budget-``b`` prefix at the round's position, the LM head on the
rows the accept walk reads, the walk; ``auto.calibrate``), and the prediction uses those times in
place of ``C_v`` and the remainder below: on a 2-core AVX2 CPU the profile's random trees with every
row's head put a 3-row verify at +30-41 % of a one-row step where the decoder's verify stage
takes +22 %, and its convex fit smooths the kernels' step-shaped cost at few rows. Older
calibrations keep the profile's model. Since version 4 (``auto.calibration``) every stage's grid
times come from plain decodes at each grid budget (``calibrate.stage_ms_by_budget``), the commit
included (``commit_at``): the version-3 times, taken at ``budget_max`` and re-timed beside its rounds,
priced a budget-3 round at 2.10 ``ar`` steps where the decodes measured 1.86 (results/soft22-zen5).
Since version 5 ``ar``'s round is timed in that same pass, prompt by prompt beside the trees
(``Calibration.ar_timed_ms``), and prices budget 0: before, it came from ``ar`` decodes beside the
main pass a minute earlier (no longer made), and a VM that changed speed in between moved every
predicted ratio.

Plain decoding is a candidate too: budget 0. The calibration also times ``ar`` on the same
prompts and records the tree's measured verify stage, so each prediction carries what the profile
leaves out (the draw, the mask, Python between the stages): ``ar`` at ``C_v(0; l)`` plus its
measured remainder, a tree at ``C_v(b; l)`` plus the remainder on the line from ar's (one row) to
the calibration tree's (``budget_max + 1`` rows). The profile is put on the calibration's clock
when ar's rounds ran faster than its one-row forward (``profile_scale``: a profile measured under
load would otherwise make every stage it does not cover look cheap). A tree is chosen only when predicted
at least ``AR_MARGIN`` faster than ``ar``; otherwise ``auto`` decodes plainly and says why
(``AutoChoice.reason``).

Both files are measured per machine, target weights, dtype and drafters (``auto.files``: where
they live and which fit); another machine's file is never borrowed: ``--budget auto`` measures on
first use (``python -m dominotree calibrate-budget`` does it separately; the explorer has a button).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..config import CHAIN_METHODS, DecodeConfig
from .files import auto_paths, drafters_id, other_machine, stale
from .costmodel import device_slug
from .calibration import Calibration, load_calibration
from ..tree import Tree, accept_walk

AR_MARGIN = 0.03          # a tree must be predicted this much faster than ar to be chosen over it
PROFILE_SLOW = 0.8        # a profile this much slower than the calibration's own ar rounds is worth a warning
# the fixed-budget heaps whose first b pops are the budget-b tree, ties included
# (tests/test_autobudget.py; DDTree's top-budget lists break it at exact ties)
AUTO_METHODS = ("marg", "condstatic", "dominotree")
NO_BUDGET = ("ar", *CHAIN_METHODS)         # methods that draft no tree: a budget means nothing to them


def prefix_accept(tree: Tree, target_tokens: list[int], budget_max: int) -> list[int]:
    """``out[b-1]``: tokens the budget-``b`` prefix of ``tree`` commits (accepted drafts + bonus), b = 1..budget_max."""
    out = []
    for b in range(1, budget_max + 1):
        n = min(b, tree.num_nodes)
        accepted, _ = accept_walk(tree.prefix(n), target_tokens[:n + 1])
        out.append(len(accepted))
    return out


def _median(xs) -> float:
    xs = sorted(xs)
    k = len(xs)
    return float(xs[k // 2] if k % 2 else (xs[k // 2 - 1] + xs[k // 2]) / 2)


def profile_scale(cal: Calibration, cost_model) -> float:
    """The factor (<= 1) that brings the profile's forward times down to this calibration's own
    clock: a measured ``ar`` round cannot take less than its one-row forward, so ``ar`` rounds
    timed faster than the profile's forward (median ratio below 1) mean the profile was measured
    slower (under load, or on a slower state of the VM) and every ``C_v`` is scaled by that ratio.
    Rounds timed slower are the remainder the profile leaves out, not a scale (``ar_round_ms``).
    1 for a version-1 calibration (no ar rounds)."""
    if not cal.ar_ms:
        return 1.0
    return min(1.0, _median(m / cost_model.verify_ms_at(0, s) for s, m in zip(cal.ar_starts, cal.ar_ms)))


def ar_round_ms(cal: Calibration, cost_model) -> float:
    """Predicted ms of one ``ar`` round (one token) over the calibration's ar rounds: the
    profile's one-row forward (``profile_scale``d) plus the remainder ar's rounds measured beyond
    it. A version-1 calibration has no ar rounds: the profile's forward plus the tree's commit time."""
    if cal.ar_ms is None:
        return sum(cost_model.verify_ms_at(0, s) + cal.commit_ms for s in cal.starts) / len(cal.starts)
    k = profile_scale(cal, cost_model)
    rest = max(0.0, _median(m - k * cost_model.verify_ms_at(0, s) for s, m in zip(cal.ar_starts, cal.ar_ms)))
    return sum(k * cost_model.verify_ms_at(0, s) + rest for s in cal.ar_starts) / len(cal.ar_starts)


def curve(cal: Calibration, cost_model) -> list[dict]:
    """Per budget b = 0..budget_max (0: plain decoding): tau (mean tokens per round), the round's
    predicted ms and ``ar`` steps, predicted tokens/s and speedup over ``ar``."""
    ar_ms = cal.ar_timed_ms if cal.ar_timed_ms is not None else ar_round_ms(cal, cost_model)
    k = profile_scale(cal, cost_model)
    # what the profile's forward leaves out of a tree's verify stage (the draw, mask, Python): timed
    # at budget_max rows, and for one row by the ar rounds; in between it grows with the rows
    over_max = 0.0 if cal.verify_ms is None else max(0.0, _median(
        v - k * cost_model.verify_ms_at(cal.budget_max, s) for s, v in zip(cal.starts, cal.verify_ms)))
    over_one = over_max if not cal.ar_ms else min(over_max, max(0.0, _median(
        m - k * cost_model.verify_ms_at(0, s) for s, m in zip(cal.ar_starts, cal.ar_ms))))
    over = lambda b: over_one + (over_max - over_one) * b / cal.budget_max    # noqa: E731
    out = [{"budget": 0, "tau": 1.0, "round_ms": ar_ms, "round_ar_steps": 1.0,
            "predicted_tokens_per_s": 1e3 / ar_ms, "speedup": 1.0}]
    n = len(cal.accept)
    for b in range(1, cal.budget_max + 1):
        toks = sum(a[b - 1] for a in cal.accept)
        timed = cal.verify_at(b)      # version 3: the verify stage as timed at this budget in these rounds
        ms = sum(cal.draft_at(b) + cal.build_at(b) + cal.commit_at(b) +
                 (timed if timed is not None else k * cost_model.verify_ms_at(b, s) + over(b)) for s in cal.starts)
        out.append({"budget": b, "tau": toks / n, "round_ms": ms / n, "round_ar_steps": ms / n / ar_ms,
                    "predicted_tokens_per_s": 1e3 * toks / ms, "speedup": toks / n / (ms / n / ar_ms)})
    return out


def choose(cal: Calibration, cost_model) -> int:
    """The budget with the highest predicted tokens/s (the smallest such budget on a tie), or 0
    (plain decoding) when no tree is predicted ``AR_MARGIN`` faster than ``ar``."""
    return _choose(curve(cal, cost_model))


def _choose(rows: list[dict]) -> int:
    best = max(rows[1:], key=lambda r: (r["predicted_tokens_per_s"], -r["budget"]))
    return int(best["budget"]) if best["speedup"] >= 1 + AR_MARGIN else 0


def explain(rows: list[dict], budget: int) -> str:
    """One line a person can read: why ``auto`` chose ``budget`` (0: plain decoding)."""
    best = max(rows[1:], key=lambda r: (r["predicted_tokens_per_s"], -r["budget"]))
    if budget == 0:
        return (f"auto: no tree pays here: the best, budget {best['budget']}, costs {best['round_ar_steps']:.2f} ar "
                f"steps a round and commits {best['tau']:.2f} tokens (predicted {best['speedup']:.2f}x ar), "
                f"so it decodes plainly")
    r = rows[budget]
    return (f"auto: budget {budget}: a round costs {r['round_ar_steps']:.2f} ar steps and commits {r['tau']:.2f} "
            f"tokens, predicted {r['speedup']:.2f}x ar")


def require_profile(path: str | Path, preset: str, dtype: str):
    """The verify-cost profile ``--budget auto`` needs, or one line saying how to make it."""
    from ..errors import UserError
    from .costmodel import load_cost_model
    path = Path(path)
    if not path.is_file():
        raise UserError(f"--budget auto needs a verify-cost profile and there is none at {path}: make one with "
                        f"`python -m dominotree profile-cost --preset {preset} --dtype {dtype} --out {path}`")
    return load_cost_model(path)


@dataclass(frozen=True)
class AutoChoice:
    """What ``--budget auto`` chose for one method on one pair and device, why, and from which
    files. ``budget`` 0: no tree is predicted to pay, the method decodes plainly."""
    method: str
    budget: int
    calibration: Path
    cost_model: Path
    created: str | None = None                  # when the calibration was made (its meta)
    warnings: tuple[str, ...] = ()              # given files made with another preset, dtype or machine
    curve: list = field(default_factory=list, compare=False)
    reason: str = ""                            # ``explain``: the choice in one line

    def describe(self) -> str:
        """``budget auto = 6 (calibrated 2025-05-01, budget_dominotree.json): auto: budget 6: ...``."""
        when = f"calibrated {self.created[:10]}, " if self.created else "calibrated, "
        head = "plain decoding" if self.budget == 0 else str(self.budget)
        return f"budget auto = {head} ({when}{self.calibration.name})" + (f": {self.reason}" if self.reason else "")

    def to_dict(self) -> dict:
        """The choice as the CLI's JSON, traces and bench summaries record it."""
        return {"method": self.method, "budget": self.budget, "reason": self.reason,
                "calibration": str(self.calibration), "cost_model": str(self.cost_model), "warnings": list(self.warnings),
                "curve": [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in self.curve]}


def check_auto_method(method: str) -> None:
    from ..errors import UserError
    if method not in AUTO_METHODS:
        raise UserError(f"--budget auto is for the fixed-budget tree methods ({', '.join(AUTO_METHODS)}), "
                        f"not {method!r}")


def auto_choice(preset: str, device, method: str, dtype: str = "float32", cost_model_path=None,
                calibration_path=None, draft_vocab: int = 0, weights: str | None = None) -> AutoChoice:
    """``--budget auto`` from the saved profile and calibration; it never calibrates. Raises
    UserError, one line naming the commands that make what is missing. ``weights``: the target's
    weights (int4, bf16, float32) when known, to warn about files made with other weights."""
    from ..errors import UserError
    from .costmodel import load_cost_model
    check_auto_method(method)
    cpath, kpath = auto_paths(preset, device, method, cost_model_path, calibration_path, draft_vocab, weights, dtype)
    pair = "--target DIR --drafter DIR" if preset == "custom" else f"--preset {preset}"
    # this machine's own file is where a new one will be saved, so it may be there but stale
    old_c = [] if cost_model_path else stale(cpath, device, weights, dtype)
    old_k = [] if calibration_path else stale(kpath, device, weights, dtype, drafters_id(preset))
    old = old_c + old_k
    missing = [w for w, p, o in (("a verify-cost profile", cpath, old_c), (f"a {method} budget calibration", kpath, old_k))
               if not p.is_file() or o]
    if missing:
        vocab = f" --draft-vocab {draft_vocab}" if draft_vocab else ""
        wt = f" --weights {weights}" if weights and weights != dtype else ""
        raise UserError(f"--budget auto needs {' and '.join(missing)} made on this machine ({device_slug(device)}, "
                        f"{weights or dtype} weights, {dtype}): measure {'it' if len(missing) == 1 else 'them'} "
                        f"with `python -m dominotree calibrate-budget {pair} --dtype {dtype}{wt} --method {method}"
                        f"{vocab}` (about two minutes), or run `generate --budget auto`, which measures on first use"
                        + (f" (this machine's files were made with {'; '.join(old)})" if old else ""))
    cm, cal = load_cost_model(cpath), load_calibration(kpath)
    if cal.method != method:
        raise UserError(f"budget calibration {kpath} is for {cal.method!r}, not {method!r}")
    warnings = tuple(f"the budget calibration was made with {key} {cal.meta.get(key)!r}, this run uses {want!r}"
                     for key, want in (("preset", preset), ("dtype", dtype)) if cal.meta.get(key) not in (None, want))
    warnings += other_machine(cal.meta.get("hardware"), device, "budget calibration")
    warnings += other_machine(cm.meta.get("hardware"), device, "verify-cost profile")
    if weights is not None:      # files from before weights were recorded carry none: no warning
        for what, meta in (("budget calibration", cal.meta), ("verify-cost profile", cm.meta)):
            if meta.get("weights") not in (None, weights):
                warnings += (f"the {what} was made with {meta['weights']} target weights, this run uses {weights}",)
    if cm.meta.get("dtype") not in (None, dtype):
        warnings += (f"the verify-cost profile was made with dtype {cm.meta.get('dtype')!r}, this run uses {dtype!r}",)
    if int(cal.meta.get("draft_vocab", 0)) != draft_vocab:
        made = cal.meta.get("draft_vocab", 0) or "the full"
        warnings += (f"the budget calibration was made with {made} drafter vocabulary, this run uses "
                     f"{draft_vocab or 'the full one'}",)
    k = profile_scale(cal, cm)
    if k < PROFILE_SLOW:
        warnings += (f"the verify-cost profile's forward is {1 / k:.1f}x slower than the ar rounds this calibration "
                     f"timed (measured under other load?): its costs are scaled by {k:.2f}; re-measure it with "
                     f"`python -m dominotree profile-cost`",)
    did = drafters_id(preset)
    if did and cal.meta.get("drafters") != did:
        warnings += (f"the budget calibration was made with other drafters ({cal.meta.get('drafters') or 'not recorded'}"
                     f"; this run's are {did}): their acceptance differs, recalibrate",)
    rows = curve(cal, cm)
    budget = _choose(rows)
    return AutoChoice(method, budget, kpath, cpath, cal.meta.get("created"), warnings, rows, explain(rows, budget))


def apply_auto(cfgs: list[DecodeConfig], preset: str, device, dtype: str = "float32", weights: str | None = None) \
        -> tuple[list[DecodeConfig], dict[str, AutoChoice], list[str]]:
    """Every config whose method has a calibration here gets its auto budget (never calibrating);
    the others keep theirs. Returns the configs, the choices by method, and one line per reason a
    method with a tree kept its budget (tree-less methods have none to choose)."""
    from dataclasses import replace
    from ..errors import UserError
    out, chosen, kept = [], {}, {}
    for cfg in cfgs:
        why = None
        if cfg.method in NO_BUDGET:
            pass
        elif cfg.method not in AUTO_METHODS:
            why = f"auto is calibrated for {', '.join(AUTO_METHODS)} only"
        else:
            try:
                ch = auto_choice(preset, device, cfg.method, dtype, draft_vocab=cfg.draft_vocab, weights=weights)
                chosen[cfg.method] = ch
                cfg = replace(cfg, tree=replace(cfg.tree, budget=ch.budget))
            except (UserError, OSError) as e:
                why = str(e)
        if why is not None:
            kept.setdefault((cfg.tree.budget, why), []).append(cfg.method)
        out.append(cfg)
    notes = [f"{', '.join(ms)} {'keeps' if len(ms) == 1 else 'keep'} budget {b}: {why}" for (b, why), ms in kept.items()]
    return out, chosen, notes


def auto_available(preset: str, device, dtype: str = "float32", draft_vocab: int = 0, weights: str | None = None) \
        -> tuple[dict[str, AutoChoice], str | None]:
    """The auto choice of every method calibrated for this pair and device (and draft vocabulary)
    and, when there is none, the one line saying why (for ``dominotree``: the commands that make
    what it lacks)."""
    from ..errors import UserError
    chosen, reason = {}, None
    for m in AUTO_METHODS:
        try:
            chosen[m] = auto_choice(preset, device, m, dtype, draft_vocab=draft_vocab, weights=weights)
        except (UserError, OSError) as e:
            if m == "dominotree" or reason is None:
                reason = str(e)
    return chosen, None if chosen else reason
