"""Train the embedded DFlash and Domino drafters on self-distillation data, in one process.

    python -m dominotree.train.trainer --data data/distill \\
        --out-dflash assets/drafters/smollm2-dflash-b16 \\
        --out-domino assets/drafters/smollm2-domino-b16 --time-budget-min 75 --seed 0

Both drafters share each step's target forward (the tapped hidden states of the target, bf16,
no grad), which is the shared cost. Per sequence many blocks ("anchors") are trained at once:
the block rows of all anchors are concatenated and the context is the whole sequence's
features, with a mask so each block sees only context positions < its anchor and only its own
block (non-causal inside the block), and RoPE positions per row (``blk_positions``).

Block semantics (reference/algorithms.md 1b, 2b, 7.1). Block input at anchor ``p`` is
``[x_p, MASK x (B-1)]`` at positions ``p .. p+B-1``; the context is the target features of
positions ``< p``.
- DFlash (``shift_label`` false): row ``r = 1..B-1`` predicts ``x_{p+r}``.
- Domino (``shift_label`` true): row ``i = 0..B-1`` predicts ``x_{p+1+i}``. Base logits
  ``lm_head(z_i)``; for ``i >= 1`` the final logits add ``W2 SiLU(W1 [z_i ; s_i])`` with
  ``s_i = GRU(e(x_{p+i}), s_{i-1})``, ``s_0 = GRU(e(x_p), 0)``, teacher-forced on the true
  tokens, ``e`` = the target's embedding table. Loss ``(1-lam) CE(final) + lam CE(base)`` with
  ``lam`` decaying linearly 1 -> 0 over the first ``--decay-ratio`` of training.

The 49k-vocabulary LM head dominates the cost. Each predicted row carries DFlash's weight
``exp(-(k-1)/gamma)`` (k = 1 for the first predicted row); instead of multiplying the loss by
it we keep row k with probability ``w_k`` and divide by the expected number of kept rows
(an unbiased estimate of the weighted mean CE, with ~44 % of the LM-head rows at B=16,
gamma=7). Every kept row's CE is the exact full-vocabulary CE; evaluation uses all rows.

Held-out metric ("acc"): on held-out sequences, from fixed random anchors, 1 + the number of
leading block rows whose argmax equals the data token (greedy chain acceptance against the
data). For Domino this is the corrected greedy rollout: because acceptance stops at the first
mismatch, the teacher-forced GRU states equal the rollout's states on every accepted row, so
one parallel pass gives exactly the rollout's acceptance length.

Schedules (warmup + cosine lr, Domino's lambda) run on training progress =
``max(elapsed / time budget, step / max_steps)``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from dominotree.models.checkpoint import load_drafter, save_drafter
from dominotree.models.drafter import Drafter, DrafterConfig, build_target_layer_ids


# ------------------------------------------------------------------------------------------
# data

@dataclass
class Seq:
    ids: torch.Tensor        # [T] long
    prompt_len: int
    sampled: bool
    key: int                 # index in the full list (feature-cache key)

    @property
    def n_anchor(self) -> int:
        """Anchors p in [prompt_len, T-2]: the bonus token is a generated token, and at least
        one token follows it."""
        return max(0, len(self.ids) - 1 - self.prompt_len)


def read_data(folder: Path, min_answer: int = 2) -> list[Seq]:
    """All complete records of ``*.jsonl`` under ``folder`` (torn last lines are skipped)."""
    files = sorted(Path(folder).glob("*.jsonl"))
    if not files:
        raise SystemExit(f"error: no *.jsonl shards in {folder}")
    out: list[Seq] = []
    for f in files:
        with open(f) as fh:
            for line in fh:
                try:
                    r = json.loads(line)
                    ids, pl = r["ids"], int(r["prompt_len"])
                except (ValueError, KeyError, TypeError):
                    continue
                if len(ids) - pl < min_answer:
                    continue
                out.append(Seq(torch.tensor(ids, dtype=torch.long), pl, bool(r.get("sampled", False)), len(out)))
    if not out:
        raise SystemExit(f"error: no usable records in {folder}")
    return out


def split_heldout(seqs: list[Seq], n_eval: int, seed: int) -> tuple[list[Seq], list[Seq]]:
    """Held-out set: ``n_eval`` sequences, greedy ones first (they are what T=0 decoding sees)."""
    rng = random.Random(seed + 12345)
    idx = list(range(len(seqs)))
    rng.shuffle(idx)
    n_eval = min(n_eval, max(1, len(seqs) // 10))
    greedy = [i for i in idx if not seqs[i].sampled and seqs[i].n_anchor >= 4]
    rest = [i for i in idx if i not in set(greedy)]
    ev = set((greedy + rest)[:n_eval])
    return [s for i, s in enumerate(seqs) if i not in ev], [seqs[i] for i in sorted(ev)]


# ------------------------------------------------------------------------------------------
# target features

class _Stop(Exception):
    pass


class TargetFeatures:
    """Tapped target features ``hidden_states[l+1]`` (decoder layer ``l`` outputs), concatenated.

    Forward hooks on the tapped layers; the forward stops after the last tapped layer (the
    remaining layers, the final norm and the LM head are never run). Features are kept in a
    bounded in-memory cache (bf16) so later epochs skip the target forward.
    """

    def __init__(self, model, taps: tuple[int, ...], cache_gb: float):
        self.model = model
        self.taps = tuple(taps)
        self.last = max(taps)
        self.cap = int(cache_gb * 2**30)
        self.used = 0
        self.cache: dict[int, torch.Tensor] = {}
        self.hits = self.misses = 0
        self._cap: dict[int, torch.Tensor] = {}
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
            if l == self.last:
                raise _Stop
        return fn

    @torch.no_grad()
    def compute(self, ids: torch.Tensor) -> torch.Tensor:
        self._cap = {}
        self._active = True
        try:
            self.model.model(input_ids=ids[None], use_cache=False)
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
        return feats  # [1, T, L*H]

    def __call__(self, seq: Seq, keep: bool = True) -> torch.Tensor:
        f = self.cache.get(seq.key)
        if f is not None:
            self.hits += 1
            return f
        self.misses += 1
        f = self.compute(seq.ids)
        nbytes = f.numel() * f.element_size()
        if keep and self.used + nbytes <= self.cap:
            self.cache[seq.key] = f
            self.used += nbytes
        return f


# ------------------------------------------------------------------------------------------
# blocks

def row_weights(n: int, gamma: float) -> torch.Tensor:
    """DFlash's decaying loss weight per predicted row, ``exp(-(k-1)/gamma)``, k = 1..n."""
    return torch.exp(-torch.arange(n, dtype=torch.float32) / gamma)


@dataclass
class Blocks:
    """The blocks of one sequence: ``A`` anchors x ``B`` rows, flattened row-major."""
    anchors: torch.Tensor    # [A]
    positions: torch.Tensor  # [A*B] absolute positions p..p+B-1
    blk_ids: torch.Tensor    # [A*B] [x_p, MASK...]
    tokens: torch.Tensor     # [A, B] true tokens x_{p+i} (pad 0 past the end)
    lab_dflash: torch.Tensor  # [A*B] row r predicts x_{p+r}; row 0 and past-the-end = -100
    lab_domino: torch.Tensor  # [A*B] row i predicts x_{p+1+i}; past-the-end = -100
    mask: torch.Tensor       # [1, 1, A*B, n_ctx + A*B] bool, True = attend
    n_ctx: int


def make_blocks(seq: Seq, anchors: list[int], bs: int, mask_id: int) -> Blocks:
    ids = seq.ids
    T = len(ids)
    a = torch.tensor(sorted(anchors), dtype=torch.long)
    A = len(a)
    ext = torch.cat([ids, torch.full((bs + 1,), -100, dtype=torch.long)])
    offs = torch.arange(bs)
    pos = a[:, None] + offs[None, :]                      # [A, B]
    tok = ext[pos]                                        # [A, B] x_{p+i}
    nxt = ext[pos + 1]                                    # [A, B] x_{p+1+i}
    blk = torch.full((A, bs), mask_id, dtype=torch.long)
    blk[:, 0] = ids[a]
    lab_d = tok.clone()
    lab_d[:, 0] = -100
    n_ctx = int(a.max())                                  # context columns needed: positions < max anchor
    n = A * bs
    ctx_vis = torch.arange(n_ctx)[None, :] < a.repeat_interleave(bs)[:, None]    # [n, n_ctx]
    blk_of = torch.arange(n) // bs
    blk_vis = blk_of[:, None] == blk_of[None, :]                                  # [n, n]
    mask = torch.cat([ctx_vis, blk_vis], dim=1)[None, None]
    return Blocks(a, pos.reshape(-1), blk.reshape(-1), tok.clamp_min(0), lab_d.reshape(-1),
                  nxt.reshape(-1), mask, n_ctx)


def pick_anchors(seq: Seq, k: int, rng: random.Random) -> list[int]:
    lo, hi = seq.prompt_len, len(seq.ids) - 2
    cand = list(range(lo, hi + 1))
    if len(cand) <= k:
        return cand
    return rng.sample(cand, k)


# ------------------------------------------------------------------------------------------
# model pieces

def resume_from(model: Drafter, folder: Path) -> None:
    """Load a released-format checkpoint into ``model`` (fp32 master weights); the checkpoint's
    config must equal the one the flags describe, so a resumed run trains the same architecture."""
    from dominotree.models.checkpoint import load_drafter
    src = load_drafter(folder, torch.float32)
    ours, theirs = model.cfg.to_dict(), src.cfg.to_dict()
    diff = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
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


# ------------------------------------------------------------------------------------------
# the trainer

class Trainer:
    def __init__(self, a, target, dflash: Drafter, domino: Drafter):
        self.a = a
        self.target = target
        self.dflash = dflash
        self.domino = domino
        self.bs = dflash.cfg.block_size
        self.embed_w = target.get_input_embeddings().weight      # [V, H] bf16, frozen
        self.head_w = target.get_output_embeddings().weight      # [V, H] bf16, frozen
        self.feats = TargetFeatures(target, dflash.cfg.target_layer_ids, a.feat_cache_gb)
        self.w_d = row_weights(self.bs - 1, a.gamma)             # DFlash rows 1..B-1
        self.w_m = row_weights(self.bs, a.gamma)                 # Domino rows 0..B-1
        self.amp = torch.autocast("cpu", dtype=torch.bfloat16, enabled=not a.no_amp)

    # --- one sequence through both backbones ------------------------------------------
    def _backbones(self, feats: torch.Tensor, blk: Blocks):
        feats = feats[:, : blk.n_ctx]
        if self.a.no_amp:  # float32 drafter: bf16 target features must be cast explicitly
            feats = feats.float()
        noise = F.embedding(blk.blk_ids, self.embed_w).float()[None]   # [1, n, H]
        ctx_pos = torch.arange(blk.n_ctx)
        with self.amp:
            z_d = self.dflash(feats, noise, ctx_pos, blk.positions, attn_mask=blk.mask)[0]
            z_m = self.domino(feats, noise, ctx_pos, blk.positions, attn_mask=blk.mask)[0]
        # GRU over the true tokens x_p .. x_{p+B-1}: state i has consumed x_p..x_{p+i}
        emb = F.embedding(blk.tokens, self.embed_w).float()             # [A, B, H]
        s, _ = self.domino.prefix_gru(emb)                              # [A, B, G] fp32
        return z_d, z_m, s.reshape(-1, s.shape[-1])

    def _head(self, z: torch.Tensor) -> torch.Tensor:
        w = self.head_w.to(z.dtype) if self.a.no_amp else self.head_w
        with self.amp:
            return F.linear(z, w).float()

    def _domino_logits(self, z, s, row_idx):
        """Base and final logits for Domino rows (row 0 uncorrected)."""
        base = self._head(z)
        with self.amp:
            corr = self.domino.correction(z, s).float()
        corr = corr * (row_idx >= 1).to(corr.dtype)[:, None]
        return base, base + corr

    # --- training step ------------------------------------------------------------------
    def step(self, seqs: list[Seq], lam: float, rng: random.Random, gen: torch.Generator) -> dict:
        """Forward + backward of both drafters on ``seqs`` (grads accumulate; no optimizer step)."""
        a, bs = self.a, self.bs
        zd, ld, zm, ss, lm, rm = [], [], [], [], [], []
        den_d = den_m = 0.0
        t_feat = t_bb = 0.0
        for seq in seqs:
            anchors = pick_anchors(seq, a.anchors, rng)
            if not anchors:
                continue
            blk = make_blocks(seq, anchors, bs, a.mask_token_id)
            tf = time.perf_counter()
            feats = self.feats(seq)
            tb = time.perf_counter()
            t_feat += tb - tf
            z_d, z_m, s = self._backbones(feats, blk)
            t_bb += time.perf_counter() - tb
            row = torch.arange(len(blk.positions)) % bs
            wd = torch.where(row >= 1, self.w_d[(row - 1).clamp_min(0)], torch.zeros(()))
            wm = self.w_m[row]
            vd, vm = blk.lab_dflash != -100, blk.lab_domino != -100
            # keep each row with probability = its weight; normalise by the expected count
            u = torch.rand(len(row), generator=gen)
            kd, km = vd & (u < wd), vm & (u < wm)
            den_d += float(wd[vd].sum())
            den_m += float(wm[vm].sum())
            zd.append(z_d[kd]); ld.append(blk.lab_dflash[kd])
            zm.append(z_m[km]); ss.append(s[km]); lm.append(blk.lab_domino[km]); rm.append(row[km])
        zd, ld, zm, ss, lm, rm = (torch.cat(x) for x in (zd, ld, zm, ss, lm, rm))
        t1 = time.perf_counter()
        ce_d = F.cross_entropy(self._head(zd), ld, reduction="sum") / max(den_d, 1e-6)
        base, final = self._domino_logits(zm, ss, rm)
        ce_mb = F.cross_entropy(base, lm, reduction="sum") / max(den_m, 1e-6)
        ce_mf = F.cross_entropy(final, lm, reduction="sum") / max(den_m, 1e-6)
        loss_m = (1 - lam) * ce_mf + lam * ce_mb
        (ce_d + loss_m).backward()
        t_head = time.perf_counter() - t1
        return dict(dflash=float(ce_d.detach()), domino=float(loss_m.detach()), domino_final=float(ce_mf.detach()),
                    domino_base=float(ce_mb.detach()), rows_d=int(len(ld)), rows_m=int(len(lm)),
                    t_feat=t_feat, t_bb=t_bb, t_head=t_head)

    # --- held-out evaluation ------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, ev: list[tuple[Seq, list[int]]]) -> dict:
        bs = self.bs
        self.dflash.eval(); self.domino.eval()
        acc_d, acc_m, acc_mb = [], [], []
        ce = {"d": [0.0, 0], "m": [0.0, 0], "mb": [0.0, 0]}
        pos_hits_d = torch.zeros(bs - 1)
        pos_hits_m = torch.zeros(bs)
        for seq, anchors in ev:
            blk = make_blocks(seq, anchors, bs, self.a.mask_token_id)
            z_d, z_m, s = self._backbones(self.feats(seq), blk)
            A = len(anchors)
            row = torch.arange(A * bs) % bs
            ld = blk.lab_dflash.view(A, bs)[:, 1:]
            lg_d = self._head(z_d.view(A, bs, -1)[:, 1:].reshape(-1, z_d.shape[-1]))
            vd = ld.reshape(-1) != -100
            ce["d"][0] += float(F.cross_entropy(lg_d[vd], ld.reshape(-1)[vd], reduction="sum")); ce["d"][1] += int(vd.sum())
            hit_d = (lg_d.argmax(-1).view(A, bs - 1) == ld)
            base, final = self._domino_logits(z_m, s, row)
            lm = blk.lab_domino
            vm = lm != -100
            ce["m"][0] += float(F.cross_entropy(final[vm], lm[vm], reduction="sum")); ce["m"][1] += int(vm.sum())
            ce["mb"][0] += float(F.cross_entropy(base[vm], lm[vm], reduction="sum")); ce["mb"][1] += int(vm.sum())
            hit_m = (final.argmax(-1) == lm).view(A, bs)
            hit_mb = (base.argmax(-1) == lm).view(A, bs)
            run_d = hit_d.long().cumprod(1)
            run_m = hit_m.long().cumprod(1)
            acc_d += (1 + run_d.sum(1)).tolist()
            acc_m += (1 + run_m.sum(1)).tolist()
            acc_mb += (1 + hit_mb.long().cumprod(1).sum(1)).tolist()
            pos_hits_d += run_d.sum(0).float()
            pos_hits_m += run_m.sum(0).float()
        self.dflash.train(); self.domino.train()
        n = max(1, len(acc_d))
        return dict(acc_dflash=sum(acc_d) / n, acc_domino=sum(acc_m) / n, acc_domino_base=sum(acc_mb) / n,
                    ce_dflash=ce["d"][0] / max(1, ce["d"][1]), ce_domino=ce["m"][0] / max(1, ce["m"][1]),
                    ce_domino_base=ce["mb"][0] / max(1, ce["mb"][1]), n_blocks=n,
                    reach_dflash=[round(float(x) / n, 3) for x in pos_hits_d[:8]],
                    reach_domino=[round(float(x) / n, 3) for x in pos_hits_m[:8]])


# ------------------------------------------------------------------------------------------

class Log:
    def __init__(self, path: Path | None):
        self.f = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.f = open(path, "a")

    def __call__(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        if self.f:
            self.f.write(line + "\n")
            self.f.flush()


class ThreadProbe:
    """Pick the thread count by measurement. Run at ``cur`` threads (1 at first); at step 5
    and then every ``every`` steps run one step at the other count and switch when its seconds
    per kept row beat the median of the recent steps at ``cur`` by 10 %."""

    def __init__(self, max_threads: int, every: int):
        self.opts = (1, max_threads)
        self.every = every
        self.cur = 1
        self.th = 1
        self.hist: list[float] = []

    def before(self, step: int) -> None:
        probe = len(self.hist) >= 3 and (step == 5 or step % self.every == self.every - 1)
        self.th = (self.opts[1] if self.cur == self.opts[0] else self.opts[0]) if probe else self.cur
        torch.set_num_threads(self.th)

    def after(self, step: int, sec_per_row: float) -> str | None:
        if self.th == self.cur:
            self.hist = (self.hist + [sec_per_row])[-10:]
            return None
        med = sorted(self.hist)[len(self.hist) // 2]
        msg = f"threads: {self.cur} -> {med * 1e3:.2f} ms/row (median), {self.th} -> {sec_per_row * 1e3:.2f} ms/row"
        if sec_per_row < 0.9 * med:
            self.cur, self.hist = self.th, [sec_per_row]
        return msg + f"; using {self.cur}"


def save_atomic(model: Drafter, folder: Path, extra: dict) -> None:
    """Write to a sibling temp folder, then swap it in (an interrupted save never leaves a
    half-written checkpoint in place)."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    old = folder.with_name(folder.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    save_drafter(model, tmp, dtype=torch.bfloat16, extra_config=extra)
    load_drafter(tmp)  # refuse to swap in a checkpoint that does not load
    shutil.rmtree(old, ignore_errors=True)
    if folder.exists():
        os.replace(folder, old)
    os.replace(tmp, folder)
    shutil.rmtree(old, ignore_errors=True)


def write_summary(path: Path, r: dict, cmd: str, a, cfg_d: DrafterConfig, cfg_m: DrafterConfig, mb: float) -> None:
    """Append the run's final numbers as a markdown section (so a README is complete even
    when nobody is watching the end of the run)."""
    lines = [
        "", f"## Final results (appended by the trainer, {time.strftime('%Y-%m-%d %H:%M:%S %Z')})", "",
        f"Command: `{cmd}`", "",
        f"- steps {r['steps']}, epochs over the training sequences {r['epochs']}, wall time "
        f"{r['wall_s'] / 60:.1f} min (training loop {r['train_s'] / 60:.1f} min)",
        f"- sizes: {cfg_d.num_hidden_layers} draft layers, hidden {cfg_d.hidden_size}, intermediate "
        f"{cfg_d.intermediate_size}, heads {cfg_d.num_attention_heads}/{cfg_d.num_key_value_heads} x "
        f"{cfg_d.head_dim}, taps {list(cfg_d.target_layer_ids)}, mask id {cfg_d.mask_token_id}; Domino GRU "
        f"{cfg_m.gru_hidden_dim}, emb_dim {cfg_m.emb_dim}; both checkpoints {mb:.1f} MB (bf16)",
        f"- final train loss (EMA of the row-sampled weighted CE): DFlash {r['loss_dflash_ema']:.3f}, "
        f"Domino {r['loss_domino_ema']:.3f}",
        f"- held-out CE (all rows, full vocabulary): DFlash {r['ce_dflash']:.3f}, Domino final "
        f"{r['ce_domino']:.3f} (base {r['ce_domino_base']:.3f})",
        f"- held-out greedy chain acceptance length (acc, {r['n_blocks']} blocks): DFlash "
        f"**{r['acc_dflash']:.3f}**, Domino **{r['acc_domino']:.3f}** (its base rows alone "
        f"{r['acc_domino_base']:.3f})",
        f"- fraction of blocks with the first k drafts all right, k = 1..8: DFlash {r['reach_dflash']}, "
        f"Domino {r['reach_domino']}",
        f"- checkpoints: `{a.out_dflash}`, `{a.out_domino}`", "",
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write("\n".join(lines))


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m dominotree.train.trainer",
                                 description="Train the DFlash and Domino drafters together on self-distillation data.")
    ap.add_argument("--data", type=Path, default=Path("data/distill"), help="folder of *.jsonl shards")
    ap.add_argument("--target", type=Path, default=None, help="target model folder (default: embedded SmolLM2)")
    ap.add_argument("--out-dflash", type=Path, default=Path("assets/drafters/smollm2-dflash-b16"))
    ap.add_argument("--out-domino", type=Path, default=Path("assets/drafters/smollm2-domino-b16"))
    ap.add_argument("--time-budget-min", type=float, default=75.0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time budget only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2, help="draft decoder layers")
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=0, help="0: the target's")
    ap.add_argument("--kv-heads", type=int, default=0, help="0: the target's")
    ap.add_argument("--head-dim", type=int, default=0, help="0: the target's")
    ap.add_argument("--taps", default="", help="tapped target layers, e.g. 1,8,14,20,27 (default: DFlash's rule, 5 layers)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--mask-token-id", type=int, default=16, help="SmolLM2 <empty_output>, never in chat output")
    ap.add_argument("--gru-hidden", type=int, default=256)
    ap.add_argument("--emb-dim", type=int, default=128)
    ap.add_argument("--decay-ratio", type=float, default=0.3, help="Domino base-anchored curriculum length")
    ap.add_argument("--lam-floor", type=float, default=0.0,
                    help="lower bound of the base-loss weight lam (0: the released curriculum, lam -> 0). "
                         "A floor keeps the base logits a usable Top-M candidate list for DominoTree")
    ap.add_argument("--resume-dflash", type=Path, default=None,
                    help="start from this DFlash checkpoint folder (released format) instead of a fresh init")
    ap.add_argument("--resume-domino", type=Path, default=None,
                    help="start from this Domino checkpoint folder (released format) instead of a fresh init")
    ap.add_argument("--gamma", type=float, default=7.0, help="row loss-weight decay exp(-(k-1)/gamma)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.03, help="warmup fraction of training")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--anchors", type=int, default=32, help="blocks (anchors) per sequence per step")
    ap.add_argument("--init-from-target", action="store_true", help="copy the target's last layers into the draft layers")
    ap.add_argument("--feat-cache-gb", type=float, default=3.0, help="in-memory target-feature cache")
    ap.add_argument("--n-eval", type=int, default=24, help="held-out sequences (at most 10%% of the data)")
    ap.add_argument("--eval-anchors", type=int, default=8, help="anchors per held-out sequence")
    ap.add_argument("--eval-every-min", type=float, default=5.0)
    ap.add_argument("--save-every-min", type=float, default=10.0)
    ap.add_argument("--log-every", type=int, default=10, help="steps")
    ap.add_argument("--log", type=Path, default=None, help="also append log lines to this file")
    ap.add_argument("--summary-md", type=Path, default=None,
                    help="append a markdown section with the final numbers to this file at the end")
    ap.add_argument("--threads", default="auto",
                    help="torch threads: a number, or 'auto' (on a shared machine an oversubscribed "
                         "OpenMP pool can be 5x slower than one thread: every --probe-every steps, "
                         "try 1 and the default count for a few steps and keep the faster)")
    ap.add_argument("--probe-every", type=int, default=60)
    ap.add_argument("--no-amp", action="store_true", help="float32 instead of bf16 autocast")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t_start = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    log = Log(a.log)
    cmd = "python -m dominotree.train.trainer " + " ".join(sys.argv[1:] if argv is None else argv)
    log(f"start: {cmd}")
    max_threads = torch.get_num_threads()
    torch.set_num_threads(1 if a.threads == "auto" else int(a.threads))
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    gen = torch.Generator().manual_seed(a.seed + 1)

    from transformers import AutoModelForCausalLM
    target_dir = a.target
    if target_dir is None:
        from dominotree.models.smollm2 import ensure_smollm2
        target_dir = ensure_smollm2(verbose=True)
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.bfloat16, attn_implementation="sdpa",
                                                  local_files_only=True).eval()
    target.requires_grad_(False)

    seqs = read_data(a.data)
    train, held = split_heldout(seqs, a.n_eval, a.seed)
    n_mask = sum(int((s.ids[s.prompt_len:] == a.mask_token_id).sum()) for s in seqs)
    if n_mask:
        log(f"warning: mask token {a.mask_token_id} occurs {n_mask} times in the answers")
    ans_tok = sum(len(s.ids) - s.prompt_len for s in train)
    log(f"data {a.data}: {len(seqs)} sequences, train {len(train)} ({ans_tok} answer tokens, "
        f"{sum(len(s.ids) for s in train)} tokens), held-out {len(held)} "
        f"({sum(not s.sampled for s in held)} greedy)")
    erng = random.Random(a.seed + 999)
    ev = []
    for s in held:
        hi = max(s.prompt_len, len(s.ids) - 2)
        cand = list(range(s.prompt_len, hi + 1))
        ev.append((s, sorted(erng.sample(cand, min(a.eval_anchors, len(cand))))))
    ev = [(s, an) for s, an in ev if an]

    cfg_d, cfg_m = make_configs(target.config, a)
    dflash, domino = Drafter(cfg_d), Drafter(cfg_m)
    with torch.no_grad():
        init_drafter(dflash, target, a.init_from_target)
        init_drafter(domino, target, a.init_from_target)
    for name, model, folder in (("dflash", dflash, a.resume_dflash), ("domino", domino, a.resume_domino)):
        if folder is not None:
            resume_from(model, folder)
            log(f"{name}: resumed from {folder}")
    dflash.train(); domino.train()
    nparam = lambda m: sum(p.numel() for p in m.parameters())
    mb = (nparam(dflash) + nparam(domino)) * 2 / 1e6
    log(f"target {target_dir} ({target.config.num_hidden_layers} layers, hidden {target.config.hidden_size}, "
        f"vocab {target.config.vocab_size}); taps {list(cfg_d.target_layer_ids)}; mask id {a.mask_token_id}")
    log(f"dflash: {cfg_d.num_hidden_layers} layers, inter {cfg_d.intermediate_size}, heads "
        f"{cfg_d.num_attention_heads}/{cfg_d.num_key_value_heads}x{cfg_d.head_dim}, {nparam(dflash) / 1e6:.2f} M params; "
        f"domino: + GRU {cfg_m.gru_hidden_dim}, emb {cfg_m.emb_dim}, {nparam(domino) / 1e6:.2f} M params; "
        f"both {mb:.1f} MB in bf16; threads {a.threads} (max {max_threads})")
    opt_d = torch.optim.AdamW(param_groups(dflash, a.weight_decay), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    opt_m = torch.optim.AdamW(param_groups(domino, a.weight_decay), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    tr = Trainer(a, target, dflash, domino)

    budget_s = a.time_budget_min * 60
    t0 = time.perf_counter()

    def progress(step):
        p = (time.perf_counter() - t0) / budget_s if budget_s > 0 else 0.0
        if a.max_steps:
            p = max(p, step / a.max_steps)
        return min(p, 1.0)

    def save(step, why):
        extra = {"dominotree_training": {"step": step, "seed": a.seed, "data": str(a.data),
                                         "minutes": round((time.perf_counter() - t0) / 60, 1), "lr": a.lr,
                                         "lam_floor": a.lam_floor,
                                         "resumed_from": {"dflash": str(a.resume_dflash) if a.resume_dflash else None,
                                                          "domino": str(a.resume_domino) if a.resume_domino else None}}}
        ts = time.perf_counter()
        save_atomic(dflash, a.out_dflash, extra)
        save_atomic(domino, a.out_domino, extra)
        log(f"saved ({why}) step {step}: {a.out_dflash}, {a.out_domino} ({time.perf_counter() - ts:.1f} s)")

    def run_eval(step):
        te = time.perf_counter()
        r = tr.evaluate(ev)
        log(f"eval step {step} | acc dflash {r['acc_dflash']:.3f} domino {r['acc_domino']:.3f} "
            f"(base {r['acc_domino_base']:.3f}) | ce dflash {r['ce_dflash']:.3f} domino {r['ce_domino']:.3f} "
            f"(base {r['ce_domino_base']:.3f}) | reach@1..8 dflash {r['reach_dflash']} domino {r['reach_domino']} "
            f"| {r['n_blocks']} blocks {time.perf_counter() - te:.1f} s")
        return r

    probe = ThreadProbe(max_threads, a.probe_every)
    order: list[Seq] = []
    step = 0
    epoch = 0
    last_eval = last_save = time.perf_counter()
    ema = {}
    res = run_eval(0)
    last_eval_step = 0
    stop: list[str] = []
    try:  # SIGTERM: finish the step, save, exit (only possible in the main thread)
        old_handler = signal.signal(signal.SIGTERM, lambda *_: stop.append("SIGTERM"))
    except ValueError:
        old_handler = None
    while True:
        p = progress(step)
        if p >= 1.0:
            break
        if stop:
            log(f"stopping on {stop[0]}: final save")
            break
        if len(order) < a.batch:
            nxt = train[:]
            random.Random(a.seed * 1000 + epoch).shuffle(nxt)
            order += nxt
            epoch += 1
        batch, order = order[: a.batch], order[a.batch:]
        lr = lr_at(p, a.lr, a.warmup, a.min_lr_frac)
        lam = max(a.lam_floor, 1.0 - p / a.decay_ratio if a.decay_ratio > 0 else 0.0)
        for o in (opt_d, opt_m):
            for g in o.param_groups:
                g["lr"] = lr
        if a.threads == "auto" and max_threads > 1:
            probe.before(step)
        ts = time.perf_counter()
        out = tr.step(batch, lam, rng, gen)
        gn_d = float(torch.nn.utils.clip_grad_norm_(dflash.parameters(), 1.0))
        gn_m = float(torch.nn.utils.clip_grad_norm_(domino.parameters(), 1.0))
        opt_d.step(); opt_m.step()
        opt_d.zero_grad(set_to_none=True); opt_m.zero_grad(set_to_none=True)
        step += 1
        dt = time.perf_counter() - ts
        if a.threads == "auto" and max_threads > 1:
            msg = probe.after(step, dt / max(1, out["rows_d"] + out["rows_m"]))
            if msg:
                log(msg)
        for k in ("dflash", "domino", "domino_final", "domino_base"):
            ema[k] = out[k] if k not in ema else 0.9 * ema[k] + 0.1 * out[k]
        if step % a.log_every == 0 or step <= 3:
            log(f"step {step} | {time.perf_counter() - t0:.0f} s | ep {epoch} | lr {lr:.2e} lam {lam:.2f} | "
                f"loss dflash {out['dflash']:.3f} (ema {ema['dflash']:.3f}) domino {out['domino']:.3f} "
                f"(ema {ema['domino']:.3f}; final {ema['domino_final']:.3f} base {ema['domino_base']:.3f}) | "
                f"gn {gn_d:.2f}/{gn_m:.2f} | rows {out['rows_d']}/{out['rows_m']} | step {dt:.2f} s "
                f"(feat {out['t_feat']:.2f} bb {out['t_bb']:.2f} head+bwd {out['t_head']:.2f}) | "
                f"feat cache {tr.feats.used / 2**30:.2f} GB hit {tr.feats.hits}/{tr.feats.hits + tr.feats.misses}")
        now = time.perf_counter()
        if now - last_eval >= a.eval_every_min * 60:
            if a.threads == "auto" and max_threads > 1:
                torch.set_num_threads(probe.cur)
            res = run_eval(step)
            last_eval_step = step
            last_eval = time.perf_counter()
        if now - last_save >= a.save_every_min * 60:
            save(step, "periodic")
            last_save = time.perf_counter()
        if a.max_steps and step >= a.max_steps:
            break
    if last_eval_step != step:
        res = run_eval(step)
    save(step, "final")
    total = time.perf_counter() - t_start
    summary = {"steps": step, "epochs": epoch, "wall_s": round(total, 1), "train_s": round(time.perf_counter() - t0, 1),
               "loss_dflash_ema": round(ema.get("dflash", float("nan")), 4),
               "loss_domino_ema": round(ema.get("domino", float("nan")), 4), **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}}
    log("done: " + json.dumps(summary))
    if a.summary_md is not None:
        write_summary(a.summary_md, summary, cmd, a, cfg_d, cfg_m, mb)
    if old_handler is not None:
        signal.signal(signal.SIGTERM, old_handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
