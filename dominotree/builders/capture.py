"""CUDA-graph capture for the graph and frontier builders, and the record of what happened.

``record_bodies(bodies, device, where)`` is the one capture routine: ``WARMUP`` eager runs of every
body (on a side stream on CUDA), then one recording run of each body into its own CUDA graph (the
graphs share one memory pool). Both phases run under ``syncguard.no_host_sync`` (and, on CUDA,
torch's sync debug mode ``"error"``), so a body that reads a device value on the host fails here,
loudly, instead of being captured wrong. On the CPU the same routine is a dry run: the same warm-up
and recording pass, eagerly and under the same guard, without graphs; ``tests/test_syncguard.py``
runs the builders' capture through it on every test run.

``Capture`` is what a builder reports (``Built.extra["capture"]``, then the round's trace,
``bench-build`` and the explorer's builder chart): whether its graph was captured and replayed or
why it ran eagerly.
"""
from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass

import torch

from ..syncguard import no_host_sync

EAGER_ENV = "DOMINOTREE_GRAPH_EAGER"
WARMUP = 3

CAPTURED, EAGER, FALLBACK, REFERENCE, NATIVE = "captured", "eager", "fallback", "reference", "native"


@dataclass
class Capture:
    """``mode``: ``captured`` (graphs replayed), ``eager`` (no CUDA, or disabled), ``fallback``
    (capture failed: eager from then on), ``reference`` (the scorer has no per-node work: the
    Python heap ran) or ``native`` (CPU: the heap and the bodies in one C++ op,
    ``kernels/bestfirst.cpp``); ``reason`` says why, in words."""
    mode: str
    reason: str = ""

    def to_dict(self) -> dict:
        return {"mode": self.mode, "reason": self.reason}

    def label(self) -> str:
        return self.mode if not self.reason else f"{self.mode} ({self.reason})"


def graphs_enabled(device: torch.device) -> bool:
    """CUDA graphs are used on CUDA unless ``DOMINOTREE_GRAPH_EAGER=1``."""
    return device.type == "cuda" and os.environ.get(EAGER_ENV, "").lower() not in ("1", "true", "yes")


def initial(device: torch.device, use_graphs: bool) -> Capture:
    """The record before any capture: eager, and why, or pending (``eager`` until captured)."""
    if use_graphs:
        return Capture(EAGER, "not captured yet")
    if device.type != "cuda":
        return Capture(EAGER, f"{device.type}: CUDA graphs need a CUDA device")
    if not graphs_enabled(device):
        return Capture(EAGER, f"{EAGER_ENV}=1")
    return Capture(EAGER, "graphs turned off for this program")


def failed(e: Exception) -> Capture:
    return Capture(FALLBACK, f"capture failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])


class sync_check:
    """On CUDA, make any host sync an error (``torch.cuda.set_sync_debug_mode``); a no-op elsewhere."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def __enter__(self):
        if self.cuda:
            self.prev = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        if self.cuda:
            torch.cuda.set_sync_debug_mode(self.prev)
        return False


def record_bodies(bodies, device: torch.device, where: str, warmup: int = WARMUP) -> tuple[list, list]:
    """Warm up and record ``bodies`` (callables reading and writing only static buffers).

    Returns ``(graphs, outputs)``: one ``torch.cuda.CUDAGraph`` and the recorded run's output per
    body on CUDA; on another device (the dry run) ``graphs`` holds ``None``s and ``outputs`` the
    eager recording run's outputs. Raises whatever the bodies raise (``HostSyncError`` for a host
    sync); the caller falls back to eager mode."""
    cuda = device.type == "cuda"
    side = torch.cuda.Stream(device=device) if cuda else None
    if cuda:
        side.wait_stream(torch.cuda.current_stream(device))
    with sync_check(device), (torch.cuda.stream(side) if cuda else nullcontext()), no_host_sync(where + " warm-up"):
        for _ in range(warmup):
            for body in bodies:
                body()
    if cuda:
        torch.cuda.current_stream(device).wait_stream(side)
    graphs, outputs, pool = [], [], None
    for body in bodies:
        graph = torch.cuda.CUDAGraph() if cuda else None
        with (torch.cuda.graph(graph, pool=pool) if cuda else nullcontext()), no_host_sync(where):
            outputs.append(body())
        if cuda and pool is None:
            pool = graph.pool()
        graphs.append(graph)
    return graphs, outputs
