"""The ``hf-generate`` reference: plain ``transformers`` ``generate`` (greedy, bf16, SDPA) on the
target's folder, the baseline a user would otherwise run.

    model = load_hf_model(folder)                      # bf16, once
    rec = hf_generate(model, prompt_ids, max_new_tokens=128)
    rec["tokens_per_s"], rec["token_ids"]

``tokens_per_s`` counts new tokens over the wall time of the whole ``generate`` call (prefill
included), the way the bench counts every method. EOS stops it as it stops our decoder.
"""
from __future__ import annotations

import time
from pathlib import Path

import torch


def load_hf_model(folder: str | Path, dtype=torch.bfloat16, device: str = "cpu"):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa",
                                                 local_files_only=True)
    return model.to(device).eval()


@torch.inference_mode()
def hf_generate(model, prompt_ids: list[int], max_new_tokens: int, eos_ids=None, stop_at_eos: bool = True) -> dict:
    """One greedy ``generate`` call; returns token ids, new token count, wall time and tokens/s."""
    dev = next(model.parameters()).device
    ids = torch.tensor([list(prompt_ids)], dtype=torch.long, device=dev)
    eos = sorted(eos_ids) if (eos_ids and stop_at_eos) else None
    kw = dict(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, use_cache=True,
              attention_mask=torch.ones_like(ids), pad_token_id=eos[0] if eos else 0)
    if eos is None:
        kw["min_new_tokens"] = max_new_tokens
    else:
        kw["eos_token_id"] = eos
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model.generate(ids, **kw)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    new = out[0, ids.shape[1]:].tolist()
    return {"token_ids": new, "new_tokens": len(new), "wall_time": wall,
            "tokens_per_s": len(new) / wall if wall > 0 else 0.0}
