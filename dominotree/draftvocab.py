"""A draft vocabulary: the drafters score only the N target tokens that the target writes most.

The drafters have no LM head of their own: a block's base logits are the target's head applied
to the drafter's 16 rows, a product with all 49k vocabulary rows that costs the embedded pair about
a fifth of a float32 round on a laptop CPU. Restricted to the N most frequent answer tokens (the
idea of FR-Spec, Zhao et al. 2025), that product shrinks by V / N, and so do the per-depth
log-softmax and Top-M of the build. A token outside the set is never drafted; verification is
untouched, so decoding stays lossless whatever N is (``tests/test_lossless.py``). N = 0 (the
default) is the paper's full vocabulary.

How it runs: the draft computes base logits over the N columns only; the build then runs, unchanged,
in that column space (token t means ``ids[t]``), on a view of the Domino drafter whose correction
rows ``W2`` and whose embedding table are restricted to the same ids; ``globalize`` maps the built
tree and its menus back to target token ids before the verify.

The ranked ids ship with the drafters (``assets/drafters/draft-vocab.json``, made by
``python -m dominotree.train.rankvocab`` from the self-distilled training answers).
"""
from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import torch

from .config import BOUNDS, ConfigError

DEFAULT_FILE = Path(__file__).resolve().parents[1] / "assets" / "drafters" / "draft-vocab.json"


def read_ranked(path: str | Path = DEFAULT_FILE) -> list[int]:
    """Token ids ranked by frequency (most frequent first) from a draft-vocab file."""
    path = Path(path)
    try:
        blob = json.loads(path.read_text())
        ranked = [int(i) for i in blob["ranked_ids"]]
    except FileNotFoundError:
        raise ConfigError(f"no draft vocabulary at {path}; make one with "
                          f"`python -m dominotree.train.rankvocab`") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(f"{path}: not a draft-vocab file ({e})") from None
    if len(set(ranked)) != len(ranked) or any(i < 0 for i in ranked):
        raise ConfigError(f"{path}: ranked_ids must be distinct non-negative token ids")
    return ranked


class DraftVocab:
    """The first ``size`` ids of ``ranked`` (sorted) with the target's rows for them."""

    def __init__(self, target, ranked: list[int], size: int):
        vocab = target.vocab_rows
        if BOUNDS["draft_vocab"].check(size) == 0:
            raise ConfigError("a draft vocabulary of 0 tokens is the full vocabulary: no DraftVocab to make")
        if size > len(ranked):
            raise ConfigError(f"draft vocabulary of {size} tokens asked, the ranked list has {len(ranked)}")
        ids = sorted(ranked[:size])
        if ids[-1] >= vocab:
            raise ConfigError(f"draft vocabulary id {ids[-1]} is outside the target's {vocab} tokens")
        self.size = size
        self.dtype = target.lm_head.weight.dtype
        self.ids = torch.tensor(ids, dtype=torch.long, device=target.device)
        self.id_list = ids
        self.head_linear = target.head_rows(self.ids)                            # x @ W[ids].T
        self.embed = torch.nn.Embedding.from_pretrained(target.embed.weight.detach()[self.ids], freeze=True)
        self._views: dict[int, object] = {}

    def logits(self, rows: torch.Tensor) -> torch.Tensor:
        """Base logits of the drafter's rows over the N tokens, [rows, N] (the target head's dtype)."""
        return self.head_linear(rows.to(self.dtype))

    def restrict(self, drafter):
        """A view of ``drafter`` sharing its weights, with the Domino correction rows ``W2``
        restricted to the N tokens (a DFlash drafter has none, and is returned as is)."""
        if not drafter.cfg.is_domino:
            return drafter
        view = self._views.get(id(drafter))
        if view is None:
            proj = drafter.embed_proj
            w2 = torch.nn.Linear(proj[2].in_features, self.size, bias=False,
                                 device=proj[2].weight.device, dtype=proj[2].weight.dtype)
            w2.weight = torch.nn.Parameter(proj[2].weight.detach()[self.ids].contiguous(), requires_grad=False)
            view = copy.copy(drafter)
            view._modules = dict(drafter._modules)
            view._modules["embed_proj"] = torch.nn.Sequential(proj[0], proj[1], w2)
            view.cfg = replace(drafter.cfg, vocab_size=self.size)
            self._views[id(drafter)] = view
        return view

    def to_global(self, tokens: list[int]) -> list[int]:
        ids = self.id_list
        return [ids[t] for t in tokens]

    def globalize(self, built):
        """``built`` (tree and menus in column space; the root is a target id) in target ids."""
        t = built.tree
        t.tokens = t.tokens[:1] + self.to_global(t.tokens[1:])
        for m in built.menus:
            m.tokens = self.to_global(m.tokens)
        return built
