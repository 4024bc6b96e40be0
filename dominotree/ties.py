"""Near-ties: the target's logit gap where two T = 0 outputs of the same prompt first differ.

Every method commits the target's argmax, so at T = 0 its output equals ``ar``'s exactly in exact
arithmetic. In bfloat16 the verify forward (many rows, tree mask) and ``ar``'s one-row forward
round differently, and where the target's top two tokens are nearly tied the argmax can flip. A
gap of a few hundredths with the method's token ranked second is such a rounding tie; a large gap
or a low rank would be a real bug. The explorer (``live.tie_note``) and the bench
(``bench.ties.diagnose``) both ask this module.
"""
from __future__ import annotations

import torch

ROUNDING_GAP = 0.25   # logits: two bf16 ulps at |logit| in [16, 32)


@torch.inference_mode()
def gap_at(dec, prefix: list[int], ar_token: int, method_token: int) -> tuple[float, int]:
    """Target logit of ``ar_token`` minus that of ``method_token`` after ``prefix`` (fresh
    forward in the target's dtype, read in float32), and ``method_token``'s rank (0 = argmax)."""
    tgt = dec.target
    ids = torch.tensor([prefix], dtype=torch.long, device=tgt.device)
    pos = torch.arange(len(prefix), device=tgt.device)[None]
    out = tgt.forward(ids, pos, tgt.new_cache(), last_only=True)
    logits = out.logits[-1].float()
    rank = int((logits > logits[method_token]).sum())
    return float(logits[ar_token] - logits[method_token]), rank
