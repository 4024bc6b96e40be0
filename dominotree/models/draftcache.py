"""The drafter's KV cache: per layer, the context keys/values of committed positions."""
from __future__ import annotations

import torch


class DraftCache:
    """Per layer, the context keys/values of committed positions (never the block's noise).

    Held as the Python forward's per-layer ``(k, v)`` [B, kv_heads, length, head_dim], or for the
    fused CPU forward (``draftcpu``) as one buffer ``[layers, 2, kv_heads, capacity, head_dim]``
    whose first ``length`` positions are committed (a round writes its block after them and
    commits only its context). ``kv`` reads either; setting it keeps the given tensors."""

    def __init__(self):
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.buf: torch.Tensor | None = None
        self._length = 0

    @property
    def kv(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if self.buf is None:
            return self._kv
        n = self._length
        return [(b[0, :, :n][None], b[1, :, :n][None]) for b in self.buf]

    @kv.setter
    def kv(self, value: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self._kv, self.buf, self._length = list(value), None, 0

    @property
    def length(self) -> int:
        if self.buf is not None:
            return self._length
        return self._kv[0][0].shape[2] if self._kv else 0

    def reserve(self, layers: int, kv_heads: int, head_dim: int, need: int) -> torch.Tensor:
        """The float32 CPU buffer with room for ``need`` positions (capacity doubles; the committed
        positions are copied on growth, and once from ``kv`` when the Python forward filled it)."""
        cap = 0 if self.buf is None else self.buf.shape[3]
        if need <= cap:
            return self.buf
        n = self.length
        buf = torch.empty(layers, 2, kv_heads, max(256, need, 2 * cap), head_dim)
        if self.buf is not None:
            buf[:, :, :, :n] = self.buf[:, :, :, :n]
        else:
            for i, (k, v) in enumerate(self._kv):    # batch 1
                buf[i, 0, :, :n], buf[i, 1, :, :n] = k[0], v[0]
        self.buf, self._kv, self._length = buf, [], n
        return buf

    def commit(self, length: int) -> None:
        """The buffer's first ``length`` positions are committed context."""
        self._length = length
