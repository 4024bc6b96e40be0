"""The reference builders: Python best-first heaps. They define the trees.

``build_reference`` is DominoTree's builder: pop the best path, push all K children of the popped
node eagerly, heap key ``(-cumulative log-prob, insertion counter)`` so ties break by insertion
order, scores summed in Python float64 from fp32 values. ``build_lazy`` is DDTree's builder over
per-depth marginals: push the next sibling and the first child lazily, ties break on the ranks
tuple; an optional ``stop`` rule turns it into CaDDTree's adaptive budget.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..config import TreeConfig
from ..trace import Menu
from ..tree import Tree


@dataclass
class Built:
    tree: Tree
    menus: list[Menu] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def build_reference(scorer, root_token: int, root_state, cfg: TreeConfig, max_depth: int, stop=None) -> Built:
    """Best-first conditional tree: ``budget`` nodes, each expanded node offers K children.

    ``stop(n, logw) -> bool``, when given, is asked before accepting each popped node (an adaptive
    budget, CondAdaptive); ``cfg.budget`` is then the maximum."""
    tokens, parents, depths, scores, margs = [int(root_token)], [-1], [0], [0.0], [0.0]
    menus: list[Menu] = []
    heap: list = []
    tie = 0

    def expand(row: int, state, depth: int, cum: float, marg: float):
        nonlocal tie
        ch = scorer.children(state, depth)
        menus.append(Menu(row, depth, ch.tokens, ch.logprobs, ch.base_logprobs, ch.ranks))
        for k, (tok, lp, blp) in enumerate(zip(ch.tokens, ch.logprobs, ch.base_logprobs)):
            st = ch.states[k] if ch.states is not None else None
            heapq.heappush(heap, (-(cum + lp), tie, tok, depth, row, st, marg + blp))
            tie += 1

    expand(0, root_state, 1, 0.0, 0.0)
    stopped = False
    while heap and len(tokens) - 1 < cfg.budget:
        if stop is not None and stop(len(tokens) - 1, -heap[0][0]):
            stopped = True
            break
        neg, _, tok, depth, parent, state, marg = heapq.heappop(heap)
        row = len(tokens)
        tokens.append(tok); parents.append(parent); depths.append(depth)
        scores.append(-neg); margs.append(marg)
        # the last node's children could never be used: skip the wasted expansion
        if depth < max_depth and len(tokens) - 1 < cfg.budget:
            expand(row, state, depth + 1, -neg, marg)
    extra = {"stopped_early": stopped} if stop is not None else {}
    return Built(Tree(tokens, parents, depths, scores, margs), menus, extra)


def build_lazy(top_ids: list[list[int]], top_lps: list[list[float]], root_token: int, budget: int,
               stop=None) -> Built:
    """DDTree's best-first tree over per-depth marginals with lazy sibling/child pushes.

    ``top_ids[d][r]`` / ``top_lps[d][r]``: the rank-r token of depth d+1 and its log-prob
    (sorted descending). ``stop(n, logw) -> bool``, when given, is asked before accepting each
    popped node (CaDDTree's rule); the build ends at the first True.
    """
    depth_max, k = len(top_ids), len(top_ids[0]) if top_ids else 0
    tokens, parents, depths, scores = [int(root_token)], [-1], [0], [0.0]
    heap = [(-top_lps[0][0], (0,), 0, 1, 0, top_lps[0][0])] if depth_max and k else []
    stopped = False
    while heap and len(tokens) - 1 < budget:
        neg, ranks, parent, depth, rank, logw = heap[0]
        if stop is not None and stop(len(tokens) - 1, logw):
            stopped = True
            break
        heapq.heappop(heap)
        row = len(tokens)
        tokens.append(top_ids[depth - 1][rank]); parents.append(parent); depths.append(depth)
        scores.append(logw)
        if rank + 1 < k:
            sib = logw - top_lps[depth - 1][rank] + top_lps[depth - 1][rank + 1]
            heapq.heappush(heap, (-sib, ranks[:-1] + (rank + 1,), parent, depth, rank + 1, sib))
        if depth < depth_max:
            child = logw + top_lps[depth][0]
            heapq.heappush(heap, (-child, ranks + (0,), row, depth + 1, 0, child))
    tree = Tree(tokens, parents, depths, scores, list(scores))
    return Built(tree, [], {"stopped_early": stopped})
