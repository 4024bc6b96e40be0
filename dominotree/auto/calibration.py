"""A ``--budget auto`` calibration as data: what one calibration run measured (``auto.calibrate``),
its checks, and its JSON file (``budget_<method>...json`` in the machine's folder, ``auto.files``).

Version 1: per round the acceptance of every budget and the draft, commit and build times;
2: the tree's verify stage per round and ``ar``'s rounds on the same prompts (budget 0);
3: the verify stage per grid budget; 4: every stage per grid budget as timed in plain decodes at
that budget (``auto.calibrate``'s timing pass), the commit included (``commit_grid_ms``); 5: ``ar``'s
round as timed in that same pass (``ar_timed_ms``), so that both sides of every predicted ratio
share one clock."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..jsonfile import read_json, write_json_atomic

SCHEMA = "dominotree.budget_calibration"
SCHEMA_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)


@dataclass
class Calibration:
    """A budget-``budget_max`` run of ``method``: per round its start and the tokens every prefix
    would have committed, plus the stage costs that do not come from the verify-cost model."""
    method: str
    budget_max: int
    starts: list[int]                    # per round: the root's position (context length)
    accept: list[list[int]]              # per round: tokens committed at b = 1..budget_max
    draft_ms: float
    commit_ms: float
    build_grid: list[int]                # budgets at which the build was timed
    build_ms: list[float]                # median build ms at each grid budget
    meta: dict = field(default_factory=dict)
    draft_grid_ms: list[float] | None = None   # median draft ms at each grid budget (None: draft_ms)
    verify_ms: list[float] | None = None       # per round: the measured verify stage (version 2)
    ar_starts: list[int] | None = None         # ar on the same prompts: each round's start
    ar_ms: list[float] | None = None           #   and its ms, all stages (version 2)
    verify_grid: list[int] | None = None       # budgets at which the verify stage was timed (version 3)
    verify_grid_ms: list[float] | None = None  #   its median ms at each
    commit_grid_ms: list[float] | None = None  #   and the commit's (version 4)
    ar_timed_ms: float | None = None           # ar's round, all stages, timed beside them (version 5)

    def __post_init__(self):
        if not self.accept or len(self.accept) != len(self.starts):
            raise ValueError("a calibration needs at least one round, with a start per round")
        if any(len(a) != self.budget_max for a in self.accept):
            raise ValueError("every round needs one acceptance per budget 1..budget_max")
        if not self.build_grid or len(self.build_grid) != len(self.build_ms) or \
                any(b2 <= b1 for b1, b2 in zip(self.build_grid, self.build_grid[1:])):
            raise ValueError("build_grid must be increasing, with one build time per budget")
        if self.draft_grid_ms is not None and len(self.draft_grid_ms) != len(self.build_grid):
            raise ValueError("draft_grid_ms needs one draft time per grid budget")
        if self.verify_ms is not None and len(self.verify_ms) != len(self.starts):
            raise ValueError("verify_ms needs one time per round")
        if (self.verify_grid is None) != (self.verify_grid_ms is None) or (self.verify_grid is not None and (
                not self.verify_grid or len(self.verify_grid) != len(self.verify_grid_ms)
                or any(b2 <= b1 for b1, b2 in zip(self.verify_grid, self.verify_grid[1:])) or self.verify_grid[0] < 1)):
            raise ValueError("verify_grid must be increasing budgets >= 1, with one verify time per budget")
        if self.commit_grid_ms is not None and (self.verify_grid is None or len(self.commit_grid_ms) != len(self.verify_grid)):
            raise ValueError("commit_grid_ms needs a verify_grid, with one commit time per budget")
        if (self.ar_ms is None) != (self.ar_starts is None) or \
                (self.ar_ms is not None and (not self.ar_ms or len(self.ar_ms) != len(self.ar_starts))):
            raise ValueError("ar_ms and ar_starts go together, one per ar round")
        if self.ar_timed_ms is not None and not (self.ar_timed_ms > 0 and self.verify_grid is not None):
            raise ValueError("ar_timed_ms must be a positive time, beside a verify_grid")

    def draft_at(self, b: int) -> float:
        """Draft ms at budget ``b`` (the grid's, linear between its budgets, flat beyond them)."""
        if self.draft_grid_ms is None:
            return self.draft_ms
        g, v = self.build_grid, self.draft_grid_ms
        if b <= g[0]:
            return float(v[0])
        for (b0, v0), (b1, v1) in zip(zip(g, v), zip(g[1:], v[1:])):
            if b <= b1:
                return float(v0 + (v1 - v0) * (b - b0) / (b1 - b0))
        return float(v[-1])

    def build_at(self, b: int) -> float:
        g, v = self.build_grid, self.build_ms
        if b <= g[0]:
            return float(v[0]) * (b / g[0] if g[0] > 0 else 1.0)
        return _between(g, v, b)

    def verify_at(self, b: int) -> float | None:
        """The verify stage's ms at budget ``b`` as timed (version 3: linear between the grid's
        budgets, the last slope beyond them); None without such times."""
        g, v = self.verify_grid, self.verify_grid_ms
        if g is None:
            return None
        return float(v[0]) if b <= g[0] else _between(g, v, b)

    def commit_at(self, b: int) -> float:
        """The commit stage's ms at budget ``b`` (version 4: as timed on the verify grid, linear
        between its budgets); ``commit_ms`` before."""
        if self.commit_grid_ms is None:
            return self.commit_ms
        g, v = self.verify_grid, self.commit_grid_ms
        return float(v[0]) if b <= g[0] else _between(g, v, b)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "version": SCHEMA_VERSION, "method": self.method, "budget_max": self.budget_max,
                "starts": self.starts, "accept": self.accept, "draft_ms": self.draft_ms, "commit_ms": self.commit_ms,
                "build_grid": self.build_grid, "build_ms": self.build_ms, "meta": self.meta,
                **({"draft_grid_ms": self.draft_grid_ms} if self.draft_grid_ms is not None else {}),
                **({"verify_ms": self.verify_ms} if self.verify_ms is not None else {}),
                **({"ar_starts": self.ar_starts, "ar_ms": self.ar_ms} if self.ar_ms is not None else {}),
                **({"verify_grid": self.verify_grid, "verify_grid_ms": self.verify_grid_ms}
                   if self.verify_grid is not None else {}),
                **({"commit_grid_ms": self.commit_grid_ms} if self.commit_grid_ms is not None else {}),
                **({"ar_timed_ms": self.ar_timed_ms} if self.ar_timed_ms is not None else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "Calibration":
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise ValueError(f"not a DominoTree budget calibration (missing schema {SCHEMA!r})")
        if d.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"calibration version {d.get('version')!r} is not supported")
        opt = lambda k, f: [f(x) for x in d[k]] if d.get(k) is not None else None   # noqa: E731
        return cls(d["method"], int(d["budget_max"]), [int(s) for s in d["starts"]],
                   [[int(x) for x in a] for a in d["accept"]], float(d["draft_ms"]), float(d["commit_ms"]),
                   [int(b) for b in d["build_grid"]], [float(x) for x in d["build_ms"]], d.get("meta") or {},
                   opt("draft_grid_ms", float), opt("verify_ms", float), opt("ar_starts", int), opt("ar_ms", float),
                   opt("verify_grid", int), opt("verify_grid_ms", float), opt("commit_grid_ms", float),
                   float(d["ar_timed_ms"]) if d.get("ar_timed_ms") is not None else None)

    def save(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict())


def _between(g: list[int], v: list[float], b: float) -> float:
    """``v`` at ``b`` on the grid ``g`` (b >= g[0]): linear between points, the last slope beyond."""
    for (b0, v0), (b1, v1) in zip(zip(g, v), zip(g[1:], v[1:])):
        if b <= b1:
            return float(v0 + (v1 - v0) * (b - b0) / (b1 - b0))
    slope = (v[-1] - v[-2]) / (g[-1] - g[-2]) if len(g) > 1 else v[-1] / max(g[-1], 1)
    return float(v[-1] + slope * (b - g[-1]))


def load_calibration(path: str | Path) -> Calibration:
    return read_json(path, "budget calibration", "python -m dominotree calibrate-budget", Calibration.from_dict)
