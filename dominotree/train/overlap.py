"""Training prompts must not overlap the evaluation prompts: word n-gram and near-duplicate checks.

``prompts.py`` already filters exact and near-exact (word-set Jaccard) matches while it builds
its template pool. This module is the independent check, applied to whatever the data actually
holds (template, self-written and multi-turn requests alike): no training request may share a
word n-gram (default 8 words) with any evaluation prompt, nor contain a whole evaluation prompt
shorter than that, nor equal one after normalization.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from dominotree.train.prompts import normalize

DEFAULT_N = 8


def ngrams(text: str, n: int = DEFAULT_N) -> set[tuple[str, ...]]:
    """Word n-grams of the normalized text; a text shorter than ``n`` words is one n-gram of itself."""
    w = normalize(text).split()
    if not w:
        return set()
    if len(w) < n:
        return {tuple(w)}
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


@dataclass(frozen=True)
class Overlap:
    train: str
    eval: str
    shared: tuple[str, ...]


class EvalIndex:
    """The n-grams and normalized texts of an evaluation prompt set, for fast lookups."""

    def __init__(self, eval_texts: Iterable[str], n: int = DEFAULT_N):
        self.n = n
        self.norms: dict[str, str] = {}
        self.grams: dict[tuple[str, ...], str] = {}
        self.short: dict[str, str] = {}     # eval prompts shorter than n words: contained whole?
        for t in eval_texts:
            key = normalize(t)
            self.norms.setdefault(key, t)
            if len(key.split()) < n:
                self.short.setdefault(f" {key} ", t)
            else:
                for g in ngrams(t, n):
                    self.grams.setdefault(g, t)

    def find(self, text: str) -> Overlap | None:
        """The first overlap of ``text`` with the evaluation set, or None."""
        key = normalize(text)
        if key in self.norms:
            return Overlap(text, self.norms[key], tuple(key.split()))
        for g in ngrams(text, self.n):
            if g in self.grams:
                return Overlap(text, self.grams[g], g)
        padded = f" {key} "
        for short, t in self.short.items():
            if short in padded:
                return Overlap(text, t, tuple(short.split()))
        return None


def find_overlaps(train_texts: Iterable[str], eval_texts: Iterable[str], n: int = DEFAULT_N) -> list[Overlap]:
    idx = EvalIndex(eval_texts, n)
    return [o for t in train_texts if (o := idx.find(t)) is not None]
