"""Verify-cost model for the adaptive budgets (CaDDTree, CondAdaptive) and `--budget auto`: fit, save, load.

``C_v(n; l)`` is the latency of one verify forward over the root plus ``n`` tree nodes at context
length ``l``; ``C_d`` is the per-round draft cost. Both are measured on the machine at hand
(the published CaDDTree models were fitted on 8x A800 and do not transfer).

The fit follows CaDDTree's ``fit_cost_model.py`` without cvxpy: at each profiled context the
latencies over the profiled node counts are projected onto the nondecreasing convex sequences
(least squares, ``D^2 b >= 0`` and ``D b >= 0`` on the possibly uneven grid) by a small
non-negative least squares in a hinge basis. Between profiled ``n`` the fit is linear; beyond
the largest ``n`` it extends its last slope (linear extrapolation keeps it convex). Across
context lengths it is interpolated linearly and clamped to the profiled range (no
extrapolation in ``l``, which keeps every slice monotone and convex).

The profiler (``dominotree/auto/profile.py``, run by ``python -m dominotree profile-cost --preset smollm2``)
writes ``results/cost_model_<preset>_<device>.json``; ``load_cost_model(path)`` reads it back.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..jsonfile import read_json, write_json_atomic

SCHEMA = "dominotree.cost_model"
SCHEMA_VERSION = 1


# --- the fit ---------------------------------------------------------------------------------

def nnls(A: np.ndarray, y: np.ndarray, max_iter: int | None = None) -> np.ndarray:
    """Lawson-Hanson non-negative least squares: argmin ||A w - y|| subject to w >= 0."""
    A = np.asarray(A, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    m, k = A.shape
    w = np.zeros(k)
    passive = np.zeros(k, dtype=bool)
    tol = 10 * np.finfo(float).eps * np.linalg.norm(A, 1) * max(m, k)
    max_iter = max_iter or 3 * k + 30
    for _ in range(max_iter):
        grad = A.T @ (y - A @ w)
        if passive.all() or grad[~passive].max(initial=-np.inf) <= tol:
            break
        j = int(np.argmax(np.where(passive, -np.inf, grad)))
        passive[j] = True
        while True:
            z = np.zeros(k)
            z[passive] = np.linalg.lstsq(A[:, passive], y, rcond=None)[0]
            if (z[passive] > tol).all():
                w = z
                break
            bad = passive & (z <= tol)
            alpha = np.min(w[bad] / np.maximum(w[bad] - z[bad], 1e-300))
            w = w + alpha * (z - w)
            passive &= w > tol
            w[~passive] = 0.0
            if not passive.any():
                break
    return w


def hinge_basis(x) -> np.ndarray:
    """Columns ``[1, -1, x - x0, max(0, x - x1), ..., max(0, x - x_{m-2})]``: with non-negative
    weights they span exactly the nondecreasing convex piecewise-linear functions on the grid
    (the first two columns make the intercept free)."""
    x = np.asarray(x, dtype=np.float64)
    cols = [np.ones_like(x), -np.ones_like(x), x - x[0]]
    cols += [np.maximum(0.0, x - knot) for knot in x[1:-1]]
    return np.stack(cols, axis=1)


def fit_monotone_convex(x, y) -> np.ndarray:
    """Least-squares projection of ``y`` (sampled at increasing ``x``) onto nondecreasing convex
    sequences; returns the fitted values at ``x``."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size == 0:
        raise ValueError("x and y must be 1-D and the same length")
    if np.any(np.diff(x) <= 0):
        raise ValueError("x must be strictly increasing")
    if x.size == 1:
        return y.copy()
    A = hinge_basis(x)
    return A @ nnls(A, y)


# --- the model -------------------------------------------------------------------------------

@dataclass
class CostModel:
    """Fitted verify latency ``verify_ms[i][j]`` at ``contexts[i]`` and ``nodes[j]`` plus draft cost."""
    contexts: list[int]
    nodes: list[int]
    verify_ms: list[list[float]]             # fitted (monotone, convex in n per context)
    draft_ms: float                          # C_d used by the stopping rule
    draft_ms_by_kind: dict = field(default_factory=dict)
    raw_ms: list[list[float]] | None = None  # measured medians, same shape as verify_ms
    meta: dict = field(default_factory=dict)

    def __post_init__(self):
        self.contexts = [int(c) for c in self.contexts]
        self.nodes = [int(n) for n in self.nodes]
        if not self.contexts or not self.nodes:
            raise ValueError("a cost model needs at least one context length and one node count")
        if any(np.diff(self.contexts) <= 0) or any(np.diff(self.nodes) <= 0):
            raise ValueError("contexts and nodes must be strictly increasing")
        v = np.asarray(self.verify_ms, dtype=np.float64)
        if v.shape != (len(self.contexts), len(self.nodes)):
            raise ValueError(f"verify_ms has shape {v.shape}, expected {(len(self.contexts), len(self.nodes))}")
        if not np.all(np.isfinite(v)) or not math.isfinite(self.draft_ms) or self.draft_ms < 0:
            raise ValueError("cost model values must be finite and non-negative")
        self._v = v
        self._x = np.asarray(self.nodes, dtype=np.float64)

    # C_v and C_d in milliseconds / seconds
    def _row(self, i: int, n: float) -> float:
        x, y = self._x, self._v[i]
        if len(x) == 1:
            return float(y[0])
        if n <= x[-1]:
            return float(np.interp(n, x, y))
        slope = (y[-1] - y[-2]) / (x[-1] - x[-2])
        return float(y[-1] + slope * (n - x[-1]))

    def verify_ms_at(self, n: float, context_len: float) -> float:
        c = self.contexts
        if context_len <= c[0] or len(c) == 1:
            return self._row(0, n)
        if context_len >= c[-1]:
            return self._row(len(c) - 1, n)
        j = int(np.searchsorted(c, context_len))
        w = (context_len - c[j - 1]) / (c[j] - c[j - 1])
        return (1 - w) * self._row(j - 1, n) + w * self._row(j, n)

    def verify_s(self, n: float, context_len: float) -> float:
        return self.verify_ms_at(n, context_len) / 1e3

    @property
    def draft_s(self) -> float:
        return self.draft_ms / 1e3

    # serialization
    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "version": SCHEMA_VERSION, "contexts": self.contexts, "nodes": self.nodes,
                "verify_ms": [[round(float(x), 6) for x in row] for row in self._v],
                "raw_ms": self.raw_ms, "draft_ms": self.draft_ms, "draft_ms_by_kind": self.draft_ms_by_kind,
                "meta": self.meta}

    def save(self, path: str | Path) -> Path:
        return write_json_atomic(path, self.to_dict(), indent=1)

    @classmethod
    def from_dict(cls, d: dict) -> "CostModel":
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise ValueError(f"not a DominoTree cost model (missing schema {SCHEMA!r})")
        if d.get("version") != SCHEMA_VERSION:
            raise ValueError(f"cost model version {d.get('version')!r} is not supported (expected {SCHEMA_VERSION})")
        return cls(d["contexts"], d["nodes"], d["verify_ms"], float(d["draft_ms"]), d.get("draft_ms_by_kind") or {},
                   d.get("raw_ms"), d.get("meta") or {})

    @classmethod
    def fit(cls, contexts, nodes, raw_ms, draft_ms: float, draft_ms_by_kind=None, meta=None) -> "CostModel":
        """Fit each context's latencies monotone + convex in n; keep the raw medians too."""
        raw = np.asarray(raw_ms, dtype=np.float64)
        fitted = [fit_monotone_convex(nodes, row) for row in raw]
        return cls(list(contexts), list(nodes), [list(map(float, r)) for r in fitted], float(draft_ms),
                   dict(draft_ms_by_kind or {}), raw.tolist(), dict(meta or {}))

    @classmethod
    def synthetic(cls, draft_ms: float = 1.0, base_ms: float = 5.0, per_node_ms: float = 0.2,
                  quad_ms: float = 0.0, per_ctx_ms: float = 0.0, contexts=(0, 4096),
                  nodes=(0, 1, 2, 4, 8, 16, 32, 64)) -> "CostModel":
        """A closed-form model ``base + per_node*n + quad*n^2 + per_ctx*l`` (tests, what-if runs)."""
        v = [[base_ms + per_node_ms * n + quad_ms * n * n + per_ctx_ms * c for n in nodes] for c in contexts]
        return cls(list(contexts), list(nodes), v, draft_ms, meta={"synthetic": True})


def load_cost_model(path: str | Path) -> CostModel:
    """Read a cost model JSON written by ``profile-cost`` (clear errors for the wrong file)."""
    return read_json(path, "cost model file", "python -m dominotree profile-cost", CostModel.from_dict)


# --- where it lives ----------------------------------------------------------------------------

def device_slug(device) -> str:
    """``cpu`` or ``cuda-<gpu name>`` (lower case, dashes): the cost model's hardware tag."""
    import torch
    dev = torch.device(device) if not isinstance(device, torch.device) else device
    if dev.type == "cuda" and torch.cuda.is_available():
        name = torch.cuda.get_device_name(dev)
        return "cuda-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return dev.type


def default_path(preset: str, device) -> Path:
    """``results/cost_model_<preset>_<device>.json`` (relative to the working directory)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset or "custom")
    return Path("results") / f"cost_model_{slug}_{device_slug(device)}.json"
