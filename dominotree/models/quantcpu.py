"""4-bit and 8-bit block weights on x86 CPUs: with float32 activations (``kernels/quant.cpp``), and
block weights with 8-bit activation blocks (``kernels/q8act.cpp``: ``Q4Q8Linear``, ``Q8Q8Linear``).

torch's own CPU int4 product (``quant.Int4Linear``) vectorizes only with bf16 activations, and
with bf16 activations a tree verify and an ``ar`` step round differently, so the tree methods
equal their ``ar`` only up to near-ties. This kernel dequantizes the GGUF's Q4_1 blocks in
registers (``w = fma(q, d, m)``, float32) and multiplies float32 activations, with one fixed
chain of float32 operations per output whatever the number of rows and threads: a row's result
does not depend on the rest of the product (``tests/test_quantcpu.py`` asserts ``==``), so int4 is
as exact as the float32 target, and reads 4.5 bits per weight instead of 32.

The kernel is C++ (AVX2 + FMA), built by ``cpuext``. Where it cannot build, ``available()`` says
why and int4 falls back to torch's kernel with bf16 activations (``quant.Int4Linear``):
``int4_activations`` and ``int4_linear`` make that choice. The block formats (``quant.py``) sit
below these kernels and import nothing from here.
"""
from __future__ import annotations

import sys

import torch

from .cpuext import amx_min_rows, amx_why, available, set_amx  # noqa: F401 - AMX switches re-exported
from .linear import onednn_product, route_products
from .quant import GROUP, Q4_1, Int4Linear, quantize_q4_1, quantize_q8_0

def pack_q4(blocks: Q4_1) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_1 blocks -> (codes [N, K/2] uint8, dm [N, K/32, 2] float32) in the kernel's layout
    (see ``kernels/quant.cpp``); d and m widened to float32 once (widening the GGUF's float16 in the
    kernel measured slower: it is compute-bound, not memory-bound, on a 2-core AVX2 CPU)."""
    n, k = blocks.q.shape
    q = blocks.q.view(n, k // GROUP, 4, 8)
    codes = torch.cat([q[:, :, 0] | (q[:, :, 1] << 4), q[:, :, 2] | (q[:, :, 3] << 4)], dim=-1)
    dm = torch.stack([blocks.d, blocks.m], dim=-1).float()
    return codes.reshape(n, k // 2).contiguous(), dm.contiguous()


def _rows(x: torch.Tensor, in_features: int, kernel: str) -> torch.Tensor:
    """``x`` as the contiguous float32 [rows, in_features] matrix the kernels take."""
    x2 = x.reshape(-1, in_features)
    if x2.dtype != torch.float32:
        raise TypeError(f"the {kernel} kernel takes float32 activations, not {x2.dtype}")
    return x2.contiguous()


class Q4Linear:
    """``x @ W.T (+ b)`` with W as Q4_1 blocks, float32 activations (the kernel must be available)."""

    def __init__(self, blocks: Q4_1, bias: torch.Tensor | None = None):
        why = available()
        if why is not None:
            raise RuntimeError(why)
        self.out_features, self.in_features = blocks.q.shape
        self.codes, self.dm = pack_q4(blocks)
        self.bias = None if bias is None else bias.float()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.dominotree_quant.q4_linear(_rows(x, self.in_features, "int4 float32"), self.codes, self.dm)
        y = y.view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def weight(self) -> torch.Tensor:
        """The weight the kernel uses, [N, K] float32 (for tests): the product with the identity."""
        return torch.ops.dominotree_quant.q4_linear(torch.eye(self.in_features), self.codes, self.dm).t().contiguous()



LANES = 16      # outputs per tile of kernels/q8act.cpp


def pack_q4_tiles(blocks: Q4_1) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_1 blocks -> (codes [ceil(N/16), K/32, 4, 16, 4] uint8, dm [ceil(N/16), K/32, 2, 16]
    float16) in ``kernels/q8act.cpp``'s tile layout: byte i of lane j in part p holds
    ``q[j, 8p + i] | q[j, 8p + 4 + i] << 4``; outputs padded to 16 with zero weights. d and m
    must be float16 values (the GGUF's; ``quantize_q4_1`` rounds them so)."""
    n, k = blocks.q.shape
    for s in (blocks.d, blocks.m):
        if not torch.equal(s.half().float(), s.float()):
            raise ValueError("Q4_1 scales must be float16 values")
    tiles, nb = -(-n // LANES), k // GROUP
    pad = tiles * LANES - n
    q, d, m = (torch.nn.functional.pad(t, (0, 0, 0, pad)) for t in (blocks.q, blocks.d.float(), blocks.m.float()))
    q = q.view(tiles, LANES, nb, 4, 2, 4)                   # [tile, lane, block, part, half, i]
    codes = (q[..., 0, :] | (q[..., 1, :] << 4)).permute(0, 2, 3, 1, 4)
    dm = torch.stack([d.view(tiles, LANES, nb), m.view(tiles, LANES, nb)], dim=1).permute(0, 3, 1, 2)
    return codes.contiguous(), dm.half().contiguous()


def best_isa() -> int:
    """The instruction set ``q4q8_linear`` runs here: 2 AVX-512 VNNI, 1 AVX2, 0 scalar (AMX, 3, only
    where ``set_amx`` turned it on: ``cpuext``)."""
    why = available()
    if why is not None:
        raise RuntimeError(why)
    return int(torch.ops.dominotree_q8act.best_isa())


class Q4Q8Linear:
    """``x @ W.T (+ b)`` with W as Q4_1 blocks and each row of x in 8-bit blocks of 32, as
    llama.cpp multiplies a Q4_1 model (``kernels/q8act.cpp``): integer dot products, exact and
    row-independent, about 4x fewer instructions per weight than the float32 kernel on AVX-512
    VNNI. Its weight is ``Q4Linear``'s; its activations are rounded to 8 bits per block."""

    def __init__(self, blocks: Q4_1, bias: torch.Tensor | None = None):
        why = available()
        if why is not None:
            raise RuntimeError(why)
        self.out_features, self.in_features = blocks.q.shape
        self.codes, self.dm = pack_q4_tiles(blocks)
        self.bias = None if bias is None else bias.float()

    def __call__(self, x: torch.Tensor, isa: int = -1) -> torch.Tensor:
        y = torch.ops.dominotree_q8act.q4q8_linear(_rows(x, self.in_features, "int4 x 8-bit"), self.codes, self.dm,
                                                   self.out_features, isa)
        y = y.view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias


class Q8Linear:
    """``x @ W.T`` with W as Q8_0 blocks (int8 codes [N, K], float32 scales [N, K/32]), float32
    activations: the GGUF's 8-bit tied embedding as the LM head, a quarter of float32's bytes.
    ``q * d`` is exact in float32, so the weight equals the dequantized embedding bit for bit."""

    def __init__(self, codes: torch.Tensor, d: torch.Tensor):
        why = available()
        if why is not None:
            raise RuntimeError(why)
        self.codes, self.d = codes.to(torch.int8).contiguous(), d.float().contiguous()
        self.out_features, self.in_features = self.codes.shape

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.ops.dominotree_quant.q8_linear(_rows(x, self.in_features, "Q8_0"), self.codes, self.d)
        return y.view(*x.shape[:-1], -1)

    def rows(self, ids: torch.Tensor | None = None) -> "Q8Linear":
        """The product of the rows ``ids`` only (``self`` when None): each output is the same chain
        of operations, so its columns equal the full product's ``ids`` columns bit for bit."""
        return self if ids is None else Q8Linear(self.codes[ids], self.d[ids])

    def weight(self) -> torch.Tensor:
        """The weight the kernel uses, [N, K] float32."""
        n, k = self.codes.shape
        return (self.codes.float().view(n, k // GROUP, GROUP) * self.d[..., None]).view(n, k)


def pack_q8_tiles(codes: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q8_0 blocks (codes [N, K] int8, d [N, K/32]) -> (codes [ceil(N/16), K/32, 8, 16, 4] uint8
    holding q + 128, d [ceil(N/16), K/32, 1, 16] float32) in ``kernels/q8act.cpp``'s tile layout."""
    n, k = codes.shape
    tiles, nb = -(-n // LANES), k // GROUP
    pad = tiles * LANES - n
    q = torch.nn.functional.pad(codes.to(torch.int16) + 128, (0, 0, 0, pad)).to(torch.uint8)
    q = q.view(tiles, LANES, nb, 8, 4).permute(0, 2, 3, 1, 4)             # [tile, block, group, lane, i]
    s = torch.nn.functional.pad(d.float(), (0, 0, 0, pad)).view(tiles, LANES, nb).permute(0, 2, 1)
    return q.contiguous(), s.reshape(tiles, nb, 1, LANES).contiguous()


class Q8Q8Linear:
    """``x @ W.T`` with W as Q8_0 blocks and each row of x in 8-bit blocks of 32 (integer dot
    products, ``kernels/q8act.cpp``): ``Q8Linear``'s weight, 8-bit activations. The LM head and
    the drafters' products next to an ``int4-q8`` target."""

    def __init__(self, codes: torch.Tensor, d: torch.Tensor):
        why = available()
        if why is not None:
            raise RuntimeError(why)
        self.q8 = Q8Linear(codes, d)          # the blocks as given (weight(), rows())
        self.out_features, self.in_features = self.q8.out_features, self.q8.in_features
        self.codes, self.d = pack_q8_tiles(self.q8.codes, self.q8.d)

    def __call__(self, x: torch.Tensor, isa: int = -1) -> torch.Tensor:
        y = torch.ops.dominotree_q8act.q8q8_linear(_rows(x, self.in_features, "8-bit x 8-bit"), self.codes, self.d,
                                                   self.out_features, isa)
        return y.view(*x.shape[:-1], self.out_features)

    def rows(self, ids: torch.Tensor | None = None) -> "Q8Q8Linear":
        """The product of the rows ``ids`` only (``self`` when None): the full product's columns."""
        return self if ids is None else Q8Q8Linear(self.q8.codes[ids], self.q8.d[ids])

    def weight(self) -> torch.Tensor:
        """The weight, [N, K] float32 (the dequantized Q8_0 blocks)."""
        return self.q8.weight()


def q8_product(weight: torch.Tensor, bias: torch.Tensor | None, kind=Q8Linear):
    """``x @ W.T (+ b)`` on 8-bit blocks of ``weight`` (``quantize_q8_0``: a quarter of float32's
    bytes) with ``kind`` (``Q8Linear``: float32 activations; ``Q8Q8Linear``: 8-bit activation
    blocks); oneDNN's float32 product where the kernel or the shape does not allow it."""
    if weight.device.type != "cpu" or weight.shape[1] % GROUP or available() is not None:
        return onednn_product(weight, bias)
    lin = kind(*quantize_q8_0(weight))
    return lin if bias is None else (lambda x: lin(x) + bias)


def q8_products(module: torch.nn.Module, kind=Q8Linear) -> torch.nn.Module:
    """Route the float32 CPU products of every ``nn.Linear`` in ``module`` through ``q8_product``
    with ``kind``, for decoding (``linear.route_products``: remade when a weight changes, autograd
    untouched). Used for the drafters' backbones next to an int4 target (``presets.load_pair``;
    ``Q8Q8Linear`` next to ``int4-q8``): on 18 held-out prompts their tau was unchanged
    (``results/cheap-rounds/draft_rows_tau.txt``). Returns ``module``."""
    return route_products(module, lambda w, b: q8_product(w, b, kind))


# --- the choice between these kernels and torch's (presets.load_pair) -----------------------------

def int4_activations() -> torch.dtype:
    """The activation dtype of 4-bit products here: float32 where ``quantcpu``'s kernel builds (exact,
    row-independent), else bf16 on torch's kernel (a one-line notice says why)."""
    why = available()
    if why is None:
        return torch.float32
    print(f"[dominotree] {why}; int4 runs on torch's kernel with bf16 activations", file=sys.stderr)
    return torch.bfloat16


def int4_linear(blocks: dict[str, Q4_1] | None = None, activations: torch.dtype = torch.bfloat16,
                q8: bool = False):
    """A ``FastModel`` linear builder: Q4_1 blocks by parameter name (a GGUF), or quantized from
    the float weights when ``blocks`` is None or lacks the name. float32 ``activations`` run on
    ``Q4Linear`` (``q8``: ``Q4Q8Linear``, 8-bit activation blocks), bf16 on torch's kernel
    (``quant.Int4Linear``)."""
    def make(names, weight, bias):
        if blocks is not None and all(n in blocks for n in names):
            q = Q4_1.cat([blocks[n] for n in names])
            if tuple(q.q.shape) != tuple(weight.shape):
                raise ValueError(f"{names}: GGUF shape {tuple(q.q.shape)} != model shape {tuple(weight.shape)}")
        else:
            q = quantize_q4_1(weight)
        if activations == torch.float32:
            return (Q4Q8Linear if q8 else Q4Linear)(q, bias)
        return Int4Linear(q, bias)
    return make
