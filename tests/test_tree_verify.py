"""Tree invariants, attention mask and position ids against direct path recomputation, tree
verification against a fresh forward of each root-to-node path, KV compaction against a fresh
prefill of the accepted text.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_tree_verify.py
"""
import random

import pytest
import torch

from dominotree.models.target import cache_compact, cache_length, cache_truncate
from dominotree.tree import (Tree, accept_walk, ancestor_matrix, child_maps, path_to, position_ids,
                             tree_mask)
from dominotree.verify import verify_tree


def random_tree(n, vocab=300, seed=0):
    r = random.Random(seed)
    tokens, parents, depths = [r.randrange(vocab)], [-1], [0]
    for i in range(1, n):
        p = r.randrange(i)
        tokens.append(r.randrange(vocab)); parents.append(p); depths.append(depths[p] + 1)
    return Tree(tokens, parents, depths)


@pytest.mark.parametrize("seed", range(5))
def test_mask_and_positions_match_paths(seed):
    t = random_tree(17, seed=seed)
    t.validate()
    vis = ancestor_matrix(t)
    for i in range(len(t)):
        assert set(torch.nonzero(vis[i]).view(-1).tolist()) == set(path_to(t, i))
        assert len(path_to(t, i)) == t.depths[i] + 1
    m = tree_mask(t, 5, torch.float32)
    assert m.shape == (1, 1, 17, 22)
    assert (m[0, 0, :, :5] == 0).all()
    assert torch.equal(m[0, 0, :, 5:] == 0, vis)
    assert (m[m != 0] == torch.finfo(torch.float32).min).all()
    assert position_ids(t, 5).tolist() == [[5 + d for d in t.depths]]


def test_validate_rejects_bad_trees():
    with pytest.raises(ValueError):
        Tree([1, 2], [-1, 1], [0, 1]).validate()
    with pytest.raises(ValueError):
        Tree([1, 2, 3], [-1, 0, 1], [0, 1, 1]).validate()


def test_accept_walk_known_answers():
    # root 5 -> a(7) -> c(9);  root -> b(8)
    t = Tree([5, 7, 8, 9], [-1, 0, 0, 1], [0, 1, 1, 2])
    assert accept_walk(t, [7, 9, 0, 4]) == ([0, 1, 3], 4)
    assert accept_walk(t, [8, 0, 6, 0]) == ([0, 2], 6)
    assert accept_walk(t, [1, 0, 0, 0]) == ([0], 1)
    assert child_maps(t)[0] == {7: 1, 8: 2}


@pytest.mark.parametrize("seed", range(3))
def test_tree_verify_matches_path_recompute(tiny_pair, seed):
    tgt = tiny_pair.target
    prefix = torch.randint(0, 256, (1, 9), generator=torch.Generator().manual_seed(seed))
    t = random_tree(17, vocab=256, seed=seed + 10)
    with torch.no_grad():
        cache = tgt.new_cache()
        tgt.forward(prefix, torch.arange(9)[None], cache)
        out = verify_tree(tgt, cache, t, 9, taps=(1, 2))
        assert cache_length(cache) == 9 + 17
        for i in range(len(t)):
            path = [t.tokens[j] for j in path_to(t, i)]
            full = torch.cat([prefix, torch.tensor([path])], dim=1)
            ref = tgt.model(full, output_hidden_states=True)
            assert torch.allclose(out.logits[i], ref.logits[0, -1].float(), atol=1e-4), i
            feat = torch.cat([ref.hidden_states[2][0, -1], ref.hidden_states[3][0, -1]])
            assert torch.allclose(out.feats[0, i], feat, atol=1e-4)


@pytest.mark.parametrize("accepted", [[0], [0, 1], [0, 2, 5], [0, 1, 3, 7]])
def test_kv_compaction_matches_fresh_prefill(tiny_pair, accepted):
    tgt = tiny_pair.target
    prefix = torch.randint(0, 256, (1, 7), generator=torch.Generator().manual_seed(3))
    # a tree in which `accepted` is a root-to-node path
    t = Tree([11, 12, 13, 14, 15, 16, 17, 18], [-1, 0, 0, 1, 0, 2, 1, 3], [0, 1, 1, 2, 1, 2, 2, 3])
    assert path_to(t, accepted[-1]) == accepted
    nxt = torch.tensor([[42]])
    with torch.no_grad():
        cache = tgt.new_cache()
        tgt.forward(prefix, torch.arange(7)[None], cache)
        verify_tree(tgt, cache, t, 7, taps=None)
        cache_compact(cache, 7, accepted)
        n = 7 + len(accepted)
        assert cache_length(cache) == n
        got = tgt.forward(nxt, torch.tensor([[n]]), cache).logits[-1]
        text = torch.cat([prefix, torch.tensor([[t.tokens[i] for i in accepted]]), nxt], dim=1)
        ref = tgt.model(text).logits[0, -1].float()
    assert torch.allclose(got, ref, atol=1e-4)


def test_cache_truncate(tiny_pair):
    tgt = tiny_pair.target
    with torch.no_grad():
        cache = tgt.new_cache()
        tgt.forward(torch.tensor([[1, 2, 3, 4, 5]]), torch.arange(5)[None], cache)
        cache_truncate(cache, 3)
        assert cache_length(cache) == 3
        cache_truncate(cache, 10)
        assert cache_length(cache) == 3
