"""The 8-bit form of a drafter's weights (``model.safetensors.q8``): the weight matrices that the
CPU fast path multiplies as 8-bit blocks, stored as exactly those blocks.

Which: every ``nn.Linear`` of ``fc`` and ``layers`` whose width is a multiple of 32
(``presets.load_pair``'s ``q8_products`` next to an ``int4`` / ``int4-q8`` target), as
``quant.quantize_q8_0`` of the float32 weight: int8 codes [N, K] (``<name>.q8_codes``) and float32
scales [N, K/32] (``<name>.q8_scales``). Every other tensor (norms, the GRU, the Domino head) is
kept as it was (bf16). Loading dequantizes (``codes * scale`` in float32, ``Q8Linear.weight``'s
arithmetic), and quantizing that again gives the stored blocks back bit for bit, so on the default
CPU setting the drafter multiplies exactly the blocks it multiplied from the bf16 checkpoint (the
same drafts); on every other setting (float32 / bf16 weights, ``--forward hf``, CUDA) it runs the
dequantized weights, which differ from the bf16 ones by the 8-bit rounding (at most half a step,
max |w| / 254, per weight of a block). The file is ``packing.planes_bytes`` of that safetensors
file (its header verbatim, the int8 codes, the bf16 byte planes and the float32 scales each
compressed) with its sha256, checked on reading. Folders: ``checkpoint.q8_folder``.
"""
from __future__ import annotations

import json
import struct
from pathlib import Path

import torch
from safetensors.torch import load as load_safetensors_bytes

from .drafter import CheckpointError, Drafter, DrafterConfig
from .packing import expand_planes, planes_bytes

Q8_MAGIC = b"DTQ81\n"
Q8_MODULES = ("fc", "layers")     # the drafter modules whose products run as 8-bit blocks (presets.load_pair)
Q8_CODES, Q8_SCALES = ".q8_codes", ".q8_scales"
Q8_FORMAT = "Q8_0/32"              # quant.quantize_q8_0: blocks of 32, float32 scale max|w| / 127


def q8_names(cfg: DrafterConfig) -> list[str]:
    """The weights a drafter of ``cfg`` multiplies as 8-bit blocks on the CPU fast path: every
    ``nn.Linear`` weight of ``Q8_MODULES`` whose width is a multiple of the block (32)."""
    from torch import nn

    from .quant import GROUP
    with torch.device("meta"):
        model = Drafter(cfg)
    return [f"{top}.{name}.weight" if name else f"{top}.weight"
            for top in Q8_MODULES for name, m in getattr(model, top).named_modules()
            if type(m) is nn.Linear and m.in_features % GROUP == 0]


def q8_tensors(tensors: dict[str, torch.Tensor], names: list[str]) -> dict[str, torch.Tensor]:
    """``tensors`` with each of ``names`` replaced by its 8-bit blocks as the CPU fast path makes
    them at load (``quantize_q8_0`` of the float32 weight): ``<name>.q8_codes`` (int8 [N, K]) and
    ``<name>.q8_scales`` (float32 [N, K/32]); the other tensors unchanged."""
    from .quant import quantize_q8_0
    out = {}
    for k, v in tensors.items():
        if k in names:
            codes, scales = quantize_q8_0(v.to(torch.float32))
            out[k + Q8_CODES], out[k + Q8_SCALES] = codes.contiguous(), scales.contiguous()
        else:
            out[k] = v.contiguous()
    missing = sorted(set(names) - set(tensors))
    if missing:
        raise CheckpointError(f"no tensor {missing[0]} to store in 8 bits")
    return out


def dequantize_q8(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors of an 8-bit file with every ``.q8_codes`` / ``.q8_scales`` pair made one float32
    weight, ``codes * scale`` per block of 32 (``quantcpu.Q8Linear.weight``'s arithmetic)."""
    from .quant import GROUP
    out = {k: v for k, v in tensors.items() if not k.endswith((Q8_CODES, Q8_SCALES))}
    for k, codes in tensors.items():
        if not k.endswith(Q8_CODES):
            continue
        name = k[:-len(Q8_CODES)]
        scales = tensors.get(name + Q8_SCALES)
        if scales is None:
            raise CheckpointError(f"8-bit weight {name} has codes but no scales")
        if name in out:
            raise CheckpointError(f"8-bit weight {name} is stored twice")
        n, kk = codes.shape if codes.dim() == 2 else (0, 0)
        if (codes.dtype != torch.int8 or codes.dim() != 2 or kk % GROUP or scales.dtype != torch.float32
                or tuple(scales.shape) != (n, kk // GROUP)):
            raise CheckpointError(f"8-bit weight {name}: codes {codes.dtype} {tuple(codes.shape)}, scales "
                                  f"{scales.dtype} {tuple(scales.shape)} are not Q8_0 blocks of {GROUP}")
        if codes.numel() and int(codes.min()) < -127:
            raise CheckpointError(f"8-bit weight {name}: a code of -128 (Q8_0 codes are -127..127)")
        if not bool(torch.isfinite(scales).all()) or bool((scales < 0).any()):
            raise CheckpointError(f"8-bit weight {name}: scales must be finite and >= 0")
        out[name] = (codes.to(torch.float32).view(n, kk // GROUP, GROUP) * scales[..., None]).view(n, kk)
    stray = sorted(k for k in tensors if k.endswith(Q8_SCALES) and k[:-len(Q8_SCALES)] + Q8_CODES not in tensors)
    if stray:
        raise CheckpointError(f"8-bit scales {stray[0]} without codes")
    return out


def read_q8_file(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a ``model.safetensors.q8`` as stored (codes and scales not dequantized)."""
    try:
        data = expand_planes(Path(path).read_bytes(), Q8_MAGIC)
        meta = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]]).get("__metadata__") or {}
        if meta.get("dominotree_q8") != Q8_FORMAT:
            raise ValueError(f"its metadata names no {Q8_FORMAT} blocks")
        return load_safetensors_bytes(data)
    except Exception as e:
        raise CheckpointError(f"cannot read {Path(path).name}: not a sound 8-bit drafter file ({e})") from None


def q8_bytes(tensors: dict[str, torch.Tensor], names: list[str], source_sha256: str = "") -> bytes:
    """The ``model.safetensors.q8`` blob of ``tensors`` with ``names`` as 8-bit blocks."""
    from safetensors.torch import save as save_safetensors_bytes
    meta = {"format": "pt", "dominotree_q8": Q8_FORMAT}
    if source_sha256:
        meta["source_sha256"] = source_sha256
    data = save_safetensors_bytes(q8_tensors(tensors, names), metadata=meta)
    blob = planes_bytes(data, Q8_MAGIC)
    if expand_planes(blob, Q8_MAGIC) != data:
        raise RuntimeError("8-bit storage did not round-trip")       # never expected
    return blob
