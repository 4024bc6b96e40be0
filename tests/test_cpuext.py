"""The fused float32 layer steps (kernels/layer.cpp) against the torch ops they replace, and the
fast forward with and without them."""
import pytest
import torch
import torch.nn.functional as F

from dominotree.models import cpuext
from dominotree.models.fast import FastModel, _rms, _rotate_half
from dominotree.models.random_tiny import ensure_random_tiny
from dominotree.presets import load_target

WHY = cpuext.available(verbose=False)
pytestmark = pytest.mark.skipif(WHY is not None, reason=str(WHY))
ops = torch.ops.dominotree_layer


def test_rms_norm_matches_torch():
    torch.manual_seed(0)
    x, w = torch.randn(5, 3, 576) * 3, torch.randn(576)
    assert torch.allclose(ops.rms_norm(x, w, 1e-5), _rms(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="sizes differ"):
        ops.rms_norm(x, torch.randn(100), 1e-5)
    with pytest.raises(RuntimeError, match="float32"):
        ops.rms_norm(x.bfloat16(), w, 1e-5)


def test_drafter_norm_is_fused_only_for_inference(monkeypatch):
    """The drafters' RMSNorm runs the fused op when decoding (no autograd), the torch ops when
    training; both agree to float32 rounding."""
    from dominotree.models.drafter import RMSNorm
    norm = RMSNorm(64, 1e-5)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(64))
    x = torch.randn(3, 5, 64).transpose(0, 1)          # not contiguous: the op gets a copy
    calls = []

    class Spy:
        def rms_norm(self, *a):
            calls.append(a[0].shape)
            return ops.rms_norm(*a)
    trained = norm(x)
    assert trained.requires_grad and not calls
    monkeypatch.setattr(torch.ops, "dominotree_layer", Spy())
    with torch.inference_mode():
        decoded = norm(x)
    assert calls == [x.shape]
    assert torch.allclose(decoded, trained.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norms", [False, True])
def test_rope_kv_matches_torch_and_writes_the_cache(norms):
    torch.manual_seed(1)
    n, nh, nkv, hd, start, cap = 5, 6, 2, 16, 7, 20
    qkv = torch.randn(n, (nh + 2 * nkv) * hd)
    cos, sin = torch.randn(n, hd), torch.randn(n, hd)
    qn, kn = (torch.randn(hd), torch.randn(hd)) if norms else (None, None)
    kv = torch.zeros(2, nkv, cap, hd)
    q = ops.rope_kv(qkv, cos, sin, kv, start, nh, nkv, qn, kn, 1e-6)
    rq, rk, rv = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
    rq, rk, rv = rq.view(n, nh, hd), rk.view(n, nkv, hd), rv.view(n, nkv, hd)
    if norms:
        rq, rk = _rms(rq, qn, 1e-6), _rms(rk, kn, 1e-6)
    rq, rk, rv = rq.transpose(0, 1), rk.transpose(0, 1), rv.transpose(0, 1)
    rq = rq * cos[None] + _rotate_half(rq) * sin[None]
    rk = rk * cos[None] + _rotate_half(rk) * sin[None]
    assert torch.allclose(q, rq, rtol=1e-5, atol=1e-6)
    assert torch.allclose(kv[0, :, start:start + n], rk, rtol=1e-5, atol=1e-6)
    assert torch.equal(kv[1, :, start:start + n], rv)
    assert not kv[:, :, :start].any() and not kv[:, :, start + n:].any()      # nothing else written
    with pytest.raises(RuntimeError, match="beyond the cache"):
        ops.rope_kv(qkv, cos, sin, kv, cap - 2, nh, nkv, qn, kn, 1e-6)
    with pytest.raises(RuntimeError, match="wrong width"):
        ops.rope_kv(qkv[:, :-hd].contiguous(), cos, sin, kv, 0, nh, nkv, qn, kn, 1e-6)


def test_silu_mul_matches_torch():
    torch.manual_seed(2)
    gu = torch.randn(4, 2 * 1536) * 4
    g, u = gu.chunk(2, dim=-1)
    assert torch.allclose(ops.silu_mul(gu), F.silu(g) * u, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("weights", ["float32", "int4"])
def test_fast_forward_with_and_without_the_fused_steps(weights):
    """Same logits to float32 rounding (Qwen3's q/k norms included)."""
    tgt = load_target(ensure_random_tiny()["target"], torch.float32, weights=weights)
    fast = tgt.fast
    assert fast.kernels
    ids = torch.randint(5, 200, (1, 12))
    pos = torch.arange(12)[None]
    out = []
    for k in (True, False):
        fast.kernels = k
        cache = fast.new_cache()
        out.append(fast.forward(ids, pos, cache)[0])
    fast.kernels = True
    assert torch.allclose(out[0], out[1], rtol=1e-4, atol=1e-4)


def test_fast_model_uses_them_only_for_float32_on_cpu():
    tgt = load_target(ensure_random_tiny()["target"], torch.float32, weights="bf16")
    assert tgt.fast is not None and not tgt.fast.kernels
    assert isinstance(load_target(ensure_random_tiny()["target"], torch.float32).fast, FastModel)


@pytest.mark.parametrize("weights", ["int4", "int4-q8"])
def test_whole_q4_layer_op_gives_the_python_composition_bit_for_bit(monkeypatch, weights):
    """``q4_block`` runs FastModel._block's steps in C++, and ``q4_stack`` runs every layer's
    ``q4_block`` in one call: the same bits as the Python composition (logits, tapped features and
    the cache), causal prefill, tree mask and one-row steps alike (random-tiny is Qwen3: q/k norms
    included)."""
    from dominotree.models import fast as fast_mod
    from dominotree.tree import Tree, position_ids, tree_mask
    TREE = Tree([7, 11, 12, 13, 14, 15], [-1, 0, 0, 1, 1, 3], [0, 1, 1, 2, 2, 3])
    PREFIX = [5, 9, 33, 100, 7, 8, 200, 3, 44]
    tgt = load_target(ensure_random_tiny()["target"], torch.float32, weights=weights)
    fast = tgt.fast
    assert all(layer.q4 is not None for layer in fast.layers)
    saved = [layer.q4 for layer in fast.layers]
    taps = (0, len(fast.layers) - 1)
    runs = []
    for mode in ("stack", "layer", "python"):
        monkeypatch.setattr(fast_mod, "STACK", mode == "stack")
        for layer, q4 in zip(fast.layers, saved):
            layer.q4 = None if mode == "python" else q4
        cache = fast.new_cache()
        a, fa = fast.forward(torch.tensor([PREFIX]), torch.arange(len(PREFIX))[None], cache, taps=taps)
        start = len(PREFIX)
        b, fb = fast.forward(torch.tensor([TREE.tokens]), position_ids(TREE, start), cache,
                             mask=tree_mask(TREE, start, tgt.dtype), taps=taps)
        c = fast.forward(torch.tensor([[7]]), torch.tensor([[start + len(TREE.tokens)]]), cache)[0]
        runs.append((a, fa, b, fb, c, cache.kv[:, :, :, :cache.length].clone()))
    assert fast._stack is not None                      # the stack ran
    for other in runs[1:]:
        for x, y in zip(runs[0], other):
            assert torch.equal(x, y)


def test_a_build_lock_left_by_a_killed_build_is_removed(tmp_path, capsys):
    """torch's FileBaton waits forever on a lock a killed build left; an old one is removed, a
    fresh one (a build running now) is left alone."""
    import os
    import time
    from dominotree.models.cpuext import STALE_BATON_S, clear_stale_baton
    lock = tmp_path / "lock"
    assert not clear_stale_baton(tmp_path)
    lock.touch()
    assert not clear_stale_baton(tmp_path) and lock.exists()
    old = time.time() - STALE_BATON_S - 5
    os.utime(lock, (old, old))
    assert clear_stale_baton(tmp_path) and not lock.exists()
    assert "did not finish" in capsys.readouterr().err
