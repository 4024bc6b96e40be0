"""Training losses beyond the hard-label cross-entropy, per row (the step sums and normalises).

- ``soft_loss``: the target's own distribution as the label. ``KL(p || q)`` over the target's
  top-k tokens (``p`` = the target's top-k log-probs renormalised over those k; ``q`` = the
  drafter's softmax over its whole head vocabulary), plus the cross-entropy on the target's
  argmax. A sampled answer then teaches what the target would say, not the sample.
- ``topm_loss``: Domino's correction as the tree uses it. ``scoring.ConditionalScorer`` scores a
  node's children among the depth's Top-M *base* candidates: corrected logits over those M,
  softmax over those M. The loss is the cross-entropy of that restricted softmax, on rows >= 1
  (row 0 is never corrected) whose label is among the Top-M (a label outside them cannot be
  drafted by the tree, whatever the correction does).
- ``loop_mask``: answer positions that continue a 5-gram already seen in the same answer (the
  yardstick's definition, ``train.loops.loop_flags``), to down-weight loops.
"""
from __future__ import annotations

import torch

from .loops import loop_flags


def soft_loss(logits: torch.Tensor, ids: torch.Tensor, lp: torch.Tensor) -> torch.Tensor:
    """Per row ``KL(p || q) + CE(argmax)``: ``logits`` [N, C] the drafter's, ``ids`` [N, k] the
    target's top-k tokens as column indices of ``logits`` (largest first), ``lp`` [N, k] their
    log-probs."""
    logq = torch.log_softmax(logits.float(), dim=-1).gather(1, ids)
    logp = torch.log_softmax(lp.float(), dim=-1)
    return (logp.exp() * (logp - logq)).sum(1) - logq[:, 0]


def topm_loss(base: torch.Tensor, final: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor,
              m: int) -> torch.Tensor:
    """Per row: ``-log softmax_M(final[TopM(base)])[label]`` where the label is among the Top-M
    of ``base`` and the row index is >= 1; 0 elsewhere. ``labels`` are column indices."""
    top = base.detach().topk(min(m, base.shape[1]), dim=1).indices            # [N, M]
    hit = top == labels[:, None]
    ok = hit.any(1) & (rows >= 1)
    lf = torch.log_softmax(final.float().gather(1, top), dim=-1)
    return -(lf * hit).sum(1) * ok


def loop_mask(ids: torch.Tensor, prompt_len: int) -> torch.Tensor:
    """[T] bool: position q of the answer continues a 5-gram already in the answer (prompt: False)."""
    flags = loop_flags(ids[prompt_len:].tolist())
    return torch.tensor([False] * prompt_len + flags, dtype=torch.bool)
