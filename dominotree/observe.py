"""Watching the round loop without patching it: a public ``StageClock`` and ``Observer``.

``Decoder.rounds`` (``decode.py``) times each round's four stages with a ``StageClock`` and, between
stages, tells every observer what the stage made. An observer's time is off the round's clock: the
loop reads the clock again after the observers return, and ``Decoder.generate`` leaves their time
out of ``wall_s`` (it is recorded per round as ``extra["viewer_ms"]``). So a viewer can annotate
rounds, keep their draft blocks or time other builds, and the stage times stay what the benchmark
measures. Who uses it:

- ``decode.Annotator``: the trace-only extras (Top-M lists, the marginal tree) of a viewer's run;
- ``view.rebuild.KeepBlocks``: each round's draft block, for rebuilds under other settings;
- ``auto.calibrate``: the build at other budgets and the LM head on fewer rows, per round;
- ``auto.profile``, ``view.rebuild``: ``StageClock`` alone, to time a forward or a rebuild.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .config import STAGES


class StageClock:
    """Milliseconds per stage of one round (``ms``); on CUDA every reading waits for the device."""

    def __init__(self, device=None):
        self.cuda = device is not None and torch.device(device).type == "cuda"
        self.ms: dict[str, float] = {s: 0.0 for s in STAGES}

    def now(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def lap(self, stage: str, t0: float) -> float:
        """Add the time since ``t0`` to ``stage``; returns now (the next stage's ``t0``)."""
        t1 = self.now()
        self.ms[stage] = self.ms.get(stage, 0.0) + (t1 - t0) * 1e3
        return t1


@dataclass
class RoundState:
    """What one round has made so far, as observers see it. ``drafter`` is the pair's drafter
    (None for ``ar`` and budget 0), ``vocab`` the draft vocabulary (None: the full one), ``block``
    the draft (after the draft stage), ``built`` and ``scorer`` the tree and its children function
    (after the build stage). ``builder`` is the builder function the round builds with; an
    observer may call ``decoder.build`` with it and a fresh ``StageClock`` (``auto.calibrate``).
    ``cache`` and ``taps`` are the target's KV cache (holding the context up to ``start``) and
    the layers the drafter reads: an observer that verifies a tree itself (``auto.calibrate``
    times the verify at other budgets) truncates the cache back to ``start`` before returning."""
    cfg: object
    root: int
    start: int
    drafter: object = None
    vocab: object = None
    builder: object = None
    block: object = None
    built: object = None
    scorer: object = None
    cache: object = None
    taps: object = None
    extra: dict = field(default_factory=dict)


class Observer:
    """Override what you need. Every hook runs off the round's clock, between stages."""

    reads_all_rows = False     # True: the round reads every tree row's target token for the trace

    def after_draft(self, decoder, state: RoundState) -> None:
        """The draft stage made ``state.block`` (not called when nothing was drafted)."""

    def after_build(self, decoder, state: RoundState) -> None:
        """The build stage made ``state.built`` (and ``state.scorer`` where the method has one)."""

    def after_round(self, decoder, state: RoundState, rt) -> None:
        """The round is committed and traced as ``rt`` (a ``RoundTrace``); an observer may add to it."""
