"""Prompt files: one JSON object per line, and our offline sets in ``assets/prompts``.

Every source yields ``Prompt(id, category, turns)``. JSONL files take one object per line with
``prompt`` (a string) or ``turns`` (a list of user turns, Spec-Bench / MT-Bench style), and
optional ``id`` / ``question_id`` and ``category``; blank lines and ``#`` comment lines are
skipped; a malformed line is a ``UserError`` that names the file and the line number. The bench
(``bench.datasets``, which adds the paper's benchmarks) and the budget calibration
(``auto.calibrate.calibration_prompts``) read prompts through here.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UserError

ASSETS_PROMPTS = Path(__file__).resolve().parent.parent / "assets" / "prompts"
# our own offline sets: assets/prompts/eval.jsonl (whole or one category) and calibrate.jsonl
ASSET_SETS = ("eval", "chat", "math", "code", "calibrate")


@dataclass
class Prompt:
    id: str
    category: str
    turns: list[str] = field(default_factory=list)
    dataset: str = ""
    group: str = ""        # rollup (math / code / chat) for the paper's datasets

    def to_dict(self) -> dict:
        return {"id": self.id, "category": self.category, "turns": self.turns, "dataset": self.dataset,
                "group": self.group or self.category}


# --- JSONL -----------------------------------------------------------------------------------

def parse_prompt_obj(obj, where: str, index: int, default_category: str = "prompts") -> Prompt:
    """One JSONL object -> Prompt; ``where`` is used in error messages (``file:line``)."""
    if not isinstance(obj, dict):
        raise UserError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "turns" in obj:
        turns = obj["turns"]
        if isinstance(turns, str):
            turns = [turns]
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) and t.strip() for t in turns):
            raise UserError(f"{where}: 'turns' must be a non-empty list of non-empty strings")
    elif "prompt" in obj:
        if not isinstance(obj["prompt"], str) or not obj["prompt"].strip():
            raise UserError(f"{where}: 'prompt' must be a non-empty string")
        turns = [obj["prompt"]]
    else:
        raise UserError(f"{where}: needs a 'prompt' string or a 'turns' list (keys: {', '.join(sorted(obj)) or 'none'})")
    pid = obj.get("id", obj.get("question_id", index))
    cat = obj.get("category") or default_category
    return Prompt(str(pid), str(cat), list(turns))


def load_jsonl(path: str | Path, default_category: str | None = None) -> list[Prompt]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"prompt file not found: {path}")
    cat = default_category or path.stem
    out, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            try:
                obj = json.loads(s)
            except json.JSONDecodeError as e:
                raise UserError(f"{path}:{lineno}: malformed JSON ({e.msg} at column {e.colno})") from None
            p = parse_prompt_obj(obj, f"{path}:{lineno}", len(out), cat)
            if p.id in seen:
                raise UserError(f"{path}:{lineno}: duplicate id {p.id!r}")
            seen.add(p.id)
            p.dataset = path.stem
            out.append(p)
    if not out:
        raise UserError(f"{path}: no prompts (one JSON object per line with 'prompt' or 'turns')")
    return out


def write_jsonl(prompts: list[Prompt], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        for p in prompts:
            f.write(json.dumps({"id": p.id, "category": p.category, "turns": p.turns}, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


# --- our assets ----------------------------------------------------------------------------------

def load_assets(name: str = "eval") -> list[Prompt]:
    """Our offline prompt sets: ``eval`` (the 36 held-out prompts the benches decode), one of its
    categories (``chat``, ``math``, ``code``), or ``calibrate`` (48 more in the same three
    categories, disjoint from ``eval`` and from every training request: what ``--budget auto``
    calibrates on, so that its choice is not fitted to the prompts a bench then measures)."""
    ps = load_jsonl(ASSETS_PROMPTS / ("calibrate.jsonl" if name == "calibrate" else "eval.jsonl"))
    if name not in ("eval", "calibrate"):
        ps = [p for p in ps if p.category == name]
    for p in ps:
        p.dataset = f"assets:{name}"
    return ps
