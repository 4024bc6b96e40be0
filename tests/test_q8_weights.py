"""The 8-bit storage of drafter checkpoints (``model.safetensors.q8``, ``models/q8blocks.py``, folders in ``models/checkpoint.py``; issue 39).

    .venv/bin/python -m pytest -q tests/test_q8_weights.py

The weights the CPU fast path multiplies as 8-bit blocks are stored as exactly those blocks: the
blocks ``quantize_q8_0`` makes at load from the bf16 checkpoint equal the stored ones, loading the
stored form and quantizing again gives them back (idempotence), and a decode next to an ``int4-q8``
target drafts the same trees with the same scores from either form. Other tensors stay bf16.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

from dominotree.models import cpuext
from dominotree.models.checkpoint import (CheckpointError, load_drafter, q8_folder, read_config,
                                          save_compact_drafter, save_q8_drafter, weights_digest)
from dominotree.models.packing import expand_planes, planes_bytes
from dominotree.models.q8blocks import Q8_CODES, Q8_MAGIC, Q8_SCALES, dequantize_q8, q8_names, read_q8_file
from dominotree.models.drafter import Drafter, DrafterConfig
from dominotree.models.quant import quantize_q8_0
from dominotree.presets import EMBEDDED_DRAFTER_DIRS

# a Domino drafter (GRU and head: kept bf16) with widths that are multiples of 32, one that is not
CFG = DrafterConfig(hidden_size=64, intermediate_size=80, num_hidden_layers=2, num_attention_heads=2,
                    num_key_value_heads=1, head_dim=32, vocab_size=200, block_size=8, num_target_layers=6,
                    mask_token_id=199, target_layer_ids=(1, 3, 4), rope_theta=10_000.0, projector_type="domino",
                    shift_label=True, emb_dim=16, gru_hidden_dim=32)


def _drafter(seed=0, cfg=CFG) -> Drafter:
    torch.manual_seed(seed)
    d = Drafter(cfg).eval()
    with torch.no_grad():
        for p in d.parameters():
            p.normal_(0, 0.05)
        d.fc.weight[3, 5:37] = 0.0           # an all-zero block (scale 0)
    return d


def _pair(tmp_path, seed=0) -> tuple[Path, Path]:
    bf = save_compact_drafter(_drafter(seed), tmp_path / "bf16")
    q8 = tmp_path / "q8"
    shutil.copytree(bf, q8)
    q8_folder(q8)
    return bf, q8


def _runtime_blocks(folder: Path) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The blocks ``presets.load_pair`` makes at load: ``quantize_q8_0`` of the float32 weights."""
    sd = load_drafter(folder).state_dict()
    return {n: quantize_q8_0(sd[n]) for n in q8_names(read_config(folder))}


def test_stored_blocks_are_the_runtime_blocks_and_idempotent(tmp_path):
    bf, q8 = _pair(tmp_path)
    assert sorted(p.name for p in q8.iterdir()) == ["config.json", "model.safetensors.q8"]
    names = q8_names(CFG)
    assert "fc.weight" in names and "layers.1.mlp.down_proj.weight" not in names     # width 80: not 32-aligned
    assert {f"layers.{i}.{m}.weight" for i in range(2) for m in ("self_attn.q_proj", "self_attn.o_proj",
                                                                  "mlp.gate_proj", "mlp.up_proj")} <= set(names)
    stored = read_q8_file(q8 / "model.safetensors.q8")
    want = _runtime_blocks(bf)
    for n, (codes, scales) in want.items():
        assert torch.equal(stored[n + Q8_CODES], codes) and torch.equal(stored[n + Q8_SCALES], scales), n
        assert stored[n + Q8_CODES].dtype == torch.int8 and stored[n + Q8_SCALES].dtype == torch.float32
    # idempotence: the loaded (dequantized) form quantizes to the stored blocks, and so does q8 of q8
    again = _runtime_blocks(q8)
    assert all(torch.equal(again[n][0], want[n][0]) and torch.equal(again[n][1], want[n][1]) for n in want)
    qq = tmp_path / "qq"
    save_q8_drafter(load_drafter(q8), qq)
    stored2 = read_q8_file(qq / "model.safetensors.q8")
    assert all(torch.equal(stored2[n + Q8_CODES], stored[n + Q8_CODES]) for n in names)
    # every other tensor is the bf16 checkpoint's, unchanged
    a, b = load_drafter(bf, dtype=torch.bfloat16).state_dict(), load_drafter(q8, dtype=torch.bfloat16).state_dict()
    for k in a:
        if k not in names:
            assert torch.equal(a[k], b[k]) and stored[k].dtype == torch.bfloat16, k
    # the dequantized weights differ from bf16 by at most half a step of their block
    fa, fb = load_drafter(bf).state_dict(), load_drafter(q8).state_dict()
    for n in names:
        step = want[n][1].repeat_interleave(32, dim=1)
        assert bool(((fa[n] - fb[n]).abs() <= step * (0.5 + 1e-5)).all()), n


@pytest.mark.skipif(cpuext.available() is not None, reason="the C++ kernels are not built here")
def test_routed_products_multiply_the_stored_blocks(tmp_path):
    """The products ``presets.load_pair`` routes next to an int4-q8 target hold the stored blocks."""
    from dominotree.models.linear import routed_product
    from dominotree.models.quantcpu import Q8Q8Linear, q8_products
    _, q8 = _pair(tmp_path)
    d = load_drafter(q8)
    q8_products(d.fc, Q8Q8Linear)
    q8_products(d.layers, Q8Q8Linear)
    stored = read_q8_file(q8 / "model.safetensors.q8")
    mods = dict(d.named_modules())
    for n in q8_names(CFG):
        prod = routed_product(mods[n[:-len(".weight")]])
        assert type(prod) is Q8Q8Linear
        assert torch.equal(prod.q8.codes, stored[n + Q8_CODES]) and torch.equal(prod.q8.d, stored[n + Q8_SCALES])


@pytest.mark.skipif(cpuext.available() is not None, reason="the C++ kernels are not built here")
def test_decoding_drafts_the_same_from_either_form(tmp_path):
    """random-tiny's target with int4-q8 weights, its drafters stored bf16 and 8-bit: every round's
    tree, scores, candidates and accepted rows are equal."""
    from dominotree.config import DecodeConfig, TreeConfig
    from dominotree.decode import Decoder
    from dominotree.models.random_tiny import ensure_random_tiny
    from dominotree.presets import load_pair
    paths = ensure_random_tiny()
    dirs = {}
    for form in ("bf16", "q8"):
        for kind in ("dflash", "domino"):
            dst = tmp_path / form / kind
            save_compact_drafter(load_drafter(paths[kind]), dst)
            if form == "q8":
                q8_folder(dst)
        dirs[form] = [str(tmp_path / form / k) for k in ("dflash", "domino")]
    runs = {}
    for form, ds in dirs.items():
        pair = load_pair(target=paths["target"], drafters=ds, dtype="float32", device="cpu", weights="int4-q8")
        dec = Decoder(pair)
        got = []
        for method in ("dominotree", "ddtree", "dflash"):
            tr = dec.generate("Tell me about the sea.", DecodeConfig(method=method, max_new_tokens=24,
                                                                    tree=TreeConfig(budget=6)))
            got.append((tr.token_ids, [(r.tree.tokens, r.tree.parents, r.tree.scores, r.accepted, r.candidates,
                                        r.candidate_logprobs) for r in tr.rounds]))
        runs[form] = got
    assert runs["bf16"] == runs["q8"]


def test_digest_names_the_stored_weights(tmp_path):
    bf, q8 = _pair(tmp_path)
    data = expand_planes((q8 / "model.safetensors.q8").read_bytes(), Q8_MAGIC)
    assert weights_digest(q8) == hashlib.sha256(data).hexdigest() != weights_digest(bf)
    import json
    import struct
    meta = json.loads(data[8:8 + struct.unpack("<Q", data[:8])[0]])["__metadata__"]
    assert meta["source_sha256"] == weights_digest(bf) and meta["dominotree_q8"] == "Q8_0/32"
    # a plain or compact file beside it is the one read (and named)
    shutil.copy2(bf / "model.safetensors.bp", q8 / "model.safetensors.bp")
    assert weights_digest(q8) == weights_digest(bf)


def _rewrite(folder: Path, edit) -> None:
    """Rewrite an 8-bit file with ``edit(tensors)`` applied (a well-formed file of other content)."""
    from safetensors.torch import save
    f = folder / "model.safetensors.q8"
    t = read_q8_file(f)
    edit(t)
    f.write_bytes(planes_bytes(save(t, metadata={"format": "pt", "dominotree_q8": "Q8_0/32"}), Q8_MAGIC))


def test_bad_files_are_refused_with_a_clear_error(tmp_path):
    _, q8 = _pair(tmp_path)
    good = (q8 / "model.safetensors.q8").read_bytes()
    f = q8 / "model.safetensors.q8"
    for at in (-5, len(good) // 2, 40):               # compressed data, the middle, the stored sha256
        blob = bytearray(good)
        blob[at] ^= 0xFF
        f.write_bytes(bytes(blob))
        with pytest.raises(CheckpointError, match="cannot read model.safetensors.q8"):
            load_drafter(q8)
    f.write_bytes(good[:-100])
    with pytest.raises(CheckpointError, match="cannot read model.safetensors.q8"):
        load_drafter(q8)
    f.write_bytes(b"DTBP1\n" + good[6:])
    with pytest.raises(CheckpointError, match="bad magic"):
        weights_digest(q8)
    with pytest.raises(CheckpointError, match="bad magic"):
        load_drafter(q8)
    bad = {
        "codes but no scales": lambda t: t.pop("fc.weight" + Q8_SCALES),
        "scales .* without codes": lambda t: t.pop("fc.weight" + Q8_CODES),
        "are not Q8_0 blocks": lambda t: t.update({"fc.weight" + Q8_SCALES: t["fc.weight" + Q8_SCALES][:, :-1].clone()}),
        "-128": lambda t: t["fc.weight" + Q8_CODES].__setitem__((0, 0), -128),
        "finite": lambda t: t["fc.weight" + Q8_SCALES].__setitem__((0, 0), float("nan")),
    }
    for why, edit in bad.items():
        f.write_bytes(good)
        _rewrite(q8, edit)
        with pytest.raises(CheckpointError, match=why):
            load_drafter(q8)
    f.write_bytes(good)
    from safetensors.torch import save
    f.write_bytes(planes_bytes(save(read_q8_file(f), metadata={"format": "pt"}), Q8_MAGIC))
    with pytest.raises(CheckpointError, match="no Q8_0/32 blocks"):
        load_drafter(q8)


@pytest.mark.parametrize("kind", ["dflash", "domino"])
def test_shipped_drafters_in_8_bits(kind, tmp_path):
    """The shipped drafter, in whichever form it ships: 8-bit blocks that quantize back to
    themselves, and the same blocks as its bf16 form would make at load (when that form is here)."""
    folder = EMBEDDED_DRAFTER_DIRS[kind]
    if not (folder / "config.json").is_file():
        pytest.skip("no shipped drafters")
    q8 = tmp_path / kind
    shutil.copytree(folder, q8)
    q8_folder(q8)
    stored = read_q8_file(q8 / "model.safetensors.q8")
    want = _runtime_blocks(folder)
    assert set(want) == set(q8_names(read_config(folder))) and len(want) == 1 + 7 * read_config(folder).num_hidden_layers
    for n, (codes, scales) in want.items():
        assert torch.equal(stored[n + Q8_CODES], codes) and torch.equal(stored[n + Q8_SCALES], scales), n
        deq = dequantize_q8({n + Q8_CODES: codes, n + Q8_SCALES: scales})[n]
        c2, s2 = quantize_q8_0(deq)
        assert torch.equal(c2, codes) and torch.equal(s2, scales), n
