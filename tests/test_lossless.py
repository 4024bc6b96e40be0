"""Losslessness: every method's float32 greedy output equals plain autoregressive decoding,
with random drafters and with an oracle drafter that reaches deep and sibling acceptance;
at T > 0 the committed tokens follow the target's distribution (chi-square).

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_lossless.py
"""
import math
import random

import pytest
import torch

from dominotree.config import DecodeConfig, TreeConfig
from dominotree.tree import Tree, accept_walk
from dominotree.verify import sample

from oracle import ar_continuation, make_oracle, sibling_accepted

METHODS = ["dflash", "ddtree", "domino", "dominotree", "marg", "condstatic"]
PROMPTS = ["Hello", "What is 17 times 23?", "def fib(n):", "Tell me a story about a cat."]


@pytest.mark.parametrize("prompt", PROMPTS[:3])
def test_random_drafters_equal_ar(tiny_decoder, prompt):
    ar = tiny_decoder.generate(prompt, DecodeConfig(method="ar", max_new_tokens=40)).token_ids
    for m in METHODS:
        for budget in (4, 16):
            cfg = DecodeConfig(method=m, max_new_tokens=40, tree=TreeConfig(budget=budget, corr_topm=16, node_topk=4))
            tr = tiny_decoder.generate(prompt, cfg)
            assert tr.token_ids == ar, (m, budget)
            if budget == 4 and m not in ("dflash", "domino"):       # trees draft only the depths they can use
                assert all(len(r.candidates) == 4 for r in tr.rounds), m


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_oracle_drafter_deep_and_sibling_acceptance(tiny_decoder, seed):
    prompt_ids = tiny_decoder.encode_prompt(PROMPTS[seed])
    n = 90
    seq = ar_continuation(tiny_decoder, prompt_ids, n + 20)
    ar = seq[len(prompt_ids):len(prompt_ids) + n]
    stats = {}
    for m in METHODS:
        fn = make_oracle(tiny_decoder, seq, seed=seed)
        cfg = DecodeConfig(method=m, max_new_tokens=n, stop_at_eos=False)
        trace = tiny_decoder.generate(prompt_ids, cfg, draft_fn=fn)
        assert trace.token_ids == ar, m
        stats[m] = (max(r.accept_len for r in trace.rounds), any(sibling_accepted(r) for r in trace.rounds), trace.tau)
    # chains never accept a sibling; trees do, and every drafted method goes deep
    for m in METHODS:
        assert stats[m][0] >= 9, (m, stats[m])
    assert not stats["dflash"][1] and not stats["domino"][1]
    assert any(stats[m][1] for m in ("ddtree", "dominotree", "marg", "condstatic")), stats
    # a tree recovers from the injected "true token second" mistakes, a chain does not
    assert stats["dominotree"][2] > stats["domino"][2]


def test_oracle_sibling_acceptance_in_every_tree_method(tiny_decoder):
    prompt_ids = tiny_decoder.encode_prompt(PROMPTS[3])
    seq = ar_continuation(tiny_decoder, prompt_ids, 140)
    ar = seq[len(prompt_ids):len(prompt_ids) + 120]
    for m in ("ddtree", "dominotree", "marg", "condstatic"):
        fn = make_oracle(tiny_decoder, seq, clean=0.6, sibling=0.35, rank3=0.04, seed=5)
        trace = tiny_decoder.generate(prompt_ids, DecodeConfig(method=m, max_new_tokens=120, stop_at_eos=False),
                                      draft_fn=fn)
        assert trace.token_ids == ar, m
        assert sum(sibling_accepted(r) for r in trace.rounds) >= 2, m


# --- T > 0 ---------------------------------------------------------------------------------

def _chi2_pvalue(obs, exp):
    """Pearson chi-square p-value (Wilson-Hilferty normal approximation; no scipy needed)."""
    stat = sum((o - e) ** 2 / e for o, e in zip(obs, exp))
    k = len(obs) - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))


def _binned(counts, probs, n, min_exp=5.0):
    order = sorted(range(len(probs)), key=lambda i: -probs[i])
    obs, exp, o_acc, e_acc = [], [], 0, 0.0
    for i in order:
        o_acc += counts.get(i, 0)
        e_acc += probs[i] * n
        if e_acc >= min_exp:
            obs.append(o_acc); exp.append(e_acc); o_acc, e_acc = 0, 0.0
    if e_acc > 0 or o_acc:
        obs[-1] += o_acc; exp[-1] += e_acc
    return obs, exp


def test_sample_and_match_is_lossless_on_a_markov_target():
    """Toy target with known conditionals p(next | last token) over 4 tokens; a fixed depth-2
    tree. Committed 2-token sequences must follow p(x1|root) p(x2|x1)."""
    torch.manual_seed(0)
    P = torch.softmax(torch.randn(4, 4) * 1.5, dim=-1)
    tree = Tree([0, 1, 2, 3, 1], [-1, 0, 0, 1, 1], [0, 1, 1, 2, 2])  # root 0; children 1,2; under 1: 3,1
    gen = torch.Generator().manual_seed(1)
    counts, n, matched, bonus_only = {}, 6000, 0, 0
    for _ in range(n):
        logits = torch.log(P[torch.tensor(tree.tokens)])
        post = sample(logits, 1.0, gen)
        acc, bonus = accept_walk(tree, post)
        seq = [tree.tokens[i] for i in acc[1:]] + [bonus]
        if len(seq) < 2:   # continue decoding the next token directly from the target
            bonus_only += 1
            seq.append(sample(torch.log(P[seq[-1]])[None], 1.0, gen)[0])
        else:
            matched += 1
        counts[seq[0] * 4 + seq[1]] = counts.get(seq[0] * 4 + seq[1], 0) + 1
    probs = [float(P[0, a] * P[a, b]) for a in range(4) for b in range(4)]
    obs, exp = _binned(counts, probs, n)
    assert matched > 500 and bonus_only > 500
    assert _chi2_pvalue(obs, exp) > 1e-3


def test_decoder_at_temperature_follows_target(tiny_decoder):
    """Through the real round loop: the 2nd generated token (the 1st committed by a round, via a
    matched tree branch or a bonus token) follows the target's marginal."""
    tgt = tiny_decoder.target
    prompt_ids = tiny_decoder.encode_prompt("Hi")
    T = 0.7
    with torch.no_grad():
        ids = torch.tensor([prompt_ids])
        p1 = torch.softmax(tgt.model(ids).logits[0, -1].float() / T, -1)
        firsts = [i for i in range(len(p1)) if p1[i] > 1e-5]
        batch = torch.tensor([prompt_ids + [f] for f in firsts])
        p2 = torch.softmax(tgt.model(batch).logits[:, -1].float() / T, -1)
        marg2 = (p1[firsts, None] * p2).sum(0)
        marg2 = (marg2 / marg2.sum()).tolist()

    def true_logits(start, root):  # depth-1 proposals = the target's own top tokens
        with torch.no_grad():
            return tgt.model(torch.tensor([prompt_ids + [root]])).logits[0, -1].float()

    n = 300
    counts, matched, bonus = {}, 0, 0
    fn = make_oracle(tiny_decoder, prompt_ids, true_logits=true_logits)
    for s in range(n):
        cfg = DecodeConfig(method="dominotree", temperature=T, max_new_tokens=2, seed=s, stop_at_eos=False,
                           tree=TreeConfig(budget=8, corr_topm=16, node_topk=4))
        tr = tiny_decoder.generate(prompt_ids, cfg, draft_fn=fn)
        x2 = tr.token_ids[1]
        counts[x2] = counts.get(x2, 0) + 1
        if tr.rounds[0].accept_len > 1:
            matched += 1
        else:
            bonus += 1
    assert matched > 20 and bonus > 20, (matched, bonus)
    obs, exp = _binned(counts, marg2, n)
    assert _chi2_pvalue(obs, exp) > 1e-3


def test_sampler_follows_softmax_at_temperature():
    """The inverse-CDF sampler: every row is an independent draw from softmax(logits / T)."""
    gen = torch.Generator().manual_seed(3)
    logits = torch.tensor([1.0, 0.0, 2.5, -1.0, 0.5, -3.0])
    for temp in (0.5, 1.0):
        n = 20000
        draws = sample(logits.repeat(n, 1).to(torch.bfloat16), temp, gen)
        probs = torch.softmax(logits.to(torch.bfloat16).float() / temp, -1).tolist()
        counts = {i: draws.count(i) for i in range(len(probs))}
        obs, exp = _binned(counts, probs, n)
        assert _chi2_pvalue(obs, exp) > 1e-3, temp


def test_sampler_never_draws_zero_probability_tokens_and_argmax_takes_the_first_tie():
    gen = torch.Generator().manual_seed(4)
    logits = torch.tensor([[-float("inf"), 0.0, -float("inf"), 0.0, -float("inf")]]).repeat(5000, 1)
    draws = sample(logits, 1.0, gen)
    assert set(draws) == {1, 3}
    assert sample(torch.tensor([[0.0, 2.0, 2.0], [3.0, 3.0, 1.0]]), 0.0) == [1, 0]
    assert sample(torch.tensor([[0.0, 2.0, 2.0]], dtype=torch.bfloat16), 0.0) == [1]


def test_small_trees_draft_from_a_cut_block(tiny_decoder):
    """A budget-b tree reads b depths; the drafter runs max(b, DRAFT_MIN_ROWS) block rows (one
    more for DFlash, whose first row is the root), never more than its block, and the output
    still equals ar's."""
    from dataclasses import replace

    from dominotree.decode import DRAFT_MIN_ROWS, block_rows
    dom = tiny_decoder.pair.drafters["domino"].cfg
    dfl = tiny_decoder.pair.drafters["dflash"].cfg
    assert block_rows(dom, None) == dom.block_size and block_rows(dfl, None) == dfl.block_size
    assert block_rows(dom, 2) == min(dom.block_size, DRAFT_MIN_ROWS)
    assert block_rows(dom, dom.block_size) == dom.block_size
    assert block_rows(dfl, dfl.block_size - 1) == dfl.block_size
    assert block_rows(dom, 10 ** 6) == dom.block_size
    rows = []
    real = tiny_decoder.pair.drafters["domino"].forward

    def spy(feats, noise, *a, **k):
        rows.append(noise.shape[1])
        return real(feats, noise, *a, **k)
    ar = tiny_decoder.generate("Count to five.", DecodeConfig(method="ar", max_new_tokens=12)).token_ids
    tiny_decoder.pair.drafters["domino"].forward = spy
    try:
        cfg = DecodeConfig(method="dominotree", max_new_tokens=12, tree=replace(TreeConfig(), budget=3))
        got = tiny_decoder.generate("Count to five.", cfg).token_ids
    finally:
        del tiny_decoder.pair.drafters["domino"].forward
    assert rows and set(rows) == {block_rows(dom, 3)}
    assert got == ar


def test_warm_up_decodes_ar_and_a_tree_per_drafter(tiny_decoder, monkeypatch):
    """The explorer warms a loaded pair before its first timed run: ar, and a tree method of each
    drafter kind, through the real decode loop."""
    seen = []
    real = type(tiny_decoder).generate

    def spy(self, prompt, cfg, *a, **k):
        seen.append(cfg.method)
        tr = real(self, prompt, cfg, *a, **k)
        assert len(tr.token_ids) == cfg.max_new_tokens
        return tr
    monkeypatch.setattr(type(tiny_decoder), "generate", spy)
    tiny_decoder.warm_up(max_new_tokens=3)
    assert seen == ["ar", "ddtree", "dominotree"]
