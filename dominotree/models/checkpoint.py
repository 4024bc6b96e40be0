"""Reading and writing drafter checkpoints in the released formats, with format checks.

A folder holds ``config.json`` plus ``model.safetensors`` (or several ``*.safetensors`` shards),
with unprefixed tensor names, as ``z-lab/*-DFlash-b16`` and ``Huang2020/*-Domino-b16``.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from ..config import METHOD_DRAFTER, ConfigError
from .drafter import CheckpointError, Drafter, DrafterConfig


def read_config(folder: str | Path) -> DrafterConfig:
    folder = Path(folder)
    if not folder.is_dir():
        raise CheckpointError(f"drafter folder does not exist: {folder}")
    path = folder / "config.json"
    if not path.is_file():
        raise CheckpointError(f"{folder} has no config.json: not a drafter checkpoint folder")
    try:
        raw = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path} is not a JSON object")
    return DrafterConfig.from_dict(raw)


def _read_tensors(folder: Path) -> dict[str, torch.Tensor]:
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{folder} has no *.safetensors weights")
    out = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    out[k] = fh.get_tensor(k)
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise CheckpointError(f"cannot read {f.name}: {e}") from None
    return out


def load_drafter(folder: str | Path, dtype: torch.dtype = torch.float32,
                 device: str | torch.device = "cpu") -> Drafter:
    """Load a drafter folder into our modules; refuses missing, extra or misshapen tensors."""
    folder = Path(folder)
    cfg = read_config(folder)
    tensors = _read_tensors(folder)
    with torch.device("meta"):
        model = Drafter(cfg)
    expected = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    missing = sorted(set(expected) - set(tensors))
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        raise CheckpointError(f"{folder.name}: missing tensors {', '.join(missing[:5])}{more}")
    bad = [f"{k} {tuple(tensors[k].shape)} != {shape}" for k, shape in expected.items()
           if tuple(tensors[k].shape) != shape]
    if bad:
        raise CheckpointError(f"{folder.name}: tensor shapes do not match config.json: {'; '.join(bad[:3])}")
    unexpected = sorted(set(tensors) - set(expected))
    if unexpected:
        raise CheckpointError(f"{folder.name}: unexpected tensors {', '.join(unexpected[:5])} "
                              f"(is projector_type in config.json right?)")
    model = Drafter(cfg)
    model.load_state_dict({k: v.to(dtype) for k, v in tensors.items()}, strict=True)
    return model.to(device=device, dtype=dtype).eval()


def save_drafter(model: Drafter, folder: str | Path, dtype: torch.dtype = torch.bfloat16,
                 extra_config: dict | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in the released layout."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg.to_dict()
    cfg["dtype"] = str(dtype).replace("torch.", "")
    if extra_config:
        cfg.update(extra_config)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def check_pair(method: str, cfg: DrafterConfig | None, target) -> None:
    """Refuse a drafter that does not fit the method or the target, naming the problem."""
    need = METHOD_DRAFTER[method]
    if need is None:
        return
    if cfg is None:
        raise ConfigError(f"method {method!r} needs a {need} drafter, but none was given")
    if need == "dflash" and cfg.is_domino:
        raise CheckpointError(
            f"method {method!r} builds on DFlash marginals and needs a DFlash checkpoint, but this drafter "
            f"is a Domino checkpoint (projector_type={cfg.projector_type!r}, shift_label=true); "
            f"use 'marg' for a marginal tree on the Domino backbone")
    if need == "domino" and not cfg.is_domino:
        raise CheckpointError(
            f"method {method!r} needs a Domino checkpoint (GRU correction head, shift_label=true), "
            f"but this drafter is a plain DFlash checkpoint (shift_label={str(cfg.shift_label).lower()})")
    if target is None:
        return
    if cfg.hidden_size != target.hidden_size:
        raise CheckpointError(f"drafter hidden_size {cfg.hidden_size} != target hidden_size "
                              f"{target.hidden_size}: this drafter was made for another target")
    if cfg.num_target_layers and cfg.num_target_layers != target.num_layers:
        raise CheckpointError(f"drafter expects a target with {cfg.num_target_layers} layers, "
                              f"the target has {target.num_layers}")
    if max(cfg.target_layer_ids) >= target.num_layers:
        raise CheckpointError(f"drafter taps target layer {max(cfg.target_layer_ids)}, "
                              f"the target has only {target.num_layers} layers")
    if cfg.mask_token_id >= target.vocab_rows:
        raise CheckpointError(f"mask_token_id {cfg.mask_token_id} has no row in the target's "
                              f"embedding table ({target.vocab_rows} rows)")
    if cfg.is_domino and cfg.vocab_size != target.vocab_rows:
        raise CheckpointError(f"Domino head vocab_size {cfg.vocab_size} != target vocabulary "
                              f"{target.vocab_rows}")
