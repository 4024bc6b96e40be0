"""Drafter configs from the target, initialisation, parameter groups and the lr schedule."""
from __future__ import annotations

import math
from pathlib import Path

import torch

from dominotree.models.drafter import Drafter, DrafterConfig, build_target_layer_ids

# config keys a checkpoint may differ in from the flags: no weight's shape depends on them, so a
# block-16 drafter fine-tunes into a block-8 one
RESHAPE_FREE = ("block_size",)


def resume_from(model: Drafter, folder: Path) -> None:
    """Load a released-format checkpoint into ``model`` (fp32 master weights); the checkpoint's
    config must equal the one the flags describe (but for ``RESHAPE_FREE`` keys), so a resumed
    run trains the same architecture."""
    from dominotree.models.checkpoint import load_drafter
    src = load_drafter(folder, torch.float32)
    ours, theirs = model.cfg.to_dict(), src.cfg.to_dict()
    diff = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k) and k not in RESHAPE_FREE)
    if diff:
        raise SystemExit(f"error: {folder}: config differs from the flags in {', '.join(diff[:6])}")
    model.load_state_dict(src.state_dict(), strict=True)


def make_configs(tcfg, a) -> tuple[DrafterConfig, DrafterConfig]:
    H = int(tcfg.hidden_size)
    heads = a.heads or int(tcfg.num_attention_heads)
    kv = a.kv_heads or int(getattr(tcfg, "num_key_value_heads", heads))
    hd = a.head_dim or int(getattr(tcfg, "head_dim", None) or H // heads)
    n_layers_t = int(tcfg.num_hidden_layers)
    taps = tuple(int(x) for x in a.taps.split(",")) if a.taps else tuple(build_target_layer_ids(n_layers_t, 5))
    rope = getattr(tcfg, "rope_theta", None)
    if rope is None and isinstance(getattr(tcfg, "rope_parameters", None), dict):
        rope = tcfg.rope_parameters.get("rope_theta")
    common = dict(hidden_size=H, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                  num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd,
                  vocab_size=int(tcfg.vocab_size), block_size=a.block_size,
                  num_target_layers=n_layers_t, mask_token_id=a.mask_token_id, target_layer_ids=taps,
                  rms_norm_eps=float(getattr(tcfg, "rms_norm_eps", 1e-6)),
                  rope_theta=float(rope or 1_000_000.0),
                  max_position_embeddings=int(getattr(tcfg, "max_position_embeddings", 8192) or 8192))
    d = DrafterConfig(**common)
    m = DrafterConfig(**common, projector_type="domino", shift_label=True, pure_draft_prefix_len=1,
                      emb_dim=a.emb_dim, gru_hidden_dim=a.gru_hidden)
    d.check()
    m.check()
    return d, m


def init_drafter(model: Drafter, target, from_target: bool) -> None:
    """Zero the Domino W2 (the correction starts at 0: final = base); scale the final norm
    (see below); optionally copy the
    target's last decoder layers into the draft layers (same shapes when sizes match)."""
    if model.cfg.is_domino:
        torch.nn.init.zeros_(model.embed_proj[2].weight)
    # The final norm feeds the target's LM head: start from the target's own final-norm
    # profile, scaled down so random initial directions give near-uniform logits (CE ~ ln V
    # instead of ~20 with unit weights).
    tnorm = getattr(target.model, "norm", None)
    if tnorm is not None and tuple(tnorm.weight.shape) == tuple(model.norm.weight.shape):
        model.norm.weight.copy_(tnorm.weight.float() * 0.25)
    if not from_target:
        return
    tl = target.model.layers
    n = len(model.layers)
    for i, layer in enumerate(model.layers):
        src = tl[len(tl) - n + i]
        ssd = src.state_dict()
        for k, v in layer.state_dict().items():
            if k in ssd and tuple(ssd[k].shape) == tuple(v.shape):
                v.copy_(ssd[k].float())


def param_groups(model: Drafter, wd: float):
    dec, nodec = [], []
    for n, p in model.named_parameters():
        (dec if p.ndim >= 2 else nodec).append(p)
    return [{"params": dec, "weight_decay": wd}, {"params": nodec, "weight_decay": 0.0}]


def lr_at(progress: float, base: float, warmup: float, final_frac: float) -> float:
    if progress < warmup:
        return base * max(progress / warmup, 0.02)
    t = min(1.0, (progress - warmup) / max(1e-9, 1 - warmup))
    return base * (final_frac + (1 - final_frac) * 0.5 * (1 + math.cos(math.pi * t)))
