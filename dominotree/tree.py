"""The draft tree: one flat type shared by builders, verifier, traces and the explorer.

Row 0 is the root (the last committed "bonus" token, depth 0); nodes follow in pop order,
so ``parents[i] < i``. A node at depth ``d`` sits at absolute position ``start + d``.
Everything else (attention mask, position ids, paths) is derived by pure functions here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class Tree:
    tokens: list[int]                 # row 0 = root token
    parents: list[int]                # parents[0] == -1
    depths: list[int]                 # depths[0] == 0
    scores: list[float] = field(default_factory=list)       # heap key: cumulative log-prob as scored
    marg_scores: list[float] = field(default_factory=list)  # same path under the uncorrected base

    def __post_init__(self):
        n = len(self.tokens)
        if not self.scores:
            self.scores = [0.0] * n
        if not self.marg_scores:
            self.marg_scores = [0.0] * n

    @classmethod
    def root_only(cls, token: int) -> "Tree":
        return cls([int(token)], [-1], [0])

    @classmethod
    def chain(cls, root: int, tokens, scores=None, marg_scores=None) -> "Tree":
        n = len(tokens)
        return cls([int(root)] + [int(t) for t in tokens], [-1] + list(range(n)),
                   list(range(n + 1)),
                   [0.0] + list(scores) if scores is not None else [],
                   [0.0] + list(marg_scores) if marg_scores is not None else [])

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def num_nodes(self) -> int:
        """Non-root nodes (what the budget counts)."""
        return len(self.tokens) - 1

    def prefix(self, budget: int) -> "Tree":
        """The root and the first ``budget`` nodes in pop order (all of them when fewer): the tree
        a best-first build of that budget gives."""
        n = max(0, min(int(budget), self.num_nodes)) + 1
        return Tree(self.tokens[:n], self.parents[:n], self.depths[:n], self.scores[:n], self.marg_scores[:n])

    def same_shape(self, other: "Tree") -> bool:
        """Identical tokens, parents and depths (the structural part of tree identity)."""
        return (self.tokens, self.parents, self.depths) == (other.tokens, other.parents, other.depths)

    def validate(self) -> None:
        n = len(self.tokens)
        if n == 0 or self.parents[0] != -1 or self.depths[0] != 0:
            raise ValueError("tree must start with a root at depth 0 with parent -1")
        if not (len(self.parents) == len(self.depths) == len(self.scores) == len(self.marg_scores) == n):
            raise ValueError("tree arrays have different lengths")
        for i in range(1, n):
            p = self.parents[i]
            if not 0 <= p < i:
                raise ValueError(f"node {i}: parent {p} is not an earlier row")
            if self.depths[i] != self.depths[p] + 1:
                raise ValueError(f"node {i}: depth {self.depths[i]} != parent depth + 1")

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "parents": self.parents, "depths": self.depths,
                "scores": self.scores, "marg_scores": self.marg_scores}

    @classmethod
    def from_dict(cls, d: dict) -> "Tree":
        t = cls([int(x) for x in d["tokens"]], [int(x) for x in d["parents"]],
                [int(x) for x in d["depths"]], [float(x) for x in d.get("scores", [])],
                [float(x) for x in d.get("marg_scores", [])])
        t.validate()
        return t


def path_to(tree: Tree, i: int) -> list[int]:
    """Row indices from the root to row ``i`` inclusive."""
    out = []
    while i >= 0:
        out.append(i)
        i = tree.parents[i]
    return out[::-1]


def children_of(tree: Tree) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in tree.tokens]
    for i in range(1, len(tree.tokens)):
        kids[tree.parents[i]].append(i)
    return kids


def child_maps(tree: Tree) -> list[dict[int, int]]:
    """Per row, child token -> child row (the first such child if tokens repeat)."""
    maps: list[dict[int, int]] = [{} for _ in tree.tokens]
    for i in range(1, len(tree.tokens)):
        maps[tree.parents[i]].setdefault(tree.tokens[i], i)
    return maps


def ancestor_matrix(tree: Tree) -> torch.Tensor:
    """``vis[i, j]`` is True when row ``j`` is row ``i`` or one of its ancestors."""
    n = len(tree.tokens)
    vis = torch.zeros(n, n, dtype=torch.bool)
    vis[0, 0] = True
    for i in range(1, n):
        vis[i, :i] = vis[tree.parents[i], :i]
        vis[i, i] = True
    return vis


def tree_mask(tree: Tree, prefix_len: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Additive 4D mask ``(1, 1, n, prefix_len + n)``: 0 where visible, finfo.min elsewhere.

    Float, not bool: under eager attention a bool mask is silently added as 0/1.
    """
    n = len(tree.tokens)
    vis = torch.ones(n, prefix_len + n, dtype=torch.bool)
    vis[:, prefix_len:] = ancestor_matrix(tree)
    mask = torch.zeros(1, 1, n, prefix_len + n, dtype=dtype)
    return mask.masked_fill_(~vis, torch.finfo(dtype).min)


def position_ids(tree: Tree, start: int) -> torch.Tensor:
    """``(1, n)`` absolute positions: the root at ``start``, a node at depth d at ``start + d``."""
    return (start + torch.tensor(tree.depths, dtype=torch.long)).unsqueeze(0)


def accept_walk(tree: Tree, post: list[int]) -> tuple[list[int], int]:
    """Sample-and-match: follow children whose token equals the target's token at each row.

    ``post[i]`` is the target's sample (argmax at T=0) at row ``i``. Returns the accepted rows
    (starting with the root, 0) and the bonus token (the target's token after the last one).
    """
    maps = child_maps(tree)
    cur, accepted = 0, [0]
    nxt = int(post[0])
    while nxt in maps[cur]:
        cur = maps[cur][nxt]
        accepted.append(cur)
        nxt = int(post[cur])
    return accepted, nxt
