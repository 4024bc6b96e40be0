"""Products with 8-bit activation blocks (models/quantcpu.py Q4Q8Linear / Q8Q8Linear,
kernels/q8act.cpp) and the row-independent attention (kernels/attention.cpp): the arithmetic they
promise, bit for bit (``==``) across rows, threads and instruction sets, and clear errors."""
import pytest
import torch
import torch.nn.functional as F

from dominotree.models import quantcpu
from dominotree.models.quant import GROUP, quantize_q4_1, quantize_q8_0

WHY = quantcpu.available(verbose=False)
pytestmark = pytest.mark.skipif(WHY is not None, reason=str(WHY))


def _q8_rows(x: torch.Tensor):
    """The kernel's 8-bit blocks of x: d = max|x| / 127, q = round(x / d) (ties to even)."""
    m, k = x.shape
    xb = x.view(m, k // GROUP, GROUP)
    d = xb.abs().amax(-1) / 127
    inv = torch.where(d > 0, 1.0 / d, torch.zeros_like(d))
    q = torch.round(xb * inv[..., None]).clamp(-127, 127)
    return q, d


def _reference(x, q_w, d_w, m_w):
    """sum_b (dw * d) * sum(qw q) + mw * d * sum(q), in float64 from the same integers."""
    q, d = _q8_rows(x)
    n = q_w.shape[0]
    qw = q_w.double().view(n, -1, GROUP)
    isum = torch.einsum("mbi,nbi->mnb", q.double(), qw)
    s = (d * q.sum(-1)).double()                         # [m, b]
    return (isum * (d_w.double()[None] * d.double()[:, None]) + m_w.double()[None] * s[:, None]).sum(-1)


def _lins(n: int, k: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) * 0.05
    q4 = quantize_q4_1(w)
    q8 = quantize_q8_0(w)
    return (quantcpu.Q4Q8Linear(q4), (q4.q, q4.d, q4.m)), (quantcpu.Q8Q8Linear(*q8), (q8[0], q8[1], torch.zeros_like(q8[1])))


@pytest.mark.parametrize("n", [1, 5, 16, 100])
def test_products_are_the_integer_dot_products_of_the_blocks(n):
    x = torch.randn(17, 96) * 2
    for lin, (qw, dw, mw) in _lins(n, 96):
        ref = _reference(x, qw, dw, mw)
        got = lin(x)
        assert got.shape == (17, n)
        assert (got.double() - ref).abs().max() <= 1e-5 * ref.abs().max(), type(lin).__name__


def test_activation_blocks_are_the_rounded_codes_exactly():
    """Each row's 8-bit blocks are exactly d = max|x| / 127, q = round(x / d) with ties to even
    (read back through an identity Q8_0 weight with scale 1: output i is float(q_i) * d), for every
    row count and instruction set; exact ties included."""
    k = 96
    eye = quantcpu.Q8Q8Linear(torch.eye(k, dtype=torch.int8), torch.ones(k, k // GROUP))
    x = torch.randn(21, k, generator=torch.Generator().manual_seed(3)) * 3
    x[0, :GROUP] = torch.tensor([127.0, -0.5, 0.5, 1.5, 2.5, -2.5, -3.5] + [0.25 * i for i in range(25)])  # d = 1: ties
    x[1, GROUP:2 * GROUP] = 0.0                                                                         # d = 0
    q, d = _q8_rows(x)
    want = (q * d[..., None]).view(x.shape)
    for isa in range(quantcpu.best_isa() + 1):
        for m in (1, 2, 5, 21):
            assert torch.equal(eye(x[:m], isa=isa), want[:m]), (isa, m)
    assert torch.equal(q[0, 0, :7], torch.tensor([127.0, -0.0, 0.0, 2.0, 2.0, -2.0, -4.0]))


def test_close_to_the_float_activations_product():
    """8-bit activation blocks: within about 1 % of the float32-activation product (llama.cpp's trade)."""
    x = torch.randn(9, 192)
    for lin, ref in ((quantcpu.Q4Q8Linear(quantize_q4_1(w := torch.randn(64, 192) * 0.05)), quantcpu.Q4Linear(quantize_q4_1(w))),
                     (quantcpu.Q8Q8Linear(*quantize_q8_0(w)), quantcpu.Q8Linear(*quantize_q8_0(w)))):
        exact = ref(x)
        assert (lin(x) - exact).abs().max() <= 0.02 * exact.abs().max()


@pytest.mark.parametrize("n", [5, 96, 1000])
def test_a_row_does_not_depend_on_rows_threads_or_instruction_set(n):
    """Bit for bit: each row of a 1..33-row product equals its one-row product, at 1 and 2 threads,
    on every instruction set this CPU has (scalar, AVX2, AVX-512 VNNI)."""
    x = torch.randn(33, 192)
    threads = torch.get_num_threads()
    try:
        for lin, _ in _lins(n, 192, seed=3):
            outs = []
            for t in (1, 2):
                torch.set_num_threads(t)
                singles = torch.cat([lin(x[i:i + 1]) for i in range(33)])
                for m in (2, 3, 4, 5, 8, 9, 17, 33):
                    assert torch.equal(lin(x[:m]), singles[:m]), (type(lin).__name__, t, m)
                outs.append(singles)
            assert torch.equal(outs[0], outs[1])
            for isa in range(quantcpu.best_isa() + 1):
                assert torch.equal(lin(x, isa=isa), outs[0]), (type(lin).__name__, isa)
    finally:
        torch.set_num_threads(threads)


def test_extreme_codes_and_activations_do_not_overflow():
    """Q8_0 codes at -128 and 127 against activations at +-127 on every instruction set (the AVX2
    path moves the weight's sign onto x; its int16 pairs must not saturate), and a zero block."""
    codes = torch.full((16, 64), -128, dtype=torch.int8)
    codes[::2] = 127
    lin = quantcpu.Q8Q8Linear(codes, torch.full((16, 2), 0.01))
    x = torch.tensor([1.0, -1.0]).repeat(32)[None].repeat(3, 1)
    x[1] = 1.0
    x[2, :32] = 0.0
    ref = x.double() @ lin.weight().double().T
    for isa in range(quantcpu.best_isa() + 1):
        assert torch.allclose(lin(x, isa=isa).double(), ref, rtol=1e-6, atol=1e-6), isa


def test_rows_of_the_8_bit_head_are_its_columns():
    codes = torch.randint(-128, 128, (203, 96), dtype=torch.int8)
    lin = quantcpu.Q8Q8Linear(codes, torch.rand(203, 3))
    ids = torch.tensor([0, 5, 6, 150, 202])
    x = torch.randn(4, 96)
    assert lin.rows(None) is lin
    assert torch.equal(lin.rows(ids)(x), lin(x)[:, ids])
    assert torch.equal(lin.weight(), quantcpu.Q8Linear(codes, lin.q8.d).weight())


def test_bad_inputs_are_clear_errors():
    (lin, _), _ = _lins(16, 64)
    with pytest.raises(TypeError, match="float32"):
        lin(torch.randn(2, 64).bfloat16())
    with pytest.raises(RuntimeError, match="codes do not match"):
        torch.ops.dominotree_q8act.q4q8_linear(torch.randn(2, 96), lin.codes, lin.dm, 16, -1)
    with pytest.raises(RuntimeError, match="instruction set"):
        lin(torch.randn(2, 64), isa=7)


# --- the AMX-INT8 path (kernels/q8amx.cpp) -------------------------------------------------------

AMX_EMULATED, AMX = 4, 3
AMX_WHY = None if WHY is not None else quantcpu.amx_why()
needs_amx = pytest.mark.skipif(AMX_WHY is not None, reason=f"the AMX-INT8 path cannot run here: {AMX_WHY}")


def _amx_cases():
    for n, k in ((5, 96), (100, 192), (33, 64), (16, 32), (1000, 576)):
        yield n, k, _lins(n, k, seed=n + k)


def test_the_amx_layouts_give_every_row_the_same_bits_emulated():
    """The AMX path with its tile instructions and float part emulated in C++ (runs on any CPU):
    the activations as A tiles (q + 128), the weights as B tiles (4-bit codes unpacked, 8-bit
    codes signed) with their sums taken off, the 16-row tiles and the partial last one: each
    row's output == the other paths' (rows 1-64, odd shapes, Q4_1 and Q8_0)."""
    x = torch.randn(64, 576) * 1.5
    for n, k, lins in _amx_cases():
        for lin, _ in lins:
            ref = lin(x[:, :k].contiguous(), isa=0)
            assert torch.equal(lin(x[:, :k].contiguous()), ref)
            for m in range(1, 65):
                assert torch.equal(lin(x[:m, :k].contiguous(), isa=AMX_EMULATED), ref[:m]), (type(lin).__name__, n, k, m)


@needs_amx
def test_amx_equals_the_other_paths_bit_for_bit():
    """On the hardware: every row count 1-64 on AMX alone (isa 3), and the automatic split (whole
    16-row tiles on AMX, the rest on VNNI) at several cut-offs, == the VNNI, AVX2 and scalar paths."""
    x = torch.randn(64, 576) * 1.5
    before = quantcpu.amx_min_rows()
    try:
        for n, k, lins in _amx_cases():
            for lin, _ in lins:
                xk = x[:, :k].contiguous()
                ref = lin(xk, isa=0)
                for isa in range(quantcpu.best_isa() + 1):
                    assert torch.equal(lin(xk, isa=isa), ref), isa
                for m in range(1, 65):
                    assert torch.equal(lin(xk[:m], isa=AMX), ref[:m]), (type(lin).__name__, n, k, m)
                for cut in (1, 5, 17):
                    assert quantcpu.set_amx(cut) is None and quantcpu.amx_min_rows() == cut
                    for m in (1, 4, 5, 16, 17, 21, 33, 64):
                        assert torch.equal(lin(xk[:m]), ref[:m]), (cut, m)
    finally:
        quantcpu.set_amx(before)


@needs_amx
def test_amx_rows_do_not_depend_on_threads():
    x = torch.randn(40, 192)
    threads = torch.get_num_threads()
    try:
        for lin, _ in _lins(300, 192, seed=7):
            outs = []
            for t in (1, 2):
                torch.set_num_threads(t)
                outs.append(lin(x, isa=AMX))
            assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], lin(x, isa=0))
    finally:
        torch.set_num_threads(threads)


def test_amx_is_on_where_the_cpu_runs_it_and_says_why_it_cannot(monkeypatch):
    """On by default where the CPU runs it (``DOMINOTREE_AMX`` unset or ``auto``, from
    ``AMX_MIN_ROWS`` rows), off with ``DOMINOTREE_AMX=0``; where the CPU has no AMX, turning it on
    says why and changes nothing; a bad setting is a clear error that changes nothing."""
    import os

    from dominotree.models import cpuext
    before = quantcpu.amx_min_rows()
    if os.environ.get("DOMINOTREE_AMX", "auto") == "0" or AMX_WHY is not None:
        assert before == 0
    elif "DOMINOTREE_AMX_MIN_ROWS" not in os.environ:
        assert before == cpuext.AMX_MIN_ROWS == 5
    try:
        if AMX_WHY is not None:
            assert quantcpu.set_amx(5) == AMX_WHY and quantcpu.amx_min_rows() == 0
            with pytest.raises(RuntimeError, match="instruction set 3"):
                _lins(16, 64)[0][0](torch.randn(2, 64), isa=AMX)
        assert quantcpu.set_amx(0) is None and quantcpu.amx_min_rows() == 0
        with pytest.raises(ValueError, match="min_rows"):
            quantcpu.set_amx(-1)
        for env, want in (({"DOMINOTREE_AMX": "auto", "DOMINOTREE_AMX_MIN_ROWS": "7"}, 7),
                          ({"DOMINOTREE_AMX": "0"}, 0), ({"DOMINOTREE_AMX": "1", "DOMINOTREE_AMX_MIN_ROWS": "3"}, 3)):
            monkeypatch.delenv("DOMINOTREE_AMX_MIN_ROWS", raising=False)
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            cpuext._amx_from_env()
            assert quantcpu.amx_min_rows() == (0 if AMX_WHY is not None else want), env
        for env in ({"DOMINOTREE_AMX": "yes"}, {"DOMINOTREE_AMX": "1", "DOMINOTREE_AMX_MIN_ROWS": "0"}):
            for k, v in env.items():
                monkeypatch.setenv(k, v)
            now = quantcpu.amx_min_rows()
            with pytest.raises(ValueError, match="DOMINOTREE_AMX"):
                cpuext._amx_from_env()
            assert quantcpu.amx_min_rows() == now
    finally:
        quantcpu.set_amx(before)


# --- attention ---------------------------------------------------------------------------------

def _qkv(nh=6, nkv=2, hd=40, cap=64, n=5, start=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(nh, n, hd, generator=g)
    kv = torch.randn(2, nkv, cap, hd, generator=g)
    return q, kv


def _sdpa(q, kv, start, mask, causal):
    n, L = q.shape[1], start + q.shape[1]
    k, v = kv[0, :, :L], kv[1, :, :L]
    o = F.scaled_dot_product_attention(q[None].double(), k[None].double(), v[None].double(), attn_mask=mask,
                                       is_causal=causal, enable_gqa=q.shape[0] != kv.shape[1])
    return o[0].transpose(0, 1).reshape(n, -1)


def test_attention_matches_sdpa_for_each_mask_kind():
    q, kv = _qkv()
    n, start = 5, 20
    L = start + n
    vis = torch.rand(n, L, generator=torch.Generator().manual_seed(1)) > 0.4
    vis[:, 0] = True
    additive = torch.zeros(1, 1, n, L).masked_fill_(~vis, torch.finfo(torch.float32).min)
    causal_vis = torch.arange(L)[None] <= torch.arange(n)[:, None] + start
    att = torch.ops.dominotree_attn.attention
    cases = [(None, False, None), (vis[None, None], False, vis[None, None]), (additive, False, additive.double()),
             (causal_vis[None, None], False, causal_vis[None, None])]
    for mask, causal, ref_mask in cases:
        got = att(q, kv, start, mask, causal)
        assert torch.allclose(got.double(), _sdpa(q, kv, start, ref_mask, causal), atol=1e-5)
    q0, kv0 = _qkv(n=7, start=0)
    assert torch.allclose(att(q0, kv0, 0, None, True).double(), _sdpa(q0, kv0, 0, None, True), atol=1e-5)


def test_attention_row_is_the_one_row_step_bit_for_bit():
    """A verify row that sees the prefix and its ancestors (hidden keys between them) gets the
    same bits as a one-row step over the prefix and those ancestors, stored contiguously."""
    q, kv = _qkv(n=6, start=30, seed=4)
    start, n = 30, 6
    ancestors = [0, 2, 5]                         # row 5's path in the tree: positions start + 0, 2, 5
    mask = torch.zeros(1, 1, n, start + n)
    hidden = [j for j in range(n) if j not in ancestors]
    mask[0, 0, 5, [start + j for j in hidden]] = torch.finfo(torch.float32).min
    att = torch.ops.dominotree_attn.attention
    tree_row = att(q, kv, start, mask, False)[5]
    compact = kv.clone()
    compact[:, :, start:start + len(ancestors)] = kv[:, :, [start + j for j in ancestors]]
    step = att(q[:, 5:6].contiguous(), compact, start + len(ancestors) - 1, None, False)[0]
    assert torch.equal(tree_row, step)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(att(q, kv, start, mask, False)[5], tree_row)
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("hd", [64, 128])
def test_attention_fast_path_is_the_one_key_chain_bit_for_bit(dtype, hd):
    """The fast path (eight keys' scores at a time, 64 outputs of the value sum held in registers;
    head sizes that are multiples of 64) gives every row the bits of the plain chain that takes one
    key at a time (``attention_reference``), for every mask kind and key count."""
    att, ref = torch.ops.dominotree_attn.attention, torch.ops.dominotree_attn.attention_reference
    for n, start in [(1, 0), (1, 7), (3, 13), (9, 41), (17, 256), (33, 100)]:
        q, kv = _qkv(nh=9, nkv=3, hd=hd, cap=start + n + 3, n=n, start=start, seed=n + start)
        q, kv = q.to(dtype), kv.to(dtype)
        L = start + n
        vis = torch.rand(n, L, generator=torch.Generator().manual_seed(L)) > 0.3
        vis[:, 0] = True
        additive = torch.zeros(1, 1, n, L).masked_fill_(~vis, torch.finfo(torch.float32).min)
        additive[0, 0, :, L - 1] = 0.25               # a finite mask value is added to the score
        for mask, causal in [(None, True), (None, False), (vis[None, None], False), (additive, False)]:
            got = att(q, kv, start, mask, causal)
            assert torch.equal(got, ref(q, kv, start, mask, causal)), (n, start, causal, mask is None)
            assert torch.isfinite(got.float()).all()


def test_q8_products_route_a_linear_through_the_8_bit_activation_kernel():
    """``q8_products(module, Q8Q8Linear)`` (the drafters next to an int4-q8 target): a Linear's
    product is ``Q8Q8Linear`` of its weight's 8-bit blocks, plus its bias."""
    g = torch.Generator().manual_seed(6)
    lin = torch.nn.Linear(64, 40)
    with torch.no_grad():
        lin.weight.copy_(torch.randn(40, 64, generator=g))
    quantcpu.q8_products(lin, quantcpu.Q8Q8Linear)
    x = torch.randn(5, 64, generator=g)
    with torch.inference_mode():
        assert torch.equal(lin(x), quantcpu.Q8Q8Linear(*quantize_q8_0(lin.weight))(x) + lin.bias)
