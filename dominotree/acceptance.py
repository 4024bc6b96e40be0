"""Acceptance by depth: reach@d, the share of rounds that accepted at least d draft tokens.

The acceptance yardstick (``python -m dominotree acceptance``, ``bench/acceptance.py``) reports it
per drafter and tree method, and the explorer's "Acceptance by depth" plot (``figures.py``) draws
it for a comparison's traces: both read this one definition.
"""
from __future__ import annotations

MAX_D = 8


def reach(accepted: list[int], max_d: int = MAX_D) -> list[float]:
    """Share of rounds accepting at least d draft tokens, d = 1..max_d (``accepted``: per round)."""
    n = len(accepted)
    return [sum(a >= d for a in accepted) / n if n else 0.0 for d in range(1, max_d + 1)]
