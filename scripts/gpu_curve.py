"""Per-forward cost curve, fast vs transformers forward, at Qwen3-4B shapes with random weights
(no download), for the GPU check. ``--tiny`` runs random-tiny shapes (CPU plumbing check).

    python scripts/gpu_curve.py --device cuda --json-out OUT/fast_curve_cuda.json

Prints one JSON line: {"shapes", "device", "ms": {"fast": {rows: ms}, "hf": {...}}, "max_logit_diff"}.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

ROWS = (1, 2, 4, 8, 17, 33)
QWEN3_4B = dict(vocab_size=151936, hidden_size=2560, intermediate_size=9728, num_hidden_layers=36,
                num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=4096)
TINY = dict(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from dominotree.models.fast import FastModel
    from dominotree.models.target import Target, cache_truncate
    dev, dtype = torch.device(a.device), torch.bfloat16 if a.device != "cpu" or not a.tiny else torch.float32
    torch.manual_seed(0)
    cfg = Qwen3Config(**(TINY if a.tiny else QWEN3_4B), tie_word_embeddings=False, initializer_range=0.02)
    cfg._attn_implementation = "sdpa"
    with torch.device(dev):
        model = Qwen3ForCausalLM(cfg).to(dtype).eval()
    targets = {"hf": Target(model, None), "fast": Target(model, None, fast=FastModel(model))}
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    ctx = torch.randint(0, cfg.vocab_size, (1, a.context), device=dev)
    ms = {k: {} for k in targets}
    diff = 0.0
    with torch.inference_mode():
        caches = {}
        for k, t in targets.items():
            caches[k] = t.new_cache()
            t.forward(ctx, torch.arange(a.context, device=dev)[None], caches[k], last_only=True)
        def inputs(n):
            ids = torch.randint(0, cfg.vocab_size, (1, n), device=dev)
            pos = torch.arange(a.context, a.context + n, device=dev)[None]
            keep = torch.ones(n, a.context + n, dtype=torch.bool, device=dev).tril(a.context)
            mask = None if n == 1 else torch.zeros(1, 1, n, a.context + n, dtype=dtype, device=dev).masked_fill(
                ~keep, torch.finfo(dtype).min)
            return ids, pos, mask
        # every shape once before any timing: the first run of a row count pays kernel selection and
        # allocator growth (two H200 runs each had one first-shape point at 1.7x its neighbours)
        for n in ROWS:
            for k, t in targets.items():
                ids, pos, mask = inputs(n)
                t.forward(ids, pos, caches[k], mask=mask)
                cache_truncate(caches[k], a.context)
        for n in ROWS:
            ids, pos, mask = inputs(n)
            outs = {}
            for k, t in targets.items():
                ts = []
                for r in range(a.reps + 2):
                    sync()
                    t0 = time.perf_counter()
                    out = t.forward(ids, pos, caches[k], mask=mask)
                    sync()
                    if r >= 2:
                        ts.append((time.perf_counter() - t0) * 1e3)
                    cache_truncate(caches[k], a.context)
                outs[k] = out.logits.float()
                ms[k][n] = round(statistics.median(ts), 3)
            diff = max(diff, float((outs["hf"] - outs["fast"]).abs().max()))
    res = {"shapes": "tiny" if a.tiny else "qwen3-4b", "device": str(dev), "dtype": str(dtype), "context": a.context,
           "ms": ms, "max_logit_diff": diff, "torch": torch.__version__}
    line = json.dumps(res)
    if a.json_out:
        Path(a.json_out).write_text(line + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
