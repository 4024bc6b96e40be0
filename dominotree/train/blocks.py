"""Training blocks: anchors, block inputs, labels and the context/block attention mask."""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from dominotree.train.data import Seq

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

    def to(self, device) -> "Blocks":
        """The same blocks on ``device`` (made on the CPU, used where the models are)."""
        return Blocks(*(getattr(self, f).to(device) for f in ("anchors", "positions", "blk_ids", "tokens",
                                                              "lab_dflash", "lab_domino", "mask")), self.n_ctx)


def make_blocks(seq: Seq, anchors: list[int], bs: int, mask_id: int) -> Blocks:
    ids = seq.ids
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
