"""4-bit weights: the GGUF's Q4_1 blocks, for ``quantcpu``'s float32 kernel or torch's CPU int4 matmul.

Q4_1 stores each block of 32 weights as a float16 scale ``d``, a float16 minimum ``m`` and 32
4-bit codes ``q`` in [0, 15]: ``w = d * q + m``. torch's CPU kernel
(``_weight_int4pack_mm_for_cpu``, group size 32) computes ``w = (q - 8) * scale + zero``, so
``scale = d`` and ``zero = m + 8 d`` give the same weight. The kernel wants its scales in the
activation dtype, and its float32 path is unvectorized (about 13x slower than bf16 here), so
torch's kernel runs with bf16 activations and bf16 scales: the weights are the GGUF's to within
the bf16 rounding of ``d`` and ``m + 8 d``. Where it builds, ``quantcpu.Q4Linear`` (float32
activations, float32 ``d`` and ``m``) is used instead (``quantcpu.int4_linear`` chooses: the
kernels import these block formats, never the other way).

``gguf_q4_1(path)`` reads the blocks of a Llama GGUF (rows reordered the way transformers'
GGUF loader reorders attn_q / attn_k); ``quantize_q4_1(w)`` makes Q4_1 blocks from float
weights (llama.cpp's ``quantize_row_q4_1``), for models that ship no GGUF (tests).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

GROUP = 32
BLOCK_BYTES = 20        # float16 d, float16 m, 16 bytes of codes
GGUF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
              "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
              "ffn_down": "mlp.down_proj"}


class Q4_1:
    """Q4_1 blocks of one [N, K] weight: codes ``q`` [N, K] uint8, ``d`` / ``m`` [N, K/32] float32."""

    def __init__(self, q: torch.Tensor, d: torch.Tensor, m: torch.Tensor):
        self.q, self.d, self.m = q, d, m

    def dequantize(self) -> torch.Tensor:
        n, k = self.q.shape
        w = self.q.float().view(n, k // GROUP, GROUP) * self.d[..., None] + self.m[..., None]
        return w.view(n, k)

    @staticmethod
    def cat(parts: list["Q4_1"]) -> "Q4_1":
        return Q4_1(*(torch.cat([getattr(p, a) for p in parts]) for a in ("q", "d", "m")))


def decode_blocks(raw: np.ndarray, n: int, k: int) -> Q4_1:
    """Q4_1 bytes [n, k / 32 * 20] -> codes and scales (low nibbles are a block's first 16)."""
    b = raw.reshape(n, k // GROUP, BLOCK_BYTES)
    d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    qs = b[..., 4:]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).reshape(n, k)
    return Q4_1(torch.from_numpy(q.astype(np.uint8)), torch.from_numpy(d), torch.from_numpy(m))


def _unpermute_rows(x: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's q/k row interleaving (transformers' GGUF loader does the same)."""
    dim = x.shape[0] // heads // 2
    return x.reshape(heads, dim, 2, *x.shape[1:]).transpose(1, 2).reshape(x.shape)


def gguf_q4_1(path: str | Path, n_heads: int, n_kv_heads: int) -> dict[str, Q4_1]:
    """Every Q4_1 matrix of a Llama GGUF, keyed by its transformers parameter name."""
    import gguf
    reader = gguf.GGUFReader(str(path))
    out = {}
    for t in reader.tensors:
        parts = t.name.split(".")
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in GGUF_NAMES:
            continue
        if t.tensor_type != gguf.GGMLQuantizationType.Q4_1:
            raise ValueError(f"{t.name} is {t.tensor_type.name}, not Q4_1")
        k, n = (int(x) for x in t.shape)
        blk = decode_blocks(np.asarray(t.data), n, k)
        heads = {"attn_q": n_heads, "attn_k": n_kv_heads}.get(parts[2])
        if heads is not None:
            blk = Q4_1(*(_unpermute_rows(x, heads) for x in (blk.q, blk.d, blk.m)))
        out[f"model.layers.{parts[1]}.{GGUF_NAMES[parts[2]]}.weight"] = blk
    return out


def gguf_q8_0(path: str | Path, name: str = "token_embd.weight") -> tuple[torch.Tensor, torch.Tensor] | None:
    """A Q8_0 matrix of a GGUF as (codes [N, K] int8, d [N, K/32] float32), or None when the
    tensor is absent or stored otherwise (block: float16 d, then 32 int8 codes)."""
    import gguf
    t = next((t for t in gguf.GGUFReader(str(path)).tensors if t.name == name), None)
    if t is None or t.tensor_type != gguf.GGMLQuantizationType.Q8_0:
        return None
    k, n = (int(x) for x in t.shape)
    b = np.asarray(t.data).reshape(n, k // GROUP, 2 + GROUP)
    d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = b[..., 2:].copy().view(np.int8).reshape(n, k)
    return torch.from_numpy(codes), torch.from_numpy(d)


def quantize_q4_1(w: torch.Tensor) -> Q4_1:
    """Q4_1 blocks of float weights [N, K] (min/max per block of 32, float16 d and m)."""
    n, k = w.shape
    if k % GROUP:
        raise ValueError(f"in_features {k} is not a multiple of {GROUP}")
    x = w.detach().float().view(n, k // GROUP, GROUP)
    lo, hi = x.amin(-1), x.amax(-1)
    d = ((hi - lo) / 15).half().float()
    m = lo.half().float()
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = ((x - m[..., None]) * inv[..., None] + 0.5).floor().clamp_(0, 15).to(torch.uint8)
    return Q4_1(q.view(n, k), d, m)


def quantize_q8_0(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0 blocks of float weights [N, K]: (codes [N, K] int8, d [N, K/32] float32), with
    ``w ~ q * d``, d = max |w| / 127 per block of 32 (llama.cpp's 8-bit format, d kept in float32)."""
    n, k = w.shape
    if k % GROUP:
        raise ValueError(f"in_features {k} is not a multiple of {GROUP}")
    x = w.detach().float().view(n, k // GROUP, GROUP)
    d = x.abs().amax(-1) / 127
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = torch.round(x * inv[..., None]).clamp_(-127, 127).to(torch.int8)
    return q.view(n, k), d


class Int4Linear:
    """``x @ W.T`` with W as Q4_1 blocks in torch's CPU int4 layout (bf16 activations)."""

    def __init__(self, blocks: Q4_1, bias: torch.Tensor | None = None, dtype=torch.bfloat16):
        n, k = blocks.q.shape
        self.in_features, self.out_features = k, n
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(blocks.q.to(torch.int32), 1)
        sz = torch.stack([blocks.d, blocks.m + 8 * blocks.d], dim=-1)      # [N, K/32, 2]
        self.scale_zeros = sz.transpose(0, 1).contiguous().to(dtype)       # [K/32, N, 2]
        self.bias = None if bias is None else bias.to(dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.aten._weight_int4pack_mm_for_cpu(x.reshape(-1, self.in_features), self.packed, GROUP,
                                                       self.scale_zeros)
        y = y.view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def weight(self) -> torch.Tensor:
        """The weight the kernel uses, [N, K] in float32 (for tests)."""
        eye = torch.eye(self.in_features, dtype=self.scale_zeros.dtype)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(eye, self.packed, GROUP, self.scale_zeros).t().float()


def int4_available() -> bool:
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(
        torch.ops.aten, "_convert_weight_to_int4pack_for_cpu")
