"""DominoTree's best-first build on CPU as one C++ op (``models/kernels/bestfirst.cpp``).

The graph builder's CPU path where it applies (``native_inputs``): the reference's heap and its two
per-node bodies (the correction's menu, the children's GRU step) run in C++, each body the same
ATen ops on the same shapes as ``graph.NodeExpander``'s, so trees, scores and menus equal
``build_reference``'s (``tests/test_builders.py``, which runs the graph builder on CPU). On a
2-core CPU the Python heap spent most of a round's build calling small torch ops from Python.
"""
from __future__ import annotations

import os

import torch

from ..config import TreeConfig
from ..scoring import ConditionalScorer
from ..trace import Menu
from ..tree import Tree
from .capture import NATIVE, Capture
from .reference import Built

NATIVE_ENV = "DOMINOTREE_NATIVE_BUILD"      # 0: keep the Python heap on CPU (A/B, tests)
_NATIVE_CAPTURE = Capture(NATIVE, "CPU: the heap and the per-node bodies in one C++ op (kernels/bestfirst.cpp)")


def native_inputs(scorer: ConditionalScorer) -> tuple | None:
    """The weights the C++ build reads for ``scorer`` (``ConditionalScorer.native_weights``), or
    None where it does not apply or ``DOMINOTREE_NATIVE_BUILD`` is 0."""
    if os.environ.get(NATIVE_ENV, "1").lower() in ("0", "false", "no"):
        return None
    return scorer.native_weights()


def build_native(scorer: ConditionalScorer, weights: tuple, root_token: int, root_state, cfg: TreeConfig,
                 max_depth: int) -> Built:
    """The reference's tree and menus from ``kernels/bestfirst.cpp`` (the same ops on the same
    shapes, the same heap keys and ties)."""
    block, k = scorer.block, min(scorer.k, scorer.V)
    with torch.inference_mode():
        ints, sc, nodes, toks, vals, ranks = torch.ops.dominotree_build.best_first(
            block.base_logits, block.z, root_state.reshape(-1).to(torch.float32), int(root_token), int(cfg.budget),
            int(max_depth), k, int(scorer.m), *weights)
    tokens, parents, depths = (list(c) for c in zip(*ints.tolist()))
    scores, margs = (list(c) for c in zip(*sc.tolist()))
    menus = [Menu(node, depth, t, [v[0] for v in vs], [v[1] for v in vs], r)
             for (node, depth), t, vs, r in zip(nodes.tolist(), toks.tolist(), vals.tolist(), ranks.tolist())]
    return Built(Tree(tokens, parents, depths, scores, margs), menus, {"capture": _NATIVE_CAPTURE.to_dict()})
