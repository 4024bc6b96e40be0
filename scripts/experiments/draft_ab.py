"""A/B of the drafter backbone on CPU: the Python path (``DraftLayer``'s torch ops) against the fused
one (``models/draftcpu.py``: one C++ op per layer), in DominoTree rounds of the embedded pair
(SmolLM2-135M, default int4-q8 target weights, the drafters' products in 8-bit blocks).

Interleaved in one process (ar, DominoTree with the Python backbone, DominoTree fused; per prompt
and repetition), after a warm-up; per-round medians of the draft stage, of the backbone alone
(``Drafter.forward``) and of the whole round (draft + build + verify + commit), and tok/s of
whole decodes (median over repetitions). Both arms must commit the same tokens (and ``ar``'s).

Run (2 cores shared: under the CPU lock):
    PYTHONPATH=. flock /tmp/cpu.lock .venv/bin/python scripts/experiments/draft_ab.py --threads 1 2
"""
from __future__ import annotations

import argparse
import os
import statistics as st
import time

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPTS = ["Explain how a refrigerator keeps food cold, in simple terms.",
           "Write a Python function that reverses a string.",
           "Give me three tips for better sleep."]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--budget", type=int, default=3)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    a = ap.parse_args()

    from dominotree.config import DecodeConfig, TreeConfig
    from dominotree.decode import Decoder
    from dominotree.models import draftcpu
    from dominotree.presets import load_pair

    pair = load_pair("smollm2")
    dec = Decoder(pair, annotate=False)
    drafter = pair.drafters["domino"]
    backbone: list[float] = []
    inner = drafter.forward

    def timed_forward(*args, **kw):
        t = time.perf_counter()
        out = inner(*args, **kw)
        backbone.append((time.perf_counter() - t) * 1e3)
        return out

    drafter.forward = timed_forward
    ar_cfg = DecodeConfig(method="ar", max_new_tokens=a.tokens, stop_at_eos=False)
    dt_cfg = DecodeConfig(method="dominotree", max_new_tokens=a.tokens, stop_at_eos=False,
                          draft_vocab=a.draft_vocab, tree=TreeConfig(budget=a.budget))
    from dominotree.machine import cpu_isa, cpu_model, cpu_signature
    print(f"CPU: {cpu_model()} ({cpu_signature()}, {cpu_isa()}, {os.cpu_count()} logical cores); torch {torch.__version__}; "
          f"target weights {pair.target.weights}; drafter products {type(drafter.fc.forward.current()).__name__}")
    print(f"dominotree budget {a.budget}, draft vocabulary {a.draft_vocab}, {a.tokens} new tokens, "
          f"{len(PROMPTS)} prompts x {a.reps} reps, arms interleaved; medians")
    for threads in a.threads:
        torch.set_num_threads(threads)
        dec.warm_up()
        for fused in (False, True):
            draftcpu.FUSED = fused
            dec.generate(PROMPTS[0], dt_cfg)
        stats = {arm: {"draft": [], "backbone": [], "round": [], "build": [], "verify": [], "tps": []}
                 for arm in ("python", "fused")}
        ar_tps = []
        for rep in range(a.reps):
            for prompt in PROMPTS:
                t = time.perf_counter()
                ar = dec.generate(prompt, ar_cfg).token_ids
                ar_tps.append(len(ar) / (time.perf_counter() - t))
                for arm in ("python", "fused") if rep % 2 == 0 else ("fused", "python"):
                    draftcpu.FUSED = arm == "fused"
                    backbone.clear()
                    t = time.perf_counter()
                    tr = dec.generate(prompt, dt_cfg)
                    wall = time.perf_counter() - t
                    if tr.token_ids != ar:
                        raise SystemExit(f"{arm}: dominotree's tokens differ from ar's on {prompt!r}")
                    s = stats[arm]
                    s["tps"].append(len(tr.token_ids) / wall)
                    s["backbone"].extend(backbone)
                    for r in tr.rounds:
                        s["draft"].append(r.stage_ms["draft"])
                        s["build"].append(r.stage_ms.get("build", 0.0))
                        s["verify"].append(r.stage_ms["verify"])
                        s["round"].append(sum(r.stage_ms.values()))
        draftcpu.FUSED = True
        med = {arm: {k: st.median(v) for k, v in s.items()} for arm, s in stats.items()}
        ar_ms = 1e3 / st.median(ar_tps)
        print(f"\n{threads} thread(s): ar {st.median(ar_tps):.1f} tok/s ({ar_ms:.2f} ms/token)")
        print(f"{'per round (ms)':<16}{'python':>9}{'fused':>9}{'ratio':>8}")
        for k in ("backbone", "draft", "build", "verify", "round"):
            p, f = med["python"][k], med["fused"][k]
            print(f"{k:<16}{p:9.3f}{f:9.3f}{f / p:8.2f}")
        print(f"{'draft / ar step':<16}{med['python']['draft'] / ar_ms:9.3f}{med['fused']['draft'] / ar_ms:9.3f}")
        print(f"{'tok/s':<16}{med['python']['tps']:9.1f}{med['fused']['tps']:9.1f}"
              f"{med['fused']['tps'] / med['python']['tps']:8.2f}   (ar {st.median(ar_tps):.1f})")
        print(f"rounds per arm: {len(stats['fused']['round'])}; every decode == ar")


if __name__ == "__main__":
    main()
