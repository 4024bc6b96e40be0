"""The drafter as our own torch modules: DFlash block-diffusion backbone + Domino GRU head.

Parameter names equal the released checkpoints' tensor names (``layers.{i}.self_attn.q_proj``,
``fc``, ``hidden_norm``, ``norm``, ``prefix_gru``, ``embed_proj.{0,2}``), so a released
``config.json`` + safetensors loads with ``load_state_dict`` and no remote code.

The drafter has no embedding table or LM head: both are the target's.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError  # defined with every user error in errors.py; importable here
from . import draftcpu
from .draftcache import DraftCache  # noqa: F401 - importable here (decode.py)

DOMINO_PROJECTORS = ("domino", "causal_v5")


@dataclass(frozen=True)
class DrafterConfig:
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    block_size: int
    num_target_layers: int
    mask_token_id: int
    target_layer_ids: tuple[int, ...]
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1_000_000.0
    max_position_embeddings: int = 40960
    attention_bias: bool = False
    # Domino head (projector_type "domino"); None for a plain DFlash drafter
    projector_type: str | None = None
    shift_label: bool = False
    pure_draft_prefix_len: int = 1
    emb_dim: int = 0
    gru_hidden_dim: int = 0

    @property
    def is_domino(self) -> bool:
        return self.projector_type in DOMINO_PROJECTORS

    @property
    def kind(self) -> str:
        return "domino" if self.is_domino else "dflash"

    @property
    def draft_depth(self) -> int:
        """Draft positions per block: 16 rows with ``shift_label``, else the 15 mask rows."""
        return self.block_size if self.shift_label else self.block_size - 1

    @classmethod
    def from_dict(cls, raw: dict) -> "DrafterConfig":
        dc = raw.get("dflash_config")
        if not isinstance(dc, dict):
            raise CheckpointError("config.json has no 'dflash_config' block: not a DFlash/Domino drafter")
        need = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "vocab_size", "block_size"]
        missing = [k for k in need if k not in raw]
        if "mask_token_id" not in dc:
            missing.append("dflash_config.mask_token_id")
        if missing:
            raise CheckpointError(f"config.json is missing {', '.join(missing)}")
        heads = int(raw["num_attention_heads"])
        head_dim = int(raw.get("head_dim") or raw["hidden_size"] // heads)
        n_layers = int(raw["num_hidden_layers"])
        n_target = int(raw.get("num_target_layers", 0))
        ids = dc.get("target_layer_ids") or build_target_layer_ids(n_target, n_layers)
        proj = dc.get("projector_type")
        rope_theta = raw.get("rope_theta")
        if rope_theta is None and isinstance(raw.get("rope_parameters"), dict):
            rope_theta = raw["rope_parameters"].get("rope_theta")
        cfg = cls(
            hidden_size=int(raw["hidden_size"]), intermediate_size=int(raw["intermediate_size"]),
            num_hidden_layers=n_layers, num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads", heads)), head_dim=head_dim,
            vocab_size=int(raw["vocab_size"]), block_size=int(raw["block_size"]),
            num_target_layers=n_target, mask_token_id=int(dc["mask_token_id"]),
            target_layer_ids=tuple(int(i) for i in ids),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=float(rope_theta or 1_000_000.0),
            max_position_embeddings=int(raw.get("max_position_embeddings", 40960)),
            attention_bias=bool(raw.get("attention_bias", False)),
            projector_type=proj,
            shift_label=bool(dc.get("shift_label", False)),
            pure_draft_prefix_len=int(dc.get("pure_draft_prefix_len", 1)),
            emb_dim=int(dc.get("emb_dim", raw.get("emb_dim", 0)) or 0),
            gru_hidden_dim=int(dc.get("gru_hidden_dim", raw.get("gru_hidden_dim", 0)) or 0),
        )
        cfg.check()
        return cfg

    def check(self) -> None:
        if self.is_domino:
            if self.emb_dim <= 0 or self.gru_hidden_dim <= 0:
                raise CheckpointError("Domino drafter config needs emb_dim and gru_hidden_dim > 0")
            if self.pure_draft_prefix_len != 1:
                raise CheckpointError(f"Domino drafter needs pure_draft_prefix_len == 1, got {self.pure_draft_prefix_len}")
            if not self.shift_label:
                raise CheckpointError("Domino drafter config has shift_label false; released Domino "
                                      "checkpoints use shift_label true (all block rows are drafts)")
        elif self.projector_type is not None:
            raise CheckpointError(f"unknown projector_type {self.projector_type!r}")
        elif self.shift_label:
            raise CheckpointError("DFlash drafter config has shift_label true but no Domino head")
        if self.block_size < 2:
            raise CheckpointError(f"block_size must be >= 2, got {self.block_size}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise CheckpointError("num_attention_heads must be a multiple of num_key_value_heads")
        if not self.target_layer_ids:
            raise CheckpointError("dflash_config.target_layer_ids is empty")

    def to_dict(self) -> dict:
        """The released ``config.json`` layout (architecture string and auto_map included)."""
        dc = {"mask_token_id": self.mask_token_id, "target_layer_ids": list(self.target_layer_ids)}
        out = {
            "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
            "model_type": "qwen3", "block_size": self.block_size,
            "num_target_layers": self.num_target_layers, "dflash_config": dc,
            "hidden_size": self.hidden_size, "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers, "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads, "head_dim": self.head_dim,
            "layer_types": ["full_attention"] * self.num_hidden_layers,
            "rms_norm_eps": self.rms_norm_eps, "rope_theta": self.rope_theta,
            "max_position_embeddings": self.max_position_embeddings, "vocab_size": self.vocab_size,
            "tie_word_embeddings": False, "attention_bias": self.attention_bias,
            "dtype": "bfloat16", "sliding_window": None, "use_sliding_window": False,
        }
        if self.is_domino:
            dc.update(projector_type=self.projector_type, pure_draft_prefix_len=self.pure_draft_prefix_len,
                      emb_dim=self.emb_dim, gru_hidden_dim=self.gru_hidden_dim, shift_label=True)
            out["emb_dim"] = self.emb_dim
        return out


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """DFlash's default tapped layers (outputs of these 0-indexed decoder layers)."""
    if num_target_layers <= 0:
        raise CheckpointError("dflash_config.target_layer_ids missing and num_target_layers unknown")
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [int(round(start + i * span / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def _fused_norm(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether an RMSNorm runs as the C++ kernels' fused op (``cpuext``; float32 CPU inference,
    agreeing with the torch ops to float32 rounding), as ``fast.FastModel``'s does."""
    if (x.dtype != torch.float32 or weight.dtype != torch.float32 or x.device.type != "cpu"
            or torch.is_grad_enabled()):
        return False
    from .cpuext import available
    return available() is None


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _fused_norm(x, self.weight):     # decoding on CPU: one C++ op instead of seven
            return torch.ops.dominotree_layer.rms_norm(x.contiguous(), self.weight, self.eps)
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_cos_sin(positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim))
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: [B, heads, L, hd]; cos/sin: [L, hd]."""
    return x * cos + _rotate_half(x) * sin


class DraftAttention(nn.Module):
    """Queries from the block only; keys/values from [context ; block]; non-causal."""

    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        h, hd = cfg.hidden_size, cfg.head_dim
        self.nh, self.nkv, self.hd = cfg.num_attention_heads, cfg.num_key_value_heads, hd
        self.q_proj = nn.Linear(h, self.nh * hd, bias=cfg.attention_bias)
        self.k_proj = nn.Linear(h, self.nkv * hd, bias=cfg.attention_bias)
        self.v_proj = nn.Linear(h, self.nkv * hd, bias=cfg.attention_bias)
        self.o_proj = nn.Linear(self.nh * hd, h, bias=cfg.attention_bias)
        self.q_norm = RMSNorm(hd, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(hd, cfg.rms_norm_eps)

    def _kv(self, x, cos, sin):
        b, n, _ = x.shape
        k = self.k_norm(self.k_proj(x).view(b, n, self.nkv, self.hd)).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.nkv, self.hd).transpose(1, 2)
        return apply_rope(k, cos, sin), v

    def forward(self, x, ctx, rope_ctx, rope_blk, past: tuple | None, attn_mask=None):
        b, n, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, n, self.nh, self.hd)).transpose(1, 2)
        q = apply_rope(q, *rope_blk)
        c = ctx.shape[1]
        # the context's and the block's keys/values in one product each (rows are independent)
        k_all, v_all = self._kv(torch.cat([ctx, x], dim=1), torch.cat([rope_ctx[0], rope_blk[0]]),
                                torch.cat([rope_ctx[1], rope_blk[1]]))
        k_ctx, k_blk, v_ctx, v_blk = k_all[:, :, :c], k_all[:, :, c:], v_all[:, :, :c], v_all[:, :, c:]
        if past is not None:  # committed context keys/values from earlier rounds
            k_ctx = torch.cat([past[0], k_ctx], dim=2)
            v_ctx = torch.cat([past[1], v_ctx], dim=2)
        k = torch.cat([k_ctx, k_blk], dim=2)
        v = torch.cat([v_ctx, v_blk], dim=2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=False,
                                             enable_gqa=self.nh != self.nkv)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, -1)), (k_ctx, v_ctx)


class DraftMLP(nn.Module):
    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DraftLayer(nn.Module):
    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        self.self_attn = DraftAttention(cfg)
        self.mlp = DraftMLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, ctx, rope_ctx, rope_blk, past, attn_mask=None):
        a, kv = self.self_attn(self.input_layernorm(x), ctx, rope_ctx, rope_blk, past, attn_mask)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), kv


class Drafter(nn.Module):
    """DFlash backbone (+ Domino head when ``cfg.is_domino``)."""

    def __init__(self, cfg: DrafterConfig):
        super().__init__()
        self.cfg = cfg
        h = cfg.hidden_size
        self.layers = nn.ModuleList(DraftLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(h, cfg.rms_norm_eps)
        self.fc = nn.Linear(len(cfg.target_layer_ids) * h, h, bias=False)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        if cfg.is_domino:
            g, e = cfg.gru_hidden_dim, cfg.emb_dim
            self.prefix_gru = nn.GRU(h, g, num_layers=1, batch_first=True, bias=False)
            self.embed_proj = nn.Sequential(nn.Linear(h + g, e, bias=False), nn.SiLU(),
                                            nn.Linear(e, cfg.vocab_size, bias=False))

    def forward(self, target_feats: torch.Tensor, noise_emb: torch.Tensor, ctx_positions: torch.Tensor,
                blk_positions: torch.Tensor, cache: DraftCache | None = None,
                attn_mask: torch.Tensor | None = None, keep: int | None = None) -> torch.Tensor:
        """Backbone forward.

        ``target_feats`` [B, c, L_t*H]: tapped target features of the new context positions
        ``ctx_positions`` [c]; ``noise_emb`` [B, n, H]: target embeddings of the block at
        ``blk_positions`` [n]. With a ``cache`` the new context K/V are appended to it (the
        block's K/V never are). Returns the final-normed block hidden states [B, n, H], or their
        first ``keep`` rows (every row still attends in every layer; the fused CPU path then skips
        the last layer's output product and MLP for the others, the rows kept have the same bits).
        """
        fused = draftcpu.layer_weights(self, target_feats, noise_emb, attn_mask)
        if fused is not None:       # decoding on CPU: a C++ op per layer, the same bits
            cos, sin = self.rope_rows(torch.cat([ctx_positions, blk_positions]))
            return draftcpu.forward(self, fused, target_feats, noise_emb, cos, sin, cache, keep)
        cfg = self.cfg
        ctx = self.hidden_norm(self.fc(target_feats))
        rope_ctx = rope_cos_sin(ctx_positions, cfg.head_dim, cfg.rope_theta, noise_emb.dtype)
        rope_blk = rope_cos_sin(blk_positions, cfg.head_dim, cfg.rope_theta, noise_emb.dtype)
        x = noise_emb
        new_kv = []
        for i, layer in enumerate(self.layers):
            past = cache.kv[i] if cache is not None and cache.kv else None
            x, kv = layer(x, ctx, rope_ctx, rope_blk, past, attn_mask)
            new_kv.append(kv)
        if cache is not None:
            cache.kv = new_kv
        return self.norm(x if keep is None else x[:, :keep])

    def rope_rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """float32 ``rope_cos_sin`` rows of ``positions`` from a table made once (grown when needed)."""
        need = int(positions.max()) + 1 if positions.numel() else 0
        table = self.__dict__.get("_rope_table")
        if table is None or table[0].shape[0] < need or table[0].device != positions.device:
            rows = max(1024, need, 2 * (0 if table is None else table[0].shape[0]))
            table = self.__dict__["_rope_table"] = rope_cos_sin(torch.arange(rows, device=positions.device), self.cfg.head_dim,
                                                                self.cfg.rope_theta, torch.float32)
        return table[0].index_select(0, positions), table[1].index_select(0, positions)

    # --- Domino head -------------------------------------------------------------------
    def gru_step(self, emb: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """One GRU step for N paths: ``emb`` [N, H] target embeddings, ``state`` [N, G] -> [N, G]."""
        h0 = None if state is None else state.unsqueeze(0).contiguous()
        _, hn = self.prefix_gru(emb.unsqueeze(1), h0)
        return hn[0]

    def first_state(self, emb: torch.Tensor) -> torch.Tensor:
        """``gru_step(emb, None)`` (the state after the root) without ``nn.GRU``'s per-call cost:
        from the zero state the bias-free GRU is ``h' = (1 - u) * tanh(W_in x)``, ``u = σ(W_iz x)``.
        Equal to ``gru_step`` up to float rounding (``tests/test_childgru.py``)."""
        g = self.cfg.gru_hidden_dim
        gi = F.linear(emb, self.prefix_gru.weight_ih_l0[g:])               # [N, 2G]: z and n gates
        u = torch.sigmoid(gi[:, :g])
        return (1 - u) * torch.tanh(gi[:, g:])

    def root_state(self, root: int, target, vocab=None) -> torch.Tensor:
        """``first_state`` [G] of the target token ``root``: from the GRU's per-token input table
        (``childgru``) when the decode made one (of ``target.embed``, or of the draft vocabulary
        ``vocab``'s embedding) holding ``root``, a row read instead of a product; else from its
        embedding. Equal up to float rounding (``tests/test_draftlayer.py``)."""
        from bisect import bisect_left

        from .childgru import existing_child_gru
        gru = existing_child_gru(self, target.embed if vocab is None else vocab.embed)
        row = root
        if gru is not None and vocab is not None:
            row = bisect_left(vocab.id_list, root)
            if row == len(vocab.id_list) or vocab.id_list[row] != root:
                gru = None                      # the root is outside the draft vocabulary
        if gru is not None:
            return gru.first(torch.tensor([row], device=gru.table.device))[0]
        emb = target.embed_tokens(torch.tensor([root], device=target.device))
        return self.first_state(emb.to(self.fc.weight.dtype))[0]

    def correction_hidden(self, z: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``SiLU(W1 · [z ; s])`` [N, E] (the low-rank part before W2)."""
        return self.embed_proj[1](self.embed_proj[0](torch.cat([z, state], dim=-1)))

    def correction(self, z: torch.Tensor, state: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logit correction ``W2 · SiLU(W1 · [z ; s])``: [N, V], or [N, len(ids)] for the tokens ``ids`` only."""
        h = self.correction_hidden(z, state)
        return self.embed_proj[2](h) if ids is None else F.linear(h, self.embed_proj[2].weight[ids])
