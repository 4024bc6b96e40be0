"""Dense products ``x @ W.T (+ b)`` of the target and the drafters, and how they run on CPU.

A tree verify multiplies a few rows (17 at budget 16) by every weight of the target; one ``ar``
step multiplies one row. On CPU the default float32 GEMM (MKL) handles few-row products poorly:
on a 2-core AVX2 CPU the 30 layers' products of 17 rows take 2.7x those of one row, where the
arithmetic would allow about 1.3x. Two paths, chosen per weight:

- ``DenseLinear`` in float32 on CPU, when torch has oneDNN: the weight is reordered once into
  oneDNN's blocked layout (``torch.ops.mkldnn._reorder_linear_weight``, the packing that
  ``torch.compile``'s CPU freezing uses) and every product runs through oneDNN's matmul. The
  layout is chosen for the weight, not for the number of rows, so one copy serves the one-row
  step and the tree verify alike. Measured in ``scripts/experiments/ab_forward.py``.
- ``linear`` (everything else, and the fallback): ``F.linear``; a float32 product of several rows
  in blocks of ``COLUMN_CHUNK`` output columns, since MKL packs the whole weight for such a
  product and a large weight then streams through memory more than once. Bit-identical to one
  ``F.linear`` (``tests/test_fast.py``). bf16 on CPU runs ``kernels/bf16.cpp`` (``bf16_path``):
  torch sends bf16 to oneDNN on CPUs with AVX-512 or AMX, whose kernel depends on the number of
  rows, so a verify row would not get a one-row step's bits.

Results of the two paths agree to float32 rounding, not bit for bit; the target uses one path for
every product of a run, so every method and its ``ar`` see the same arithmetic.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

COLUMN_CHUNK = 1024
ONEDNN = True          # module switch for A/B measurements (scripts/experiments/ab_forward.py)


def bf16_path() -> str:
    """How ``linear`` multiplies bf16 on CPU, each row getting the bits it gets alone:
    ``"kernel"`` (``kernels/bf16.cpp``: one fixed float32 chain per output, every row count, thread
    count and CPU), or ``"rows"`` where the kernels do not build (one ``F.linear`` per row: each row
    is a one-row product, at one row's cost each).

    Why not torch's product: with bf16 on CPU, ``F.linear`` (addmm / matmul) goes to oneDNN's
    matmul when the CPU has AVX-512 BW+VL+DQ or AVX-NE-CONVERT (``mkldnn_bf16_device_check``) and
    the product has more than 16^3 multiply-adds; oneDNN then chooses its kernel (and its blocking
    of the sum) by the shape: on a Xeon with AMX a 33-row product ran on the AMX tiles and row 0
    got other bits than alone (issue 40; earlier, K = 1536 differed from row 7 on). oneDNN's ISA
    can be capped only for the whole process (``ONEDNN_MAX_CPU_ISA``), and which kernel a shape
    gets is oneDNN's to change, so no split of the rows provably takes the one-row path. Without
    AVX-512 (this Zen 3) torch runs its own ``cpublas`` loops, which happened to be row-independent."""
    from .cpuext import available
    return "kernel" if available(verbose=False) is None else "rows"


def _bf16_rows(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    x2 = x.reshape(-1, x.shape[-1])
    if bf16_path() == "kernel":
        y = torch.ops.dominotree_bf16.linear(x2, weight, bias)
    else:
        y = torch.cat([F.linear(x2[i:i + 1], weight, bias) for i in range(x2.shape[0])]) if x2.shape[0] else \
            F.linear(x2, weight, bias)
    return y.view(*x.shape[:-1], weight.shape[0])


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear``; for float32 products of several rows, in blocks of ``COLUMN_CHUNK`` output
    columns (each output column is the same dot product either way: bit-identical); for bf16 on
    CPU without autograd, ``bf16_path``'s row-independent product."""
    n = weight.shape[0]
    if (x.dtype == torch.bfloat16 and weight.dtype == torch.bfloat16 and x.device.type == "cpu"
            and weight.device.type == "cpu" and (bias is None or bias.dtype == torch.bfloat16)
            and not (torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                                  or (bias is not None and bias.requires_grad)))):
        return _bf16_rows(x, weight, bias)
    if x.dtype != torch.float32 or x.numel() <= x.shape[-1] or n <= COLUMN_CHUNK:
        return F.linear(x, weight, bias)
    return torch.cat([F.linear(x, weight[i:i + COLUMN_CHUNK], None if bias is None else bias[i:i + COLUMN_CHUNK])
                      for i in range(0, n, COLUMN_CHUNK)], dim=-1)


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _pack(weight: torch.Tensor) -> torch.Tensor | None:
    """oneDNN's blocked copy of a float32 CPU weight, or None where that path does not apply."""
    if weight.device.type != "cpu" or weight.dtype != torch.float32 or not onednn_available():
        return None
    try:
        return torch.ops.mkldnn._reorder_linear_weight(weight.detach())
    except RuntimeError:      # an op that moved between torch releases: keep the portable path
        return None


def _onednn(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class DenseLinear:
    """``x @ W.T (+ b)`` with the weight kept in the model dtype (see the module docstring)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        self.weight, self.bias = weight.contiguous(), bias
        self.out_features = weight.shape[0]
        self.packed = _pack(self.weight)

    @property
    def path(self) -> str:
        return "onednn" if self.packed is not None and ONEDNN else "aten"

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None and ONEDNN and x.dtype == torch.float32 and not x.requires_grad:
            return _onednn(x, self.packed, self.bias)
        return linear(x, self.weight, self.bias)


def route_products(module: torch.nn.Module, make) -> torch.nn.Module:
    """Run the float32 products of every ``nn.Linear`` in ``module`` through ``make(weight, bias)``
    (a product ``x -> x @ W.T + b``, or None to keep ``F.linear``), for decoding. The product is
    made on first use and again whenever the weight or bias changed (data pointer or in-place
    version: a training step); anything that needs autograd or another dtype keeps ``F.linear``.
    Routing a module again switches it to the new ``make``. Returns ``module``."""
    for mod in module.modules():
        if type(mod) is torch.nn.Linear:
            mod.forward = _Routed(mod, make)
    return module


class _Routed:
    def __init__(self, mod: torch.nn.Linear, make):
        self.mod, self.make = mod, make
        self.key = self.product = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.mod.weight, self.mod.bias
        if (x.dtype != torch.float32 or w.dtype != torch.float32 or x.requires_grad
                or (torch.is_grad_enabled() and (w.requires_grad or (b is not None and b.requires_grad)))):
            return F.linear(x, w, b)
        product = self.current()
        return F.linear(x, w, b) if product is None else product(x)

    def current(self):
        """The product for the weights as they are now (made again when they changed), or None."""
        w, b = self.mod.weight, self.mod.bias
        key = (w.data_ptr(), w._version, w.device, None if b is None else (b.data_ptr(), b._version))
        if key != self.key:
            self.product, self.key = self.make(w.detach(), None if b is None else b.detach()), key
        return self.product


def routed_product(mod: torch.nn.Module):
    """The product ``mod``'s float32 inference calls run now (``route_products``), or None when
    ``mod`` is not routed or keeps ``F.linear``."""
    fwd = mod.__dict__.get("forward")
    return fwd.current() if isinstance(fwd, _Routed) else None


def onednn_product(weight: torch.Tensor, bias: torch.Tensor | None):
    """``x @ W.T (+ b)`` through oneDNN on the weight reordered once (None where that path does
    not apply); ``F.linear`` while ``ONEDNN`` is off (A/B measurements)."""
    packed = _pack(weight)
    if packed is None:
        return None
    return lambda x: _onednn(x, packed, bias) if ONEDNN else F.linear(x, weight, bias)


def onednn_products(module: torch.nn.Module) -> torch.nn.Module:
    """Route the float32 CPU products of every ``nn.Linear`` in ``module`` through oneDNN, as
    ``DenseLinear`` does, for decoding (``route_products``). Returns ``module``."""
    return route_products(module, onednn_product)
