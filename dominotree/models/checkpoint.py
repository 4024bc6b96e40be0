"""Reading and writing drafter checkpoints in the released formats, with format checks.

A folder holds ``config.json`` plus ``model.safetensors`` (or several ``*.safetensors`` shards),
with unprefixed tensor names, as ``z-lab/*-DFlash-b16`` and ``Huang2020/*-Domino-b16``.

The compact form (``model.safetensors.bp``, what ``assets/drafters`` ships and the trainer writes:
``save_compact_drafter``) is the same safetensors file, stored losslessly smaller: a bf16 file's
data split into its high and low byte planes, each zlib-compressed (the high bytes, sign and
exponent, compress to ~40 %; the file to ~70 %). Reading it rebuilds the original file byte for
byte (its sha256 is checked), so a compact checkpoint loads exactly the weights of the plain one.
"""
from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load as load_safetensors_bytes
from safetensors.torch import save_file

COMPACT_SUFFIX = ".bp"
_MAGIC = b"DTBP1\n"

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
    compact = sorted(folder.glob("*.safetensors" + COMPACT_SUFFIX))
    if not files and not compact:
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
    return out


def compact_bytes(data: bytes) -> bytes:
    """A bf16 (or any 2-byte dtype) safetensors file, losslessly smaller (see the module doc):
    magic, sha256 of ``data``, its header verbatim, then the zlib-compressed high and low byte
    planes of the tensor data."""
    n = struct.unpack("<Q", data[:8])[0]
    header, body = data[:8 + n], data[8 + n:]
    dtypes = {v["dtype"] for k, v in json.loads(header[8:]).items() if k != "__metadata__"}
    if not dtypes <= {"BF16", "F16", "I16", "U16"} or len(body) % 2:
        raise ValueError(f"compact storage takes 2-byte tensors only, got {sorted(dtypes)}")
    planes = np.frombuffer(body, dtype=np.uint8).reshape(-1, 2)
    hi, lo = (zlib.compress(planes[:, i].tobytes(), 6) for i in (1, 0))
    return b"".join([_MAGIC, hashlib.sha256(data).digest(), struct.pack("<QQQ", len(header), len(hi), len(lo)),
                     header, hi, lo])


def expand_bytes(blob: bytes) -> bytes:
    """The original safetensors bytes of a ``compact_bytes`` blob (sha256-checked)."""
    if not blob.startswith(_MAGIC):
        raise ValueError("not a compact safetensors file (bad magic)")
    at = len(_MAGIC)
    digest, (nh, nhi, nlo) = blob[at:at + 32], struct.unpack("<QQQ", blob[at + 32:at + 56])
    at += 56
    header, hi, lo = blob[at:at + nh], blob[at + nh:at + nh + nhi], blob[at + nh + nhi:at + nh + nhi + nlo]
    hi, lo = zlib.decompress(hi), zlib.decompress(lo)
    if len(hi) != len(lo):
        raise ValueError("corrupt compact file (byte planes differ in length)")
    body = np.empty((len(hi), 2), dtype=np.uint8)
    body[:, 1] = np.frombuffer(hi, dtype=np.uint8)
    body[:, 0] = np.frombuffer(lo, dtype=np.uint8)
    data = header + body.tobytes()
    if hashlib.sha256(data).digest() != digest:
        raise ValueError("corrupt compact file (sha256 mismatch)")
    return data


def weights_digest(folder: str | Path) -> str:
    """The sha256 (hex) of a drafter folder's safetensors bytes, read as ``load_drafter`` reads
    them (the plain file where present, else the compact one, whose header stores that digest:
    both forms of the same weights give the same value)."""
    folder = Path(folder)
    plain, compact = folder / "model.safetensors", folder / "model.safetensors.bp"
    if plain.is_file():
        h = hashlib.sha256()
        with plain.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        return h.hexdigest()
    if compact.is_file():
        with compact.open("rb") as f:
            head = f.read(len(_MAGIC) + 32)
        if head.startswith(_MAGIC) and len(head) == len(_MAGIC) + 32:
            return head[len(_MAGIC):].hex()
        raise CheckpointError(f"cannot read {compact.name}: not a compact safetensors file (bad magic)")
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
