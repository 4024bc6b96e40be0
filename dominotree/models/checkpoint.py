"""Drafter checkpoint folders in the released formats, with format checks: reading, writing,
the stored forms of the weights, and whether a drafter fits a method and a target.

A folder holds ``config.json`` plus ``model.safetensors`` (or several ``*.safetensors`` shards),
with unprefixed tensor names, as ``z-lab/*-DFlash-b16`` and ``Huang2020/*-Domino-b16``. The
weights may instead be stored as

- ``model.safetensors.bp`` (the compact form, what ``assets/drafters`` ships and the trainer writes:
  ``save_compact_drafter``): the same file losslessly smaller (``packing.compact_bytes``); it loads
  exactly the weights of the plain one;
- ``model.safetensors.q8`` (the 8-bit form, ``q8_folder`` / ``save_q8_drafter``): the products the
  CPU fast path multiplies as 8-bit blocks stored as exactly those blocks (``q8blocks``).
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save_file

from ..config import METHOD_DRAFTER, ConfigError
from .drafter import CheckpointError, Drafter, DrafterConfig
from .packing import COMPACT_MAGIC, compact_bytes, expand_bytes
from .q8blocks import Q8_CODES, Q8_MAGIC, Q8_SCALES, dequantize_q8, q8_bytes, q8_names, read_q8_file

COMPACT_SUFFIX = ".bp"
Q8_SUFFIX = ".q8"


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
    """A folder's tensors, read from the plain ``*.safetensors`` files where there are any, else the
    compact ``*.safetensors.bp``, else the 8-bit ``*.safetensors.q8`` (dequantized: ``dequantize_q8``)."""
    files = sorted(folder.glob("*.safetensors"))
    compact = sorted(folder.glob("*.safetensors" + COMPACT_SUFFIX))
    q8 = sorted(folder.glob("*.safetensors" + Q8_SUFFIX))
    if not files and not compact and not q8:
        raise CheckpointError(f"{folder} has no *.safetensors weights")
    out = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as fh:
                for k in fh.keys():
                    out[k] = fh.get_tensor(k)
        except Exception as e:  # safetensors raises its own error types for corrupt headers
            raise CheckpointError(f"cannot read {f.name}: {e}") from None
    if not files:                   # a plain file, where both are present, is the one read
        for f in compact:
            try:
                out.update(load_safetensors_bytes(expand_bytes(f.read_bytes())))
            except Exception as e:
                raise CheckpointError(f"cannot read {f.name}: {e}") from None
    if not files and not compact:
        for f in q8:
            out.update(dequantize_q8(read_q8_file(f)))
    return out


def weights_digest(folder: str | Path) -> str:
    """The sha256 (hex) of a drafter folder's safetensors bytes, read as ``load_drafter`` reads
    them (the plain file where present, else the compact one, whose header stores that digest:
    both forms of the same weights give the same value; else the 8-bit file's, whose safetensors
    hold other weights and so have another digest)."""
    folder = Path(folder)
    plain = folder / "model.safetensors"
    if plain.is_file():
        h = hashlib.sha256()
        with plain.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        return h.hexdigest()
    for suffix, magic in ((COMPACT_SUFFIX, COMPACT_MAGIC), (Q8_SUFFIX, Q8_MAGIC)):
        stored = folder / ("model.safetensors" + suffix)
        if stored.is_file():
            with stored.open("rb") as f:
                head = f.read(len(magic) + 32)
            if head.startswith(magic) and len(head) == len(magic) + 32:
                return head[len(magic):].hex()
            raise CheckpointError(f"cannot read {stored.name}: not a {'compact' if suffix == COMPACT_SUFFIX else '8-bit'} "
                                  f"safetensors file (bad magic)")
    raise CheckpointError(f"no model.safetensors in {folder}")


def compact_folder(folder: str | Path) -> Path:
    """Replace a folder's ``model.safetensors`` by ``model.safetensors.bp`` (checked to expand to
    the same bytes first); returns the new file."""
    src = Path(folder) / "model.safetensors"
    data = src.read_bytes()
    blob = compact_bytes(data)
    if expand_bytes(blob) != data:
        raise RuntimeError("compact storage did not round-trip")       # never expected
    dst = src.with_name(src.name + COMPACT_SUFFIX)
    dst.write_bytes(blob)
    src.unlink()
    return dst


# --- the 8-bit form ------------------------------------------------------------------------------

def q8_folder(folder: str | Path) -> Path:
    """Replace a drafter folder's weights (plain or compact) by ``model.safetensors.q8``: the
    8-bit blocks of ``q8_names``, made from exactly the weights the folder loads, the rest as it
    was; checked to load and to give back the same blocks before the old file is removed. The
    digest of the weights it was made from is kept in the file's metadata (``source_sha256``)."""
    folder = Path(folder)
    cfg = read_config(folder)
    if any(folder.glob("*.safetensors" + Q8_SUFFIX)) and not any(folder.glob("*.safetensors")) \
            and not any(folder.glob("*.safetensors" + COMPACT_SUFFIX)):
        return folder / ("model.safetensors" + Q8_SUFFIX)       # already 8-bit
    olds = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.safetensors" + COMPACT_SUFFIX))
    tensors, source = _read_tensors(folder), weights_digest(folder)
    names = q8_names(cfg)
    dst = folder / ("model.safetensors" + Q8_SUFFIX)
    tmp = dst.with_name(dst.name + ".tmp")
    tmp.write_bytes(q8_bytes(tensors, names, source))
    stored = read_q8_file(tmp)
    from .quant import quantize_q8_0
    for n in names:                      # idempotent: the loaded weight quantizes to the stored blocks
        codes, scales = quantize_q8_0(dequantize_q8({n + Q8_CODES: stored[n + Q8_CODES],
                                                     n + Q8_SCALES: stored[n + Q8_SCALES]})[n])
        if not (torch.equal(codes, stored[n + Q8_CODES]) and torch.equal(scales, stored[n + Q8_SCALES])):
            tmp.unlink()
            raise RuntimeError(f"{n}: the 8-bit blocks do not quantize back to themselves")   # never expected
    os.replace(tmp, dst)
    for old in olds:
        old.unlink()
    return dst


def save_q8_drafter(model: Drafter, folder: str | Path, extra_config: dict | None = None) -> Path:
    """``save_compact_drafter`` (bf16), then ``q8_folder``: the 8-bit blocks of the bf16 weights,
    as the CPU fast path makes them from the bf16 checkpoint."""
    save_compact_drafter(model, folder, extra_config=extra_config)
    q8_folder(folder)
    return Path(folder)


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
                 extra_config: dict | None = None, compact: bool = False) -> Path:
    """Write ``config.json`` + ``model.safetensors`` in the released layout (with ``compact``, the
    weights as ``model.safetensors.bp``; ``dtype`` must then be a 2-byte type)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = model.cfg.to_dict()
    cfg["dtype"] = str(dtype).replace("torch.", "")
    if extra_config:
        cfg.update(extra_config)
    (folder / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    stale = folder / ("model.safetensors" + Q8_SUFFIX)
    if stale.exists():
        stale.unlink()
    stale = folder / ("model.safetensors" + COMPACT_SUFFIX)
    if compact:
        compact_folder(folder)
    elif stale.exists():
        stale.unlink()
    return folder


def save_compact_drafter(model: Drafter, folder: str | Path, extra_config: dict | None = None) -> Path:
    """The trainer's export and ``assets/drafters``' form: bf16 (the released checkpoints' own
    dtype), stored compactly (``model.safetensors.bp``), loading exactly as the plain file."""
    return save_drafter(model, folder, dtype=torch.bfloat16, extra_config=extra_config, compact=True)


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
