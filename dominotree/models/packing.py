"""The byte forms our drafter checkpoints are stored in: a safetensors file, losslessly smaller,
with its original bytes given back exactly (sha256-checked). No torch here: bytes in, bytes out.

``compact_bytes`` / ``expand_bytes`` (the ``model.safetensors.bp`` form, what ``assets/drafters``
ships and the trainer writes): a bf16 file's data split into its high and low byte planes, each
zlib-compressed (the high bytes, sign and exponent, compress to ~40 %; the file to ~70 %).

``planes_bytes`` / ``expand_planes`` (the container of the 8-bit form, ``q8blocks``): a file of
1-, 2- and 4-byte tensors, each width's bytes in one section (2-byte values as two byte planes),
each section compressed with what suits it (``SECTIONS``).
"""
from __future__ import annotations

import hashlib
import json
import lzma
import struct
import zlib

import numpy as np

COMPACT_MAGIC = b"DTBP1\n"
_WIDTH = {"I8": 1, "U8": 1, "BOOL": 1, "BF16": 2, "F16": 2, "I16": 2, "U16": 2, "F32": 4, "I32": 4, "U32": 4}


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
    return b"".join([COMPACT_MAGIC, hashlib.sha256(data).digest(), struct.pack("<QQQ", len(header), len(hi), len(lo)),
                     header, hi, lo])


def expand_bytes(blob: bytes) -> bytes:
    """The original safetensors bytes of a ``compact_bytes`` blob (sha256-checked)."""
    if not blob.startswith(COMPACT_MAGIC):
        raise ValueError("not a compact safetensors file (bad magic)")
    at = len(COMPACT_MAGIC)
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


# the 8-bit file's sections: (byte width, plane or None for the whole values, compressor). Chosen
# on the shipped pair: the int8 codes are close to random (7.7 bits of entropy a code: zlib's
# Huffman coding alone, 97.3 %, 0.1 s, beats lzma's 98.1 %, 3 s); the bf16 low bytes (mostly
# mantissa) are random (zlib, 99.6 %); the bf16 high bytes (sign, exponent) compress to 14 % with
# lzma, 25 % with zlib; the float32 scales, each a bf16 value / 127, to 26 % whole with lzma
# (their byte planes apart: 69 %).
SECTIONS = ((1, None, "huffman"), (2, 1, "lzma"), (2, 0, "zlib"), (4, None, "lzma"))


def _huffman(b: bytes) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, 15, 9, zlib.Z_HUFFMAN_ONLY)
    return z.compress(b) + z.flush()


_PACK = {"huffman": _huffman, "zlib": lambda b: zlib.compress(b, 6), "lzma": lambda b: lzma.compress(b, preset=6)}
_UNPACK = {"huffman": zlib.decompress, "zlib": zlib.decompress, "lzma": lzma.decompress}


def planes_bytes(data: bytes, magic: bytes) -> bytes:
    """A safetensors file of 1-, 2- and 4-byte tensors, losslessly smaller: magic, sha256 of
    ``data``, the section sizes, the header verbatim, then ``SECTIONS``: per byte width the
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
    for w, plane, how in SECTIONS:
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


def expand_planes(blob: bytes, magic: bytes) -> bytes:
    """The original safetensors bytes of a ``planes_bytes`` blob (structure and sha256 checked)."""
    if not blob.startswith(magic):
        raise ValueError("bad magic")
    at, k = len(magic), 1 + len(SECTIONS)
    if len(blob) < at + 32 + 8 * k:
        raise ValueError("truncated")
    digest, sizes = blob[at:at + 32], struct.unpack(f"<{k}Q", blob[at + 32:at + 32 + 8 * k])
    at += 32 + 8 * k
    if at + sum(sizes) != len(blob):
        raise ValueError(f"{len(blob)} bytes, the section sizes say {at + sum(sizes)}")
    header = blob[at:at + sizes[0]]
    at += sizes[0]
    secs = []
    for size, (_, _, how) in zip(sizes[1:], SECTIONS):
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
