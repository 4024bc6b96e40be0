"""What comes back from a GPU run's ``$OUT``, checked before the run ends (device README, Limits):
at most 8 files, 16 MiB each, 64 MiB together, no more than 2 folders down, every file and
folder named in letters, digits, '.', '_' and '-' alone. A file over the limits would not come
back, silently: ``check_out`` names every breach, and ``split_to_fit`` cuts a file that is too
large into parts (joined again with ``staging.assemble``). ``summarize`` writes the run's
summary, ``$OUT/gpu_train.json``, from every step's result and this check.

Run as a script (``python3 dominotree/train/outlimits.py summary ...``) it imports no torch:
``scripts/gpu_train.sh`` rewrites the summary after every step in a few hundredths of a second.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

MiB = 1 << 20
MAX_FILES = 8
MAX_FILE = 16 * MiB
MAX_TOTAL = 64 * MiB
MAX_DEPTH = 2                 # folders above a file, below $OUT
NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def check_out(out: Path) -> list[str]:
    """Every way ``out`` breaks the limits (empty: all of it comes back)."""
    out = Path(out)
    bad, files, total = [], 0, 0
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out)
        if any(not NAME.match(part) for part in rel.parts):
            bad.append(f"{rel}: a name with characters other than letters, digits, '.', '_', '-'")
        if p.is_symlink():
            bad.append(f"{rel}: a link (links do not come back)")
            continue
        if p.is_dir():
            continue
        if not p.is_file():
            bad.append(f"{rel}: not a plain file")
            continue
        if len(rel.parts) - 1 > MAX_DEPTH:
            bad.append(f"{rel}: more than {MAX_DEPTH} folders down")
        size = p.stat().st_size
        if size > MAX_FILE:
            bad.append(f"{rel}: {size} bytes, over {MAX_FILE}")
        files += 1
        total += size
    if files > MAX_FILES:
        bad.append(f"{files} files, over {MAX_FILES}")
    if total > MAX_TOTAL:
        bad.append(f"{total} bytes in all, over {MAX_TOTAL}")
    return bad


def split_to_fit(src: Path, out: Path, stem: str, max_file: int = MAX_FILE) -> dict:
    """Cut ``src`` into ``out/<stem>.part-NN`` files of at most ``max_file`` bytes each, with
    ``out/<stem>.manifest.json``; returns the manifest (sha256 of every part and of the whole)."""
    from dominotree.train.staging import split
    tmp = out / f".{stem}.split"
    man = split(src, tmp, max_file)
    for part in man["parts"]:
        new = f"{stem}.{part['file']}"
        (tmp / part["file"]).rename(out / new)
        part["file"] = new
    (tmp / "manifest.json").unlink()
    tmp.rmdir()
    return man


def _read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_json(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)


def summarize(out: Path, work: Path, steps: list[str], dry_run: bool) -> dict:
    """``out/gpu_train.json``: each step's exit status, seconds and result (``work/<step>.json``),
    and whether ``out`` stays within the limits (checked with the summary itself in place)."""
    s = {"dry_run": dry_run, "steps": {}}
    for item in steps:
        name, rc, sec = item.split(":")
        s["steps"][name] = {"rc": int(rc), "s": int(sec), "timed_out": rc in ("124", "137")}
        got = _read(work / f"{name}.json")
        if got is not None:
            s[name] = got
    s["ok"] = bool(s["steps"]) and all(v["rc"] == 0 for v in s["steps"].values())
    write_json(out / "gpu_train.json", s)
    bad = check_out(out)
    s["out_limits"] = bad or "ok"
    s["ok"] = s["ok"] and not bad
    write_json(out / "gpu_train.json", s)
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="$OUT's summary and limits")
    ap.add_argument("cmd", choices=("summary", "check"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, default=Path(".gpu_work"))
    ap.add_argument("--steps", nargs="*", default=[], help="NAME:RC:SECONDS per step run")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "check":
        bad = check_out(a.out)
        print("\n".join(bad) or "ok")
        return 1 if bad else 0
    s = summarize(a.out, a.work, a.steps, a.dry_run)
    print(f"summary: ok={s['ok']} steps={s['steps']} out_limits={s['out_limits']}")
    return 0 if s["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
