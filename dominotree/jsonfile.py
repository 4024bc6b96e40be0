"""The measured files (profiles, calibrations, curves) as JSON: written whole or not at all (a
temporary file beside it, then a rename), so a reader never sees half of a file a killed process
was writing; read with one message for a missing or unreadable file."""
from __future__ import annotations

import json
from pathlib import Path

from .errors import UserError


def write_json_atomic(path: str | Path, obj, indent: int | None = None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=indent))
    tmp.replace(path)
    return path


def read_json(path: str | Path, what: str, make: str, parse):
    """``parse`` of the JSON object in ``path``; a UserError naming ``what`` the file should be and
    the command that ``make``s one when it is missing, and the reason when it cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{what} not found: {path} (make one with `{make}`)")
    try:
        return parse(json.loads(path.read_text()))
    except (ValueError, KeyError, TypeError) as e:
        raise UserError(f"{what} {path} cannot be read: {e}") from None
