"""The drafter's backbone as one C++ op per layer (``models/draftcpu.py``, ``kernels/draftlayer.cpp``):
where it runs (a float32 drafter with ``Q8Q8Linear`` products, CPU, autograd off) it gives the
Python path's bits, output and ``DraftCache`` alike, round after round; everywhere else the Python
path runs; decoding with it stays lossless.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_draftlayer.py
"""
import pytest
import torch

from dominotree.models import cpuext, draftcpu
from dominotree.models.drafter import DraftCache, Drafter, DrafterConfig

pytestmark = pytest.mark.skipif(cpuext.available() is not None, reason="the C++ kernels are not built here")

# GQA (4 query heads on 2 kv heads), widths that are multiples of 32 (the 8-bit blocks)
CFG = DrafterConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=32, vocab_size=320, block_size=16, num_target_layers=6,
                    mask_token_id=319, target_layer_ids=(1, 3, 4), rope_theta=10_000.0)
# (new context rows, block rows) per round: a prompt-sized first round, then 1..17 block rows
ROUNDS = [(37, 4), (3, 1), (1, 17), (5, 3), (2, 16), (4, 7), (1, 2), (6, 5)]


def routed_drafter(seed=0) -> Drafter:
    from dominotree.models.quantcpu import Q8Q8Linear, q8_products
    torch.manual_seed(seed)
    with torch.inference_mode(False):      # trainable weights, as a loaded drafter's
        d = Drafter(CFG).eval()
        with torch.no_grad():
            for m in d.modules():          # norms away from 1, so a swapped norm weight would show
                if type(m).__name__ == "RMSNorm":
                    m.weight.uniform_(0.5, 1.5)
    q8_products(d.fc, Q8Q8Linear)
    q8_products(d.layers, Q8Q8Linear)      # as presets.load_pair next to an int4-q8 target
    return d


def round_inputs(g, c, n):
    feats = torch.randn(1, c, len(CFG.target_layer_ids) * CFG.hidden_size, generator=g)
    noise = torch.randn(1, n, CFG.hidden_size, generator=g) * 0.5
    return feats, noise


def run(d, fused: bool, feats, noise, cp, bp, cache, monkeypatch):
    monkeypatch.setattr(draftcpu, "FUSED", fused)
    assert (draftcpu.layer_weights(d, feats, noise, None) is not None) == fused
    return d(feats, noise, cp, bp, cache=cache)


def assert_same_cache(a: DraftCache, b: DraftCache):
    assert a.length == b.length
    assert len(a.kv) == len(b.kv) == CFG.num_hidden_layers
    for (ka, va), (kb, vb) in zip(a.kv, b.kv):
        assert ka.shape == kb.shape == (1, CFG.num_key_value_heads, a.length, CFG.head_dim)
        assert torch.equal(ka, kb) and torch.equal(va, vb)


def test_fused_backbone_equals_python_round_after_round(monkeypatch):
    d = routed_drafter()
    with torch.inference_mode():
        _rounds_equal(d, monkeypatch)


def _rounds_equal(d, monkeypatch):
    g = torch.Generator().manual_seed(1)
    py, fu = DraftCache(), DraftCache()
    start = 0
    for c, n in ROUNDS:
        feats, noise = round_inputs(g, c, n)
        cp, bp = torch.arange(start, start + c), torch.arange(start + c, start + c + n)
        a = run(d, False, feats, noise, cp, bp, py, monkeypatch)
        b = run(d, True, feats, noise, cp, bp, fu, monkeypatch)
        assert a.shape == b.shape == (1, n, CFG.hidden_size)
        assert torch.equal(a, b), (c, n, (a - b).abs().max())
        assert fu.buf is not None and fu.length == start + c        # the block never committed
        assert_same_cache(py, fu)
        start += c
    assert fu.buf.shape[3] >= start


@pytest.mark.parametrize("c,n", [(1, 1), (9, 16), (300, 17)])
@torch.inference_mode()
def test_without_a_cache_and_at_growth(monkeypatch, c, n):
    d = routed_drafter(seed=2)
    g = torch.Generator().manual_seed(c)
    feats, noise = round_inputs(g, c, n)
    cp, bp = torch.arange(c), torch.arange(c, c + n)     # 300 + 17 > the first capacity (256)
    a = run(d, False, feats, noise, cp, bp, None, monkeypatch)
    assert torch.equal(a, run(d, True, feats, noise, cp, bp, None, monkeypatch))
    py, fu = DraftCache(), DraftCache()
    assert torch.equal(run(d, False, feats, noise, cp, bp, py, monkeypatch),
                       run(d, True, feats, noise, cp, bp, fu, monkeypatch))
    assert_same_cache(py, fu)


@torch.inference_mode()
def test_switching_paths_mid_decoding_keeps_the_cache(monkeypatch):
    """A cache filled by the Python path continues in the fused one (copied into its buffer once),
    and back; either way the outputs and the committed context equal the Python path's."""
    d = routed_drafter(seed=3)
    g = torch.Generator().manual_seed(4)
    py, mixed = DraftCache(), DraftCache()
    start = 0
    for i, (c, n) in enumerate(ROUNDS):
        feats, noise = round_inputs(g, c, n)
        cp, bp = torch.arange(start, start + c), torch.arange(start + c, start + c + n)
        a = run(d, False, feats, noise, cp, bp, py, monkeypatch)
        b = run(d, i % 3 == 1, feats, noise, cp, bp, mixed, monkeypatch)
        assert torch.equal(a, b)
        assert_same_cache(py, mixed)
        start += c


def test_weights_packed_again_after_a_change(monkeypatch):
    d = routed_drafter(seed=5)
    g = torch.Generator().manual_seed(6)
    feats, noise = round_inputs(g, 5, 4)
    cp, bp = torch.arange(5), torch.arange(5, 9)
    with torch.no_grad():
        before = run(d, True, feats, noise, cp, bp, None, monkeypatch)
        d.layers[1].mlp.down_proj.weight.mul_(0.5)      # a training step, in place
        d.layers[0].self_attn.k_norm.weight.add_(0.25)
        after = run(d, True, feats, noise, cp, bp, None, monkeypatch)
        assert not torch.equal(before, after)
        assert torch.equal(after, run(d, False, feats, noise, cp, bp, None, monkeypatch))


def test_python_path_where_the_fused_one_does_not_apply(monkeypatch):
    d = routed_drafter(seed=7)
    g = torch.Generator().manual_seed(8)
    feats, noise = round_inputs(g, 3, 4)
    cp, bp = torch.arange(3), torch.arange(3, 7)

    def boom(*a, **k):
        raise AssertionError("the fused path ran")

    monkeypatch.setattr(draftcpu, "forward", boom)
    out = d(feats, noise, cp, bp, cache=DraftCache())     # autograd on: training's path
    assert out.requires_grad
    with torch.no_grad():
        mask = torch.zeros(1, 1, 4, 7)
        d(feats, noise, cp, bp, attn_mask=mask)              # a mask (training's layout)
        d(feats.expand(2, -1, -1), noise.expand(2, -1, -1), cp, bp)    # batch 2
        assert draftcpu.fused_weights(Drafter(CFG).eval()) is None     # products not routed to 8-bit blocks
        from dominotree.models.linear import onednn_products
        assert draftcpu.fused_weights(onednn_products(Drafter(CFG).eval())) is None
        bf = routed_drafter(seed=7).to(torch.bfloat16)
        assert draftcpu.layer_weights(bf, feats.bfloat16(), noise.bfloat16(), None) is None
        bf(feats.bfloat16(), noise.bfloat16(), cp, bp)


@pytest.mark.slow   # the embedded SmolLM2 with its default int4-q8 weights
def test_embedded_pair_decodes_as_ar_with_the_fused_drafter(monkeypatch):
    from dominotree.config import DecodeConfig, TreeConfig
    from dominotree.decode import Decoder
    from dominotree.presets import load_pair
    pair = load_pair("smollm2")
    assert pair.target.weights == "int4-q8"
    dec = Decoder(pair)
    calls = []
    real = draftcpu.forward
    monkeypatch.setattr(draftcpu, "forward", lambda *a, **k: calls.append(1) or real(*a, **k))
    for prompt in ["What is 17 times 23?", "Give me three tips for better sleep."]:
        ar = dec.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40)).token_ids
        for method in ("dominotree", "ddtree"):
            for vocab in (0, 8192):
                cfg = DecodeConfig(method=method, max_new_tokens=40, draft_vocab=vocab, tree=TreeConfig(budget=3))
                n = len(calls)
                assert dec.generate(prompt, cfg).token_ids == ar, (prompt, method, vocab)
                assert len(calls) > n      # every round's draft ran the fused backbone
    # the root's GRU state read from the per-token tables the decodes made (full and 8192 tokens)
    d, tgt, vocab = pair.drafters["domino"], pair.target, dec.draft_vocab(8192)
    from dominotree.models.childgru import existing_child_gru
    assert existing_child_gru(d, tgt.embed) is not None and existing_child_gru(d, vocab.embed) is not None
    outside = next(t for t in range(tgt.vocab_rows) if t not in set(vocab.id_list))
    with torch.inference_mode():
        for root in (vocab.id_list[0], vocab.id_list[-1], 28, outside):
            want = d.first_state(tgt.embed_tokens(torch.tensor([root])))[0]
            for v in (None, vocab):
                torch.testing.assert_close(d.root_state(root, tgt, v), want, rtol=1e-5, atol=1e-6)


def test_kept_rows_have_the_bits_of_the_whole_block(monkeypatch):
    """``keep``: the last layer's output product and MLP run on the first rows only (a tree that
    reads ``keep`` depths); those rows equal the whole block's, fused and Python, round after
    round, and the cache is the same as without it."""
    d = routed_drafter(seed=3)
    g = torch.Generator().manual_seed(5)
    full, cut, py = DraftCache(), DraftCache(), DraftCache()
    start = 0
    with torch.inference_mode():
        for (c, n), keep in zip(ROUNDS, (1, 1, 3, 2, 16, 7, 5, 4)):
            feats, noise = round_inputs(g, c, n)
            cp, bp = torch.arange(start, start + c), torch.arange(start + c, start + c + n)
            a = run(d, True, feats, noise, cp, bp, full, monkeypatch)
            monkeypatch.setattr(draftcpu, "FUSED", True)
            b = d(feats, noise, cp, bp, cache=cut, keep=keep)
            monkeypatch.setattr(draftcpu, "FUSED", False)
            p = d(feats, noise, cp, bp, cache=py, keep=keep)
            m = min(keep, n)
            assert b.shape == p.shape == (1, m, CFG.hidden_size)
            assert torch.equal(b, a[:, :m]) and torch.equal(p, a[:, :m]), (c, n, keep)
            assert_same_cache(full, cut)
            assert_same_cache(full, py)
            start += c
