"""Write a JSON file whole or not at all (a temporary file beside it, then a rename), so a reader
never sees half of a profile, calibration or curve that a killed process was writing."""
from __future__ import annotations

import json
from pathlib import Path


def write_json_atomic(path: str | Path, obj, indent: int | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=indent))
    tmp.replace(path)
    return path
