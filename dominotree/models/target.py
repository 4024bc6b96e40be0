"""The target: any transformers causal LM, run with SDPA, tree masks and explicit positions.

All DynamicCache access goes through ``cache_truncate`` / ``cache_compact`` here, because the
cache API moves between transformers releases (``layers[i].keys`` vs ``key_cache`` lists,
``crop`` taking an absolute length in 4.x and a negative count in 5.24).

With a fast path (``fast.FastModel``, Llama and Qwen3) the adapter runs that instead and its
caches are ``fast.KVCache``; the same ``cache_*`` functions handle both kinds.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
from transformers import DynamicCache

from .fast import KVCache
from .linear import DenseLinear


def _layer_kv(cache):
    """Yield (get, set) accessors for every layer's key and value tensors."""
    if hasattr(cache, "layers"):
        for layer in cache.layers:
            yield layer, "keys", "values"
    else:  # older DynamicCache layout
        for i in range(len(cache.key_cache)):
            yield (cache.key_cache, cache.value_cache, i), None, None


def cache_length(cache) -> int:
    return int(cache.get_seq_length())


def is_fast_cache(cache) -> bool:
    return isinstance(cache, KVCache)


def cache_apply(cache, fn) -> None:
    """Replace every layer's K and V ([B, heads, T, hd]) by ``fn(tensor)``."""
    if hasattr(cache, "layers"):
        for layer in cache.layers:
            if getattr(layer, "keys", None) is None or layer.keys.numel() == 0:
                continue
            layer.keys = fn(layer.keys)
            layer.values = fn(layer.values)
    else:
        for i in range(len(cache.key_cache)):
            cache.key_cache[i] = fn(cache.key_cache[i])
            cache.value_cache[i] = fn(cache.value_cache[i])


def cache_truncate(cache, length: int) -> None:
    """Keep the first ``length`` positions."""
    if is_fast_cache(cache):
        cache.truncate(length)
    elif cache_length(cache) > length:
        cache_apply(cache, lambda t: t[..., :length, :].contiguous())


def cache_compact(cache, start: int, keep_rows: list[int]) -> None:
    """Keep only ``keep_rows`` of the window appended at ``start`` (O(tree), not O(context)).

    After a tree verify the cache holds ``start + n`` positions; the accepted rows are moved to
    ``[start, start + len(keep_rows))`` and the rest dropped. Rows must be increasing.
    """
    if is_fast_cache(cache):
        cache.compact(start, keep_rows)
        return
    k = len(keep_rows)
    if keep_rows == list(range(k)):
        cache_truncate(cache, start + k)
        return
    idx = None

    def fn(t):
        nonlocal idx
        if idx is None or idx.device != t.device:
            idx = torch.tensor(keep_rows, dtype=torch.long, device=t.device) + start
        tail = t.index_select(-2, idx)
        return torch.cat([t[..., :start, :], tail], dim=-2)
    cache_apply(cache, fn)


def cache_keyword(model) -> str:
    """The keyword ``model.forward`` takes its KV cache by: ``cache`` in transformers 5.2x,
    ``past_key_values`` before. Read from the signature, since older releases swallow an unknown
    ``cache=`` in ``**kwargs`` and would run without the cache instead of raising."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@dataclass
class TargetOutput:
    logits: torch.Tensor | None   # [n, V] float32; None when the forward kept ``hidden`` instead
    feats: torch.Tensor | None    # [1, n, len(taps) * H] in the model dtype
    hidden: torch.Tensor | None = None   # [n, H] final-normed rows, for ``Target.head_logits``


class Target:
    """Thin adapter over a transformers causal LM (Qwen3, Llama, ...).

    ``fast`` (a ``FastModel`` built from ``model``) replaces the transformers forward when given;
    ``weights`` names the weights that run (``float32``, ``bf16``, ``int4`` or ``int4-q8``).
    """

    def __init__(self, model, tokenizer, name: str = "", fast=None, weights: str | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.fast = fast
        self._head_linear = None   # the LM head as a DenseLinear, made on first use (logits)
        self.weights = weights or {torch.float32: "float32", torch.bfloat16: "bf16"}.get(
            model.get_input_embeddings().weight.dtype, str(model.get_input_embeddings().weight.dtype))
        cfg = model.config
        self.config = cfg
        self.hidden_size = int(cfg.hidden_size)
        self.num_layers = int(cfg.num_hidden_layers)
        self.embed = model.get_input_embeddings()
        self.lm_head = model.get_output_embeddings()
        self.vocab_rows = int(self.embed.weight.shape[0])
        self.max_positions = int(getattr(cfg, "max_position_embeddings", 4096) or 4096)
        eos = set()
        for src in (getattr(cfg, "eos_token_id", None), getattr(getattr(model, "generation_config", None), "eos_token_id", None),
                    getattr(tokenizer, "eos_token_id", None) if tokenizer is not None else None):
            if isinstance(src, int):
                eos.add(src)
            elif isinstance(src, (list, tuple)):
                eos.update(int(x) for x in src)
        if tokenizer is not None:
            for tok in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>"):
                tid = tokenizer.convert_tokens_to_ids(tok) if tok in tokenizer.get_vocab() else None
                if isinstance(tid, int) and tid >= 0:
                    eos.add(tid)
        self.eos_ids = frozenset(eos)

    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed.weight.dtype

    @property
    def forward_kind(self) -> str:
        return "fast" if self.fast is not None else "hf"

    def new_cache(self):
        if self.fast is not None:
            return self.fast.new_cache()
        return DynamicCache(config=self.config)

    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache, mask: torch.Tensor | None = None,
                taps: tuple[int, ...] | None = None, last_only: bool = False, lazy_head: bool = False) -> TargetOutput:
        """Run ``ids`` [1, n] at ``positions`` [1, n] against ``cache`` (appended to it).

        ``mask`` is a 4D additive float mask ``(1, 1, n, past + n)`` or None for causal.
        ``taps`` are 0-indexed decoder layers whose outputs are returned as features
        (``hidden_states[l + 1]``: index 0 is the embedding output). ``lazy_head``: on the fast
        forward, keep the final-normed rows (``hidden``) and leave the LM head to
        ``head_logits`` for the rows that are read; the transformers forward computes every
        row's logits regardless.
        """
        if self.fast is not None and lazy_head and not last_only:
            hidden, feats = self.fast.forward(ids, positions, cache, mask, taps, head=False)
            return TargetOutput(None, feats, hidden)
        if self.fast is not None:
            logits, feats = self.fast.forward(ids, positions, cache, mask, taps, slice(-1, None) if last_only else None)
            return TargetOutput(logits, feats)
        kw = dict(input_ids=ids, position_ids=positions, use_cache=True, output_hidden_states=bool(taps))
        if mask is not None:
            kw["attention_mask"] = mask
        if last_only:
            kw["logits_to_keep"] = 1
        kw[cache_keyword(self.model)] = cache
        out = self.model(**kw)
        feats = None
        if taps:
            feats = torch.cat([out.hidden_states[l + 1] for l in taps], dim=-1)
        return TargetOutput(out.logits[0].float(), feats)

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits of the verify's final-normed rows (``TargetOutput.hidden``)."""
        return self.fast.head_logits(hidden)

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The target's LM head on ``hidden`` (the drafters' rows), in the model dtype."""
        head = self.lm_head
        if type(head) is not torch.nn.Linear:
            return head(hidden)
        if self._head_linear is None:
            self._head_linear = self.head_rows()
        return self._head_linear(hidden)

    def head_rows(self, ids: torch.Tensor | None = None):
        """The product ``x @ W[ids].T`` of the LM head's rows ``ids`` (all when None), for the
        drafters' rows. It runs the fast forward's own head where that holds the same weights: the
        GGUF's 8-bit blocks (a quarter of float32's bytes, ``quantcpu.Q8Linear``, whose outputs do
        not depend on which rows are kept), else the dense float32 weight."""
        head = self.lm_head
        fast = self.fast
        same = fast is not None and head.bias is None and fast.head.data_ptr() == head.weight.data_ptr()
        if same and hasattr(fast.head_linear, "rows"):
            return fast.head_linear.rows(ids)
        if same and ids is None:
            return fast.dense_head
        weight, bias = head.weight.detach(), head.bias
        if ids is not None:
            weight, bias = weight[ids].contiguous(), None if bias is None else bias[ids]
        return DenseLinear(weight, bias)
