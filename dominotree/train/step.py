"""One training step (forward + backward of both drafters) and the held-out evaluation."""
from __future__ import annotations

import random
import time

import torch
import torch.nn.functional as F

from dominotree.models.drafter import Drafter
from dominotree.train.blocks import Blocks, make_blocks, pick_anchors, row_weights
from dominotree.train.data import Seq
from dominotree.train.features import TargetFeatures
from dominotree.train.headvocab import HeadVocab
from dominotree.train.losses import loop_mask, soft_loss, topm_loss

class Trainer:
    def __init__(self, a, target, dflash: Drafter, domino: Drafter, vocab: HeadVocab | None = None):
        self.a = a
        self.vocab = vocab                                       # None: the loss over all tokens
        self.target = target
        self.dflash = dflash
        self.domino = domino
        self.bs = dflash.cfg.block_size
        self.embed_w = target.get_input_embeddings().weight      # [V, H] bf16, frozen
        self.head_w = target.get_output_embeddings().weight      # [V, H] bf16, frozen
        self.soft_k = getattr(a, "soft_k", 0)                    # > 0: the target's top-k as the label
        self.loop_w = getattr(a, "loop_weight", 1.0)             # weight of 5-gram-loop label positions
        self.topm = getattr(a, "topm_loss", 0)                   # > 0: Domino's restricted Top-M loss
        self.topm_w = getattr(a, "topm_weight", 1.0)
        self.feats = TargetFeatures(target, dflash.cfg.target_layer_ids, a.feat_cache_gb, torch.bfloat16,
                                    soft_k=self.soft_k)
        self._loops: dict[int, torch.Tensor] = {}
        self.w_d = row_weights(self.bs - 1, a.gamma)             # DFlash rows 1..B-1
        self.w_m = row_weights(self.bs, a.gamma)                 # Domino rows 0..B-1
        self.dev = self.embed_w.device                          # where the models are: one code path for CPU and CUDA
        self.w_d, self.w_m = self.w_d.to(self.dev), self.w_m.to(self.dev)
        self.amp = torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=not a.no_amp)

    # --- one sequence through both backbones ------------------------------------------
    def _backbones(self, feats: torch.Tensor, blk: Blocks):
        feats = feats[:, : blk.n_ctx]
        if self.a.no_amp:  # float32 drafter: bf16 target features must be cast explicitly
            feats = feats.float()
        noise = F.embedding(blk.blk_ids, self.embed_w).float()[None]   # [1, n, H]
        ctx_pos = torch.arange(blk.n_ctx, device=self.dev)
        with self.amp:
            z_d = self.dflash(feats, noise, ctx_pos, blk.positions, attn_mask=blk.mask)[0]
            z_m = self.domino(feats, noise, ctx_pos, blk.positions, attn_mask=blk.mask)[0]
        # GRU over the true tokens x_p .. x_{p+B-1}: state i has consumed x_p..x_{p+i}
        emb = F.embedding(blk.tokens, self.embed_w).float()             # [A, B, H]
        s, _ = self.domino.prefix_gru(emb)                              # [A, B, G] fp32
        return z_d, z_m, s.reshape(-1, s.shape[-1])

    def _head(self, z: torch.Tensor, cand: torch.Tensor | None = None) -> torch.Tensor:
        """The target's frozen head on ``z``: all tokens, or only the ids ``cand``."""
        w = self.head_w if cand is None else self.head_w[cand]
        w = w.to(z.dtype) if self.a.no_amp else w
        with self.amp:
            return F.linear(z, w).float()

    def _domino_logits(self, z, s, row_idx, cand: torch.Tensor | None = None):
        """Base and final logits for Domino rows (row 0 uncorrected), over all tokens or ``cand``."""
        base = self._head(z, cand)
        with self.amp:
            corr = self.domino.correction(z, s, cand).float()
        corr = corr * (row_idx >= 1).to(corr.dtype)[:, None]
        return base, base + corr

    # --- training step ------------------------------------------------------------------
    def step(self, seqs: list[Seq], lam: float, rng: random.Random, gen: torch.Generator) -> dict:
        """Forward + backward of both drafters on ``seqs`` (grads accumulate; no optimizer step)."""
        a, bs = self.a, self.bs
        zd, ld, zm, ss, lm, rm = [], [], [], [], [], []
        den_d = den_m = 0.0
        t_feat = t_bb = 0.0
        kd_soft, km_soft = [], []        # per kept row: the target's top-k (ids, log-probs)
        self.feats.prefetch(seqs)        # the step's target forwards as one padded batch
        for seq in seqs:
            anchors = pick_anchors(seq, a.anchors, rng)
            if not anchors:
                continue
            blk = make_blocks(seq, anchors, bs, a.mask_token_id).to(self.dev)
            tf = time.perf_counter()
            feats = self.feats(seq)
            soft = self.feats.labels(seq) if self.soft_k else None
            tb = time.perf_counter()
            t_feat += tb - tf
            z_d, z_m, s = self._backbones(feats, blk)
            t_bb += time.perf_counter() - tb
            row = torch.arange(len(blk.positions), device=self.dev) % bs
            wd = torch.where(row >= 1, self.w_d[(row - 1).clamp_min(0)], torch.zeros((), device=self.dev))
            wm = self.w_m[row]
            T = len(seq.ids)
            q_d = blk.positions.clamp(max=T - 1)          # the labelled token's position, per row
            q_m = (blk.positions + 1).clamp(max=T - 1)
            if self.loop_w != 1.0:
                loops = self.loops(seq)
                wd = wd * torch.where(loops[q_d], self.loop_w, 1.0)
                wm = wm * torch.where(loops[q_m], self.loop_w, 1.0)
            vd, vm = blk.lab_dflash != -100, blk.lab_domino != -100
            # keep each row with probability = its weight; normalise by the expected count
            u = torch.rand(len(row), generator=gen).to(self.dev)   # drawn on the CPU: the same rows kept on any device
            kd, km = vd & (u < wd), vm & (u < wm)
            den_d += float(wd[vd].sum())
            den_m += float(wm[vm].sum())
            zd.append(z_d[kd]); ld.append(blk.lab_dflash[kd])
            zm.append(z_m[km]); ss.append(s[km]); lm.append(blk.lab_domino[km]); rm.append(row[km])
            if soft is not None:       # row t of the labels is the target's distribution of token t+1
                kd_soft.append((soft[0][q_d[kd] - 1].long(), soft[1][q_d[kd] - 1]))
                km_soft.append((soft[0][q_m[km] - 1].long(), soft[1][q_m[km] - 1]))
        zd, ld, zm, ss, lm, rm = (torch.cat(x) for x in (zd, ld, zm, ss, lm, rm))
        sd = sm = None
        if self.soft_k:                # the target's argmax replaces the data token as the hard label
            sd = [torch.cat([x[i] for x in kd_soft]) for i in (0, 1)]
            sm = [torch.cat([x[i] for x in km_soft]) for i in (0, 1)]
            ld, lm = sd[0][:, 0], sm[0][:, 0]
        t1 = time.perf_counter()
        cand = None
        if self.vocab is not None:        # the candidate-set loss (headvocab.py)
            if self.soft_k:
                k = self.soft_k
                cand, (ld, lm, di, mi) = self.vocab(ld, lm, sd[0].reshape(-1), sm[0].reshape(-1))
                sd[0], sm[0] = di.view(-1, k), mi.view(-1, k)
            else:
                cand, (ld, lm) = self.vocab(ld, lm)
        ce_d = self._loss(self._head(zd, cand), ld, sd) / max(den_d, 1e-6)
        base, final = self._domino_logits(zm, ss, rm, cand)
        ce_mb = self._loss(base, lm, sm) / max(den_m, 1e-6)
        ce_mf = self._loss(final, lm, sm) / max(den_m, 1e-6)
        ce_mr = topm_loss(base, final, lm, rm, self.topm).sum() / max(den_m, 1e-6) if self.topm else torch.zeros((), device=self.dev)
        loss_m = (1 - lam) * (ce_mf + self.topm_w * ce_mr) + lam * ce_mb
        (ce_d + loss_m).backward()
        t_head = time.perf_counter() - t1
        return dict(dflash=float(ce_d.detach()), domino=float(loss_m.detach()), domino_final=float(ce_mf.detach()),
                    domino_base=float(ce_mb.detach()), domino_topm=float(ce_mr.detach()),
                    rows_d=int(len(ld)), rows_m=int(len(lm)),
                    head_vocab=int(len(cand)) if cand is not None else int(self.head_w.shape[0]),
                    t_feat=t_feat, t_bb=t_bb, t_head=t_head, den_d=den_d, den_m=den_m)

    def _loss(self, logits: torch.Tensor, labels: torch.Tensor, soft) -> torch.Tensor:
        """Summed over rows: CE on ``labels``, or with ``soft`` = (top-k columns, log-probs) the
        target's distribution (``losses.soft_loss``: KL + CE on its argmax)."""
        if soft is None:
            return F.cross_entropy(logits, labels, reduction="sum")
        return soft_loss(logits, soft[0], soft[1]).sum()

    def loops(self, seq: Seq) -> torch.Tensor:
        """[T] bool: the 5-gram-loop positions of ``seq`` (``losses.loop_mask``), made once."""
        m = self._loops.get(seq.key)
        if m is None:
            m = self._loops[seq.key] = loop_mask(seq.ids, seq.prompt_len).to(self.dev)
        return m

    # --- held-out evaluation ------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, ev: list[tuple[Seq, list[int]]]) -> dict:
        bs = self.bs
        self.dflash.eval(); self.domino.eval()
        acc_d, acc_m, acc_mb = [], [], []
        ce = {"d": [0.0, 0], "m": [0.0, 0], "mb": [0.0, 0]}
        pos_hits_d = torch.zeros(bs - 1, device=self.dev)
        pos_hits_m = torch.zeros(bs, device=self.dev)
        for seq, anchors in ev:
            blk = make_blocks(seq, anchors, bs, self.a.mask_token_id).to(self.dev)
            z_d, z_m, s = self._backbones(self.feats(seq), blk)
            A = len(anchors)
            row = torch.arange(A * bs, device=self.dev) % bs
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
