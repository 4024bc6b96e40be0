"""Make a trained drafter pair the embedded default: copy it into the folders
``presets.EMBEDDED_DRAFTER_DIRS`` names, compactly, with its lineage in ``config.json``.

    python scripts/ship_drafters.py data/ft29-soft3/smollm2-dflash-b8 data/ft29-soft3/smollm2-domino-b8 \
        --lineage "issue 29: soft arm, stages soft/soft2/soft3 (results/train-issue29/)"

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

from dominotree.models.checkpoint import (compact_folder, load_drafter, read_config,  # noqa: E402
                                          weights_digest)
from dominotree.presets import EMBEDDED_DRAFTER_DIRS  # noqa: E402

PAIR_BUDGET_BYTES = 34 * 10**6      # both folders; the tracked tree must stay under 52 MiB


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs=2, type=Path, help="the DFlash and the Domino drafter folders (any order)")
    ap.add_argument("--lineage", required=True, help="how these weights were made (stored in config.json)")
    a = ap.parse_args(argv)
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
            if (folder / "model.safetensors").is_file():
                shutil.copy2(folder / "model.safetensors", dst / "model.safetensors")
                compact_folder(dst)
            else:
                shutil.copy2(folder / "model.safetensors.bp", dst / "model.safetensors.bp")
            raw = json.loads((dst / "config.json").read_text())
            raw.setdefault("dominotree_training", {})["lineage"] = a.lineage
            raw["dominotree_training"]["sha256"] = weights_digest(dst)
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
