"""The target's tapped hidden states for training, computed once per sequence and cached."""
from __future__ import annotations

import torch

from dominotree.train.data import Seq

class _Stop(Exception):
    pass


class TargetFeatures:
    """Tapped target features ``hidden_states[l+1]`` (decoder layer ``l`` outputs), concatenated.

    Forward hooks on the tapped layers; the forward stops after the last tapped layer (the
    remaining layers, the final norm and the LM head are never run). Features are in ``dtype``
    (the trainer asks for bf16 also from a float32 target: half the memory, and cached and fresh
    features the same) and kept in a bounded in-memory cache so later epochs skip the target
    forward.
    """

    def __init__(self, model, taps: tuple[int, ...], cache_gb: float, dtype: torch.dtype | None = None,
                 soft_k: int = 0):
        self.model = model
        self.soft_k = soft_k          # > 0: also keep the target's top-k next-token log-probs per position
        self.soft: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.soft_s = 0.0             # seconds spent on the labels' extra layers and head
        self.soft_tokens = 0
        self.dtype = dtype            # features' dtype (None: the target's)
        self.taps = tuple(taps)
        self.last = max(taps)
        self.cap = int(cache_gb * 2**30)
        self.used = 0
        self.cache: dict[int, torch.Tensor] = {}
        self.hits = self.misses = 0
        self._cap: dict[int, torch.Tensor] = {}
        self._held: dict[int, torch.Tensor] = {}      # made by ``prefetch``, not yet taken
        self._handles = []
        self._active = False
        layers = model.model.layers
        for l in sorted(set(self.taps)):
            self._handles.append(layers[l].register_forward_hook(self._hook(l)))

    def _hook(self, l):
        def fn(_mod, _inp, out):
            if not self._active:  # the hooks act only inside compute()
                return None
            self._cap[l] = out[0] if isinstance(out, (tuple, list)) else out
            if l == self.last and not self.soft_k:
                raise _Stop
        return fn

    @torch.no_grad()
    def compute(self, ids: torch.Tensor) -> torch.Tensor:
        """Features [1, T, L*H] of one sequence ``ids`` [T] (labels, when asked for, in ``_last_soft``)."""
        feats, last = self._forward(ids[None])
        if last is not None:
            self._last_soft = self._labels(last[0])
        return feats

    def _forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Tapped features [N, T, L*H] of the rows of ``ids`` [N, T] and, with ``soft_k``, the final
        hidden states [N, T, H]. Rows may be right-padded: causal attention keeps every real
        position's result independent of the padding after it."""
        self._cap = {}
        self._active = True
        out = None
        try:
            out = self.model.model(input_ids=ids.to(self.model.device), use_cache=False)
        except _Stop:
            pass
        finally:
            self._active = False
        n_layers = len(self.model.model.layers)
        if n_layers - 1 in self._cap:
            # transformers' hidden_states[-1] is the final-normed output, and the decoder's
            # target adapter reads hidden_states[l + 1]: match it for a tap on the last layer
            self._cap[n_layers - 1] = self.model.model.norm(self._cap[n_layers - 1])
        feats = torch.cat([self._cap[l] for l in self.taps], dim=-1)
        self._cap = {}
        feats = feats if self.dtype is None else feats.to(self.dtype)
        return feats, (out.last_hidden_state if out is not None and self.soft_k else None)

    @torch.no_grad()
    def prefetch(self, seqs: list[Seq]) -> None:
        """Features (and labels) of the sequences of a step not yet made, in one padded forward
        instead of one forward each (on a GPU the per-sequence forwards are launch-bound). Rows
        that do not fit the cache are kept until the step takes them (``__call__``)."""
        todo = [s for s in seqs if s.key not in self.cache and s.key not in self._held]
        if len(todo) < 2:
            return
        T = max(len(s.ids) for s in todo)
        ids = torch.zeros(len(todo), T, dtype=torch.long)
        for i, s in enumerate(todo):
            ids[i, : len(s.ids)] = s.ids
        feats, last = self._forward(ids)
        for i, s in enumerate(todo):
            f = feats[i: i + 1, : len(s.ids)].clone()
            if last is not None:
                self.soft[s.key] = self._labels(last[i, : len(s.ids)])
            self._held[s.key] = f

    def _labels(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The target's head on its final hidden states [T, H]: top-k ids (int32) and log-probs
        (float32) of the next token at every position, in chunks of 128 rows (the [T, V] logits
        are never held at once)."""
        import time
        t0 = time.perf_counter()
        head = self.model.get_output_embeddings()
        ids, lps = [], []
        for c in h.split(128):
            lp = torch.log_softmax(head(c).float(), dim=-1)
            v, i = lp.topk(self.soft_k, dim=-1)
            ids.append(i.to(torch.int32)); lps.append(v)
        self.soft_s += time.perf_counter() - t0
        self.soft_tokens += h.shape[0]
        return torch.cat(ids), torch.cat(lps)

    def labels(self, seq: Seq) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids [T, k], log-probs [T, k]): row t is the target's distribution of token t+1. Made
        with the sequence's features (once per process: a restart recomputes them)."""
        got = self.soft.get(seq.key)
        if got is None:
            self.cache.pop(seq.key, None)     # features cached before labels were asked for
            self._held.pop(seq.key, None)
            self(seq)
            got = self.soft[seq.key]
        return got

    def __call__(self, seq: Seq, keep: bool = True) -> torch.Tensor:
        f = self.cache.get(seq.key)
        if f is not None:
            self.hits += 1
            return f
        self.misses += 1
        f = self._held.pop(seq.key, None)
        if f is None:
            f = self.compute(seq.ids)
            if self.soft_k:
                self.soft[seq.key] = self._last_soft
        nbytes = f.numel() * f.element_size()
        if keep and self.used + nbytes <= self.cap:
            self.cache[seq.key] = f
            self.used += nbytes
        return f
