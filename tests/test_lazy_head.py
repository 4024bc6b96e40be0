"""The verify's lazy LM head (``verify.TreeRows``): the accept walk reads only the rows it needs,
and every token it reads has the bits an all-rows head and draw give it.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_lazy_head.py
"""
import pytest
import torch

import dominotree.decode as D
from dominotree.config import DecodeConfig
from dominotree.trace import UNREAD
from dominotree.tree import Tree, accept_walk
from dominotree.verify import TreeRows, sample, verify_tree

from oracle import ar_continuation, make_oracle, sibling_accepted

METHODS = ["ar", "dflash", "ddtree", "domino", "dominotree", "marg", "condstatic"]


class EagerRows(TreeRows):
    """Today's verify before the lazy head: every row's head and draw at once, then the walk."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.read_all()


def _tree():
    # root; children 1, 2 of the root; 3 under 1; 4, 5 under 2; 6 under 3
    return Tree(tokens=[5, 7, 9, 11, 13, 15, 17], parents=[-1, 0, 0, 1, 2, 2, 3], depths=[0, 1, 1, 2, 2, 2, 3],
                scores=[0.0] * 7, marg_scores=[0.0] * 7)


@pytest.mark.parametrize("temperature", [0.0, 0.7])
def test_rows_read_lazily_equal_an_all_rows_sample(tiny_decoder, temperature):
    tgt = tiny_decoder.target
    tree = _tree()
    prompt = torch.tensor([[1, 2, 3, 4]])
    for lazy in (False, True):
        cache = tgt.new_cache()
        tgt.forward(prompt, torch.arange(4)[None], cache)
        out = verify_tree(tgt, cache, tree, 4, None, lazy_head=lazy)
        if not lazy:
            full = sample(out.logits, temperature, torch.Generator().manual_seed(3))
        else:
            assert out.logits is None and out.hidden.shape[0] == len(tree)
            rows = TreeRows(tgt, tree, out, temperature, torch.Generator().manual_seed(3))
            got = {i: rows[i] for i in (4, 0)}           # any order, one row at a time or by chains
            assert got == {4: full[4], 0: full[0]}
            assert rows.tokens[2] is None or rows.tokens[2] == full[2]
            assert rows.read_all() == full              # every row, bit for bit (==)


def test_a_read_takes_the_first_child_chain_only(tiny_decoder):
    tgt = tiny_decoder.target
    tree = _tree()
    cache = tgt.new_cache()
    tgt.forward(torch.tensor([[1, 2, 3]]), torch.arange(3)[None], cache)
    rows = TreeRows(tgt, tree, verify_tree(tgt, cache, tree, 3, None, lazy_head=True), 0.0)
    rows[0]
    assert [i for i, t in enumerate(rows.tokens) if t is not None] == [0, 1, 3, 6]
    rows[2]                                   # a walk that turns to the second child reads its chain
    assert [i for i, t in enumerate(rows.tokens) if t is not None] == [0, 1, 2, 3, 4, 6]
    assert rows.rows_read == 6


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_lazy_verify_decodes_bit_identical_to_the_all_rows_verify(tiny_decoder, monkeypatch, temperature):
    """Every method, the oracle drafter (deep and sibling acceptance): committed tokens, accepted
    paths, bonuses and every row the walk read are == with and without the lazy head."""
    prompt_ids = tiny_decoder.encode_prompt("Tell me a story about a cat.")
    seq = ar_continuation(tiny_decoder, prompt_ids, 100)
    saw_deep = saw_sibling = saw_skip = False
    for m in METHODS:
        cfg = DecodeConfig(method=m, max_new_tokens=72, stop_at_eos=False, temperature=temperature, seed=11)
        runs = {}
        for lazy in (True, False):
            if not lazy:
                monkeypatch.setattr(D, "TreeRows", EagerRows)
            fn = None if m == "ar" else make_oracle(tiny_decoder, seq, seed=1)
            runs[lazy] = tiny_decoder.generate(prompt_ids, cfg, draft_fn=fn)
            monkeypatch.undo()
        a, b = runs[True], runs[False]
        assert a.token_ids == b.token_ids, m
        assert [(r.accepted, r.bonus) for r in a.rounds] == [(r.accepted, r.bonus) for r in b.rounds], m
        for ra, rb in zip(a.rounds, b.rounds):
            # the explorer's traces keep every row (annotated decoder): == the all-rows tokens
            assert ra.target_tokens == rb.target_tokens, m
        saw_deep |= max(r.accept_len for r in a.rounds) >= 8
        saw_sibling |= any(sibling_accepted(r) for r in a.rounds)
    if temperature == 0.0:        # samples leave the oracle's greedy continuation at T > 0
        assert saw_deep and saw_sibling
    # a benchmark decoder (no traces) leaves unread rows unread, and reads fewer than all of them
    bench = D.Decoder(tiny_decoder.pair, annotate=False)
    cfg = DecodeConfig(method="dominotree", max_new_tokens=48, stop_at_eos=False, temperature=temperature, seed=11)
    tr = bench.generate(prompt_ids, cfg, draft_fn=make_oracle(bench, seq, seed=1))
    for r in tr.rounds:
        walk, bonus = accept_walk(r.tree, r.target_tokens)
        assert (walk, bonus) == (r.accepted, r.bonus)
        saw_skip |= UNREAD in r.target_tokens
    assert saw_skip
