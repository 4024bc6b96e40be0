"""4-bit and 8-bit block weights with float32 activations on x86 CPUs (``kernels/quant.cpp``).

torch's own CPU int4 product (``quant.Int4Linear``) vectorizes only with bf16 activations, and
with bf16 activations a tree verify and an ``ar`` step round differently, so the tree methods
equal their ``ar`` only up to near-ties. This kernel dequantizes the GGUF's Q4_1 blocks in
registers (``w = fma(q, d, m)``, float32) and multiplies float32 activations, with one fixed
chain of float32 operations per output whatever the number of rows and threads: a row's result
does not depend on the rest of the product (``tests/test_quantcpu.py`` asserts ``==``), so int4 is
as exact as the float32 target, and reads 4.5 bits per weight instead of 32.

The kernel is C++ (AVX2 + FMA), built by ``cpuext``. Where it cannot build, ``available()`` says
why and int4 falls back to torch's kernel with bf16 activations (``quant.Int4Linear``).
"""
from __future__ import annotations

import torch

from .cpuext import available
from .linear import onednn_product, route_products
from .quant import GROUP, Q4_1, quantize_q8_0

def pack_q4(blocks: Q4_1) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_1 blocks -> (codes [N, K/2] uint8, dm [N, K/32, 2] float32) in the kernel's layout
    (see ``kernels/quant.cpp``); d and m widened to float32 once (widening the GGUF's float16 in the
    kernel measured slower: it is compute-bound, not memory-bound, on a 2-core AVX2 CPU)."""
    n, k = blocks.q.shape
    q = blocks.q.view(n, k // GROUP, 4, 8)
    codes = torch.cat([q[:, :, 0] | (q[:, :, 1] << 4), q[:, :, 2] | (q[:, :, 3] << 4)], dim=-1)
    dm = torch.stack([blocks.d, blocks.m], dim=-1).float()
    return codes.reshape(n, k // 2).contiguous(), dm.contiguous()


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
        x2 = x.reshape(-1, self.in_features)
        if x2.dtype != torch.float32:
            raise TypeError(f"the int4 float32 kernel takes float32 activations, not {x2.dtype}")
        y = torch.ops.dominotree_quant.q4_linear(x2.contiguous(), self.codes, self.dm)
        y = y.view(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def weight(self) -> torch.Tensor:
        """The weight the kernel uses, [N, K] float32 (for tests): the product with the identity."""
        return torch.ops.dominotree_quant.q4_linear(torch.eye(self.in_features), self.codes, self.dm).t().contiguous()



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
        x2 = x.reshape(-1, self.in_features)
        if x2.dtype != torch.float32:
            raise TypeError(f"the Q8_0 kernel takes float32 activations, not {x2.dtype}")
        return torch.ops.dominotree_quant.q8_linear(x2.contiguous(), self.codes, self.d).view(*x.shape[:-1], -1)

    def rows(self, ids: torch.Tensor | None = None) -> "Q8Linear":
        """The product of the rows ``ids`` only (``self`` when None): each output is the same chain
        of operations, so its columns equal the full product's ``ids`` columns bit for bit."""
        return self if ids is None else Q8Linear(self.codes[ids], self.d[ids])

    def weight(self) -> torch.Tensor:
        """The weight the kernel uses, [N, K] float32."""
        n, k = self.codes.shape
        return (self.codes.float().view(n, k // GROUP, GROUP) * self.d[..., None]).view(n, k)


def q8_product(weight: torch.Tensor, bias: torch.Tensor | None):
    """``x @ W.T (+ b)`` on 8-bit blocks of ``weight`` (``quantize_q8_0``: a quarter of float32's
    bytes); oneDNN's float32 product where the kernel or the shape does not allow it."""
    if weight.device.type != "cpu" or weight.shape[1] % GROUP or available() is not None:
        return onednn_product(weight, bias)
    lin = Q8Linear(*quantize_q8_0(weight))
    return lin if bias is None else (lambda x: lin(x) + bias)


def q8_products(module: torch.nn.Module) -> torch.nn.Module:
    """Route the float32 CPU products of every ``nn.Linear`` in ``module`` through ``q8_product``,
    for decoding (``linear.route_products``: remade when a weight changes, autograd untouched).
    Used for the drafters' backbones next to an int4 target (``presets.load_pair``): on 18
    held-out prompts their tau was unchanged (``results/cheap-rounds``). Returns ``module``."""
    return route_products(module, q8_product)
