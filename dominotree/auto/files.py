"""Where ``--budget auto``'s two files live and whether a file fits this run.

A verify-cost profile and a budget calibration are measured per machine, target weights, dtype and
(the calibration) drafters, and kept in ``~/.cache/dominotree/auto/<preset>_<device>_<cpu>_<weights>_<dtype>/``
(``machine_dir``; a calibration's name ends in ``_d<id>``, the preset's own drafters, ``drafters_id``,
where they can change); a file under
``results/`` (``default_path``) is used only when it was made on this kind of CPU with these
weights, dtype and drafters (``not_made_here``). Another machine's file, or one made with other
drafters, is never borrowed: acceptance, and so the best budget, changes with the drafters.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .costmodel import device_slug


def drafters_id(preset: str | None) -> str:
    """A short name of the drafters a preset loads, when they can change under the same preset name
    (the embedded pair's shipped weights); empty otherwise (released hub drafters, custom pairs)."""
    if preset != "smollm2":
        return ""
    from ..presets import embedded_drafters_id
    return embedded_drafters_id()


def default_path(preset: str, device, method: str, draft_vocab: int = 0) -> Path:
    """``results/budget_<preset>_<device>_<method>[_v<N>].json`` (relative to the working
    directory; ``_v<N>`` for a run whose drafters score a draft vocabulary of N tokens)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", preset or "custom")
    vocab = f"_v{draft_vocab}" if draft_vocab else ""
    return Path("results") / f"budget_{slug}_{device_slug(device)}_{method}{vocab}.json"


def machine_dir(preset: str, device, weights: str | None, dtype: str) -> Path:
    """Where this machine keeps the files of ``--budget auto`` for a pair, weights and dtype:
    ``$DOMINOTREE_CACHE/auto/<preset>_<device>_<cpu signature>_<weights>_<dtype>``."""
    import torch
    from ..machine import cpu_signature
    from ..models.smollm2 import cache_root
    slug = lambda x: re.sub(r"[^A-Za-z0-9_.-]+", "-", str(x))   # noqa: E731
    cpu = cpu_signature() if torch.device(device).type == "cpu" else ""
    parts = [preset or "custom", device_slug(device), cpu, weights or dtype, dtype]
    return cache_root() / "auto" / "_".join(slug(p) for p in parts if p)


def calibration_name(method: str, draft_vocab: int = 0, preset: str | None = None) -> str:
    """A calibration's file name in ``machine_dir``: ``budget_<method>[_v<N>][_d<id>].json``
    (``_v<N>``: drafters scoring N tokens; ``_d<id>``: ``drafters_id(preset)``, when there is one)."""
    did = drafters_id(preset)
    return f"budget_{method}{f'_v{draft_vocab}' if draft_vocab else ''}{f'_d{did}' if did else ''}.json"


def not_made_here(meta: dict, device, weights: str | None, dtype: str, drafters: str = "") -> list[str]:
    """Why a profile or calibration (its ``meta``) does not fit this machine, weights, dtype and
    (when given: a calibration of a preset whose drafters can change) ``drafters``; empty when it
    does. A file that does not record one of them does not fit: costs and the best budget do not
    carry across CPUs (Zen 4 and Zen 5 share "AMD EPYC" and the ISA flags), kernel builds
    (``cpuext.kernels_id``), weights or dtypes, and acceptance does not carry across drafters."""
    import torch
    from ..machine import cpu_isa, cpu_model, cpu_signature
    from ..models.cpuext import kernels_id
    made = meta.get("hardware") if isinstance(meta.get("hardware"), dict) else {}
    want = {"dtype": (meta.get("dtype"), dtype)}
    if weights is not None:
        want["weights"] = (meta.get("weights"), weights)
    if drafters:
        want["drafters"] = (meta.get("drafters"), drafters)
    if torch.device(device).type == "cpu":
        for k, here in (("cpu", cpu_model()), ("cpu_isa", cpu_isa()), ("cpu_signature", cpu_signature()),
                        ("cpu_count", os.cpu_count()), ("kernels", kernels_id())):
            want[k] = (made.get(k), here)
    elif torch.cuda.is_available():
        want["gpu"] = (made.get("gpu"), torch.cuda.get_device_name(torch.device(device)))
    return [f"{k} {have!r} (here {here!r})" for k, (have, here) in want.items() if have != here]


def stale(path: Path, device, weights: str | None, dtype: str, drafters: str = "") -> list[str]:
    """Why the file at ``path``, which exists, was not made for this run (``not_made_here``: another
    machine, kernel build, weights, dtype or drafters); empty when it was, or when there is none."""
    return not_made_here(_meta(path), device, weights, dtype, drafters) if path.is_file() else []


def _meta(path: Path) -> dict:
    try:
        d = json.loads(path.read_text())
        return d.get("meta") or {} if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def auto_paths(preset: str, device, method: str, cost_model_path=None, calibration_path=None,
               draft_vocab: int = 0, weights: str | None = None, dtype: str | None = None) -> tuple[Path, Path]:
    """The verify-cost profile and the calibration of this run: the given ones, else the first of
    this machine's (``machine_dir``) and the committed ``results/`` file that was made here with
    these weights and dtype (and, for a calibration, these drafters), else where this machine's
    will be saved once measured (``calibration_name``)."""
    from .costmodel import default_path as cost_path
    here = machine_dir(preset, device, weights, dtype or "float32")

    def pick(given, mine: Path, committed: Path, drafters: str = "") -> Path:
        if given:
            return Path(given)
        if dtype is None:           # no way to tell: the committed default, as before
            return committed
        for p in (mine, committed):
            if p.is_file() and not not_made_here(_meta(p), device, weights, dtype, drafters):
                return p
        return mine
    return (pick(cost_model_path, here / "cost_model.json", cost_path(preset, device)),
            pick(calibration_path, here / calibration_name(method, draft_vocab, preset),
                 default_path(preset, device, method, draft_vocab), drafters_id(preset)))


def other_machine(made_on: dict | None, device, what: str) -> tuple[str, ...]:
    """A warning when ``what`` was measured on another kind of CPU (its model, vector ISA or core
    count differ from this one's): costs, and so the best budget, do not carry across CPUs."""
    import torch
    if not isinstance(made_on, dict) or torch.device(device).type != "cpu":
        return ()
    from ..machine import cpu_isa, cpu_model
    here = {"cpu": cpu_model(), "cpu_isa": cpu_isa(), "cpu_count": os.cpu_count()}
    diff = [f"{k} {made_on[k]!r} (here {v!r})" for k, v in here.items() if made_on.get(k) not in (None, v)]
    return (f"the {what} was made on another machine: {', '.join(diff)}; recalibrate here",) if diff else ()
