"""``scripts/ship_drafters.py`` refuses a pair it cannot record honestly, and changes nothing then."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dominotree.presets import EMBEDDED_DRAFTER_DIRS

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "ship_drafters.py"


def embedded_digest() -> dict[str, str]:
    return {str(f.relative_to(ROOT)): hashlib.sha256(f.read_bytes()).hexdigest()
            for d in EMBEDDED_DRAFTER_DIRS.values() for f in sorted(d.iterdir())}


@pytest.mark.parametrize("lineage", ["", "   "])
def test_an_empty_lineage_is_refused_before_anything_is_written(lineage):
    """Session 29 shipped a pair with ``--lineage ""`` (a shell variable that came out empty): the
    embedded config.json lost the drafters' whole history. Now that is a usage error."""
    before = embedded_digest()
    folders = [str(d) for d in EMBEDDED_DRAFTER_DIRS.values()]
    r = subprocess.run([sys.executable, str(SCRIPT), *folders, "--lineage", lineage],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2
    assert "--lineage is empty" in r.stderr
    assert "shipped" not in r.stdout
    assert embedded_digest() == before


def test_the_shipped_pair_says_how_it_was_made():
    for d in EMBEDDED_DRAFTER_DIRS.values():
        info = json.loads((d / "config.json").read_text())["dominotree_training"]
        assert info["lineage"].strip(), d
