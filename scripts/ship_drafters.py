"""Make a trained drafter pair the embedded default: copy it into the folders
``presets.EMBEDDED_DRAFTER_DIRS`` names, compactly, with its lineage in ``config.json``.

    python scripts/ship_drafters.py data/ft29-soft3/smollm2-dflash-b8 data/ft29-soft3/smollm2-domino-b8 \
        --lineage "issue 29: soft arm, stages soft/soft2/soft3 (results/train-issue29/)"

``--store q8`` (the default) writes ``model.safetensors.q8``: the products the CPU fast path runs
as 8-bit blocks stored as exactly those blocks, the rest bf16 (``models/q8blocks.py``; the
default CPU setting drafts exactly as from the bf16 checkpoint, the float32 / bf16 / CUDA settings
run the dequantized weights; docs/gpu-training.md); ``--store bf16`` the lossless compact bf16 form
(``model.safetensors.bp``; a folder already in 8 bits cannot go back to it).

Checks before anything is written: both folders load (``load_drafter``), one is DFlash and one
Domino, their block sizes agree with the folder names, and the pair fits the tracked-size budget
(``tests/test_compact_weights.py``). Then the old embedded folders are replaced. Afterwards: run the
acceptance yardstick and the tests (``tests/test_embedded.py``, ``tests/test_compact_weights.py``);
``--budget auto`` recalibrates by itself (its calibrations are keyed by the drafters' id).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dominotree.models.checkpoint import (Q8_SUFFIX, compact_folder, load_drafter, q8_folder,  # noqa: E402
                                          read_config, weights_digest)
from dominotree.presets import EMBEDDED_DRAFTER_DIRS  # noqa: E402

PAIR_BUDGET_BYTES = 34 * 10**6      # both folders, either form (q8: ~25.6 MB, bf16: ~33.3 MB); see
                                    # tests/test_compact_weights.py for the tracked tree's budget


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs=2, type=Path, help="the DFlash and the Domino drafter folders (any order)")
    ap.add_argument("--lineage", required=True, help="how these weights were made (stored in config.json)")
    ap.add_argument("--store", choices=("q8", "bf16"), default="q8",
                    help="q8: the 8-bit products as their Q8_0 blocks, the rest bf16 (model.safetensors.q8); "
                         "bf16: lossless compact bf16 (model.safetensors.bp)")
    ap.add_argument("--note", default=None, help="a note stored beside the lineage in config.json")
    a = ap.parse_args(argv)
    if not a.lineage.strip():
        ap.error("--lineage is empty: say how these weights were made (it is what config.json keeps of their history)")
    by_kind = {}
    for folder in a.folders:
        cfg = read_config(folder)
        load_drafter(folder)                        # raises CheckpointError on a bad folder
        by_kind[cfg.kind] = (folder, cfg)
    if set(by_kind) != set(EMBEDDED_DRAFTER_DIRS):
        ap.error(f"need one DFlash and one Domino drafter, got {sorted(by_kind)}")
    for kind, (folder, cfg) in by_kind.items():
        want = EMBEDDED_DRAFTER_DIRS[kind].name
        if not want.endswith(f"-b{cfg.block_size}"):
            ap.error(f"{folder} has block size {cfg.block_size}; the embedded folder is {want}")
    with tempfile.TemporaryDirectory() as tmp:
        staged = {}
        for kind, (folder, _) in by_kind.items():
            dst = Path(tmp) / kind
            dst.mkdir()
            shutil.copy2(folder / "config.json", dst / "config.json")
            weights = [f for f in ("model.safetensors", "model.safetensors.bp", "model.safetensors" + Q8_SUFFIX)
                       if (folder / f).is_file()][:1]
            if not weights:
                ap.error(f"{folder} has no model.safetensors, .bp or {Q8_SUFFIX}")
            if weights[0].endswith(Q8_SUFFIX) and a.store == "bf16":
                ap.error(f"{folder} is stored in 8 bits: its bf16 weights are not there to ship (--store q8)")
            shutil.copy2(folder / weights[0], dst / weights[0])
            source = weights_digest(dst)
            if weights[0] == "model.safetensors":
                compact_folder(dst)
            if a.store == "q8":
                q8_folder(dst)
            raw = json.loads((dst / "config.json").read_text())
            info = raw.setdefault("dominotree_training", {})
            info["lineage"] = a.lineage
            if a.note:
                info["note"] = a.note
            info["sha256"] = weights_digest(dst)
            if a.store == "bf16":
                info.pop("stored", None)
            elif source != info["sha256"]:     # made here from bf16 weights (an 8-bit folder keeps its note)
                info["stored"] = {"form": "q8", "file": "model.safetensors" + Q8_SUFFIX, "from_sha256": source}
            (dst / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
            staged[kind] = dst
        size = sum(f.stat().st_size for d in staged.values() for f in d.iterdir())
        if size > PAIR_BUDGET_BYTES:
            ap.error(f"the pair is {size / 1e6:.1f} MB, over the {PAIR_BUDGET_BYTES / 1e6:.0f} MB it may take")
        for kind, dst in staged.items():
            load_drafter(dst)
            for old in EMBEDDED_DRAFTER_DIRS[kind].parent.glob(f"smollm2-{kind}-b*"):
                shutil.rmtree(old)
            shutil.copytree(dst, EMBEDDED_DRAFTER_DIRS[kind])
            print(f"{kind}: {by_kind[kind][0]} -> {EMBEDDED_DRAFTER_DIRS[kind]}")
    print(f"shipped {size / 1e6:.1f} MB; now run the acceptance yardstick and tests/test_embedded.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
