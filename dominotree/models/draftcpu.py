"""The drafter's backbone on CPU as one C++ op per layer (``kernels/draftlayer.cpp``), for decoding.

A draft runs the backbone over a few block rows: in Python (``drafter.DraftLayer``) that is ~50
small torch ops per layer, and their dispatch, not the products, was most of the draft stage
(issue 30). ``forward`` runs the same arithmetic as ``Drafter.forward`` with each layer one op:

- the context rows ``hidden_norm(fc(target features))`` and the final norm as in Python;
- per layer, ``dominotree_draft.draft_block``: keys/values of the new context rows (not
  layer-normed) and of the block rows (``input_layernorm``), q_norm / k_norm, RoPE, non-causal
  attention of the block rows over [committed context ; new context ; block], o_proj, residual,
  post-attention norm, SiLU-gated MLP, residual;
- RoPE rows read from a table made once per drafter (``Drafter.rope_rows``);
- the keys/values in ``DraftCache``'s preallocated buffer ``[layers, 2, kv_heads, capacity,
  head_dim]``: a round writes its new context after the committed positions and its block after
  that, then commits the context only (the block's rows are overwritten next round), so nothing
  is concatenated per round.

It runs where it gives the Python path's arithmetic: a float32 drafter on CPU, batch 1, no
attention mask, autograd off, the C++ kernels built, and every product of the layers a bias-free
``quantcpu.Q8Q8Linear`` (the drafter next to an ``int4-q8`` target, ``presets.load_pair``); the
products are the same kernel on the same rows, the small ops the same C++ or torch ops, so the
result equals the Python path's bit for bit (``tests/test_draftlayer.py``). Anything else (training, bf16,
CUDA, other products) keeps the Python path. ``FUSED = False`` turns it off (A/B measurements).
"""
from __future__ import annotations

import torch

from .cpuext import available
from .draftcache import DraftCache
from .linear import routed_product

FUSED = True          # module switch for A/B measurements (scripts/experiments/draft_ab.py)


def _layer_products(layer) -> tuple | None:
    """The 7 products of one ``DraftLayer`` as they run now, or None when one is not a bias-free
    ``Q8Q8Linear`` whose outputs fill its tiles."""
    from .quantcpu import LANES, Q8Q8Linear
    at, mlp = layer.self_attn, layer.mlp
    mods = (at.q_proj, at.k_proj, at.v_proj, at.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj)
    prods = tuple(routed_product(m) for m in mods)
    if any(type(p) is not Q8Q8Linear or p.out_features % LANES for p in prods):
        return None
    return prods


def _pack(layer, prods: tuple) -> list[torch.Tensor]:
    """``draft_block``'s 12 tensors: the norms, then q/k/v and gate/up stacked by tiles."""
    at = layer.self_attn
    q, k, v, o, g, u, d = prods
    norms = [t.detach() for t in (layer.input_layernorm.weight, layer.post_attention_layernorm.weight,
                                  at.q_norm.weight, at.k_norm.weight)]
    return norms + [torch.cat([q.codes, k.codes, v.codes]), torch.cat([q.d, k.d, v.d]), o.codes, o.d,
                    torch.cat([g.codes, u.codes]), torch.cat([g.d, u.d]), d.codes, d.d]


def _modules(drafter) -> list:
    """Per layer its 7 linears and 4 norms, listed once per drafter."""
    mods = drafter.__dict__.get("_draft_block_modules")
    if mods is None:
        mods = drafter.__dict__["_draft_block_modules"] = [
            m for layer in drafter.layers for at, mlp in [(layer.self_attn, layer.mlp)]
            for m in (at.q_proj, at.k_proj, at.v_proj, at.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj,
                      layer.input_layernorm, layer.post_attention_layernorm, at.q_norm, at.k_norm)]
    return mods


def _key(drafter) -> tuple:
    """What the packed weights depend on, cheap to read every round: per module its routed forward,
    weight and bias (objects kept alive by the cache, so their ids are not reused) and the weight's
    in-place version (a training step)."""
    key = []
    for m in _modules(drafter):
        p = m._parameters
        w = p["weight"]
        key += (id(m.__dict__.get("forward")), id(w), -1 if w.is_inference() else w._version, id(p.get("bias")))
    return tuple(key)


def fused_weights(drafter) -> list[list[torch.Tensor]] | None:
    """Per layer, ``draft_block``'s weight tensors (packed again when a product or a norm weight
    changed), or None when the drafter's products are not all ``Q8Q8Linear``."""
    key = _key(drafter)
    cached = drafter.__dict__.get("_draft_block_weights")
    if cached is not None and cached[0] == key:
        return cached[2]
    prods = [_layer_products(layer) for layer in drafter.layers]
    packed = None if any(p is None for p in prods) else [_pack(la, p) for la, p in zip(drafter.layers, prods)]
    keep = [p for m in _modules(drafter) for p in (m.__dict__.get("forward"), *m._parameters.values())]
    drafter.__dict__["_draft_block_weights"] = (key, keep, packed)
    return packed


def layer_weights(drafter, target_feats: torch.Tensor, noise_emb: torch.Tensor, attn_mask) -> list | None:
    """``forward``'s per-layer weights when it runs this call (see the module docstring), else None."""
    if not (FUSED and attn_mask is None and not torch.is_grad_enabled()
            and noise_emb.dim() == 3 and noise_emb.shape[0] == 1 and target_feats.shape[0] == 1
            and noise_emb.dtype == torch.float32 and target_feats.dtype == torch.float32
            and noise_emb.device.type == "cpu" and drafter.fc.weight.dtype == torch.float32
            and drafter.norm.weight.dtype == torch.float32 and available(verbose=False) is None):
        return None
    return fused_weights(drafter)


def forward(drafter, weights: list, target_feats: torch.Tensor, noise_emb: torch.Tensor, cos: torch.Tensor,
            sin: torch.Tensor, cache: DraftCache | None = None, keep: int | None = None) -> torch.Tensor:
    """``Drafter.forward`` with ``layer_weights``' ``weights`` and the RoPE rows ``cos``/``sin`` of
    the context's positions, then the block's (the other arguments and the result as there); with
    ``keep`` the last layer's output product and MLP run on the first ``keep`` block rows only."""
    cfg = drafter.cfg
    ctx = drafter.hidden_norm(drafter.fc(target_feats))[0].contiguous()
    c, n = ctx.shape[0], noise_emb.shape[1]
    cache = DraftCache() if cache is None else cache
    past = cache.length
    kv = cache.reserve(len(weights), cfg.num_key_value_heads, cfg.head_dim, past + c + n)
    x = noise_emb[0].contiguous()
    block = torch.ops.dominotree_draft.draft_block
    last = len(weights) - 1
    for i, w in enumerate(weights):
        x = block(x, ctx, w, cos, sin, kv[i], past, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.rms_norm_eps,
                  keep if i == last and keep is not None else -1)
    cache.commit(past + c)
    return drafter.norm(x)[None]
