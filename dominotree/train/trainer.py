"""Train the embedded DFlash and Domino drafters on self-distillation data, in one process.

    python -m dominotree.train.trainer --data data/distill \\
        --out-dflash data/train/smollm2-dflash-b8 --out-domino data/train/smollm2-domino-b8 \\
        --block-size 8 --time-budget-min 75 --seed 0

(``scripts/experiments/train_issue29.sh`` is how the shipped block-8 pair was made; a pair ships once saved
compactly into the folders ``presets.EMBEDDED_DRAFTER_DIRS`` names.)

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

import json
import os
import random
import signal
import sys
import time

import torch

from dominotree.models.drafter import Drafter
from dominotree.train.data import Seq, read_data, split_stage
from dominotree.train.drafters import init_drafter, lr_at, make_configs, param_groups, resume_from
from dominotree.train.headvocab import HeadVocab, frequent_tokens
from dominotree.train.options import parse_args
from dominotree.train.runtime import Log, ThreadProbe, save_atomic, write_summary
from dominotree.train.state import Position, data_fingerprint, load_state, save_state
from dominotree.train.step import Trainer


def main(argv: list[str] | None = None, dist=None) -> int:
    """``dist``: this process is one rank of a data-parallel run (``train/distributed.py``): it steps
    on ``dist.share(batch)`` and ``dist.reduce`` adds the ranks' gradients before the optimizer."""
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
    target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=getattr(torch, a.target_dtype), attn_implementation="sdpa",
                                                  local_files_only=True).eval()
    target.requires_grad_(False)

    seqs = read_data(a.data, shards=a.shards)
    train, held = split_stage(seqs, a.n_eval, a.seed, a.heldout_shards, a.train_from_shard, a.train_to_shard)
    if a.heldout_shards is not None or a.train_from_shard or a.train_to_shard is not None:
        log(f"held-out from the first {a.heldout_shards or 'all'} shards; training on shards "
            f"{a.train_from_shard} and later" + (f", before {a.train_to_shard}" if a.train_to_shard is not None else ""))
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
    dev = torch.device(a.device)
    target.to(dev); dflash.to(dev); domino.to(dev)
    dflash.train(); domino.train()
    nparam = lambda m: sum(p.numel() for p in m.parameters())
    mb = (nparam(dflash) + nparam(domino)) * 2 / 1e6
    log(f"target {target_dir} ({target.config.num_hidden_layers} layers, hidden {target.config.hidden_size}, "
        f"vocab {target.config.vocab_size}); taps {list(cfg_d.target_layer_ids)}; mask id {a.mask_token_id}")
    log(f"dflash: {cfg_d.num_hidden_layers} layers, inter {cfg_d.intermediate_size}, heads "
        f"{cfg_d.num_attention_heads}/{cfg_d.num_key_value_heads}x{cfg_d.head_dim}, {nparam(dflash) / 1e6:.2f} M params; "
        f"domino: + GRU {cfg_m.gru_hidden_dim}, emb {cfg_m.emb_dim}, {nparam(domino) / 1e6:.2f} M params; "
        f"both {mb:.1f} MB in bf16; threads {a.threads} (max {max_threads}); "
        f"peak lr dflash {a.lr:g} domino {a.lr_domino:g}")
    opt_d = torch.optim.AdamW(param_groups(dflash, a.weight_decay), lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    opt_m = torch.optim.AdamW(param_groups(domino, a.weight_decay), lr=a.lr_domino, betas=(0.9, 0.95), eps=1e-8)
    vocab = None
    if a.head_vocab:
        vocab = HeadVocab(frequent_tokens((s.ids[s.prompt_len:] for s in train), a.head_vocab,
                                          target.config.vocab_size))
        log(f"head vocabulary: the {len(vocab.frequent)} most frequent answer tokens + each step's labels; "
            f"they cover {vocab.coverage(s.ids[s.prompt_len:] for s in held):.1%} of held-out answer tokens")
    tr = Trainer(a, target, dflash, domino, vocab)
    models, opts = {"dflash": dflash, "domino": domino}, {"dflash": opt_d, "domino": opt_m}
    fingerprint = data_fingerprint(seqs)
    pos = Position()
    if a.resume:
        pos = load_state(a.state, models, opts, rng, gen, a, fingerprint)
        log(f"resumed from {a.state}: step {pos.step}, epoch {pos.epoch}, {pos.train_s / 60:.1f} min of training done, "
            f"{len(pos.order)} sequences left in the epoch")

    budget_s = a.time_budget_min * 60
    t0 = time.perf_counter() - pos.train_s   # the schedule counts the earlier runs' training time

    def progress(step):
        p = (time.perf_counter() - t0) / budget_s if budget_s > 0 else 0.0
        if a.max_steps:
            p = max(p, step / a.max_steps)
        return min(p, 1.0)

    def save(step, why):
        extra = {"dominotree_training": {"step": step, "seed": a.seed, "data": str(a.data),
                                         "minutes": round((time.perf_counter() - t0) / 60, 1), "lr": a.lr,
                                         "lr_domino": a.lr_domino,
                                         "lam_floor": a.lam_floor,
                                         "resumed_from": {"dflash": str(a.resume_dflash) if a.resume_dflash else None,
                                                          "domino": str(a.resume_domino) if a.resume_domino else None}}}
        ts = time.perf_counter()
        save_atomic(dflash, a.out_dflash, extra)
        save_atomic(domino, a.out_domino, extra)
        if a.state is not None:
            save_state(a.state, Position(step, epoch, time.perf_counter() - t0, [q.key for q in order], dict(ema)),
                       models, opts, rng, gen, a, fingerprint)
        log(f"saved ({why}) step {step}: {a.out_dflash}, {a.out_domino} ({time.perf_counter() - ts:.1f} s)")

    def run_eval(step):
        te = time.perf_counter()
        r = tr.evaluate(ev)
        if a.soft_k and tr.feats.soft_tokens:
            log(f"soft labels (top-{a.soft_k}): {tr.feats.soft_tokens} positions, head + remaining layers "
                f"{tr.feats.soft_s:.1f} s ({tr.feats.soft_tokens / max(tr.feats.soft_s, 1e-9):.0f} positions/s)")
        log(f"eval step {step} | {te - t0:.0f} s | acc dflash {r['acc_dflash']:.3f} domino {r['acc_domino']:.3f} "
            f"(base {r['acc_domino_base']:.3f}) | ce dflash {r['ce_dflash']:.3f} domino {r['ce_domino']:.3f} "
            f"(base {r['ce_domino_base']:.3f}) | reach@1..8 dflash {r['reach_dflash']} domino {r['reach_domino']} "
            f"| {r['n_blocks']} blocks {time.perf_counter() - te:.1f} s")
        if a.curve_json is not None:
            with open(a.curve_json, "a") as f:
                f.write(json.dumps({"step": step, "s": round(te - t0, 1), **r}) + "\n")
        return r

    probe = ThreadProbe(max_threads, a.probe_every)
    by_key = {q.key: q for q in train}
    order: list[Seq] = [by_key[k] for k in pos.order]
    step, epoch, ema = pos.step, pos.epoch, dict(pos.ema)
    last_eval = last_save = time.perf_counter()
    res = run_eval(step) if not a.resume else {}
    last_eval_step = step if not a.resume else -1
    stop: list[str] = []
    share_done = False
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
            if epoch == 0 and a.skip_seqs:
                nxt = nxt[a.skip_seqs:]
            order += nxt
            epoch += 1
        batch, order = order[: a.batch], order[a.batch:]
        lr = lr_at(p, a.lr, a.warmup, a.min_lr_frac)
        lam = max(a.lam_floor, 1.0 - p / a.decay_ratio if a.decay_ratio > 0 else 0.0)
        for o, peak in ((opt_d, a.lr), (opt_m, a.lr_domino)):
            for g in o.param_groups:
                g["lr"] = lr_at(p, peak, a.warmup, a.min_lr_frac)
        if a.threads == "auto" and max_threads > 1:
            probe.before(step)
        ts = time.perf_counter()
        out = tr.step(batch if dist is None else dist.share(batch), lam, rng, gen)
        if dist is not None:
            dist.reduce(out, (dflash, domino))
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
                f"gn {gn_d:.2f}/{gn_m:.2f} | rows {out['rows_d']}/{out['rows_m']} vocab {out['head_vocab']} | step {dt:.2f} s "
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
        if (a.run_steps and step - pos.step >= a.run_steps) or \
                (a.run_minutes and time.perf_counter() - t_start >= a.run_minutes * 60):
            log(f"this run's share done at step {step} (schedule progress {progress(step):.3f}); resume with --resume")
            share_done = True
            break
    if share_done:                     # the schedule goes on in a later run: no held-out pass, no summary
        save(step, "share")
    else:
        if last_eval_step != step:
            res = run_eval(step)
        save(step, "final")
        total = time.perf_counter() - t_start
        summary = {"steps": step, "epochs": epoch, "wall_s": round(total, 1),
                   "train_s": round(time.perf_counter() - t0, 1),
                   "loss_dflash_ema": round(ema.get("dflash", float("nan")), 4),
                   "loss_domino_ema": round(ema.get("domino", float("nan")), 4),
                   **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in res.items()}}
        log("done: " + json.dumps(summary))
        if a.summary_md is not None:
            write_summary(a.summary_md, summary, cmd, a, cfg_d, cfg_m, mb)
    if old_handler is not None:
        signal.signal(signal.SIGTERM, old_handler)
    return 0

if __name__ == "__main__":
    sys.exit(main())
