"""A cheaper LM head for training: the loss over a candidate vocabulary instead of all 49k tokens.

The drafters have no LM head of their own: a row's logits are the target's frozen head applied to
the drafter's hidden state (plus, for Domino, the correction ``W2 · h``). In training that head is
most of each step (forward and backward over [rows, 49152]). Here a step's softmax runs over

    candidates = the ``n`` most frequent answer tokens of the training data  ∪  the step's labels

so each label competes with the tokens that actually occur in the target's answers. Tokens outside
the set get no gradient: their logits keep coming from the frozen target head (and, for Domino,
their correction rows keep their zero initialisation), so nothing pushes them up. Evaluation and
decoding always use the full vocabulary; whether the cheaper loss buys acceptance per CPU-hour is
measured on the held-out split, not assumed.
"""
from __future__ import annotations

from collections.abc import Iterable

import torch


def ranked_tokens(answers: Iterable[torch.Tensor], vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every id ranked by its count over ``answers``, most frequent first (ties, unseen ids
    included: the smaller id first), and the counts by id."""
    counts = torch.zeros(vocab_size, dtype=torch.long)
    for ids in answers:
        counts += torch.bincount(ids, minlength=vocab_size)[:vocab_size]
    # stable sort on -count keeps ascending ids among equal counts
    return torch.sort(-counts, stable=True).indices, counts


def frequent_tokens(answers: Iterable[torch.Tensor], n: int, vocab_size: int) -> torch.Tensor:
    """The ``n`` most frequent ids over ``answers`` (ties: the smaller id first), sorted by id."""
    if n < 1:
        raise ValueError("a candidate vocabulary needs at least one token")
    order, _ = ranked_tokens(answers, vocab_size)
    return torch.sort(order[: min(n, vocab_size)]).values


class HeadVocab:
    """The candidate set of a training step and the labels re-indexed into it."""

    def __init__(self, frequent: torch.Tensor):
        self.frequent = frequent

    def __call__(self, *labels: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """``(candidates, [labels as indices into candidates])``; labels must be valid ids."""
        cand = torch.unique(torch.cat([self.frequent.to(labels[0].device), *labels]))          # sorted
        return cand, [torch.searchsorted(cand, lab.contiguous()) for lab in labels]

    def coverage(self, answers: Iterable[torch.Tensor]) -> float:
        """Share of answer tokens inside the frequent set (how much of the mass it covers)."""
        hit = tot = 0
        for ids in answers:
            hit += int(torch.isin(ids, self.frequent).sum())
            tot += len(ids)
        return hit / max(1, tot)
