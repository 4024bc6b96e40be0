"""The trainer's full state, for a resumed run that continues the same schedule exactly.

The released checkpoints (``assets/drafters``) are bf16 weights only. A resumable state also
needs the float32 master weights, both AdamW states, the schedule position (step, epoch, the
training seconds already spent, which set the lr and Domino's lambda), the rest of the epoch's
sequence order and every random state. ``save_state`` writes them to one file atomically;
``load_state`` restores them, refusing a state made on other data or with other flags that
shape the schedule.

The file is about 12 bytes per drafter parameter (fp32 weights + two Adam moments), too large
to commit: it lives outside the repository (``--state``). Across machines, a run resumes from
the committed checkpoints (``--resume-dflash/--resume-domino``) with fresh optimizer moments.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

import torch

SCHEDULE_FLAGS = ("lr", "lr_domino", "min_lr_frac", "warmup", "decay_ratio", "lam_floor", "time_budget_min",
                  "max_steps", "batch", "anchors", "seed", "layers", "intermediate", "block_size", "gru_hidden",
                  "emb_dim", "taps", "soft_k", "loop_weight", "topm_loss", "topm_weight")


@dataclass
class Position:
    """Where the schedule stands."""
    step: int = 0
    epoch: int = 0
    train_s: float = 0.0                       # training-loop seconds spent before this run
    order: list[int] = field(default_factory=list)   # keys of the sequences left in this epoch
    ema: dict = field(default_factory=dict)


def data_fingerprint(seqs) -> list[int]:
    return [len(seqs), int(sum(len(s.ids) for s in seqs)), int(sum(int(s.ids.sum()) for s in seqs) % 1_000_000_007)]


def save_state(path: Path, pos: Position, models: dict, opts: dict, rng: random.Random, gen: torch.Generator,
               args, fingerprint: list[int]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    blob = {
        "position": pos.__dict__,
        "models": {k: m.state_dict() for k, m in models.items()},
        "opts": {k: o.state_dict() for k, o in opts.items()},
        "rng": rng.getstate(), "gen": gen.get_state(), "torch_rng": torch.get_rng_state(),
        "flags": {k: getattr(args, k, None) for k in SCHEDULE_FLAGS}, "data": fingerprint,
    }
    tmp = path.with_name(path.name + ".tmp")
    torch.save(blob, tmp)
    os.replace(tmp, path)


def load_state(path: Path, models: dict, opts: dict, rng: random.Random, gen: torch.Generator, args,
               fingerprint: list[int]) -> Position:
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"error: no training state at {path}")
    blob = torch.load(path, map_location="cpu", weights_only=False)
    flags = {k: getattr(args, k, None) for k in SCHEDULE_FLAGS}
    blob["flags"].setdefault("lr_domino", blob["flags"].get("lr"))   # states made before --lr-domino
    diff = [k for k in SCHEDULE_FLAGS if blob["flags"].get(k) != flags[k]]
    if diff:
        raise SystemExit(f"error: {path} was made with other settings: "
                         + ", ".join(f"--{k.replace('_', '-')} {blob['flags'].get(k)} (now {flags[k]})" for k in diff))
    if blob["data"] != fingerprint:
        raise SystemExit(f"error: {path} was made on other data ({blob['data'][0]} sequences, now {fingerprint[0]})")
    for k, m in models.items():
        m.load_state_dict(blob["models"][k], strict=True)
    for k, o in opts.items():
        o.load_state_dict(blob["opts"][k])
    rng.setstate(blob["rng"])
    gen.set_state(blob["gen"])
    torch.set_rng_state(blob["torch_rng"])
    return Position(**blob["position"])
