"""Released checkpoint formats: tiny checkpoints written with the released config keys and
tensor names load; mismatched pairings and broken folders are refused with the intended message.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_formats.py
"""
import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from dominotree.config import ConfigError
from dominotree.models.checkpoint import check_pair, load_drafter, read_config
from dominotree.models.drafter import CheckpointError

# the released config shapes (algorithms.md 1d, 2d), scaled down
DFLASH_4B_STYLE = {
    "architectures": ["DFlashDraftModel"], "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
    "model_type": "qwen3", "block_size": 16, "num_target_layers": 4,
    "dflash_config": {"mask_token_id": 259, "target_layer_ids": [1, 2]},
    "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "layer_types": ["full_attention"] * 2, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "max_position_embeddings": 40960, "vocab_size": 320, "tie_word_embeddings": False,
    "attention_bias": False, "dtype": "bfloat16", "sliding_window": None, "use_sliding_window": False,
}
DOMINO_KEYS = {"emb_dim": 16, "dflash_config": {
    "mask_token_id": 259, "target_layer_ids": [1, 2], "projector_type": "domino", "pure_draft_prefix_len": 1,
    "emb_dim": 16, "gru_hidden_dim": 32, "shift_label": True}}

RELEASED_NAMES = ["fc.weight", "hidden_norm.weight", "norm.weight", "layers.0.self_attn.q_proj.weight",
                  "layers.0.self_attn.k_proj.weight", "layers.0.self_attn.v_proj.weight",
                  "layers.0.self_attn.o_proj.weight", "layers.0.self_attn.q_norm.weight",
                  "layers.0.self_attn.k_norm.weight", "layers.1.mlp.gate_proj.weight", "layers.1.mlp.up_proj.weight",
                  "layers.1.mlp.down_proj.weight", "layers.1.input_layernorm.weight",
                  "layers.1.post_attention_layernorm.weight"]
DOMINO_NAMES = ["prefix_gru.weight_ih_l0", "prefix_gru.weight_hh_l0", "embed_proj.0.weight", "embed_proj.2.weight"]


def write_released(folder, domino: bool):
    """Write a checkpoint by hand with the released names and shapes (not through our writer)."""
    cfg = json.loads(json.dumps(DFLASH_4B_STYLE))
    if domino:
        cfg.update(json.loads(json.dumps(DOMINO_KEYS)))
    h, i, hd = 64, 128, 16
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)  # noqa: E731
    t = {"fc.weight": r(h, 2 * h), "hidden_norm.weight": r(h), "norm.weight": r(h)}
    for L in range(2):
        p = f"layers.{L}."
        t.update({p + "self_attn.q_proj.weight": r(4 * hd, h), p + "self_attn.k_proj.weight": r(2 * hd, h),
                  p + "self_attn.v_proj.weight": r(2 * hd, h), p + "self_attn.o_proj.weight": r(h, 4 * hd),
                  p + "self_attn.q_norm.weight": r(hd), p + "self_attn.k_norm.weight": r(hd),
                  p + "mlp.gate_proj.weight": r(i, h), p + "mlp.up_proj.weight": r(i, h),
                  p + "mlp.down_proj.weight": r(h, i), p + "input_layernorm.weight": r(h),
                  p + "post_attention_layernorm.weight": r(h)})
    if domino:
        t.update({"prefix_gru.weight_ih_l0": r(96, h), "prefix_gru.weight_hh_l0": r(96, 32),
                  "embed_proj.0.weight": r(16, h + 32), "embed_proj.2.weight": r(320, 16)})
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    save_file(t, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def test_released_layouts_load(tmp_path):
    d = load_drafter(write_released(tmp_path / "dflash", False))
    assert d.cfg.kind == "dflash" and d.cfg.draft_depth == 15 and d.cfg.target_layer_ids == (1, 2)
    m = load_drafter(write_released(tmp_path / "domino", True))
    assert m.cfg.kind == "domino" and m.cfg.draft_depth == 16 and m.cfg.gru_hidden_dim == 32
    names = set(load_file(str(tmp_path / "domino" / "model.safetensors")))
    assert set(RELEASED_NAMES) <= names and set(DOMINO_NAMES) <= names


def test_shipped_random_tiny_passes_same_checks(tiny_pair):
    for kind in ("dflash", "domino"):
        cfg = read_config(tiny_pair.paths[kind])
        assert cfg.kind == kind
        raw = json.loads(open(f"{tiny_pair.paths[kind]}/config.json").read())
        assert raw["architectures"] == ["DFlashDraftModel"] and "dflash_config" in raw


def test_method_pairing_refused(tmp_path, tiny_pair):
    dom = read_config(write_released(tmp_path / "domino", True))
    dfl = read_config(write_released(tmp_path / "dflash", False))
    for m in ("ddtree", "dflash", "caddtree"):
        with pytest.raises(CheckpointError, match="needs a DFlash checkpoint"):
            check_pair(m, dom, tiny_pair.target)
    for m in ("dominotree", "domino", "marg", "condstatic"):
        with pytest.raises(CheckpointError, match="needs a Domino checkpoint"):
            check_pair(m, dfl, tiny_pair.target)
    with pytest.raises(ConfigError, match="needs a domino drafter"):
        check_pair("dominotree", None, tiny_pair.target)
    check_pair("ddtree", dfl, tiny_pair.target)
    check_pair("dominotree", dom, tiny_pair.target)


def _edit_config(folder, fn):
    p = folder / "config.json"
    cfg = json.loads(p.read_text())
    fn(cfg)
    p.write_text(json.dumps(cfg))


def test_shift_label_mismatch_refused(tmp_path):
    f = write_released(tmp_path / "d", True)
    _edit_config(f, lambda c: c["dflash_config"].update(shift_label=False))
    with pytest.raises(CheckpointError, match="shift_label"):
        read_config(f)
    g = write_released(tmp_path / "e", False)
    _edit_config(g, lambda c: c["dflash_config"].update(shift_label=True))
    with pytest.raises(CheckpointError, match="shift_label"):
        read_config(g)


def test_wrong_target_refused(tmp_path, tiny_pair):
    f = write_released(tmp_path / "d", True)
    _edit_config(f, lambda c: c.update(num_target_layers=36))
    with pytest.raises(CheckpointError, match="36 layers"):
        check_pair("dominotree", read_config(f), tiny_pair.target)
    _edit_config(f, lambda c: (c.update(num_target_layers=4), c["dflash_config"].update(mask_token_id=10**6)))
    with pytest.raises(CheckpointError, match="mask_token_id"):
        check_pair("dominotree", read_config(f), tiny_pair.target)


@pytest.mark.parametrize("breakage,msg", [
    ("no_folder", "does not exist"), ("no_config", "no config.json"), ("bad_json", "not valid JSON"),
    ("no_dflash_config", "dflash_config"), ("no_weights", "no \\*.safetensors"),
    ("missing_tensor", "missing tensors"), ("wrong_shape", "shapes do not match"),
    ("hidden_mismatch", "shapes do not match"), ("corrupt", "cannot read"),
])
def test_broken_folders_refused(tmp_path, breakage, msg):
    f = write_released(tmp_path / "d", True)
    if breakage == "no_folder":
        shutil.rmtree(f)
    elif breakage == "no_config":
        (f / "config.json").unlink()
    elif breakage == "bad_json":
        (f / "config.json").write_text("{not json")
    elif breakage == "no_dflash_config":
        _edit_config(f, lambda c: c.pop("dflash_config"))
    elif breakage == "no_weights":
        (f / "model.safetensors").unlink()
    elif breakage in ("missing_tensor", "wrong_shape"):
        t = load_file(str(f / "model.safetensors"))
        if breakage == "missing_tensor":
            t.pop("prefix_gru.weight_hh_l0")
        else:
            t["fc.weight"] = t["fc.weight"][:, :10].contiguous()
        save_file(t, str(f / "model.safetensors"))
    elif breakage == "hidden_mismatch":
        _edit_config(f, lambda c: c.update(hidden_size=128, head_dim=32))
    elif breakage == "corrupt":
        (f / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match=msg):
        load_drafter(f)
