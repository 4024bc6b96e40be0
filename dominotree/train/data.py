"""Self-distillation records as training sequences, and the held-out split.

Records are JSON lines (``selfdistill``'s format) in ``shard-*.jsonl.gz`` (gzip) or ``*.jsonl``
files; a torn last line or gzip member, left by a kill, is skipped.
"""
from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch


def shard_files(folder: Path, shards: int | None = None) -> list[Path]:
    """The shards under ``folder`` in name order; only the first ``shards`` when given (a fixed
    subset stays the same data while the generator appends more)."""
    files = [f for f in sorted(Path(folder).glob("*.jsonl*")) if not f.name.endswith(".tmp")]
    if shards is not None:
        if shards < 1:
            raise SystemExit(f"error: --shards must be at least 1, got {shards}")
        if shards > len(files):
            raise SystemExit(f"error: --shards {shards}, but {folder} has {len(files)} shards")
        files = files[:shards]
    return files


def read_shard(shard: Path) -> list[dict]:
    """The complete records of one shard."""
    recs = []
    opener = gzip.open if shard.suffix == ".gz" else open
    try:
        with opener(shard, "rt") as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    except (OSError, EOFError):
        pass  # a torn gzip member: the complete lines before it were kept
    return recs


def read_records(folder: Path, shards: int | None = None) -> list[dict]:
    """All complete records under ``folder`` (its first ``shards`` shards), in name order."""
    return [r for shard in shard_files(folder, shards) for r in read_shard(shard)]


@dataclass
class Seq:
    ids: torch.Tensor        # [T] long
    prompt_len: int
    sampled: bool
    key: int                 # index in the full list (feature-cache key)
    shard: int = 0           # which shard (name order) it came from

    @property
    def n_anchor(self) -> int:
        """Anchors p in [prompt_len, T-2]: the bonus token is a generated token, and at least
        one token follows it."""
        return max(0, len(self.ids) - 1 - self.prompt_len)


def read_data(folder: Path, min_answer: int = 2, shards: int | None = None) -> list[Seq]:
    """The usable records under ``folder`` (its first ``shards`` shards) as sequences (answers of
    at least ``min_answer`` tokens)."""
    if not any(Path(folder).glob("*.jsonl*")):
        raise SystemExit(f"error: no *.jsonl or *.jsonl.gz shards in {folder}")
    out: list[Seq] = []
    for i, shard in enumerate(shard_files(folder, shards)):
        for r in read_shard(shard):
            try:
                ids, pl = r["ids"], int(r["prompt_len"])
            except (KeyError, TypeError, ValueError):
                continue
            if len(ids) - pl < min_answer:
                continue
            out.append(Seq(torch.tensor(ids, dtype=torch.long), pl, bool(r.get("sampled", False)), len(out), i))
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
    gset = set(greedy)
    rest = [i for i in idx if i not in gset]
    ev = set((greedy + rest)[:n_eval])
    return [s for i, s in enumerate(seqs) if i not in ev], [seqs[i] for i in sorted(ev)]


def split_stage(seqs: list[Seq], n_eval: int, seed: int, heldout_shards: int | None = None,
                train_from_shard: int = 0, train_to_shard: int | None = None) -> tuple[list[Seq], list[Seq]]:
    """(train, held-out) for a training stage on ``seqs`` (from ``read_data``).

    ``heldout_shards`` K: the held-out set is the one a run on the first K shards had (so a later
    stage on more data is judged on the same sequences, none of them trained on);
    ``train_from_shard`` S: train only on the sequences of shard S and later (data earlier stages
    never saw); ``train_to_shard`` E: and only before shard E, so a stage trains on the same
    sequences, in the same order, as an earlier one did before more shards were added (its
    ``--skip-seqs`` then still leaves out what that one saw). None of them: ``split_heldout`` of
    all of ``seqs``."""
    if heldout_shards is None and not train_from_shard and train_to_shard is None:
        return split_heldout(seqs, n_eval, seed)
    n_shards = seqs[-1].shard + 1
    if not 0 <= train_from_shard < n_shards:
        raise SystemExit(f"error: --train-from-shard {train_from_shard}, but the data has {n_shards} shards")
    end = n_shards if train_to_shard is None else train_to_shard
    if not train_from_shard < end <= n_shards:
        raise SystemExit(f"error: --train-to-shard {train_to_shard} must be above --train-from-shard "
                         f"{train_from_shard} and at most the {n_shards} shards the data has")
    first = seqs if heldout_shards is None else [s for s in seqs if s.shard < heldout_shards]
    held = split_heldout(first, n_eval, seed)[1]
    out = {s.key for s in held}
    return [s for s in seqs if train_from_shard <= s.shard < end and s.key not in out], held
