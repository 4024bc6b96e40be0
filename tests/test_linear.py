"""The dense products of models/linear.py: oneDNN on reordered float32 weights agrees with
``F.linear`` to float32 rounding, the switch and the fallbacks give ``F.linear``'s own bits, a
drafter's reordered weights follow a training step, and bf16 products give every row the bits it
gets alone (kernels/bf16.cpp) whatever torch's bf16 product does with the row count.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_linear.py
"""
import pytest
import torch
import torch.nn.functional as F

import dominotree.models.linear as lin

needs_onednn = pytest.mark.skipif(not lin.onednn_available(), reason="torch has no oneDNN")


@needs_onednn
@pytest.mark.parametrize("shape", [(1, 576), (17, 576), (2, 9, 576), (0, 576)])
def test_dense_linear_agrees_with_f_linear(shape):
    torch.manual_seed(0)
    w, b = torch.randn(1000, 576) * 0.05, torch.randn(1000)
    x = torch.randn(*shape)
    for bias in (None, b):
        d = lin.DenseLinear(w, bias)
        assert d.path == "onednn"
        got, want = d(x), F.linear(x, w, bias)
        assert got.shape == want.shape and got.dtype == torch.float32
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_switch_off_and_other_dtypes_keep_the_portable_path(monkeypatch):
    torch.manual_seed(1)
    w = torch.randn(300, 64)
    x = torch.randn(5, 64)
    monkeypatch.setattr(lin, "ONEDNN", False)
    d = lin.DenseLinear(w)
    assert d.path == "aten" and torch.equal(d(x), lin.linear(x, w))
    monkeypatch.setattr(lin, "ONEDNN", True)
    wb = lin.DenseLinear(w.bfloat16())
    assert wb.packed is None and torch.equal(wb(x.bfloat16()), lin.linear(x.bfloat16(), w.bfloat16()))


@needs_onednn
def test_onednn_products_follow_a_training_step_and_leave_autograd_alone():
    torch.manual_seed(2)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(), torch.nn.Linear(128, 32, bias=False))
    lin.onednn_products(net)
    lin.onednn_products(net)                       # twice is once
    x = torch.randn(7, 64)
    with torch.inference_mode():
        before = net(x)
    torch.testing.assert_close(before, _plain(net, x), rtol=1e-5, atol=1e-5)
    # training: autograd runs the module's own products, and the step changes the weights in place
    opt = torch.optim.SGD(net.parameters(), lr=0.5)
    loss = net(x).square().mean()
    loss.backward()
    assert net[0].weight.grad is not None and net[0].weight.grad.abs().sum() > 0
    opt.step()
    with torch.inference_mode():
        after = net(x)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, _plain(net, x), rtol=1e-5, atol=1e-5)   # repacked, not stale


def _plain(net, x):
    with torch.no_grad():
        h = F.silu(F.linear(x, net[0].weight, net[0].bias))
        return F.linear(h, net[2].weight)


# --- bf16: every row the bits it gets alone (kernels/bf16.cpp) ------------------------------------

def _amx_like(real):
    """torch's bf16 product as on a CPU where oneDNN takes another kernel for wide products (a
    Xeon with AMX took its AMX tiles at 33 rows, issue 40): from 5 rows on, the sum in two
    halves, each rounded to bf16 (another blocking of the sum)."""
    def product(x, w, b=None):
        if x.dtype != torch.bfloat16 or x.reshape(-1, x.shape[-1]).shape[0] < 5:
            return real(x, w, b)
        k = w.shape[1] // 2
        y = real(x[..., k:], w[:, k:]).float() + real(x[..., :k], w[:, :k]).float()
        return (y if b is None else y + b.float()).to(x.dtype)
    return product


@pytest.mark.parametrize("k", [576, 1536])
def test_bf16_rows_keep_their_bits_where_torchs_product_depends_on_the_row_count(k, monkeypatch):
    """With torch's bf16 product swapped for one whose bits change with the row count (as oneDNN's
    on AVX-512 and AMX CPUs), ``linear.linear``'s rows still equal its one-row products (before
    issue 40 it called ``F.linear`` and failed this at 33 rows on a Xeon with AMX)."""
    torch.manual_seed(0)
    w, b = torch.randn(192, k).bfloat16(), torch.randn(192).bfloat16()
    x = torch.randn(33, k).bfloat16()
    fake = _amx_like(F.linear)
    assert not torch.equal(fake(x, w, b)[:1], F.linear(x[:1], w, b))     # the stand-in does change bits
    monkeypatch.setattr(lin.F, "linear", fake)
    for path in ("kernel", "rows"):
        if path == "kernel" and lin.bf16_path() != "kernel":
            continue
        monkeypatch.setattr(lin, "bf16_path", lambda p=path: p)
        singles = torch.cat([lin.linear(x[i:i + 1], w, b) for i in range(33)])
        for m in (2, 5, 7, 17, 33):
            assert torch.equal(lin.linear(x[:m], w, b), singles[:m]), (path, m)


needs_kernels = pytest.mark.skipif(lin.bf16_path() != "kernel", reason="the C++ kernels do not build here")


@needs_kernels
@pytest.mark.parametrize("k", [17, 64, 576, 1537])
def test_bf16_kernel_is_one_chain_per_output(k):
    """kernels/bf16.cpp: rows 1-33 == one-row products, 1 and 2 threads, AVX2 == scalar, with and
    without a bias, 3-D input; within bf16 rounding of the float64 product."""
    torch.manual_seed(k)
    w, b = torch.randn(50, k).bfloat16(), torch.randn(50).bfloat16()
    x = torch.randn(33, k).bfloat16()
    threads = torch.get_num_threads()
    try:
        for bias in (None, b):
            singles = torch.cat([lin.linear(x[i:i + 1], w, bias) for i in range(33)])
            for t in (1, 2):
                torch.set_num_threads(t)
                for m in range(1, 34):
                    assert torch.equal(lin.linear(x[:m], w, bias), singles[:m]), (t, m)
            for isa in range(int(torch.ops.dominotree_bf16.best_isa()) + 1):
                assert torch.equal(torch.ops.dominotree_bf16.linear(x, w, bias, isa), singles), isa
            assert torch.equal(lin.linear(x.view(3, 11, k), w, bias), singles.view(3, 11, 50))
            ref = F.linear(x.double(), w.double(), None if bias is None else bias.double())
            assert ((singles.double() - ref).abs() <= ref.abs() * 2 ** -8 + 1e-3 * k ** 0.5).all()
    finally:
        torch.set_num_threads(threads)


@needs_kernels
def test_bf16_kernel_refuses_bad_inputs_and_leaves_autograd_to_torch():
    w = torch.randn(8, 32).bfloat16()
    with pytest.raises(RuntimeError, match="in = x's columns"):
        torch.ops.dominotree_bf16.linear(torch.randn(2, 31).bfloat16(), w, None, -1)
    with pytest.raises(RuntimeError, match="instruction set"):
        torch.ops.dominotree_bf16.linear(torch.randn(2, 32).bfloat16(), w, None, 9)
    x = torch.randn(3, 32).bfloat16().requires_grad_()
    y = lin.linear(x, w)
    y.float().sum().backward()
    assert x.grad is not None and torch.equal(y, F.linear(x, w))


def test_a_bf16_verify_forward_never_runs_torchs_bf16_product(monkeypatch):
    """The fast forward's bf16 products of several rows all go through ``linear.linear``'s
    row-independent path: torch's bf16 ``F.linear`` (oneDNN's row-count-dependent kernels on
    AVX-512 / AMX CPUs) is never called with more than one row."""
    from dominotree.presets import load_target, preset_paths
    tgt = load_target(preset_paths("random-tiny")["target"], torch.bfloat16, "cpu", forward="fast", weights="bf16")
    assert tgt.forward_kind == "fast"
    real = F.linear
    wide = []

    def watch(x, w, b=None):
        if x.dtype == torch.bfloat16 and x.reshape(-1, x.shape[-1]).shape[0] > 1:
            wide.append(tuple(x.shape))
        return real(x, w, b)
    monkeypatch.setattr(lin.F, "linear", watch)
    cache = tgt.new_cache()
    with torch.inference_mode():
        tgt.forward(torch.tensor([[5, 6, 7, 8]]), torch.arange(4)[None], cache)
        wide.clear()                              # the prefill is every method's own (not a verify)
        tgt.forward(torch.tensor([[9, 10, 11, 12, 13]]), torch.arange(4, 9)[None], cache)
    assert wide == []
