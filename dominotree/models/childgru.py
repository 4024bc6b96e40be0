"""The Domino head's GRU step for a node's children: K children of one parent in one step.

A tree expands a node into K children; each child's GRU state is the GRU stepped from the
parent's state with the child's token. ``nn.GRU`` (bias-free, as in the released head) computes

    r = σ(W_ir x + W_hr h),  u = σ(W_iz x + W_hz h),  n = tanh(W_in x + r ⊙ (W_hn h)),
    h' = (h - n) ⊙ u + n

with x the token's target embedding. Called on K children it multiplies K embeddings by W_i and
K copies of the same parent state by W_h: on a 2-core AVX2 CPU the two products of a K = 8 step at
the embedded shapes take ~0.4-0.5 ms and were most of DominoTree's build. ``ChildGRU`` does the
same arithmetic in a cheaper order:

- ``W_h h`` once per parent (one row), broadcast over its K children;
- ``W_i x`` read from a table of every token's input product (the embedding table times ``W_iᵀ``,
  computed once per drafter and embedding, in fixed chunks of rows), so a step gathers K rows
  instead of multiplying them. The table is made only where it is small (``TABLE_MAX_BYTES``: the
  embedded pair's is 151 MB in float32); larger vocabularies (Qwen3, GPU) keep the K-row product.

Every tree builder and scorer calls this one object on the same shapes, so they build identical
trees (``tests/test_builders.py``). Against ``nn.GRU`` it agrees to float rounding
(``tests/test_childgru.py``), not bit for bit: the sums are the same, their order is not.
"""
from __future__ import annotations

import weakref

import torch

TABLE_MAX_BYTES = 256 << 20
TABLE_CHUNK = 4096


class ChildGRU:
    """``(state [1, G] or [K, G], toks [K]) -> [K, G]``: the children's states (see the module doc)."""

    def __init__(self, gru: torch.nn.GRU, embed: torch.nn.Module, dtype: torch.dtype):
        w_ih, w_hh = gru.weight_ih_l0, gru.weight_hh_l0                    # [3G, H], [3G, G]
        if gru.bias or gru.num_layers != 1:
            raise ValueError("ChildGRU expects the Domino head's one-layer bias-free GRU")
        self.G = gru.hidden_size
        self.dtype = dtype
        self.w_ihT = w_ih.detach().t()
        self.w_hhT = w_hh.detach().t()
        self.embed = embed
        self.versions = (_version(w_ih), _version(w_hh))
        weight = getattr(embed, "weight", None)
        self.table = None
        if isinstance(embed, torch.nn.Embedding) and embed.max_norm is None and weight is not None:
            elem = torch.empty((), dtype=dtype).element_size()
            if weight.shape[0] * w_ih.shape[0] * elem <= TABLE_MAX_BYTES:
                self.table = self._make_table(weight.detach())
                self.versions += (_version(weight),)

    def _make_table(self, emb: torch.Tensor) -> torch.Tensor:
        """[V, 3G] = every token's embedding times ``W_iᵀ``, chunk by fixed chunk (deterministic)."""
        table = torch.empty(emb.shape[0], self.w_ihT.shape[1], dtype=self.dtype, device=emb.device)
        with torch.inference_mode():
            for lo in range(0, emb.shape[0], TABLE_CHUNK):
                torch.mm(emb[lo:lo + TABLE_CHUNK].to(self.dtype), self.w_ihT, out=table[lo:lo + TABLE_CHUNK])
        return table

    def stale(self, gru: torch.nn.GRU) -> bool:
        """Whether the weights changed since this object was made (a training step)."""
        now = (_version(gru.weight_ih_l0), _version(gru.weight_hh_l0))
        if self.table is not None:
            now += (_version(self.embed.weight),)
        return now != self.versions

    def inputs(self, toks: torch.Tensor) -> torch.Tensor:
        """[K, 3G] input products ``W_i x`` of the tokens."""
        if self.table is not None:
            return self.table.index_select(0, toks)
        return torch.mm(self.embed(toks).to(self.dtype), self.w_ihT)

    def first(self, toks: torch.Tensor) -> torch.Tensor:
        """[K, G] states after the tokens from the zero state, ``(1 - u) * tanh(W_in x)`` as
        ``Drafter.first_state`` computes them (``W_i x`` from the table where there is one)."""
        gi = self.inputs(toks)
        g = self.G
        return (1 - torch.sigmoid(gi[:, g:2 * g])) * torch.tanh(gi[:, 2 * g:])

    def __call__(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        state = state.to(self.dtype)
        gi = self.inputs(toks)                                                 # [K, 3G]
        gh = torch.mm(state, self.w_hhT)                                       # [1, 3G] (or [K, 3G])
        g = self.G
        ru = torch.sigmoid(gi[:, :2 * g] + gh[:, :2 * g])
        r, u = ru[:, :g], ru[:, g:]
        n = torch.tanh(gi[:, 2 * g:] + r * gh[:, 2 * g:])
        return (state - n) * u + n


def _version(t: torch.Tensor) -> int:
    """In-place version counter (inference tensors have none: they are never trained)."""
    return -1 if t.is_inference() else t._version


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def child_gru(drafter, embed: torch.nn.Module) -> ChildGRU:
    """The ``ChildGRU`` of ``drafter``'s head and ``embed`` (made on first use, remade when the
    weights change); one per (GRU, embedding) pair, so every builder shares its table."""
    gru = drafter.prefix_gru
    per_gru = _CACHE.setdefault(gru, weakref.WeakKeyDictionary())
    dtype = drafter.fc.weight.dtype
    got = per_gru.get(embed)
    if got is None or got.dtype != dtype or got.stale(gru):
        got = per_gru[embed] = ChildGRU(gru, embed, dtype)
    return got


def existing_child_gru(drafter, embed: torch.nn.Module) -> ChildGRU | None:
    """The ``ChildGRU`` ``child_gru`` made for ``drafter`` and ``embed``, if it is current and has
    its per-token table, else None (nothing is made here)."""
    got = _CACHE.get(drafter.prefix_gru, {}).get(embed)
    if got is None or got.table is None or got.dtype != drafter.fc.weight.dtype or got.stale(drafter.prefix_gru):
        return None
    return got
