"""The dense products of models/linear.py: oneDNN on reordered float32 weights agrees with
``F.linear`` to float32 rounding, the switch and the fallbacks give ``F.linear``'s own bits, and
a drafter's reordered weights follow a training step.

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
    assert wb.packed is None and torch.equal(wb(x.bfloat16()), F.linear(x.bfloat16(), w.bfloat16()))


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
