"""Tree verification: one target forward over [root] + nodes with tree attention, then the
sample-and-match walk. Lossless at any temperature: every committed token is a target sample
given its committed prefix (argmax at T = 0)."""
from __future__ import annotations

import torch

from .models.target import Target, TargetOutput
from .tree import Tree, position_ids, tree_mask


def sample(logits: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> list[int]:
    """One token per row of ``logits`` [n, V]: argmax when T < 1e-5, else a draw from softmax(l/T)."""
    if temperature < 1e-5:
        return torch.argmax(logits, dim=-1).tolist()
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator).view(-1).tolist()


def is_chain(tree: Tree) -> bool:
    return all(p == i - 1 for i, p in enumerate(tree.parents[1:], start=1))


def verify_tree(target: Target, cache, tree: Tree, start: int, taps: tuple[int, ...] | None) -> TargetOutput:
    """Run the target on the tree rows at positions ``start + depth`` (appends to ``cache``)."""
    dev = target.device
    ids = torch.tensor([tree.tokens], dtype=torch.long, device=dev)
    pos = position_ids(tree, start).to(dev)
    # a chain is ordinary causal attention; anything else needs the 4D ancestor mask
    mask = None if is_chain(tree) else tree_mask(tree, start, target.dtype).to(dev)
    return target.forward(ids, pos, cache, mask=mask, taps=taps)
