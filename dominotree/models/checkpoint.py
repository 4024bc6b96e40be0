"""Reading and writing drafter checkpoints in the released formats, with format checks.

A folder holds ``config.json`` plus ``model.safetensors`` (or several ``*.safetensors`` shards),
with unprefixed tensor names, as ``z-lab/*-DFlash-b16`` and ``Huang2020/*-Domino-b16``.

The compact form (``model.safetensors.bp``, what ``assets/drafters`` ships and the trainer writes:
``save_compact_drafter``) is the same safetensors file, stored losslessly smaller: a bf16 file's
data split into its high and low byte planes, each zlib-compressed (the high bytes, sign and
exponent, compress to ~40 %; the file to ~70 %). Reading it rebuilds the original file byte for
byte (its sha256 is checked), so a compact checkpoint loads exactly the weights of the plain one.

The 8-bit form (``model.safetensors.q8``, ``q8_folder`` / ``save_q8_drafter``) stores the weight
matrices that the CPU fast path multiplies as 8-bit blocks (every ``nn.Linear`` of ``fc`` and
``layers`` whose width is a multiple of 32: ``presets.load_pair``'s ``q8_products`` next to an
``int4`` / ``int4-q8`` target) as exactly those blocks: ``quant.quantize_q8_0`` of the float32
weight, int8 codes [N, K] (``<name>.q8_codes``) and float32 scales [N, K/32] (``<name>.q8_scales``).
Every other tensor (norms, the GRU, the Domino head) is kept as it was (bf16). Loading dequantizes
(``codes * scale`` in float32, ``Q8Linear.weight``'s arithmetic), and quantizing that again gives
the stored blocks back bit for bit, so on the default CPU setting the drafter multiplies exactly
the blocks it multiplied from the bf16 checkpoint (the same drafts); on every other setting
(float32 / bf16 weights, ``--forward hf``, CUDA) it runs the dequantized weights, which differ from
the bf16 ones by the 8-bit rounding (at most half a step, max |w| / 254, per weight of a block).
The file holds a safetensors file as the compact form does: its header verbatim, then the int8
codes, the bf16 high and low byte planes and the float32 scales each compressed (``_Q8_SECTIONS``),
and that safetensors file's sha256, checked on reading.
"""
from __future__ import annotations

import hashlib
import json
import lzma
import os
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
Q8_SUFFIX = ".q8"
_Q8_MAGIC = b"DTQ81\n"
Q8_MODULES = ("fc", "layers")     # the drafter modules whose products run as 8-bit blocks (presets.load_pair)
Q8_CODES, Q8_SCALES = ".q8_codes", ".q8_scales"
Q8_FORMAT = "Q8_0/32"              # quant.quantize_q8_0: blocks of 32, float32 scale max|w| / 127
_WIDTH = {"I8": 1, "U8": 1, "BOOL": 1, "BF16": 2, "F16": 2, "I16": 2, "U16": 2, "F32": 4, "I32": 4, "U32": 4}

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
    for suffix, magic in ((COMPACT_SUFFIX, _MAGIC), (Q8_SUFFIX, _Q8_MAGIC)):
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

# the 8-bit file's sections: (byte width, plane or None for the whole values, compressor). Chosen
# on the shipped pair: the int8 codes are close to random (7.7 bits of entropy a code: zlib's
# Huffman coding alone, 97.3 %, 0.1 s, beats lzma's 98.1 %, 3 s); the bf16 low bytes (mostly
# mantissa) are random (zlib, 99.6 %); the bf16 high bytes (sign, exponent) compress to 14 % with
# lzma, 25 % with zlib; the float32 scales, each a bf16 value / 127, to 26 % whole with lzma
# (their byte planes apart: 69 %).
_Q8_SECTIONS = ((1, None, "huffman"), (2, 1, "lzma"), (2, 0, "zlib"), (4, None, "lzma"))


def _huffman(b: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 15, 9, zlib.Z_HUFFMAN_ONLY)
    return z.compress(b) + z.flush()


_PACK = {"huffman": _huffman, "zlib": lambda b: zlib.compress(b, 6), "lzma": lambda b: lzma.compress(b, preset=6)}
_UNPACK = {"huffman": zlib.decompress, "zlib": zlib.decompress, "lzma": lzma.decompress}


def _planes_bytes(data: bytes, magic: bytes) -> bytes:
    """A safetensors file of 1-, 2- and 4-byte tensors, losslessly smaller: magic, sha256 of
    ``data``, the section sizes, the header verbatim, then ``_Q8_SECTIONS``: per byte width the
    tensors' bytes of that width in file order (2-byte values split into their high and low byte
    planes), each compressed."""
    n = struct.unpack("<Q", data[:8])[0]
    header, body = data[:8 + n], data[8 + n:]
    streams, end = {1: [], 2: [], 4: []}, 0
    for name, (a, b), w in _layout(header):
        if a != end:
            raise ValueError(f"{name}: tensor data not contiguous")
        streams[w].append(body[a:b])
        end = b
    if end != len(body):
        raise ValueError("trailing bytes after the tensor data")
    sections = []
    for w, plane, how in _Q8_SECTIONS:
        buf = b"".join(streams[w])
        if plane is not None:
            buf = np.frombuffer(buf, dtype=np.uint8).reshape(-1, w)[:, plane].tobytes()
        sections.append(_PACK[how](buf))
    return b"".join([magic, hashlib.sha256(data).digest(),
                     struct.pack(f"<{1 + len(sections)}Q", len(header), *map(len, sections)), header, *sections])


def _layout(header: bytes) -> list[tuple[str, tuple[int, int], int]]:
    """(name, data offsets, byte width) of every tensor of a safetensors header, in file order."""
    meta = json.loads(header[8:])
    out = []
    for name, v in meta.items():
        if name == "__metadata__":
            continue
        w = _WIDTH.get(v["dtype"])
        if w is None:
            raise ValueError(f"{name}: dtype {v['dtype']} is not stored in this form")
        a, b = v["data_offsets"]
        if (b - a) % w:
            raise ValueError(f"{name}: {b - a} bytes is not a whole number of {v['dtype']} values")
        out.append((name, (int(a), int(b)), w))
    return sorted(out, key=lambda t: t[1])


def _expand_planes(blob: bytes, magic: bytes) -> bytes:
    """The original safetensors bytes of a ``_planes_bytes`` blob (structure and sha256 checked)."""
    if not blob.startswith(magic):
        raise ValueError("bad magic")
    at, k = len(magic), 1 + len(_Q8_SECTIONS)
    if len(blob) < at + 32 + 8 * k:
        raise ValueError("truncated")
    digest, sizes = blob[at:at + 32], struct.unpack(f"<{k}Q", blob[at + 32:at + 32 + 8 * k])
    at += 32 + 8 * k
    if at + sum(sizes) != len(blob):
        raise ValueError(f"{len(blob)} bytes, the section sizes say {at + sum(sizes)}")
    header = blob[at:at + sizes[0]]
    at += sizes[0]
    secs = []
    for size, (_, _, how) in zip(sizes[1:], _Q8_SECTIONS):
        secs.append(_UNPACK[how](blob[at:at + size]))
        at += size
    streams = {1: secs[0], 4: secs[3]}
    hi, lo = secs[1], secs[2]
    if len(hi) != len(lo):
        raise ValueError("byte planes differ in length")
    two = np.empty((len(hi), 2), dtype=np.uint8)
    two[:, 1], two[:, 0] = np.frombuffer(hi, dtype=np.uint8), np.frombuffer(lo, dtype=np.uint8)
    streams[2] = two.tobytes()
    pos, parts = {1: 0, 2: 0, 4: 0}, [header]
    for _, (a, b), w in _layout(header):
        parts.append(streams[w][pos[w]:pos[w] + b - a])
        pos[w] += b - a
    if any(pos[w] != len(streams[w]) for w in pos):
        raise ValueError("the sections hold other bytes than the header's tensors")
    data = b"".join(parts)
    if hashlib.sha256(data).digest() != digest:
        raise ValueError("sha256 mismatch")
    return data


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
        data = _expand_planes(Path(path).read_bytes(), _Q8_MAGIC)
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
    blob = _planes_bytes(data, _Q8_MAGIC)
    if _expand_planes(blob, _Q8_MAGIC) != data:
        raise RuntimeError("8-bit storage did not round-trip")       # never expected
    return blob


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
