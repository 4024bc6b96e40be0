"""What a target forward of n rows costs, in one-row steps: this machine's curve, measured once
per machine and weights and cached, and the curves a projection assumes.

A tree round verifies ``budget + 1`` rows in one forward. Where that forward costs about what a
one-row step costs (a GPU, memory-bound up to some tens of rows) a tree is nearly free to verify;
on a CPU without AMX the products are compute-bound and 17 rows cost several steps. This module
gives that curve as numbers; ``view/costpanel.py`` turns it and the recorded rounds into speedups.

- ``measure(pair)``: ``profile.profile_verify`` (what ``profile-cost`` times) at one context
  length for 0..32 tree nodes, i.e. 1..33 rows, medians of interleaved repeats;
- ``cached_curve(pair)``: the measured curve from ``<cache>/cost-curves/`` (``~/.cache/dominotree``,
  or ``$DOMINOTREE_CACHE``), keyed by the CPU, the preset and weights, dtype and thread count;
- ``paper_gpu()``: the default projection, "a GPU, where verifying up to 32 rows costs one step and
  drafting and building cost what the paper reports"; ``gpu_curve_file(path)``: the curve
  ``scripts/gpu_curve.py`` measured on a GPU, when one exists.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..jsonfile import write_json_atomic

SCHEMA = "dominotree.cost_curve"
ROWS = tuple(range(1, 34))        # 1..33 rows: the root plus up to 32 tree nodes
CONTEXT = 256                     # context length of the measurement (a short chat answer)

# The paper's stage times per round, Qwen3-4B on an RTX 5080, T = 0, ms (reference/algorithms.md
# 2e and 3: DominoTree's table 2 and the conditioning ladder). Verify is one forward of 17 rows,
# which on that GPU costs about one plain decoding step: it is the unit of the projection.
PAPER_VERIFY_MS = 18.65
PAPER_DRAFT_MS = 3.53
PAPER_COMMIT_MS = 0.70
PAPER_BUILD_MS = {"dominotree": 2.31, "condadaptive": 2.31, "condstatic": 1.90, "marg": 1.78, "ddtree": 1.78,
                  "caddtree": 1.78, "domino": 2.76, "dflash": 0.0, "ar": 0.0}


@dataclass
class CostCurve:
    """Forward ms per row count (``rows[i]`` -> ``ms[i]``), and what it is."""
    rows: list[int]
    ms: list[float]
    label: str                        # "this machine: AMD EPYC ..." / "a GPU (projection)"
    kind: str = "measured"            # "measured" or "projection"
    assumption: str = ""              # for a projection: what it assumes, in words
    meta: dict = field(default_factory=dict)
    # per-method non-verify cost of a round in steps, when the curve carries it (the projection)
    overhead_steps: dict = field(default_factory=dict)

    def __post_init__(self):
        if len(self.rows) != len(self.ms) or not self.rows:
            raise ValueError("a cost curve needs as many times as row counts, at least one")
        if any(b <= a for a, b in zip(self.rows, self.rows[1:])) or self.rows[0] < 1:
            raise ValueError("row counts must be increasing and start at 1 or more")
        if any(not (m > 0) for m in self.ms):
            raise ValueError("forward times must be positive")

    def forward_ms(self, n: float) -> float:
        """ms of a forward of ``n`` rows (linear between measured counts, the last slope beyond)."""
        r, m = self.rows, self.ms
        if n <= r[0] or len(r) == 1:
            return m[0] * (n / r[0] if len(r) == 1 and n > r[0] else 1.0)
        for k in range(1, len(r)):
            if n <= r[k]:
                w = (n - r[k - 1]) / (r[k] - r[k - 1])
                return m[k - 1] + w * (m[k] - m[k - 1])
        slope = (m[-1] - m[-2]) / (r[-1] - r[-2])
        return m[-1] + slope * (n - r[-1])

    def steps(self, n: float) -> float:
        """A forward of ``n`` rows in one-row forwards."""
        return self.forward_ms(n) / self.forward_ms(1)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> "CostCurve":
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            raise ValueError("not a DominoTree cost curve")
        return cls(**{k: v for k, v in d.items() if k != "schema"})


# --- this machine --------------------------------------------------------------------------------

def cpu_name() -> str:
    from ..machine import describe
    return describe().get("cpu") or "this CPU"


def curve_key(pair) -> dict:
    """What a cached curve must match: the machine, the model and how it computes."""
    import torch
    t = pair.target
    from ..models.cpuext import kernels_id
    return {"cpu": cpu_name(), "device": str(t.device), "preset": pair.name, "paths": pair.paths,
            "weights": t.weights, "dtype": str(t.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "context": CONTEXT,
            "kernels": kernels_id() if t.device.type == "cpu" else ""}


def cache_path(pair) -> Path:
    from ..models.smollm2 import cache_root
    key = json.dumps(curve_key(pair), sort_keys=True)
    slug = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_root() / "cost-curves" / f"{pair.name or 'custom'}-{slug}.json"


def measure(pair, repeats: int = 5, context: int = CONTEXT) -> CostCurve:
    """Time target forwards of 1..33 rows (tree nodes 0..32) at ``context`` on this machine."""
    from .costmodel import fit_monotone_convex
    from .profile import profile_verify
    room = pair.target.max_positions - ROWS[-1] - 2
    ctx = max(1, min(context, room))
    t0 = time.perf_counter()
    raw = profile_verify(pair, [ctx], [n - 1 for n in ROWS], repeats=repeats)[0]
    # a forward of more rows never costs less: the medians projected onto the nondecreasing convex
    # curves (as profile-cost fits them), so a busy moment of the machine shows less
    ms = [max(float(x), 1e-6) for x in fit_monotone_convex(list(ROWS), raw)]
    key = curve_key(pair)
    return CostCurve(list(ROWS), ms, f"this machine: {key['cpu']}",
                     meta={**key, "raw_ms": [float(x) for x in raw], "context": ctx, "repeats": repeats,
                           "seconds": round(time.perf_counter() - t0, 2),
                           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def cached_curve(pair, measure_now: bool = True) -> CostCurve | None:
    """This machine's curve for ``pair``: from the cache, else measured now (a few seconds; call it
    where the model's work runs) and cached; None when absent and ``measure_now`` is False."""
    path = cache_path(pair)
    try:
        return CostCurve.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        pass
    if not measure_now:
        return None
    curve = measure(pair)
    write_json_atomic(path, curve.to_dict(), indent=1)
    return curve


# --- projections -------------------------------------------------------------------------------------

def paper_overhead_steps() -> dict[str, float]:
    """Draft + build + commit per round of each method in GPU steps, from the paper's stage times
    (plain decoding: none)."""
    out = {}
    for m, build in PAPER_BUILD_MS.items():
        out[m] = 0.0 if m == "ar" else (PAPER_DRAFT_MS + build + PAPER_COMMIT_MS) / PAPER_VERIFY_MS
    return out


GPU_ASSUMPTION = ("a GPU, where verifying up to 32 rows costs one step and drafting and building cost what the "
                  "paper reports (Qwen3-4B on an RTX 5080: draft 3.53 ms, build 1.8-2.8 ms, commit 0.70 ms "
                  "against 18.65 ms for a verify)")


def paper_gpu() -> CostCurve:
    """The default projection: a forward of up to 33 rows (the root + 32 nodes) costs one step,
    wider ones proportionally more; drafting and building cost the paper's ms in those steps."""
    return CostCurve([1, 33, 66], [PAPER_VERIFY_MS, PAPER_VERIFY_MS, 2 * PAPER_VERIFY_MS], "a GPU (projection)", "projection",
                     GPU_ASSUMPTION, {"source": "the paper's stage times"}, paper_overhead_steps())


def gpu_curve_file(path: str | Path) -> CostCurve:
    """A projection onto the curve ``scripts/gpu_curve.py`` measured (its JSON line: ``ms.fast``
    by row count), with the paper's draft and build costs in its one-row steps."""
    d = json.loads(Path(path).read_text())
    ms = d["ms"]["fast"] if "fast" in d.get("ms", {}) else d["ms"]
    rows = sorted(int(k) for k in ms)
    times = [float(ms[str(r)] if str(r) in ms else ms[r]) for r in rows]
    where = f"{d.get('device', 'a GPU')}, {d.get('shapes', '')} shapes".strip(", ")
    return CostCurve(rows, times, f"{where} (projection)", "projection",
                     f"the forward costs measured by scripts/gpu_curve.py on {where}; drafting and building cost "
                     f"what the paper reports, in steps of that GPU's one-row forward", {"source": str(path)},
                     paper_overhead_steps())


GPU_CURVE_FILES = ("results/gpu-curve/fast_curve_cuda.json", "results/gpu-curve/fast_curve.json")


def projection(root: str | Path = ".") -> CostCurve:
    """The GPU curve measured by ``scripts/gpu_curve.py`` when its output is in ``results/gpu-curve``,
    else the paper's assumption."""
    for rel in GPU_CURVE_FILES:
        p = Path(root) / rel
        if p.is_file():
            try:
                return gpu_curve_file(p)
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return paper_gpu()
