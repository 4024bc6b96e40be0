"""The project's C++ CPU kernels (``kernels/*.cpp``): built once, loaded as torch ops.

- ``kernels/quant.cpp``: 4-bit (Q4_1) weight products with float32 activations (``quantcpu``);
- ``kernels/q8act.cpp``: 4-bit (Q4_1) and 8-bit (Q8_0) weights times 8-bit activation blocks in
  integer dot products (AVX-512 VNNI where the CPU has it, else AVX2; ``quantcpu``, ``int4-q8``),
  and ``kernels/q8amx.cpp``, its AMX-INT8 path: on where the CPU has AMX-INT8 and Linux grants
  the tile state (``amx_why``), ``DOMINOTREE_AMX=0`` turns it off; ``DOMINOTREE_AMX_MIN_ROWS``
  (default 5, measured: ``docs/amx.md``) is the fewest rows it takes;
- ``kernels/bf16.cpp``: bf16 products whose rows do not depend on each other (``linear.linear``);
- ``kernels/layer.cpp``: a decoder layer's small float32 steps fused (RMSNorm, RoPE with the KV
  cache write, SiLU-and-multiply), used by ``fast.FastModel`` in float32 on CPU;
- ``kernels/attention.cpp``: attention whose rows do not depend on each other (a verify row gets a
  one-row step's bits), used by ``fast.FastModel`` in float32 and bf16 on CPU after the prefill;
- ``kernels/draftlayer.cpp``: the drafter's decoder layer as one op (its 8-bit products, norms,
  RoPE, attention over the context and the block), used by ``draftcpu`` in float32 on CPU;
- ``kernels/bestfirst.cpp``: DominoTree's best-first build (the heap, the correction's menu and
  the children's GRU step, the same ATen ops as the Python builder), used by ``builders/native.py``.

They need x86-64 with AVX2, FMA and F16C, Linux, a C++ compiler and ninja (``make setup`` installs both
and builds them: about 30 s once per torch version, into ``~/.cache/dominotree/kernels``).
Where they cannot build, ``available()`` says why and callers keep torch's ops.
``DOMINOTREE_KERNELS=0`` turns them off (for A/B measurements).
"""
from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import time
from pathlib import Path

import torch

from .smollm2 import cache_root

SOURCES = sorted((Path(__file__).with_name("kernels")).glob("*.cpp"))
HEADERS = sorted((Path(__file__).with_name("kernels")).glob("*.h"))
AMX_MIN_ROWS = 5       # from 5 rows a forward is cheaper with AMX (results/amx; docs/amx.md)
FLAGS = ["-O3", "-mavx2", "-mfma", "-mf16c", "-ffp-contract=off", "-fopenmp"]
NAME = "dominotree_cpu"
_state: dict = {}


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags from ``cpuinfo`` (default: Linux /proc/cpuinfo; empty elsewhere)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[-1].split())
    return flags


def build_dir() -> Path:
    h = hashlib.sha1(" ".join(FLAGS).encode() + torch.__version__.encode())
    for src in SOURCES + HEADERS:
        h.update(src.read_bytes())
    return cache_root() / "kernels" / f"cpu-{h.hexdigest()[:12]}"


def kernels_id() -> str:
    """A short name of the kernels this machine builds (their sources, flags and torch), with
    ``-amx<rows>`` while the AMX path is on (other costs; on by default on AMX CPUs); "" where they
    cannot run: costs measured with other kernels are not this machine's costs any more."""
    if unsupported() is not None:
        return ""
    kid = "k" + build_dir().name.rsplit("-", 1)[-1][:8]
    rows = amx_min_rows() if loaded() else 0
    return f"{kid}-amx{rows}" if rows else kid


def unsupported() -> str | None:
    """Why the kernels cannot run on this machine at all, without building them (None: they can,
    if they build)."""
    if os.environ.get("DOMINOTREE_KERNELS", "1") == "0":
        return "the C++ kernels are off (DOMINOTREE_KERNELS=0)"
    if platform.machine() not in ("x86_64", "AMD64") or sys.platform != "linux":
        return f"the C++ kernels are built for x86-64 Linux only (this is {platform.machine()} {sys.platform})"
    if not {"avx2", "fma", "f16c"} <= cpu_flags():
        return "the C++ kernels need a CPU with AVX2, FMA and F16C"
    return None


STALE_BATON_S = 600      # a build takes ~30-120 s; a build lock older than this was left by a killed build


def clear_stale_baton(d: Path, max_age_s: float = STALE_BATON_S) -> bool:
    """Remove torch's build lock (``lock``) in ``d`` when a killed build left it: torch waits on it
    forever otherwise, and every later process hangs without a word. True when one was removed."""
    lock = d / "lock"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return False
    if age <= max_age_s:
        return False
    print(f"[dominotree] removing {lock}: a kernel build that did not finish left it {age / 60:.0f} min ago",
          file=sys.stderr, flush=True)
    lock.unlink(missing_ok=True)
    return True


def _load(verbose: bool) -> str | None:
    why = unsupported()
    if why is not None:
        return why
    if shutil.which("ninja") is None:      # the pip package's binary, when the venv is not on PATH
        try:
            import ninja
            os.environ["PATH"] = ninja.BIN_DIR + os.pathsep + os.environ.get("PATH", "")
        except ImportError:
            return "the C++ kernels need ninja (pip install ninja)"
    from torch.utils.cpp_extension import load
    d = build_dir()
    d.mkdir(parents=True, exist_ok=True)
    clear_stale_baton(d)
    if verbose and not (d / f"{NAME}.so").exists():
        print(f"[dominotree] building the C++ kernels into {d} (once, ~30 s)", file=sys.stderr, flush=True)
    try:
        load(name=NAME, sources=[str(s) for s in SOURCES], extra_cflags=FLAGS, extra_ldflags=["-fopenmp"],
             build_directory=str(d), is_python_module=False, verbose=False)
    except Exception as e:      # no compiler, a failed build: say why, fall back
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"the C++ kernels did not build ({first[:200]})"
    return _amx_from_env()


def _amx_from_env() -> None:
    """The AMX path as ``DOMINOTREE_AMX`` asks: ``auto`` (unset) on where the CPU runs it, ``1``
    on and saying why where it cannot, ``0`` off (the A/B's other arm)."""
    on = os.environ.get("DOMINOTREE_AMX", "auto")
    rows = os.environ.get("DOMINOTREE_AMX_MIN_ROWS", str(AMX_MIN_ROWS))
    if on not in ("0", "1", "auto") or not rows.isdigit() or int(rows) < 1:
        raise ValueError(f"DOMINOTREE_AMX={on!r} DOMINOTREE_AMX_MIN_ROWS={rows!r}: use DOMINOTREE_AMX=auto, 0 or 1 "
                         "and a whole number of rows >= 1")
    state = int(torch.ops.dominotree_q8act.set_amx(0 if on == "0" else int(rows)))
    if on == "1":
        if state != 2:
            why = f"{AMX_STATES[state]} ({cpu_model()})"
            print(f"[dominotree] DOMINOTREE_AMX=1 but {why}; the 8-bit products stay on "
                  f"{'VNNI' if int(torch.ops.dominotree_q8act.best_isa()) == 2 else 'AVX2'}", file=sys.stderr)
    return None


AMX_STATES = {0: "this CPU has no AMX-INT8 with AVX-512 VNNI", 1: "Linux refused the AMX tile state (arch_prctl)"}


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (Linux /proc/cpuinfo), or the platform's word for it."""
    try:
        text = cpuinfo if cpuinfo is not None else Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def amx_why() -> str | None:
    """None when the AMX path of the 8-bit products can run here, else why not (needs the kernels)."""
    why = available(verbose=False)
    if why is not None:
        return why
    state = int(torch.ops.dominotree_q8act.amx_state())
    return None if state == 2 else f"{AMX_STATES[state]} ({cpu_model()})"


def set_amx(min_rows: int) -> str | None:
    """Run the 8-bit products of at least ``min_rows`` rows on AMX (0: off; ``AMX_MIN_ROWS`` by
    default where the CPU runs it). Returns None when AMX runs, else why not (then it stays off).
    The bits are the same either way (``tests/test_q8act.py``)."""
    if min_rows < 0:
        raise ValueError(f"min_rows must be >= 0, not {min_rows}")
    why = amx_why()
    if why is None:
        torch.ops.dominotree_q8act.set_amx(int(min_rows))
    return why if min_rows else None


def amx_min_rows() -> int:
    """The fewest rows the AMX path takes now (0: off)."""
    return int(torch.ops.dominotree_q8act.amx_min_rows()) if available(verbose=False) is None else 0


def loaded() -> bool:
    """Whether this process has the kernels loaded already (``available()`` ran and they built);
    never builds or loads them (for callers that only use them when something else loaded them)."""
    return _state.get("why", "not loaded") is None


def available(verbose: bool = True) -> str | None:
    """None when the kernels are loaded (building them on first use), else why not."""
    if "why" not in _state:
        _state["why"] = _load(verbose)
    return _state["why"]


if __name__ == "__main__":      # make setup: build now rather than on the first run
    why = available()
    print(f"C++ kernels: {why or 'ready in ' + str(build_dir())}")
