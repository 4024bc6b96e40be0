"""Why a method wins or loses on this machine, in numbers: pure functions of recorded runs and
cost curves (``auto/curve.py``); the explorer draws them, the exports write them.

Units. One *step* is what ``ar`` spends per token: its wall time over its tokens when an ``ar`` run
is on the page, else this machine's one-row forward. A round's cost in steps is its share of its
run's wall time (its stage times, scaled so the rounds add up to the run's wall time, as the
pane's "a round cost N ar steps" does) over the step. A method's speedup over ``ar`` is then

    speedup = tau / cost        (tokens committed per round / round cost in steps)

so in the (cost, tokens) plane the lines ``tokens = s * cost`` are speedups s: a round below the
s = 1 line was slower than ``ar``. The break-even tau at a budget b is the cost of a round that
verifies ``b + 1`` rows: this method's draft, build and commit time plus the curve's forward of
``b + 1`` rows, in steps. A projection moves the same rounds (the same trees, the same
acceptance) onto another curve: ``curve.steps(rows) + overhead`` steps each.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean

from ..auto.curve import CostCurve
from ..trace import DecodeTrace

SPEEDUP_LINES = (1.0, 1.5, 2.0)
FIXED_BUDGET = ("ddtree", "marg", "condstatic", "dominotree")


@dataclass
class MethodCost:
    method: str
    tau: float                                  # tokens committed per round
    cost: float                                 # mean round cost here, in steps
    points: list[tuple[float, int]]             # per round: (cost in steps, tokens committed)
    budget: int                                 # the verify width the break-even is for (tree nodes)
    breakeven: float                            # tau a round at that budget needs here for speedup 1
    stage_steps: dict[str, float] = field(default_factory=dict)   # mean steps per stage
    projected_points: list[tuple[float, int]] = field(default_factory=list)
    projected_cost: float = 0.0
    projected_breakeven: float = 0.0

    @property
    def speedup(self) -> float:
        return self.tau / self.cost if self.cost > 0 else 0.0

    @property
    def projected_speedup(self) -> float:
        return self.tau / self.projected_cost if self.projected_cost > 0 else 0.0


@dataclass
class CostPanel:
    step_ms: float
    step_source: str
    machine: CostCurve
    projection: CostCurve
    methods: list[MethodCost]

    def by_method(self, name: str) -> MethodCost | None:
        return next((m for m in self.methods if m.method == name), None)


def step_ms(traces: dict[str, DecodeTrace], machine: CostCurve) -> tuple[float, str]:
    """(ms of one step, where it comes from)."""
    ar = traces.get("ar") or next((t for t in traces.values() if t.method == "ar"), None)
    if ar is not None and ar.token_ids and ar.wall_s > 0:
        ms = ar.wall_s * 1e3 / len(ar.token_ids)
        return ms, f"ar's time per token on this page, {ms:.2f} ms"
    ms = machine.forward_ms(1)
    return ms, f"no ar run on the page: this machine's one-row forward, {ms:.2f} ms"


def _budget(trace: DecodeTrace) -> int:
    tc = trace.config.get("tree") if isinstance(trace.config, dict) else None
    if trace.method in FIXED_BUDGET and isinstance(tc, dict) and isinstance(tc.get("budget"), int):
        return tc["budget"]
    return round(mean(rt.tree.num_nodes for rt in trace.rounds)) if trace.rounds else 0


def method_cost(trace: DecodeTrace, step: float, machine: CostCurve, projection: CostCurve,
                budget: int | None = None) -> MethodCost | None:
    """The numbers of one run (None without rounds); ``budget`` overrides the break-even's width."""
    rounds = trace.rounds
    if not rounds:
        return None
    sums = [sum(float(v) for v in rt.stage_ms.values()) for rt in rounds]
    total = sum(sums)
    # the run's wall time also holds what no stage timed (sampling, Python between stages): share it out
    scale = trace.wall_s * 1e3 / total if total > 0 and trace.wall_s > 0 else 1.0
    points = [(s * scale / step, rt.accept_len) for s, rt in zip(sums, rounds)]
    stages = {k: mean(float(rt.stage_ms.get(k, 0.0)) for rt in rounds) * scale / step
              for k in ("draft", "build", "verify", "commit")}
    b = _budget(trace) if budget is None else int(budget)
    if trace.method == "ar":
        breakeven = 1.0
    else:
        breakeven = stages["draft"] + stages["build"] + stages["commit"] + machine.forward_ms(b + 1) * scale / step
    over = projection.overhead_steps.get(trace.method, 0.0)
    proj = [(projection.steps(len(rt.tree.tokens)) + over, rt.accept_len) for rt in rounds]
    tau = mean(rt.accept_len for rt in rounds)
    return MethodCost(trace.method, tau, mean(p[0] for p in points), points, b, breakeven, stages, proj,
                      mean(p[0] for p in proj), projection.steps(b + 1) + over if trace.method != "ar" else 1.0)


def cost_panel(traces: dict[str, DecodeTrace], machine: CostCurve, projection: CostCurve,
               budget: int | None = None) -> CostPanel:
    """Every run's numbers on one machine curve and one projection."""
    step, source = step_ms(traces, machine)
    methods = [m for m in (method_cost(t, step, machine, projection, budget) for t in traces.values()) if m is not None]
    return CostPanel(step, source, machine, projection, methods)


def _x(v: float) -> str:
    return f"{v:.2f}x"


def captions(panel: CostPanel) -> list[str]:
    """Sentences a teacher can read aloud, plain text (the caller escapes them), in a fixed order: the
    forward's cost, when a round pays, one per tree method, the projection (the lecture view's CSS,
    ``assets/lecture.css``, keeps only the second and the last: the others repeat the figure and table)."""
    mc, pr = panel.machine, panel.projection
    out = [f"On {mc.label.removeprefix('this machine: ')}, verifying a tree costs more than one step: a forward of "
           f"4 rows costs {mc.steps(4):.1f} one-row forwards, 17 rows (the paper's budget 16 plus the root) "
           f"{mc.steps(17):.1f}, 33 rows {mc.steps(33):.1f}.",
           f"A round pays for itself when it commits more tokens than it costs steps (one step = {panel.step_source}). "
           "Points below the speedup = 1 line are rounds slower than plain decoding."]
    for m in panel.methods:
        if m.method == "ar":
            continue
        verdict = "faster than" if m.speedup > 1.0 else "slower than"
        out.append(f"{m.method}: a round cost {m.cost:.2f} steps and committed {m.tau:.2f} tokens, so it ran "
                   f"{_x(m.speedup)} ar here ({verdict} ar). At budget {m.budget} its break-even tau on this machine "
                   f"is {m.breakeven:.2f}: a round must commit that many tokens just to match ar.")
    trees = [m for m in panel.methods if m.method != "ar"]
    if trees:
        best = max(trees, key=lambda m: m.projected_speedup)
        out.append(f"Projection, not a measurement: on {pr.label.removesuffix(' (projection)')}, assuming "
                   f"{pr.assumption}. The same rounds with the same acceptance would cost "
                   + ", ".join(f"{m.method} {m.projected_cost:.2f} steps ({_x(m.projected_speedup)} ar, "
                               f"break-even tau {m.projected_breakeven:.2f})" for m in trees)
                   + f": there {best.method} would be the fastest.")
    return out
