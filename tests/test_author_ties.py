"""Exact ties broken as the authors' code breaks them (issue 41 item 7).

Integer logits give many exactly tied candidates, and a zero correction makes DominoTree's menus
path-independent, so the tie-break alone decides the trees. Pinned here:

- DDTree's per-depth lists are ``topk(logits) - logsumexp(logits)`` (the authors' DDTree code), not
  ``topk(log_softmax(logits))``, which is an ulp away in places and picks other tokens among ties;
- DominoTree's depth-1 menu is ``topk(log_softmax(logits), K)`` (the authors' DominoTree code), not
  the first K of the Top-M list ``topk(logits, M)``.

Each test also shows that the other computation gives something else on these blocks, so it can
fail.
"""
from __future__ import annotations

import pytest
import torch

from dominotree.bench.build import random_block, random_head
from dominotree.builders import get_builder
from dominotree.config import TreeConfig
from dominotree.methods import FIXED_BUILDERS
from dominotree.scoring import ConditionalScorer, top_candidates


@pytest.fixture(scope="module")
def zero_head():
    d, e = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=2)
    with torch.no_grad():
        d.embed_proj[2].weight.zero_()
    return d, e


def blocks(head, n=12, depth=6, seed=41):
    gen = torch.Generator().manual_seed(seed)
    return [random_block(*head, depth, gen, ties=True) for _ in range(n)]


def node_steps(tree):
    """(depth, token, score step from the parent) per non-root node."""
    return [(tree.depths[i], tree.tokens[i], tree.scores[i] - tree.scores[tree.parents[i]])
            for i in range(1, len(tree.tokens))]


def test_ddtree_lists_are_topk_of_logits_minus_logsumexp(zero_head):
    tc = TreeConfig(budget=24)
    other = 0
    for block in blocks(zero_head):
        x = block.base_logits.float()
        vals, ids = torch.topk(x, tc.budget, dim=-1)
        vals = vals - torch.logsumexp(x, dim=-1, keepdim=True)               # the authors' DDTree
        want = [dict(zip(i, v)) for i, v in zip(ids.tolist(), vals.tolist())]
        built = FIXED_BUILDERS["lazy"](block, None, None, None, block.root, tc, block.depth, None)
        for d, tok, step in node_steps(built.tree):
            assert tok in want[d - 1]
            # the score is the running sum of list values: the step equals it up to the sum's rounding
            assert abs(step - want[d - 1][tok]) < 1e-9
        for i in range(1, len(built.tree.tokens)):
            if built.tree.parents[i] == 0:                                   # depth 1: exactly the list value
                assert built.tree.scores[i] == want[0][built.tree.tokens[i]]
        lv, li = torch.topk(torch.log_softmax(x, dim=-1), tc.budget, dim=-1)  # the computation it replaced
        other += (not torch.equal(li, ids)) or (not torch.equal(lv, vals))
    assert other > 0          # on these blocks the old computation differs, so the test can fail


@pytest.mark.parametrize("builder", ["python", "graph", "frontier"])
def test_dominotree_depth_one_is_topk_of_log_softmax(zero_head, builder):
    drafter, embed = zero_head
    tc = TreeConfig(budget=16, corr_topm=16, node_topk=4)
    other = 0
    for block in blocks(zero_head):
        lp = torch.log_softmax(block.base_logits[0].float(), dim=-1)
        vals, ids = torch.topk(lp, tc.node_topk)                              # the authors' depth-1 menu
        want = dict(zip(ids.tolist(), vals.tolist()))
        scorer = ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm)
        built = get_builder(builder)(scorer, block.root, block.root_state, tc, block.depth)
        tree = built.tree
        first = [i for i in range(1, len(tree.tokens)) if tree.parents[i] == 0]
        assert first and all(tree.tokens[i] in want and tree.scores[i] == want[tree.tokens[i]] for i in first)
        old = top_candidates(block.base_logits[0], tc.corr_topm)[:tc.node_topk]   # what it replaced
        other += set(old.tolist()) != set(ids.tolist())
    assert other > 0
