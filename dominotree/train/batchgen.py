"""Continuous batching for data generation: ``slots`` sequences decode in one forward per step.

Every step feeds exactly one token per slot. A slot that has just received a request feeds its
prompt one token per step ("prefill in the stream"), then its own samples; when a sequence
ends (an end token or its token limit) the slot takes the next request at the following step.
So no slot idles while requests remain, and the KV cache needs no splicing: all slots append
one column per step, slot ``r`` attends to the columns since its own start, and columns older
than every live slot's start are cropped from the left.

A slot's result does not depend on which other requests share the batch (up to floating-point
rounding of batched products): each row sees only its own columns, at its own positions, and
sampled requests draw from a generator seeded per request.

    gen = SlotGenerator(model, slots=64, end_ids={2})
    for req, answer, truncated in gen.run(requests):
        ...

``run`` also takes a ``refill`` callback, called whenever a slot is free and the queue is
empty: it may append requests to the queue (a follow-up turn that depends on an answer, or the
next batch of a long plan), so requests need not exist before generation starts.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

import torch
from transformers import AttentionInterface, DynamicCache
from transformers.cache_utils import DynamicLayer
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from ..models.target import cache_keyword

GROUPED_ATTENTION = "dominotree_grouped_sdpa"


@dataclass
class Request:
    key: object                     # the caller's handle, returned with the answer
    prompt: list[int]               # token ids (chat template applied)
    max_new_tokens: int
    temperature: float = 0.0        # 0: greedy
    top_p: float = 1.0
    seed: int = 0


@dataclass
class _Slot:
    req: Request
    start: int                      # first cache column of this sequence
    fed: int = 0                    # prompt tokens fed so far
    answer: list[int] = field(default_factory=list)
    gen: torch.Generator | None = None

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.req.prompt)

    def next_input(self) -> int:
        return self.req.prompt[self.fed] if self.prefilling else self.answer[-1]


NUCLEUS_K = 1024    # candidates ``nucleus`` takes by top-k before falling back to a full sort


def nucleus(probs: torch.Tensor, top_p: float, k: int = NUCLEUS_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The top-p nucleus of ``probs`` [V]: (token ids, their probabilities), most probable first;
    the smallest prefix of the descending order whose mass reaches ``top_p``.

    Sorting all 49k probabilities costs ~5 ms a row on this CPU (a fifth of a 128-slot step when
    a third of the rows sample); the nucleus is nearly always within the top ``k``, so take those
    first and sort everything only when their mass falls short of ``top_p``. Either way the
    nucleus holds the same probabilities (the order among exactly tied ones may differ)."""
    if top_p >= 1.0:
        return torch.arange(probs.shape[-1], device=probs.device), probs
    top, idx = torch.topk(probs, min(k, probs.shape[-1]))
    if float(top.sum()) < top_p and top.shape[-1] < probs.shape[-1]:
        top, idx = torch.sort(probs, descending=True)
    keep = int((torch.cumsum(top, 0) - top < top_p).sum())
    return idx[:keep], top[:keep]


def sample_row(logits: torch.Tensor, temperature: float, top_p: float, gen: torch.Generator | None) -> int:
    """Greedy at temperature 0; otherwise nucleus sampling from ``softmax(logits / T)``."""
    if temperature <= 0:
        return int(torch.argmax(logits))
    idx, p = nucleus(torch.softmax(logits.float() / temperature, dim=-1), top_p)
    return int(idx[torch.multinomial(p, 1, generator=gen)])


ROW_CHUNK = 16      # rows per attention window in ``grouped_sdpa``


def grouped_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                 is_causal=None, **kwargs):
    """One-token attention for ``SlotGenerator``: GQA without copies, windows per chunk of rows.

    Two costs of transformers' ``sdpa`` dominate at 64+ slots and grow with context:
    - it repeats every kv head for its query heads (``repeat_kv``: the whole cache copied three
      times per layer per step for SmolLM2's 9 query heads on 3 kv heads). Here the query heads of
      one kv head are query rows of that head, ``[Hkv, g, D]`` against ``[Hkv, W, D]``: no copy.
      Head ``h`` is kv head ``h // g``, as in ``repeat_kv``.
    - every row attends to the whole window, from the oldest live sequence's first column, and
      masks what is not its own. Here each chunk of ``ROW_CHUNK`` rows attends from its own
      oldest row's first allowed column (a view, no copy); ``SlotGenerator`` keeps rows sorted
      by start, so a chunk's window is close to its rows' own lengths.
    The mask is applied within each window, so any mask gives the masked result.
    Prefill steps (more than one query) and plain multi-head attention go to transformers' sdpa."""
    b, hq, q, d = query.shape
    hkv = key.shape[1]
    if q != 1 or hq == hkv:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, is_causal=is_causal, **kwargs)
    scale = d ** -0.5 if scaling is None else scaling
    qg = query.reshape(b, hkv, hq // hkv, d)
    w = key.shape[-2]
    if attention_mask is None:
        firsts = [0] * b
    else:
        mask = attention_mask[:, :, :, :w]
        first = (mask[:, 0, 0] == 0).to(torch.int8).argmax(-1)         # a fully masked row gives 0
        firsts = first.tolist()
    out = torch.empty_like(qg)
    for r0 in range(0, b, ROW_CHUNK):
        r1 = min(b, r0 + ROW_CHUNK)
        f = min(firsts[r0:r1])
        scores = torch.matmul(qg[r0:r1], key[r0:r1, :, f:].transpose(-1, -2)).mul_(scale)
        if attention_mask is not None:
            scores.add_(mask[r0:r1, :, :, f:])
        torch.matmul(torch.softmax(scores, dim=-1), value[r0:r1, :, f:], out=out[r0:r1])
    return out.reshape(b, hq, 1, d).transpose(1, 2), None


AttentionInterface.register(GROUPED_ATTENTION, grouped_sdpa)


class _SlotLayer(DynamicLayer):
    """A layer cache written in place: a preallocated [B, heads, capacity, hd] buffer (doubled
    when full) instead of DynamicLayer's ``torch.cat`` per step, which copies the whole cache of
    every layer at every step (gigabytes per step at 64 slots)."""

    def __init__(self, capacity: int = 512):
        super().__init__()
        self.cap, self.n = capacity, 0
        self._k = self._v = None

    def lazy_initialization(self, key_states, value_states) -> None:
        b, h, _, d = key_states.shape
        self._k = key_states.new_empty(b, h, self.cap, d)
        self._v = value_states.new_empty(b, h, self.cap, d)
        self.device = key_states.device
        self.is_initialized = True

    def _views(self):
        self.keys, self.values = self._k[:, :, : self.n], self._v[:, :, : self.n]
        return self.keys, self.values

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        t = key_states.shape[-2]
        if self.n + t > self.cap:
            self.cap = max(2 * self.cap, self.n + t)
            grow = lambda buf: torch.cat([buf[:, :, : self.n], buf.new_empty(*buf.shape[:2], self.cap - self.n, buf.shape[-1])], 2)
            self._k, self._v = grow(self._k), grow(self._v)
        self._k[:, :, self.n: self.n + t] = key_states
        self._v[:, :, self.n: self.n + t] = value_states
        self.n += t
        return self._views()

    def get_seq_length(self) -> int:
        return self.n

    def select_rows(self, idx: torch.Tensor) -> None:
        """Keep rows ``idx`` in that order (copies only the ``n`` used columns)."""
        if self.is_initialized:
            def pick(buf):
                new = buf.new_empty(len(idx), *buf.shape[1:])
                torch.index_select(buf[:, :, : self.n], 0, idx, out=new[:, :, : self.n])
                return new
            self._k, self._v = pick(self._k), pick(self._v)
            self._views()

    def crop_left(self, cut: int) -> None:
        if self.is_initialized and cut > 0:
            keep = self.n - cut
            self._k[:, :, :keep] = self._k[:, :, cut: self.n].clone()
            self._v[:, :, :keep] = self._v[:, :, cut: self.n].clone()
            self.n = keep
            self._views()


def slot_cache(config, capacity: int = 512) -> DynamicCache:
    cache = DynamicCache(config=config)
    cache.layers = [_SlotLayer(capacity) for _ in range(int(config.num_hidden_layers))]
    return cache


class SlotGenerator:
    """Greedy or sampled generation of many requests through one HF causal LM, ``slots`` at a time."""

    def __init__(self, model, slots: int, end_ids: set[int], crop_every: int = 32, sort_every: int = 64):
        if slots < 1:
            raise ValueError("slots must be at least 1")
        if not end_ids:
            raise ValueError("end_ids is empty: generation would never stop")
        self.model = model.eval()
        if getattr(model.config, "_attn_implementation", None) == "sdpa":
            model.set_attn_implementation(GROUPED_ATTENTION)
        self.slots = slots
        self.end_ids = set(end_ids)
        self.crop_every = crop_every
        self.sort_every = sort_every  # steps between re-sorting cache rows by start (grouped_sdpa's windows)
        self.steps = 0                # forwards run (for throughput reports)
        body, head = getattr(model, "base_model", None), model.get_output_embeddings()
        self._split = (body, head) if body is not None and body is not model and head is not None else None

    def _forward(self, ids: torch.Tensor, pos: torch.Tensor, mask: torch.Tensor, cache, need: list[int]) -> torch.Tensor:
        """Logits of rows ``need`` only: a prompt token before the last has no use for the LM head,
        which is a fifth of a step's products at SmolLM2's 49k vocabulary."""
        if self._split is None:
            out = self.model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=True,
                             **{cache_keyword(self.model): cache})
            return out.logits[need, -1]
        body, head = self._split
        h = body(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=True,
                 **{cache_keyword(body): cache}).last_hidden_state
        return head(h[need, -1])

    @torch.inference_mode()
    def run(self, requests: Iterable[Request] = (), refill: Callable[[deque], None] | None = None
            ) -> Iterator[tuple[Request, list[int], bool]]:
        """Yield ``(request, answer ids, truncated)`` as each sequence finishes (not in input order).
        The answer ends with its end token unless ``truncated`` (the token limit came first).
        ``refill(queue)`` is called when a slot is free and the queue is empty. When ``requests``
        is a deque it is the queue itself, so requests the caller appends while iterating (a
        follow-up that depends on an answer) are served too."""
        queue = requests if isinstance(requests, deque) else deque(requests)   # a deque is used as is: the caller may append
        dev = self.model.get_input_embeddings().weight.device
        dtype = self.model.get_input_embeddings().weight.dtype
        neg = torch.finfo(dtype).min
        live: list[_Slot | None] = [None] * self.slots
        cache = slot_cache(self.model.config)
        base = 0          # absolute column index of cache column 0
        col = 0           # absolute index of the column this step writes
        row_order: list[int] = []   # cache row of each live slot, in slot order

        def admit(i: int) -> None:
            if not queue and refill is not None:
                refill(queue)
            if queue:
                r = queue.popleft()
                if not r.prompt:
                    raise ValueError(f"request {r.key!r} has an empty prompt")
                if r.max_new_tokens < 1:
                    raise ValueError(f"request {r.key!r}: max_new_tokens must be >= 1")
                g = None
                if r.temperature > 0:
                    g = torch.Generator(device="cpu")
                    g.manual_seed(int(r.seed))
                live[i] = _Slot(r, start=col, gen=g)
            else:
                live[i] = None

        for i in range(self.slots):
            admit(i)
        while any(s is not None for s in live):
            rows = [i for i, s in enumerate(live) if s is not None]
            ids = torch.tensor([[live[i].next_input()] for i in rows], device=dev)
            pos = torch.tensor([[col - live[i].start] for i in rows], device=dev)
            width = col - base + 1
            starts = torch.tensor([live[i].start - base for i in rows], device=dev)
            allowed = torch.arange(width, device=dev)[None, :] >= starts[:, None]
            mask = torch.zeros(len(rows), 1, 1, width, dtype=dtype, device=dev)
            mask.masked_fill_(~allowed[:, None, None, :], neg)
            if len(rows) < cache_rows(cache):
                keep = torch.tensor(row_order, device=dev)
                for layer in cache.layers:
                    layer.select_rows(keep)
            need = [j for j, i in enumerate(rows) if live[i].fed + 1 >= len(live[i].req.prompt)]
            logits = self._forward(ids, pos, mask, cache, need)
            greedy = logits.argmax(-1).tolist() if need else []
            out_of = dict(zip(need, range(len(need))))      # cache row -> logits row
            self.steps += 1
            col += 1
            finished = []
            for j, i in enumerate(rows):
                s = live[i]
                s.fed += s.prefilling
                if s.prefilling:
                    continue                    # the output of a prompt token before the last is unused
                r = out_of[j]
                tok = greedy[r] if s.req.temperature <= 0 else sample_row(logits[r], s.req.temperature, s.req.top_p, s.gen)
                s.answer.append(tok)
                if tok in self.end_ids or len(s.answer) >= s.req.max_new_tokens:
                    finished.append(i)
                    yield s.req, s.answer, tok not in self.end_ids
            for i in finished:
                admit(i)
            # Cache rows follow ``rows`` order; a slot that stays live keeps its row, a finished
            # slot's row is reused by its new request (whose columns start now), an emptied
            # slot's row is dropped before the next step.
            nxt = [i for i, s in enumerate(live) if s is not None]
            row_order = [rows.index(i) for i in nxt]
            if self.sort_every and self.steps % self.sort_every == 0 and nxt:
                # Oldest sequences first, in slots and in cache rows alike, so that each chunk of
                # rows in ``grouped_sdpa`` has a window close to its own rows' lengths.
                by_start = sorted(range(len(nxt)), key=lambda j: live[nxt[j]].start)
                keep = torch.tensor([row_order[j] for j in by_start], device=dev)
                for layer in cache.layers:
                    layer.select_rows(keep)
                live = [live[nxt[j]] for j in by_start] + [None] * (self.slots - len(nxt))
                nxt = list(range(len(by_start)))
                row_order = nxt[:]
            if self.steps % self.crop_every == 0 and nxt:
                lo = min(live[i].start for i in nxt)
                if lo > base:
                    for layer in cache.layers:
                        layer.crop_left(lo - base)
                    base = lo


def cache_rows(cache) -> int:
    """Batch rows held by a slot cache (0 before the first forward)."""
    layer = cache.layers[0]
    return int(layer._k.shape[0]) if layer.is_initialized else 0
