"""Live decoding for a viewer: the same ``Decoder.generate`` the benchmark times, with the work
that only a viewer needs kept off its clock, plus the checks a viewer shows next to a run.

- ``generate``: the observers (the decoder's trace-only annotation, the kept draft blocks) and
  the per-round callback (snapshots for the page) are timed and left out of ``wall_s``, so
  ``tokens_per_s`` counts what the benchmark counts (it decodes with ``annotate=False``).
- ``native_bf16`` / ``default_dtype``: the fastest lossless dtype here (float32 for the 4-bit
  embedded target; else bfloat16 where the CPU computes it natively, float32 elsewhere).
- ``tie_note``: why a T = 0 output differs from ``ar``'s (the near-tie check the bench also runs,
  ``dominotree.ties``, at the first differing token).
"""
from __future__ import annotations

import time

from ..trace import DecodeTrace
from .rebuild import STORE, KeepBlocks


def generate(decoder, prompt, cfg, should_stop=None, on_round=None, observers=()) -> DecodeTrace:
    """``decoder.generate`` for a viewer: each round's draft block kept for rebuilds (when the
    ``rebuild.STORE`` is on), and ``on_round``'s time left out of ``wall_s`` like the observers'
    (``Decoder.generate``); each round records the left-out milliseconds in ``extra["viewer_ms"]``."""
    spent = [0.0]                 # seconds in on_round so far

    def timed_round(trace: DecodeTrace) -> None:
        t = time.perf_counter()
        raw = trace.wall_s
        trace.wall_s = raw - spent[0]
        try:
            if on_round is not None:
                on_round(trace)
        finally:
            trace.wall_s = raw
            dt = time.perf_counter() - t
            spent[0] += dt
            if trace.rounds:
                trace.rounds[-1].extra["viewer_ms"] = trace.rounds[-1].extra.get("viewer_ms", 0.0) + dt * 1e3

    keep = [KeepBlocks(STORE)] if STORE.max_bytes > 0 else []
    trace = decoder.generate(prompt, cfg, should_stop=should_stop, on_round=timed_round,
                             observers=[*observers, *keep])
    trace.wall_s = max(trace.wall_s - spent[0], 0.0)
    return trace


def native_bf16(cpuinfo: str | None = None) -> bool:
    """True when the CPU has bfloat16 arithmetic (AVX-512 BF16 or AMX); Linux /proc/cpuinfo."""
    from ..models.cpuext import cpu_flags
    flags = cpu_flags(cpuinfo)
    return "avx512_bf16" in flags or any(f.startswith("amx") for f in flags)


def default_dtype(device: str = "cpu", preset: str | None = None) -> str:
    """The fastest dtype here whose every method equals its ``ar`` (``preset``: None for a custom
    target): float32 on the CPU for a preset whose target then runs its 4-bit GGUF blocks times
    8-bit activation blocks (``presets.INT4_BY_DEFAULT``, where the C++ kernels run; on a 2-core
    Zen 4 with native bf16 ``ar`` ran 241 tok/s there against 43 in bf16); otherwise bfloat16 on CUDA and on CPUs with
    native bf16, float32 elsewhere (bf16 is emulated there and slower)."""
    from ..models.cpuext import unsupported
    from ..presets import INT4_BY_DEFAULT
    if device == "cpu" and preset in INT4_BY_DEFAULT and unsupported() is None:
        return "float32"
    return "bfloat16" if device == "cuda" or native_bf16() else "float32"


def tie_note(decoder, prompt_ids: list[int], ar_ids: list[int], method_ids: list[int]) -> dict | None:
    """Where ``method_ids`` first differs from ``ar_ids`` (both T = 0 outputs of the same prompt)
    and the target's logit gap there: {"token", "ar_token", "method_token", "gap", "rank",
    "near_tie"}. None when equal or when one is a prefix of the other (stopped earlier)."""
    from ..ties import ROUNDING_GAP, gap_at
    k = next((i for i, (a, b) in enumerate(zip(ar_ids, method_ids)) if a != b), None)
    if k is None:
        return None
    gap, rank = gap_at(decoder, list(prompt_ids) + list(ar_ids[:k]), ar_ids[k], method_ids[k])
    return {"token": k, "ar_token": int(ar_ids[k]), "method_token": int(method_ids[k]), "gap": gap, "rank": rank,
            "near_tie": abs(gap) <= ROUNDING_GAP and rank <= 1}
