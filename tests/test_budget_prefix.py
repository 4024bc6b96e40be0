"""The budget-prefix property ``--budget auto`` rests on: the first b pops of the budget-B tree are
the budget-b tree (every builder, both scorers, ties included), and ``prefix_accept`` is the
accept walk on each prefix.

    .venv/bin/python -m pytest -q tests/test_budget_prefix.py
"""
from __future__ import annotations

import pytest
import torch

from dominotree.auto.budget import prefix_accept
from dominotree.bench.build import random_block, random_head
from dominotree.builders import build_lazy, build_reference, get_builder
from dominotree.config import TreeConfig
from dominotree.scoring import ConditionalScorer, MarginalScorer
from dominotree.tree import accept_walk


B = 24


@pytest.fixture(scope="module")
def heads():
    d, e = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=1)
    t, te = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=2)
    with torch.no_grad():
        t.embed_proj[2].weight.zero_()       # zero correction: equal menus at a depth, many exact ties
    return [(d, e), (t, te)]


def _same_prefix(big, small, b):
    p = big.tree.prefix(b)
    assert (small.tree.tokens, small.tree.parents, small.tree.depths) == (p.tokens, p.parents, p.depths)
    assert small.tree.scores == p.scores and small.tree.marg_scores == p.marg_scores


@pytest.mark.parametrize("name", ["python", "graph", "frontier"])
@pytest.mark.parametrize("scorer", ["conditional", "marginal"])
def test_budget_prefix_property(name, scorer, heads):
    """The first b pops of the budget-B tree are the budget-b tree, for every b <= B, ties included."""
    gen = torch.Generator().manual_seed(30)
    build = get_builder(name)
    for d_e in heads:
        for ties in (False, True):
            block = random_block(*d_e, 12, gen, ties=ties)

            def make():
                if scorer == "marginal":
                    return MarginalScorer(block, 4, 16)
                return ConditionalScorer(block, *d_e, 4, 16)
            state = block.root_state if scorer == "conditional" else None
            big = build(make(), block.root, state, TreeConfig(budget=B, corr_topm=16, node_topk=4), 12)
            assert big.tree.num_nodes == B
            for b in range(1, B):
                small = build(make(), block.root, state, TreeConfig(budget=b, corr_topm=16, node_topk=4), 12)
                _same_prefix(big, small, b)
    assert len(set(big.tree.scores[1:])) < B        # the tie head really tied


def test_budget_prefix_property_ddtree_lazy_heap(heads):
    """DDTree's lazy heap over top-``budget`` marginals: the property holds where the per-depth lists
    have no exact ties (torch.topk orders equal values differently for different k, so at ties the
    top-b list is not a prefix of the top-B list; ``--budget auto`` is therefore not offered for ddtree)."""
    gen = torch.Generator().manual_seed(31)
    for _ in range(3):
        block = random_block(*heads[0], 12, gen)
        lp = torch.log_softmax(block.base_logits.float(), dim=-1)
        vals, ids = torch.topk(lp, B, dim=-1)
        big = build_lazy(ids.tolist(), vals.tolist(), block.root, B)
        for b in range(1, B):
            v, i = torch.topk(lp, b, dim=-1)     # decode.py gives DDTree the top-`budget` per depth
            _same_prefix(big, build_lazy(i.tolist(), v.tolist(), block.root, b), b)


def test_prefix_accept_is_the_walk_on_the_prefix(heads):
    gen = torch.Generator().manual_seed(32)
    block = random_block(*heads[0], 12, gen)
    tree = build_reference(ConditionalScorer(block, *heads[0], 4, 16), block.root, block.root_state,
                           TreeConfig(budget=B, corr_topm=16, node_topk=4), 12).tree
    rng = torch.Generator().manual_seed(33)
    for _ in range(20):   # target tokens that follow the tree for a while, then leave it
        post = [tree.tokens[int(torch.randint(1, B + 1, (1,), generator=rng))] for _ in range(B + 1)]
        acc, _ = accept_walk(tree, post)
        for i, r in enumerate(acc[:-1]):      # make the walk go deep: each accepted row points to its child
            kids = [j for j in range(1, B + 1) if tree.parents[j] == r]
            if kids:
                post[r] = tree.tokens[kids[-1]]
        got = prefix_accept(tree, post, B)
        for b in range(1, B + 1):
            assert got[b - 1] == len(accept_walk(tree.prefix(b), post[:b + 1])[0])
        assert got == sorted(got) and got[-1] == len(accept_walk(tree, post)[0])
