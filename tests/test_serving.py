"""The engine-free serving adapter (``dominotree/serving.py``) held against our own tree views:
SGLang's flattened mask, positions and retrieve arrays, vLLM's per-request tree bias, the accept
walk over the retrieve arrays, KV-compaction indices, and a target forward with the adapter's mask
that gives the bits ``verify_tree`` gives."""
from __future__ import annotations

import random

import pytest
import torch

from dominotree import serving as S
from dominotree.models.target import cache_compact
from dominotree.tree import Tree, accept_walk, ancestor_matrix, children_of, path_to, position_ids, tree_mask
from dominotree.verify import verify_tree
from test_tree_verify import random_tree   # random shapes; a small vocabulary lets siblings share a token


def targets_along(tree: Tree, node: int, seed: int, vocab=50) -> list[int]:
    """Per-row target tokens that accept the path to ``node`` and then stop (random elsewhere)."""
    r = random.Random(seed)
    post = [r.randrange(vocab) for _ in tree.tokens]
    path = path_to(tree, node)
    for a, b in zip(path, path[1:]):
        post[a] = tree.tokens[b]
    kids = {tree.tokens[k] for k in children_of(tree)[node]}
    post[node] = next(t for t in range(vocab + 1) if t not in kids)   # the bonus: no child matches
    return post


def test_sglang_known_tree():
    # root 5 -> a(7) -> c(9);  root -> b(8);  a -> d(4)
    t = Tree([5, 7, 8, 9, 4], [-1, 0, 0, 1, 1], [0, 1, 1, 2, 2])
    v = S.sglang_verify(t, seq_len=3)
    assert v.draft_token.tolist() == [5, 7, 8, 9, 4]
    assert v.positions.tolist() == [3, 4, 4, 5, 5]
    assert v.retrive_index.tolist() == [[0, 1, 2, 3, 4]]
    assert v.retrive_next_token.tolist() == [[1, 3, -1, -1, -1]]
    assert v.retrive_next_sibling.tolist() == [[-1, 2, -1, 4, -1]]
    assert S.request_mask(v).int().tolist() == [[1, 1, 1, 1, 0, 0, 0, 0],
                                                [1, 1, 1, 1, 1, 0, 0, 0],
                                                [1, 1, 1, 1, 0, 1, 0, 0],
                                                [1, 1, 1, 1, 1, 0, 1, 0],
                                                [1, 1, 1, 1, 1, 0, 0, 1]]
    assert S.retrieve_walk(v, torch.tensor([7, 4, 0, 0, 6])) == ([0, 1, 4], 6)
    assert S.retrieve_walk(v, torch.tensor([8, 0, 2, 0, 0])) == ([0, 2], 2)
    bias = S.vllm_tree_bias(t)
    assert bias.dtype == torch.float32 and bias[3].tolist() == [0, 0, float("-inf"), 0, float("-inf")]


@pytest.mark.parametrize("seed", range(8))
def test_adapter_equals_our_mask_positions_and_walk(seed):
    t = random_tree(1 + seed * 4 + 3, vocab=50, seed=seed)
    L = 6 + seed
    for mode in ("full", "qlen"):
        v = S.sglang_verify(t, L, mask_mode=mode)
        ours = tree_mask(t, L, torch.float32)[0, 0] == 0
        got = S.request_mask(v)
        assert torch.equal(got, ours if mode == "full" else ours[:, L:])
    v = S.sglang_verify(t, L)
    assert torch.equal(v.positions, position_ids(t, L)[0])
    assert torch.equal(S.vllm_tree_bias(t) == 0, ancestor_matrix(t))
    assert torch.equal(S.additive_mask(S.request_mask(v)), tree_mask(t, L, torch.float32))
    # the walk: random targets, and targets that accept the path to every node (deep and sibling rows)
    r = random.Random(seed)
    posts = [[r.randrange(50) for _ in t.tokens] for _ in range(20)] + \
            [targets_along(t, i, seed + i) for i in range(len(t))]
    depths_seen = set()
    for post in posts:
        want = accept_walk(t, post)
        assert S.retrieve_walk(v, torch.tensor(post)) == want
        depths_seen.add(len(want[0]) - 1)
    assert max(depths_seen) == max(t.depths)
    # the kernel's child order: next_token then next_sibling lists each parent's children by row
    for parent, kids in enumerate(children_of(t)):
        got, cur = [], v.retrive_next_token[0, parent].item()
        while cur != -1:
            got.append(cur)
            cur = v.retrive_next_sibling[0, cur].item()
        assert got == kids


def test_a_sibling_accepted_and_equal_sibling_tokens_take_the_first_row():
    t = Tree([1, 2, 3, 3, 4], [-1, 0, 0, 0, 3], [0, 1, 1, 1, 2])   # rows 2 and 3 both hold token 3
    v = S.sglang_verify(t, 0)
    for post in ([3, 0, 0, 4, 9], [3, 0, 4, 4, 9], [2, 0, 0, 0, 0]):
        assert S.retrieve_walk(v, torch.tensor(post)) == accept_walk(t, post)
    assert S.retrieve_walk(v, torch.tensor([3, 0, 7, 4, 9])) == ([0, 2], 7)


def test_batches_offset_rows_and_masks():
    trees = [random_tree(9, vocab=50, seed=s) for s in range(3)]
    lens = [4, 0, 11]
    v = S.sglang_batch(trees, lens)
    assert v.draft_token.shape == (27,) and v.custom_mask.numel() == sum((s + 9) * 9 for s in lens)
    assert v.retrive_index[2].tolist() == list(range(18, 27))
    post = torch.cat([torch.tensor(targets_along(t, len(t) - 1, b)) for b, t in enumerate(trees)])
    for b, (t, s) in enumerate(zip(trees, lens)):
        assert torch.equal(S.request_mask(v, b), tree_mask(t, s, torch.float32)[0, 0] == 0)
        assert torch.equal(v.positions[b * 9:(b + 1) * 9], position_ids(t, s)[0])
        assert S.retrieve_walk(v, post, b) == accept_walk(t, post[b * 9:(b + 1) * 9].tolist())
    q = S.sglang_batch(trees, lens, mask_mode="qlen")
    assert torch.equal(S.request_mask(q, 1), ancestor_matrix(trees[1]))
    bias = S.vllm_batch_bias([trees[0], random_tree(4, seed=9)])
    assert bias.shape == (2, 9, 9)
    assert torch.equal(bias[1, :4, :4], S.vllm_tree_bias(random_tree(4, seed=9)))
    assert bias[1, 6].tolist().count(0) == 1 and bias[1, 6, 6] == 0       # a padding row sees itself only
    with pytest.raises(ValueError, match="draft_token_num"):
        S.sglang_batch([trees[0], random_tree(5)], [1, 1])
    with pytest.raises(ValueError, match="mask_mode"):
        S.sglang_verify(trees[0], 1, mask_mode="packed")


def test_kv_indices_equal_our_compaction():
    t = Tree([11, 12, 13, 14, 15, 16, 17, 18], [-1, 0, 0, 1, 0, 2, 1, 3], [0, 1, 1, 2, 1, 2, 2, 3])
    for accepted in ([0], [0, 1], [0, 2, 5], [0, 1, 3, 7], [0, 4]):
        assert path_to(t, accepted[-1]) == accepted
        L = 5
        kv = torch.randn(2, 3, L + len(t), 4)
        ref = kv.clone()
        src, dst = S.kv_moves(accepted, L)
        S.apply_kv_moves(kv, src, dst)
        want = torch.cat([ref[..., :L, :], ref[..., [L + r for r in accepted], :]], dim=-2)
        assert torch.equal(kv[..., :L + len(accepted), :], want)
        locs = torch.arange(100, 100 + len(t))
        keep, free = S.kv_keep_free(accepted, locs)
        assert keep.tolist() == [100 + r for r in accepted]
        assert sorted(keep.tolist() + free.tolist()) == locs.tolist()
    with pytest.raises(ValueError, match="increasing"):
        S.kv_moves([0, 3, 1], 2)


@pytest.mark.parametrize("seed", range(3))
def test_target_forward_with_the_adapters_mask_gives_verify_trees_bits(tiny_pair, seed):
    _forward_with_adapter_mask(tiny_pair.target, seed)


@pytest.mark.cuda
def test_target_forward_with_the_adapters_mask_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from dominotree.presets import load_pair
    tgt = load_pair("random-tiny", dtype="float32", device="cuda").target
    for seed in range(3):
        _forward_with_adapter_mask(tgt, seed)


@pytest.mark.cuda
def test_sglang_verify_tree_greedy_kernel_walks_as_we_do():
    """SGLang's own kernel (sgl_kernel.verify_tree_greedy) on the adapter's arrays accepts the rows and
    the bonus ``accept_walk`` gives, over a batch with deep and sibling acceptance."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    sgl = pytest.importorskip("sgl_kernel")
    trees = [random_tree(17, vocab=50, seed=s) for s in range(8)]
    v = S.sglang_batch(trees, [5 + s for s in range(8)])
    posts = [targets_along(t, max(range(len(t)), key=lambda i: (t.depths[i], i % 3)), b) for b, t in enumerate(trees)]
    bs, n, dev = len(trees), v.n, "cuda"
    predicts = torch.full((bs * n,), -1, dtype=torch.int32, device=dev)
    accept_index = torch.full((bs, n), -1, dtype=torch.int32, device=dev)
    accept_token_num = torch.zeros(bs, dtype=torch.int32, device=dev)
    sgl.verify_tree_greedy(predicts, accept_index, accept_token_num, v.draft_token.view(bs, n).to(dev),
                           v.retrive_index.to(dev), v.retrive_next_token.to(dev), v.retrive_next_sibling.to(dev),
                           torch.tensor(posts, device=dev))
    for b, (t, post) in enumerate(zip(trees, posts)):
        rows, bonus = accept_walk(t, post)
        k = int(accept_token_num[b])
        assert (accept_index[b, :k + 1] - b * n).tolist() == rows
        assert int(predicts[b * n + rows[-1]]) == bonus


def _forward_with_adapter_mask(tgt, seed):
    """The tree rows run with the mask SGLang's inputs describe (and with vLLM's bias after the
    prefix's zeros) give exactly ``verify_tree``'s logits, features and cache; compaction through the
    adapter's moves leaves the cache ``cache_compact`` leaves."""
    L = 9
    prefix = torch.randint(0, 256, (1, L), generator=torch.Generator().manual_seed(seed)).to(tgt.device)
    t = random_tree(17, vocab=256, seed=seed + 10)
    v = S.sglang_verify(t, L)
    vis_vllm = torch.cat([torch.zeros(len(t), L), S.vllm_tree_bias(t)], dim=1) == 0

    def run(mask):
        with torch.no_grad():
            cache = tgt.new_cache()
            tgt.forward(prefix, torch.arange(L, device=tgt.device)[None], cache)
            if mask is None:
                return verify_tree(tgt, cache, t, L, taps=(1, 2)), cache
            return tgt.forward(v.draft_token[None].to(tgt.device), v.positions[None].to(tgt.device), cache,
                               mask=mask.to(tgt.device), taps=(1, 2)), cache

    ref, ref_cache = run(None)
    for vis in (S.request_mask(v), vis_vllm):
        out, cache = run(S.additive_mask(vis, tgt.dtype))
        assert torch.equal(out.logits, ref.logits) and torch.equal(out.feats, ref.feats)
        post = out.logits.argmax(-1)
        accepted, bonus = S.retrieve_walk(v, post.cpu())
        assert (accepted, bonus) == accept_walk(t, ref.logits.argmax(-1).tolist())
    # compaction on a path of depth 3 through the adapter's moves == cache_compact
    deep = max(range(len(t)), key=lambda i: (t.depths[i], -i))
    accepted = path_to(t, deep)
    src, dst = S.kv_moves(accepted, L)
    cache_compact(ref_cache, L, accepted)
    if hasattr(cache, "kv"):
        S.apply_kv_moves(cache.kv, src, dst)
        cache.truncate(L + len(accepted))
        assert torch.equal(cache.kv[:, :, :, :L + len(accepted)], ref_cache.kv[:, :, :, :L + len(accepted)])
    else:
        from dominotree.models.target import cache_apply, cache_truncate
        cache_apply(cache, lambda x: (S.apply_kv_moves(x, src, dst), x)[1])
        cache_truncate(cache, L + len(accepted))
    nxt, at = torch.tensor([[bonus]], device=tgt.device), torch.tensor([[L + len(accepted)]], device=tgt.device)
    with torch.no_grad():
        a = tgt.forward(nxt, at, cache).logits
        b = tgt.forward(nxt, at, ref_cache).logits
    assert torch.equal(a, b)
