"""The indexes of ``scripts/`` and ``results/`` (issue 41): every script is listed in its folder's
``README.md`` and every listed script exists; every ``scripts/...`` path the repository's prose and
code name exists or is listed as deleted; every folder of ``results/`` is listed in
``results/README.md``, every listed path exists, and ``results/`` holds at most 400 files.

    .venv/bin/python -m pytest -q tests/test_repo_index.py
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
EXPERIMENTS = SCRIPTS / "experiments"
RESULTS = ROOT / "results"
MAX_RESULT_FILES = 400
NOT_CHECKED: set[str] = set()
# a path from the repository root (``git show REV:scripts/x.sh`` names an old commit's file: not checked)
SCRIPT_PATH = re.compile(r"(?<![\w:/.-])scripts/[\w./-]+?\.(?:py|sh)\b")


def tracked(*paths: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", *paths], cwd=ROOT, capture_output=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.decode().split("\0") if p]


def first_cells(markdown: str) -> list[str]:
    """The first cell of every table row but the header rows (a header is followed by ``|---``)."""
    lines = markdown.splitlines()
    return [line.split("|")[1].strip() for i, line in enumerate(lines)
            if line.startswith("| ") and not (i + 1 < len(lines) and lines[i + 1].startswith("|---"))]


def table_names(markdown: str) -> set[str]:
    """The backticked names in the first column of every table in ``markdown``."""
    return {name for cell in first_cells(markdown) for name in re.findall(r"`([^`]+)`", cell)}


def sections(markdown: str) -> tuple[str, str]:
    """(the index, the "Deleted in ..." sections) of a scripts README."""
    head, _, deleted = markdown.partition("\n## Deleted")
    return head, deleted


def test_every_script_is_indexed_and_every_indexed_script_exists():
    for folder in (SCRIPTS, EXPERIMENTS):
        index, deleted = sections((folder / "README.md").read_text())
        files = {p.name for p in folder.iterdir() if p.is_file() and p.name != "README.md"}
        assert table_names(index) == files, folder
        gone = table_names(deleted)
        assert not gone & files, gone & files


def test_named_script_paths_exist_or_are_listed_as_deleted():
    """Code, docs and READMEs name ``scripts/...`` paths that exist; a deleted script is named only
    with the index's word that it is gone. Raw outputs under ``results/`` (logs, JSON, tables) keep
    the command as it ran and are not checked."""
    deleted = table_names(sections((EXPERIMENTS / "README.md").read_text())[1])
    assert deleted
    bad = []
    for rel in tracked():
        p = ROOT / rel
        if rel in NOT_CHECKED or p.suffix not in {".md", ".py", ".sh", ""} or not p.is_file():
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for m in SCRIPT_PATH.finditer(text):
            path = m.group(0)
            if not (ROOT / path).is_file() and path.removeprefix("scripts/") not in deleted:
                bad.append(f"{rel}: {path}")
    assert not bad, bad


def test_results_index_lists_every_folder_and_only_what_exists():
    readme = (RESULTS / "README.md").read_text()
    files = [f.removeprefix("results/") for f in tracked("results")]
    assert len(files) <= MAX_RESULT_FILES, len(files)
    bench = {f.rsplit("/", 1)[0] for f in files if f.endswith("/run.json")}   # a bench folder's own parts
    missing = set()
    for f in files:
        parts = f.split("/")
        if len(parts) == 1:
            if f != "README.md" and f"`{f}`" not in readme:
                missing.add(f)
            continue
        for depth in (1, 2):
            d = "/".join(parts[:depth])
            if depth < len(parts) and not any(d.startswith(b + "/") for b in bench) and f"`{d}/" not in readme:
                missing.add(d + "/")
    assert not missing, sorted(missing)
    for cell in first_cells(readme):
        for name in re.findall(r"`([^`]+)`", cell.split("(")[0]):
            assert (RESULTS / name).exists(), name


LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_every_relative_link_of_the_readme_and_docs_resolves():
    """README.md is a map: each of its links, and each link in docs/, names a file or folder that exists."""
    bad = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (doc.parent / target).exists():
                bad.append(f"{doc.relative_to(ROOT)} -> {target}")
    assert bad == [], "\n".join(bad)


def test_the_code_map_is_on_the_readmes_first_screen():
    """A newcomer finds the code map without scrolling far: within the first 120 lines."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert "## Code map" in lines[:120] and len(lines) <= 300
