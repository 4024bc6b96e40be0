"""Run plumbing for the trainer: log lines, the thread-count probe, atomic checkpoint saves,
the markdown summary."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import torch

from dominotree.models.checkpoint import load_drafter, save_compact_drafter
from dominotree.models.drafter import Drafter, DrafterConfig

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
    save_compact_drafter(model, tmp, extra_config=extra)   # bf16, model.safetensors.bp (loads exactly)
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
