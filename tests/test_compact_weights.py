"""Compact drafter storage and the repository's size budget (issue 34).

    .venv/bin/python -m pytest -q tests/test_compact_weights.py

``model.safetensors.bp`` (``models/packing.py``, folders in ``models/checkpoint.py``) stores a bf16 checkpoint in ~70 % of the
bytes and expands to the original file byte for byte, so a compact checkpoint loads exactly.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from dominotree.bench.build import random_head
from dominotree.models.checkpoint import (CheckpointError, load_drafter, save_compact_drafter, save_drafter,
                                          weights_digest)
from dominotree.models.packing import compact_bytes, expand_bytes
from dominotree.presets import EMBEDDED_DRAFTER_DIRS
from dominotree.train.staging import PARK, tree_bytes

ROOT = Path(__file__).resolve().parents[1]
# What a GPU run sends must leave room in its 64 MiB transfer (tracked + carried files): 47.5 MiB
# leaves room for the pinned transformers and tokenizers wheels (16.1 MiB), which the first GPU
# check could not carry. Since 2026-12-06 the GPU runs go with the CPU's data shards and results
# parked (``python -m dominotree.train.staging park``: neither run reads them), so the budget holds
# for the tracked files outside ``staging.PARK`` (27.7 MiB then; the whole tree, 47.6 MiB, grows
# with every CPU stage's committed shards and results, which is by design).
BUDGET_MIB = 47.5


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) and sa[k].dtype == sb[k].dtype for k in sa)


def test_compact_checkpoint_loads_exactly(tmp_path):
    drafter, _ = random_head(hidden=64, vocab=600, gru=32, emb=16, seed=3)
    save_drafter(drafter, tmp_path / "plain", dtype=torch.bfloat16)
    save_compact_drafter(drafter, tmp_path / "compact")
    assert not (tmp_path / "compact" / "model.safetensors").exists()
    plain = (tmp_path / "plain" / "model.safetensors").read_bytes()
    blob = (tmp_path / "compact" / "model.safetensors.bp").read_bytes()
    assert expand_bytes(blob) == plain and len(blob) < len(plain)
    assert _same(load_drafter(tmp_path / "plain"), load_drafter(tmp_path / "compact"))
    assert _same(load_drafter(tmp_path / "plain", dtype=torch.bfloat16),
                 load_drafter(tmp_path / "compact", dtype=torch.bfloat16))


def test_weights_digest_names_the_weights_in_either_form(tmp_path):
    """The drafters' identity (what ``--budget auto`` keys its calibrations by): the sha256 of the
    safetensors bytes, the same for the plain and the compact file, different for other weights."""
    import hashlib
    drafter, _ = random_head(hidden=64, vocab=600, gru=32, emb=16, seed=3)
    other, _ = random_head(hidden=64, vocab=600, gru=32, emb=16, seed=5)
    save_drafter(drafter, tmp_path / "plain", dtype=torch.bfloat16)
    save_compact_drafter(drafter, tmp_path / "compact")
    save_compact_drafter(other, tmp_path / "other")
    plain = hashlib.sha256((tmp_path / "plain" / "model.safetensors").read_bytes()).hexdigest()
    assert weights_digest(tmp_path / "plain") == weights_digest(tmp_path / "compact") == plain
    assert weights_digest(tmp_path / "other") != plain
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        weights_digest(tmp_path / "missing")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.safetensors.bp").write_bytes(b"not compact at all" * 4)
    with pytest.raises(CheckpointError, match="bad magic"):
        weights_digest(tmp_path / "bad")


def test_compact_refuses_bad_input(tmp_path):
    drafter, _ = random_head(hidden=32, vocab=100, gru=16, emb=8, seed=4)
    save_drafter(drafter, tmp_path / "f32", dtype=torch.float32)
    with pytest.raises(ValueError, match="2-byte tensors only"):
        compact_bytes((tmp_path / "f32" / "model.safetensors").read_bytes())
    save_compact_drafter(drafter, tmp_path / "c")
    f = tmp_path / "c" / "model.safetensors.bp"
    blob = bytearray(f.read_bytes())
    blob[-5] ^= 0xFF                                  # a flipped byte in the compressed data
    f.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match="cannot read model.safetensors.bp"):
        load_drafter(tmp_path / "c")


@pytest.mark.parametrize("kind", ["dflash", "domino"])
def test_shipped_drafters_are_compact(kind):
    """The shipped folder tracks one weights file, compact bf16 (``.bp``) or 8-bit (``.q8``,
    tests/test_q8_weights.py), never the plain file; a local plain copy (git-ignored) must match."""
    folder = EMBEDDED_DRAFTER_DIRS[kind]
    stored = [f for f in ("model.safetensors.bp", "model.safetensors.q8") if (folder / f).is_file()]
    if not stored:
        pytest.skip("no shipped drafters")
    tracked = subprocess.run(["git", "ls-files", str(folder)], cwd=ROOT, capture_output=True, text=True).stdout
    if tracked:
        assert sum(f in tracked for f in ("model.safetensors.bp\n", "model.safetensors.q8\n")) == 1
        assert "model.safetensors\n" not in tracked
    plain = folder / "model.safetensors"
    if plain.is_file() and stored[0].endswith(".bp"):
        assert expand_bytes((folder / stored[0]).read_bytes()) == plain.read_bytes()


def test_tracked_files_a_gpu_run_sends_within_budget():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if out.returncode:
        pytest.skip("not a git checkout")
    sent = tree_bytes(ROOT, skip=PARK)          # what a parked GPU run sends (staging's own measure)
    assert sent < tree_bytes(ROOT)              # the parked folders hold files, so the skip is not vacuous
    total = sent / 2 ** 20
    assert total <= BUDGET_MIB, (f"files outside {', '.join(PARK)} {total:.1f} MiB > budget {BUDGET_MIB} MiB "
                                 f"(GPU transfers hold 64 MiB)")
