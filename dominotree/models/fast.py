"""The fast target forward for the Llama and Qwen3 families (gpt-fast's model file is the model).

Built from a loaded transformers model's weights and config; transformers still loads the
weights, the tokenizer and the chat template. What it does differently from the transformers
forward:

- one preallocated KV tensor ``[layers, 2, kv_heads, capacity, head_dim]`` written in place, and
  compacted to the accepted path with one index copy (``KVCache.compact``);
- RoPE tables computed once (by the model's own rotary module, so every RoPE variant matches);
- fused q/k/v and gate/up products (``fuse=False`` keeps them apart, for measuring);
- final norm and LM head only on the rows the caller needs, logits in float32;
- weights dense (the model dtype) or 4-bit (``quantcpu.Q4Linear`` / ``quant.Int4Linear``);
- in float32 on CPU, a layer's small steps as fused C++ ops where ``cpuext`` builds (RMSNorm,
  RoPE with the cache write, SiLU-and-multiply): ~12 ops per layer instead of ~50.

The decoder layer is written out as in ``transformers``' ``LlamaDecoderLayer`` (RMSNorm in
float32, ``rotate_half`` RoPE, SDPA), so in float32 it agrees with the transformers forward to
float32 rounding. Families other than Llama and Qwen3 keep the transformers forward.
"""
from __future__ import annotations

import contextlib

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .linear import DenseLinear

FAMILIES = ("llama", "qwen3")
MIN_CAPACITY = 256
STACK = True          # every q4 layer in one op (q4_stack); False: one op a layer (A/B, tests)


def fast_support(config) -> str | None:
    """Why ``config`` has no fast path, or None when it has one."""
    kind = getattr(config, "model_type", "")
    if kind not in FAMILIES:
        return f"model type {kind!r} has no fast forward (only {', '.join(FAMILIES)})"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r} is not silu"
    if getattr(config, "mlp_bias", False):
        return "MLP biases are not supported"
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", False):
        return "sliding-window attention is not supported"
    return None


class KVCache:
    """Keys and values of every layer in one tensor; ``length`` positions are valid."""

    def __init__(self, layers: int, kv_heads: int, head_dim: int, dtype, device, limit: int):
        self.shape = (layers, 2, kv_heads, head_dim)
        self.dtype, self.device, self.limit = dtype, device, limit
        self.kv = torch.empty(0)
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length

    def reserve(self, need: int) -> None:
        """Make room for ``need`` positions (capacity doubles; the rare growth copies once)."""
        if need > self.limit:
            raise ValueError(f"{need} positions exceed the target's context of {self.limit}")
        cap = self.kv.shape[3] if self.kv.dim() == 5 else 0
        if need <= cap:
            return
        new_cap = min(self.limit, max(MIN_CAPACITY, 2 * cap, need))
        L, two, h, d = self.shape
        kv = torch.empty((L, two, h, new_cap, d), dtype=self.dtype, device=self.device)
        if self.length:
            kv[:, :, :, :self.length] = self.kv[:, :, :, :self.length]
        self.kv = kv

    def truncate(self, length: int) -> None:
        self.length = min(self.length, int(length))

    def compact(self, start: int, keep_rows: list[int]) -> None:
        """Keep rows ``keep_rows`` (increasing) of the window appended at ``start``."""
        k = len(keep_rows)
        if keep_rows != list(range(k)):
            idx = torch.tensor(keep_rows, dtype=torch.long, device=self.device) + start
            self.kv[:, :, :, start:start + k] = self.kv[:, :, :, idx]   # the gather copies first
        self.length = start + k


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    dt = x.dtype
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(dt)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@dataclass
class Layer:
    ln1: torch.Tensor
    ln2: torch.Tensor
    qkv: list            # one fused linear, or [q, k, v]
    o: object
    gate_up: list        # one fused linear, or [gate, up]
    down: object
    q_norm: torch.Tensor | None = None
    k_norm: torch.Tensor | None = None
    q4: list | None = None     # every product Q4_1 (quantcpu.Q4Linear): the whole layer as one C++ op


def _untimed(part: str):
    return contextlib.nullcontext()


class FastModel:
    """The decoder of a Llama / Qwen3 causal LM, run on ``KVCache``.

    ``linear(names, weight, bias)`` turns HF weights (``names``: their parameter names, several
    when fused) into the callable used here: dense by default, 4-bit from ``quant.py``.
    ``dtype`` is the activation dtype (default: the model's); ``head_dtype`` the LM head's
    (float32 by default: exact float32 logits); ``head_linear`` the product the forward's LM head
    runs (default: dense ``head``; ``quantcpu.Q8Linear`` for a GGUF's 8-bit embedding).
    """

    def __init__(self, model, linear=None, fuse: bool = True, head_dtype=torch.float32, dtype=None,
                 kernels: bool | None = None, head_linear=None):
        self.timer = None     # optional ``timer(part)`` -> context manager (profile-rounds); None: untimed
        self._stack = None    # q4_stack's weights, made on first use
        cfg = model.config
        why = fast_support(cfg)
        if why is not None:
            raise ValueError(why)
        inner = model.model
        self.config = cfg
        self.n_heads = int(cfg.num_attention_heads)
        self.n_kv = int(cfg.num_key_value_heads)
        self.head_dim = int(getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads)
        self.eps = float(cfg.rms_norm_eps)
        self.max_positions = int(getattr(cfg, "max_position_embeddings", 4096) or 4096)
        emb = inner.embed_tokens.weight.detach()
        self.dtype, self.device = dtype or emb.dtype, emb.device
        w = lambda t: t.detach().to(self.dtype)   # noqa: E731 - detached: a later model.to() leaves ours alone
        self.norm = w(inner.norm.weight)
        head = model.get_output_embeddings().weight.detach()
        self.head = head.to(head_dtype)
        tied = head.data_ptr() == emb.data_ptr()
        # a tied embedding is looked up in the head's copy when that loses nothing
        self.embed = self.head if tied and head_dtype in (torch.float32, emb.dtype) else emb
        self.dense_head = DenseLinear(self.head)       # the drafters' rows use it (Target.logits)
        self.head_linear = head_linear or self.dense_head
        self.rotary = inner.rotary_emb
        self.cos = self.sin = None
        self.fuse = fuse
        from .cpuext import available
        built = self.device.type == "cpu" and kernels is not False and available() is None
        if kernels is None:       # the fused C++ steps: float32 on CPU, where they build
            kernels = self.dtype == torch.float32 and built
        self.kernels = bool(kernels)
        # steps and verifies attend with kernels/attention.cpp (float32 and bf16 on CPU): a row's
        # bits do not depend on the other rows, so a verify row equals a one-row step
        self.row_attention = built and self.dtype in (torch.float32, torch.bfloat16)
        self.layers = []
        dense = lambda names, wt, b: DenseLinear(w(wt), None if b is None else w(b))   # noqa: E731
        linear = linear or dense
        for i, blk in enumerate(inner.layers):
            at, mlp = blk.self_attn, blk.mlp
            pre = f"model.layers.{i}."

            def group(mods, names):
                ws = [m.weight.detach() for m in mods]
                bs = [m.bias.detach() if m.bias is not None else None for m in mods]
                names = [pre + n + ".weight" for n in names]
                if not fuse:
                    return [linear([n], wt, b) for n, wt, b in zip(names, ws, bs)]
                b = None if all(x is None for x in bs) else torch.cat(
                    [x if x is not None else torch.zeros(wt.shape[0], dtype=wt.dtype) for wt, x in zip(ws, bs)])
                return [linear(names, torch.cat(ws), b)]

            qn, kn = getattr(at, "q_norm", None), getattr(at, "k_norm", None)
            self.layers.append(Layer(
                ln1=w(blk.input_layernorm.weight), ln2=w(blk.post_attention_layernorm.weight),
                qkv=group([at.q_proj, at.k_proj, at.v_proj], ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"]),
                o=group([at.o_proj], ["self_attn.o_proj"])[0],
                gate_up=group([mlp.gate_proj, mlp.up_proj], ["mlp.gate_proj", "mlp.up_proj"]),
                down=group([mlp.down_proj], ["mlp.down_proj"])[0],
                q_norm=None if qn is None else w(qn.weight), k_norm=None if kn is None else w(kn.weight)))
            self.layers[-1].q4 = self._q4_weights(self.layers[-1])

    # --- cache and RoPE ----------------------------------------------------------------------
    def new_cache(self) -> KVCache:
        return KVCache(len(self.layers), self.n_kv, self.head_dim, self.dtype, self.device, self.max_positions)

    def _rope(self, positions: torch.Tensor):
        """cos/sin rows for ``positions`` [n] from tables computed once per capacity."""
        need = int(positions.max()) + 1
        if self.cos is None or self.cos.shape[0] < need:
            cap = min(self.max_positions, max(MIN_CAPACITY, need, 2 * (0 if self.cos is None else self.cos.shape[0])))
            pos = torch.arange(cap, device=self.device)[None]
            probe = torch.empty(1, dtype=self.dtype, device=self.device)
            cos, sin = self.rotary(probe, pos)
            self.cos, self.sin = cos[0], sin[0]
        return self.cos[positions], self.sin[positions]

    # --- forward -----------------------------------------------------------------------------
    def forward(self, ids: torch.Tensor, positions: torch.Tensor, cache: KVCache, mask: torch.Tensor | None = None,
                taps: tuple[int, ...] | None = None, rows: slice | None = None, head: bool = True):
        """``ids``/``positions`` [1, n]; ``mask`` None (causal) or additive ``(1, 1, n, past + n)``.

        Returns (logits [len(rows), V] float32, feats [1, n, len(taps) * H] or None); with
        ``head=False`` the final-normed hidden rows [n, H] instead of logits, for ``head_logits``
        to read the rows a caller needs later (the verify's accept walk).
        """
        n = ids.shape[1]
        start = cache.length
        cache.reserve(start + n)
        time = self.timer or _untimed
        x = F.embedding(ids[0], self.embed).to(self.dtype)
        cos, sin = self._rope(positions[0])                   # [n, head_dim]
        attn_mask, causal = self._mask(mask, n, start)
        taps = tuple(taps or ())
        feats = {}
        stack = self._q4_stack() if self.timer is None else None
        if stack is not None:      # every layer in one op: the same q4_block per layer, no Python between
            w, qn, kn = stack
            tap_list = sorted(set(taps))
            x, tapped = torch.ops.dominotree_layer.q4_stack(x, w, cos, sin, cache.kv, start, self.n_heads, self.n_kv,
                                                           qn, kn, self.eps, attn_mask, causal, tap_list)
            feats = dict(zip(tap_list, tapped))
        else:
            for i, layer in enumerate(self.layers):
                with time("layer"):
                    x = self._block(layer, x, cos, sin, cache.kv[i], start, n, attn_mask, causal)
                if i in taps:
                    feats[i] = x
        cache.length = start + n
        with time("head"):
            h = self._norm(x, self.norm)
        if len(self.layers) - 1 in feats:   # transformers' hidden_states[-1] is the normed output
            feats[len(self.layers) - 1] = h
        feats = torch.cat([feats[t] for t in taps], dim=-1)[None] if taps else None
        if not head:
            return h, feats
        return self.head_logits(h if rows is None else h[rows]), feats

    def head_logits(self, h: torch.Tensor) -> torch.Tensor:
        """float32 logits of final-normed rows ``h`` [k, H]. A row's logits do not depend on the
        other rows given (the head products are row-independent: ``tests/test_fast.py``), so
        reading rows one batch at a time gives the bits of one batch of all of them."""
        with (self.timer or _untimed)("lm_head"):
            return self.head_linear(h.to(self.head.dtype)).float()

    def _mask(self, mask, n: int, start: int):
        """(attn_mask, is_causal) for SDPA."""
        if mask is not None:
            return mask.to(self.dtype), False
        if n == 1:
            return None, False
        if start == 0:
            return None, True
        # causal rows appended after ``start`` cached positions (bottom-right aligned)
        q = torch.arange(n, device=self.device)[:, None] + start
        k = torch.arange(start + n, device=self.device)[None]
        return (k <= q)[None, None], False

    def _norm(self, x, weight):
        return torch.ops.dominotree_layer.rms_norm(x, weight, self.eps) if self.kernels else _rms(x, weight, self.eps)

    def _qkv(self, layer: Layer, h, cos, sin, kv, start: int, n: int):
        """q [heads, n, hd] after RoPE; k (after RoPE) and v written into the cache at ``start``."""
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        qkv = torch.cat([lin(h) for lin in layer.qkv], dim=-1) if len(layer.qkv) > 1 else layer.qkv[0](h)
        if self.kernels:
            return torch.ops.dominotree_layer.rope_kv(qkv, cos, sin, kv, start, nh, nkv, layer.q_norm,
                                                      layer.k_norm, self.eps)
        q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
        q, k, v = q.view(n, nh, hd), k.view(n, nkv, hd), v.view(n, nkv, hd)
        if layer.q_norm is not None:
            q, k = _rms(q, layer.q_norm, self.eps), _rms(k, layer.k_norm, self.eps)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)     # [heads, n, hd]
        q = q * cos[None] + _rotate_half(q) * sin[None]
        k = k * cos[None] + _rotate_half(k) * sin[None]
        kv[0, :, start:start + n] = k
        kv[1, :, start:start + n] = v
        return q

    def _q4_weights(self, layer: Layer) -> list | None:
        """The tensors of ``dominotree_layer.q4_block`` when every product of ``layer`` is one
        bias-free ``Q4Linear``, or one ``Q4Q8Linear`` whose outputs fill its tiles (fused q/k/v and
        gate/up), and the fused steps run, else None."""
        from .quantcpu import LANES, Q4Linear, Q4Q8Linear
        lins = [*layer.qkv, layer.o, *layer.gate_up, layer.down]
        kind = {type(li) for li in lins}
        if (not self.kernels or len(lins) != 4 or len(kind) != 1 or kind - {Q4Linear, Q4Q8Linear}
                or any(li.bias is not None for li in lins)
                or (kind == {Q4Q8Linear} and any(li.out_features % LANES for li in lins))):
            return None
        return [layer.ln1, layer.ln2] + [t for li in lins for t in (li.codes, li.dm)]

    def _q4_stack(self):
        """``q4_stack``'s (weights, q_norms, k_norms) when every layer runs ``q4_block`` (``STACK``
        on), else None; made once."""
        if not (STACK and self.kernels and self.layers and all(la.q4 is not None for la in self.layers)):
            return None
        if self._stack is None:
            qn, kn = [la.q_norm for la in self.layers], [la.k_norm for la in self.layers]
            if any(t is None for t in qn + kn):
                if any(t is not None for t in qn + kn):
                    return None           # some layers normed, some not: one op a layer
                qn, kn = [], []
            self._stack = ([t for la in self.layers for t in la.q4], qn, kn)
        return self._stack

    def _block(self, layer: Layer, x, cos, sin, kv, start: int, n: int, attn_mask, causal: bool):
        hd, nh, nkv = self.head_dim, self.n_heads, self.n_kv
        if layer.q4 is not None and self.kernels and self.timer is None:   # profile-rounds times the parts
            return torch.ops.dominotree_layer.q4_block(x, layer.q4, cos, sin, kv, start, nh, nkv, layer.q_norm,
                                                       layer.k_norm, self.eps, attn_mask, causal)
        q = self._qkv(layer, self._norm(x, layer.ln1), cos, sin, kv, start, n)
        keys, values = kv[0, :, :start + n], kv[1, :, :start + n]
        with (self.timer or _untimed)("attention"):
            if self.row_attention and not (start == 0 and causal):
                # a step or a verify: kernels/attention.cpp gives each row the same bits whatever
                # the other rows (a prefill is the same for every method: torch's SDPA below)
                o = torch.ops.dominotree_attn.attention(q.contiguous(), kv, start, attn_mask, causal)
            elif n == 1 and attn_mask is None and q.dtype != torch.float32:
                # one query sees every cached key: fold each group's heads into the query rows of
                # its kv head, [kv, group, hd] against [kv, L, hd] (no GQA expansion of the keys);
                # faster in bf16 here (scripts/experiments/ab_forward.py), not in float32 (fewer heads to split)
                o = F.scaled_dot_product_attention(q.reshape(1, nkv, nh // nkv, hd), keys[None], values[None])
                o = o.reshape(1, nh, 1, hd)[0].transpose(0, 1).reshape(n, nh * hd)
            else:
                o = F.scaled_dot_product_attention(q[None], keys[None], values[None], attn_mask=attn_mask,
                                                   is_causal=causal, enable_gqa=nh != nkv)
                o = o[0].transpose(0, 1).reshape(n, nh * hd)
        x = x + layer.o(o)
        h = self._norm(x, layer.ln2)
        if self.kernels:
            gu = layer.gate_up[0](h) if len(layer.gate_up) == 1 else torch.cat([lin(h) for lin in layer.gate_up], -1)
            return x + layer.down(torch.ops.dominotree_layer.silu_mul(gu))
        if len(layer.gate_up) > 1:
            g, u = layer.gate_up[0](h), layer.gate_up[1](h)
        else:
            g, u = layer.gate_up[0](h).chunk(2, dim=-1)
        return x + layer.down(F.silu(g) * u)
