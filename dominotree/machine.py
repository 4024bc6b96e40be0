"""Machine and version facts recorded with every measurement (CPU model, threads, GPU, library
versions, the git commit)."""
from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict:
    """What a comparison's timings were measured on (saved with it, shown on its page)."""
    cpu = cpu_model()
    out = {"cpu": cpu, "cores": os.cpu_count() or 0, "system": platform.platform(), "python": platform.python_version()}
    try:
        import torch
        out.update(torch=torch.__version__, threads=torch.get_num_threads(),
                   gpu=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
    except Exception:  # noqa: BLE001 - a machine without torch still describes itself
        pass
    return out


def cpu_isa() -> str:
    """The vector ISA torch uses here (``AVX2``, ``AVX512``...) and the matrix extensions that
    change what a wide verify costs: ``+AVX512_BF16``, ``+AMX`` (from /proc/cpuinfo)."""
    import torch
    isa = torch.backends.cpu.get_cpu_capability()
    from .models.cpuext import cpu_flags
    flags = cpu_flags()
    return isa + "".join(f"+{name}" for flag, name in (("avx512_bf16", "AVX512_BF16"), ("amx_tile", "AMX"))
                         if flag in flags)


def cpu_signature() -> str:
    """``vendor-family-model`` from /proc/cpuinfo (``AuthenticAMD-26-2``): CPUs that share a model
    name ("AMD EPYC") and a vector ISA still differ in what a product costs (Zen 4 and Zen 5)."""
    want = {"vendor_id": "", "cpu family": "", "model": ""}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, val = line.partition(":")
            key = key.strip()
            if key in want and not want[key]:
                want[key] = val.strip()
            if all(want.values()):
                break
    except OSError:
        pass
    return "-".join(v for v in want.values() if v) or platform.machine()


def hardware_info(device=None) -> dict:
    import torch
    info = {"device": str(device) if device is not None else "cpu", "cpu": cpu_model(), "cpu_isa": cpu_isa(),
            "cpu_signature": cpu_signature(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform()}
    if device is None or torch.device(device).type == "cpu":
        from .models.cpuext import kernels_id
        info["kernels"] = kernels_id()         # other kernels, other costs
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
        info["cuda"] = torch.version.cuda
    return info


_VERSIONS: dict | None = None


def versions_info() -> dict:
    global _VERSIONS
    if _VERSIONS is None:
        import numpy
        import torch
        v = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}
        for mod in ("transformers", "pandas", "plotly"):
            try:
                v[mod] = __import__(mod).__version__
            except ImportError:
                pass
        try:
            root = Path(__file__).resolve().parents[1]
            sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                 timeout=5).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            if sha:
                v["dominotree"] = sha + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
        _VERSIONS = v
    return dict(_VERSIONS)
