"""Our ``Tree`` as the verify inputs of the serving engines, with no engine installed.

SGLang's EAGLE-style tree verify (``sgl-kernel/csrc/speculative/eagle_utils.cu``:
``build_tree_efficient`` and ``VerifyTreeGreedy``) takes, per request of ``n = draft_token_num``
rows (row 0 the last verified token, our root):
- ``draft_token`` [n]: the rows' tokens (``candidates`` of the verify);
- ``custom_mask``: flattened bools, row-major ``n x (seq_len + n)`` per request (``FULL_MASK``;
  requests concatenated), True where a row attends; ``QLEN_ONLY`` keeps only the ``n x n`` part;
- ``positions`` [n]: ``seq_len + depth``;
- ``retrive_index`` [1, n]: the row's index in the batch's flattened rows (``b * n + i``);
- ``retrive_next_token`` [1, n]: a row's first child (the lowest-index one), -1 for a leaf;
- ``retrive_next_sibling`` [1, n]: the next child of the same parent by index, -1 at the end.
The kernel fills the child lists by walking rows from ``n - 1`` down to 1 and pushing each at the
front of its parent's list, which leaves every list in increasing row order: the order our
``child_maps`` reads, so the greedy walk (first matching child) picks the row ``accept_walk`` picks.

vLLM's tree attention (``vllm/v1/attention/backends/tree_attn.py``, ``_prepare_tree_attn_bias``)
takes a float32 ``n x n`` bias, 0 where a row attends (itself, the root, its ancestors), -inf
elsewhere, built once from the static ``speculative_token_tree``; the DDTree work for vLLM
(vllm-project/vllm#42910, issue #40809) needs it per request, since each request's tree differs.
``vllm_tree_bias`` is that bias for one of our trees; ``vllm_batch_bias`` stacks a batch.

After the target's forward: ``retrieve_walk`` is the greedy verify over the retrieve arrays (the
sample-and-match walk, given each row's target token), and ``kv_moves`` / ``kv_keep_free`` are the
KV-compaction indices: moves of the accepted rows' entries to the contiguous slots after the
prefix (our ``cache_compact``), or for a paged pool the cache slots kept and freed.

Pure functions of the tree; torch only (no engine, no GPU).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .tree import Tree, ancestor_matrix, children_of


@dataclass
class SGLangVerify:
    """One request's (or a batch's, from ``sglang_batch``) EAGLE-style verify inputs."""
    draft_token: torch.Tensor           # [B * n] long
    custom_mask: torch.Tensor           # flattened bool, per request n x (seq_len + n) (or n x n)
    positions: torch.Tensor             # [B * n] long
    retrive_index: torch.Tensor         # [B, n] long
    retrive_next_token: torch.Tensor    # [B, n] long, -1: none
    retrive_next_sibling: torch.Tensor  # [B, n] long, -1: none
    seq_lens: list[int]                 # verified prefix length per request
    n: int                              # draft_token_num (rows per request, root included)
    mask_mode: str = "full"             # "full" (prefix columns included) or "qlen" (n x n only)


def _check(tree: Tree, seq_len: int) -> None:
    tree.validate()
    if seq_len < 0:
        raise ValueError(f"seq_len must be >= 0, got {seq_len}")


def retrieve_lists(tree: Tree) -> tuple[list[int], list[int]]:
    """(next_token, next_sibling) per row: first child, next sibling, both in row order, -1 for none."""
    nxt, sib = [-1] * len(tree), [-1] * len(tree)
    for parent, kids in enumerate(children_of(tree)):
        if kids:
            nxt[parent] = kids[0]
        for a, b in zip(kids, kids[1:]):
            sib[a] = b
    return nxt, sib


def sglang_verify(tree: Tree, seq_len: int, batch_index: int = 0, mask_mode: str = "full") -> SGLangVerify:
    """The verify inputs of one request whose verified prefix is ``seq_len`` tokens long (the root
    is the last verified token's row, at position ``seq_len``, as in ``build_tree_efficient``)."""
    _check(tree, seq_len)
    if mask_mode not in ("full", "qlen"):
        raise ValueError(f"mask_mode must be 'full' or 'qlen', got {mask_mode!r}")
    n = len(tree)
    vis = ancestor_matrix(tree)
    if mask_mode == "full":
        mask = torch.ones(n, seq_len + n, dtype=torch.bool)
        mask[:, seq_len:] = vis
    else:
        mask = vis
    nxt, sib = retrieve_lists(tree)
    return SGLangVerify(
        draft_token=torch.tensor(tree.tokens, dtype=torch.long),
        custom_mask=mask.reshape(-1).clone(),
        positions=seq_len + torch.tensor(tree.depths, dtype=torch.long),
        retrive_index=(batch_index * n + torch.arange(n, dtype=torch.long))[None],
        retrive_next_token=torch.tensor([nxt], dtype=torch.long),
        retrive_next_sibling=torch.tensor([sib], dtype=torch.long),
        seq_lens=[seq_len], n=n, mask_mode=mask_mode)


def sglang_batch(trees: list[Tree], seq_lens: list[int], mask_mode: str = "full") -> SGLangVerify:
    """A batch: every tree must have the same row count (SGLang verifies a fixed ``draft_token_num``
    per request; pad a smaller tree upstream or verify it alone)."""
    if not trees or len(trees) != len(seq_lens):
        raise ValueError("give one seq_len per tree, and at least one tree")
    n = len(trees[0])
    if any(len(t) != n for t in trees):
        raise ValueError(f"trees have {sorted({len(t) for t in trees})} rows; a batch needs one draft_token_num")
    parts = [sglang_verify(t, s, b, mask_mode) for b, (t, s) in enumerate(zip(trees, seq_lens))]
    cat = lambda name: torch.cat([getattr(p, name) for p in parts])   # noqa: E731
    return SGLangVerify(cat("draft_token"), cat("custom_mask"), cat("positions"), cat("retrive_index"),
                        cat("retrive_next_token"), cat("retrive_next_sibling"), list(seq_lens), n, mask_mode)


def request_mask(v: SGLangVerify, b: int = 0) -> torch.Tensor:
    """Request ``b``'s rows of the flattened ``custom_mask`` as [n, seq_len + n] (``full``) or [n, n]."""
    n = v.n
    if v.mask_mode == "qlen":
        return v.custom_mask[b * n * n:(b + 1) * n * n].view(n, n)
    off = sum((s + n) * n for s in v.seq_lens[:b])
    width = v.seq_lens[b] + n
    return v.custom_mask[off:off + n * width].view(n, width)


def additive_mask(visible: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A bool [n, T] attend-mask as the target's 4D additive mask (1, 1, n, T): 0 / finfo.min."""
    out = torch.zeros(1, 1, *visible.shape, dtype=dtype)
    return out.masked_fill_(~visible, torch.finfo(dtype).min)


def vllm_tree_bias(tree: Tree, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """vLLM's tree attention bias for this tree: [n, n], 0 where a row attends, -inf elsewhere."""
    tree.validate()
    return torch.zeros(len(tree), len(tree), dtype=dtype).masked_fill_(~ancestor_matrix(tree), float("-inf"))


def vllm_batch_bias(trees: list[Tree], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Per-request biases stacked to [B, N, N] (N the largest tree); a padding row attends only to
    itself (a row with no visible key would make a NaN softmax)."""
    if not trees:
        raise ValueError("no trees")
    N = max(len(t) for t in trees)
    out = torch.full((len(trees), N, N), float("-inf"), dtype=dtype)
    out[:, torch.arange(N), torch.arange(N)] = 0
    for b, t in enumerate(trees):
        out[b, :len(t), :len(t)] = vllm_tree_bias(t, dtype)
    return out


def retrieve_walk(v: SGLangVerify, target_tokens: torch.Tensor, b: int = 0) -> tuple[list[int], int]:
    """``VerifyTreeGreedy`` over the retrieve arrays for request ``b``: from the root follow the first
    child (in ``next_token`` / ``next_sibling`` order) whose token equals the target's token at the
    current row. ``target_tokens`` [B * n] holds the target's token per flattened row (argmax at
    T = 0, its sample per row under sample-and-match). Returns the accepted rows within the request
    (root first, as ``accept_walk``) and the bonus token."""
    ridx, nxt, sib = v.retrive_index[b].tolist(), v.retrive_next_token[b].tolist(), v.retrive_next_sibling[b].tolist()
    cand, tgt = v.draft_token.tolist(), target_tokens.tolist()
    last, accepted, cur = ridx[0], [0], 0
    while True:
        cur = nxt[cur]
        while cur != -1 and cand[ridx[cur]] != tgt[last]:
            cur = sib[cur]
        if cur == -1:
            break
        accepted.append(cur)
        last = ridx[cur]
    return accepted, int(tgt[last])


def kv_moves(accepted: list[int], seq_len: int) -> tuple[list[int], list[int]]:
    """Contiguous-cache compaction: (src, dst) positions so that the accepted rows' keys and values
    sit at ``seq_len .. seq_len + k - 1``; only the rows that move (``accepted`` is increasing)."""
    if accepted != sorted(set(accepted)) or not accepted or accepted[0] != 0:
        raise ValueError(f"accepted rows must be increasing and start at the root: {accepted}")
    pairs = [(seq_len + r, seq_len + i) for i, r in enumerate(accepted) if r != i]
    return [s for s, _ in pairs], [d for _, d in pairs]


def apply_kv_moves(kv: torch.Tensor, src: list[int], dst: list[int]) -> None:
    """Do ``kv_moves`` on a tensor whose positions are dim -2 (gathered first, so overlaps are safe)."""
    if src:
        kv[..., dst, :] = kv[..., src, :]


def kv_keep_free(accepted: list[int], cache_locs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Paged-pool compaction: the cache slots of the accepted rows, in path order (they become the
    request's next positions), and the slots of the other rows (to free). ``cache_locs`` [n] are the
    slots the verify wrote the rows to."""
    keep = torch.tensor(accepted, dtype=torch.long)
    drop = torch.ones(len(cache_locs), dtype=torch.bool)
    drop[keep] = False
    return cache_locs[keep], cache_locs[drop]
