"""Loop positions of an answer: where the target repeats an n-gram it already wrote.

The acceptance yardstick (``bench/acceptance.py``) splits its rounds into fresh and loop ones with
it, and the trainer (``train/losses.py``) down-weights loop positions with it: one definition below
both.
"""
from __future__ import annotations

LOOP_N = 5


def loop_flags(answer: list[int], n: int = LOOP_N) -> list[bool]:
    """Per answer index i: whether ``answer[i-n+1 .. i]`` occurred earlier in ``answer`` (an n-gram
    ending before i)."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for i in range(len(answer)):
        g = tuple(answer[i - n + 1:i + 1]) if i >= n - 1 else None
        out.append(g is not None and g in seen)
        if g is not None:
            seen.add(g)
    return out
