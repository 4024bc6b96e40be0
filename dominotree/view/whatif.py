"""What a smaller budget would have accepted on a recorded round.

A best-first tree stores its nodes in pop order (``tree.py``), so the tree the same builder
would have built with budget ``b`` is the first ``b`` nodes: rows ``0..b``. The target's token
at a row depends only on that row's ancestors, which all lie in the prefix, so the round's
recorded target tokens decide the smaller tree's accepted path exactly.
"""
from __future__ import annotations

import dataclasses

from ..trace import RoundTrace
from ..tree import accept_walk


def at_budget(rt: RoundTrace, budget: int) -> RoundTrace:
    """``rt`` as it would have gone with budget ``budget``: its sub-tree, accepted path and bonus
    (menus, candidates and the marginal tree are dropped: they describe the full build)."""
    tree = rt.tree.prefix(budget)
    post = rt.target_tokens[:len(tree.tokens)]
    accepted, bonus = accept_walk(tree, post)
    return dataclasses.replace(rt, tree=tree, target_tokens=list(post), accepted=accepted, bonus=bonus, menus=[],
                               candidates=[], candidate_logprobs=[], marginal_tree=None,
                               extra={**rt.extra, "whatif_budget": tree.num_nodes})
