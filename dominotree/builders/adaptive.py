"""Adaptive budgets: CaDDTree's throughput-greedy stopping rule (over DDTree marginals) and
CondAdaptive (the same rule over DominoTree's conditional scores).

The rule (reference/algorithms.md section 4b): per round the expected throughput of a tree of
the first ``n`` best-first nodes is

    theta(n) = (1 + Phi(n)) / (C_d + C_v(n; l))

with ``Phi(n)`` the sum of ``exp(cumulative log-prob)`` of those nodes (the surrogate expected
accepted drafts; the 1 is the bonus token), ``C_d`` the draft cost and ``C_v(n; l)`` the fitted
verify latency of ``n`` nodes at context length ``l``. Before accepting each popped node the
builder asks ``stop(n, logw)``; it stops at the first ``theta_new <= theta_prev``, where
``theta_prev`` starts at ``theta(0) = 1 / (C_d + C_v(0; l))``. The budget (``TreeConfig.budget``)
stays the hard maximum.

``make_stop`` returns that stateful rule (each False answer means the node was accepted);
``build_adaptive`` is ``reference.build_reference``'s conditional heap with the rule asked
before each node, and records in ``Built.extra`` the final budget and whether the maximum was hit.
"""
from __future__ import annotations

import math

from .reference import Built, build_reference


class StopRule:
    """``stop(n, logw) -> bool``: True ends the build before the popped node is accepted."""

    def __init__(self, cost_model, context_len: int):
        if cost_model is None:
            raise ValueError("the adaptive budget needs a verify-cost model")
        self.cost_model = cost_model
        self.context_len = int(context_len)
        self.draft_s = float(cost_model.draft_s)
        self._cv: dict[int, float] = {}
        self.phi = 0.0
        self.n = 0
        self.theta = 1.0 / self._denom(0)
        self.stopped = False

    def _denom(self, n: int) -> float:
        cv = self._cv.get(n)
        if cv is None:
            cv = self._cv[n] = float(self.cost_model.verify_s(n, self.context_len))
        d = self.draft_s + cv
        return d if d > 0 else 1e-12

    def __call__(self, n: int, logw: float) -> bool:
        delta = math.exp(logw)
        theta_new = (1.0 + self.phi + delta) / self._denom(n + 1)
        if theta_new <= self.theta:
            self.stopped = True
            return True
        self.phi += delta
        self.theta = theta_new
        self.n = n + 1
        return False


def make_stop(cost_model, context_len: int) -> StopRule:
    """CaDDTree's stopping rule at context length ``context_len`` (the round's root position)."""
    return StopRule(cost_model, context_len)


def build_adaptive(scorer, root_token: int, root_state, cfg, max_depth: int, stop) -> Built:
    """CondAdaptive: DominoTree's conditional best-first heap (``build_reference``: all K children
    pushed eagerly, key ``(-cum log-prob, insertion counter)``) that asks ``stop(n, logw)`` before
    accepting each popped node; ``cfg.budget`` is the maximum budget."""
    built = build_reference(scorer, root_token, root_state, cfg, max_depth, stop=stop)
    n = built.tree.num_nodes
    built.extra.update(adaptive_budget=n, max_budget=cfg.budget, hit_max_budget=n >= cfg.budget)
    return built
