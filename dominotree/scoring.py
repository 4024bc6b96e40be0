"""Children functions: given a node's state and the depth of its children, the menu of K
children with their scores. Builders only ever call ``scorer.children(state, depth)``.

- ``MarginalScorer``: per-depth top-K of the full-vocabulary base log-softmax (DDTree, ``marg``).
- ``ConditionalScorer``: Domino's GRU correction re-run along each node's own path, restricted
  to the Top-M base candidates of that depth (``dominotree``).
- ``StaticScorer``: the correction computed once per depth along the greedy chain, shared by
  every node at that depth (``condstatic``).

Depths are 1-indexed: the root's children are at depth 1, drawn from block row 0.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DraftBlock:
    """One drafter forward: per-depth base logits (row d-1 is depth d) and what the head needs."""
    root: int
    base_logits: torch.Tensor            # [D, V] model dtype
    z: torch.Tensor | None = None        # [D, H] backbone hidden states (Domino)
    root_state: torch.Tensor | None = None  # [G] GRU state after consuming the root (Domino)

    @property
    def depth(self) -> int:
        return self.base_logits.shape[0]


@dataclass
class Children:
    tokens: list[int]
    logprobs: list[float]          # heap-score increments as this method scores them
    base_logprobs: list[float]     # uncorrected full-vocabulary log-probs of the same tokens
    ranks: list[int]               # rank in the depth's Top-M base list (-1 outside it)
    states: torch.Tensor | None    # [K, G] child GRU states (conditional scorer only)


class _BaseScores:
    """Per-round base log-softmax and Top-M candidate lists shared by all scorers."""

    def __init__(self, block: DraftBlock, topm: int):
        self.block = block
        self.base_lp = torch.log_softmax(block.base_logits.float(), dim=-1)     # [D, V] fp32
        v = self.base_lp.shape[-1]
        self.topm = min(topm, v) if topm > 0 else 0
        m = self.topm or min(64, v)   # candidates shown in traces even for full-vocab scoring
        vals, ids = torch.topk(block.base_logits, m, dim=-1)
        self.cand = ids                                                        # [D, M]
        self._rank = [dict(zip(row, range(len(row)))) for row in ids.tolist()]

    def ranks(self, depth: int, tokens: list[int]) -> list[int]:
        r = self._rank[depth - 1]
        return [r.get(t, -1) for t in tokens]

    def base_of(self, depth: int, tokens: torch.Tensor) -> list[float]:
        return self.base_lp[depth - 1].index_select(0, tokens).tolist()

    def candidates(self) -> tuple[list[list[int]], list[list[float]]]:
        return self.cand.tolist(), self.base_lp.gather(1, self.cand).tolist()


class MarginalScorer(_BaseScores):
    """Every node at depth d gets the same menu: the top-K of the base distribution at d."""

    def __init__(self, block: DraftBlock, k: int, topm: int = 64):
        super().__init__(block, topm)
        self.k = min(k, self.base_lp.shape[-1])
        vals, ids = torch.topk(self.base_lp, self.k, dim=-1)
        self._menus = [(i, v) for i, v in zip(ids.tolist(), vals.tolist())]

    def children(self, state, depth: int) -> Children:
        toks, lps = self._menus[depth - 1]
        return Children(toks, lps, lps, self.ranks(depth, toks), None)


class ConditionalScorer(_BaseScores):
    """DominoTree's children function: the GRU correction along the node's realized path.

    Depth 1 (``pure_draft_prefix_len`` = 1) is path-independent: top-K of the full-vocabulary
    base log-softmax. Deeper children: ``h = SiLU(W1·[z_d ; s])`` cast to fp32, corrected logits
    ``basec_d + h @ W2c_dᵀ`` over the Top-M base candidates (fp32), log-softmax over those M,
    top-K. Child GRU states come from one batched K-way GRU step.
    """

    def __init__(self, block: DraftBlock, drafter, embed: torch.nn.Module, k: int, topm: int):
        super().__init__(block, topm)
        self.drafter, self.embed, self.k = drafter, embed, k
        self.dtype = drafter.fc.weight.dtype
        w2 = drafter.embed_proj[2].weight                                    # [V, E]
        base = block.base_logits
        if self.topm:
            c = self.cand                                                     # [D, M]
            self.w2c = w2[c.reshape(-1)].float().view(c.shape[0], c.shape[1], -1)   # [D, M, E]
            self.basec = base.gather(1, c).float()                             # [D, M]
        self.root_children = torch.topk(self.base_lp[0], min(k, self.base_lp.shape[-1]))

    def corrected_logprobs(self, state: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs, token ids) over the scored candidates for children at ``depth`` >= 2."""
        row = depth - 1
        z = self.block.z[row:row + 1]
        if self.topm:
            h = self.drafter.correction_hidden(z, state.view(1, -1).to(self.dtype)).float()  # [1, E]
            corrected = self.basec[row] + (h @ self.w2c[row].T)[0]                         # [M]
            return torch.log_softmax(corrected, dim=-1), self.cand[row]
        full = (self.block.base_logits[row:row + 1] + self.drafter.correction(z, state.view(1, -1).to(self.dtype))).float()[0]
        return torch.log_softmax(full, dim=-1), None

    def children(self, state: torch.Tensor, depth: int) -> Children:
        if depth == 1:
            vals, toks = self.root_children
        else:
            lp, cand = self.corrected_logprobs(state, depth)
            vals, local = torch.topk(lp, min(self.k, lp.shape[0]))
            toks = cand[local] if cand is not None else local
        tl = toks.tolist()
        return Children(tl, vals.tolist(), self.base_of(depth, toks), self.ranks(depth, tl),
                        self.child_states(state, toks))

    def child_states(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        emb = self.embed(toks).to(self.dtype)                                  # [K, H]
        h0 = state.view(1, -1).expand(toks.shape[0], -1)
        return self.drafter.gru_step(emb, h0)                                  # [K, G]


class StaticScorer(ConditionalScorer):
    """``condstatic``: per-depth menus from the correction along the greedy (chain) path."""

    def __init__(self, block: DraftBlock, drafter, embed, k: int, topm: int, depth: int):
        super().__init__(block, drafter, embed, k, topm)
        vals, toks = self.root_children
        self._menus = {1: (toks.tolist(), vals.tolist())}
        state = self.child_states(block.root_state, toks[:1])[0]
        for d in range(2, depth + 1):
            lp, cand = self.corrected_logprobs(state, d)
            v, local = torch.topk(lp, min(k, lp.shape[0]))
            t = cand[local] if cand is not None else local
            self._menus[d] = (t.tolist(), v.tolist())
            state = self.child_states(state, t[:1])[0]

    def children(self, state, depth: int) -> Children:
        toks, lps = self._menus[depth]
        return Children(toks, lps, self.base_of(depth, torch.tensor(toks)), self.ranks(depth, toks), None)


def domino_chain(block: DraftBlock, drafter, embed) -> tuple[list[int], list[float], list[float]]:
    """Domino's corrected greedy chain over the full vocabulary, as released ``spec_generate``:
    x_1 = argmax(base_0); then x_{i+1} = argmax(base_i + W2·SiLU(W1·[z_i ; s_i]))."""
    dtype = drafter.fc.weight.dtype
    base = block.base_logits
    base_lp = torch.log_softmax(base.float(), dim=-1)
    lp0 = base_lp[0]
    tok = int(torch.argmax(base[0]))
    toks, lps, margs = [tok], [float(lp0[tok])], [float(lp0[tok])]
    state = block.root_state.view(1, -1)
    for i in range(1, base.shape[0]):
        state = drafter.gru_step(embed(torch.tensor([tok], device=base.device)).to(dtype), state)
        logits = base[i:i + 1] + drafter.correction(block.z[i:i + 1], state).to(base.dtype)
        tok = int(torch.argmax(logits[0]))
        toks.append(tok)
        lps.append(float(torch.log_softmax(logits[0].float(), -1)[tok]))
        margs.append(float(base_lp[i, tok]))
    return toks, lps, margs


def greedy_chain(block: DraftBlock) -> tuple[list[int], list[float]]:
    """DFlash's chain: the argmax of every depth's base distribution."""
    lp = torch.log_softmax(block.base_logits.float(), dim=-1)
    vals, toks = lp.max(dim=-1)
    return toks.tolist(), vals.tolist()
