"""Per-forward cost curves of the embedded target and ar vs transformers ``generate``.

    flock /tmp/cpu.lock .venv/bin/python scripts/fast_curves.py --out results/fast-forward

1. One target forward of n rows (1, 2, 4, 8, 17, 33; a chain with the causal mask, after a
   ``--context``-token prefill, cache cut back after each) for every weights setting on the fast
   forward (with and without the C++ kernels: "torch-ops", "torch int4") and, for bf16 / float32,
   on the transformers forward. Configurations interleave per
   repeat; medians over ``--reps`` after one warm-up pass.
2. ``ar`` tokens/s per weights setting (fast forward) against ``hf-generate`` (transformers
   ``generate``, bf16), interleaved per prompt, greedy, ``--new`` tokens, median over prompts.

Prints the tables and writes ``curves.txt`` (the same text) and ``curves.json`` to ``--out``.

On a CPU with AMX-INT8, ``--amx-ab`` measures the default int4-q8 target with and without the
AMX path (``kernels/q8amx.cpp``, switched per forward in the same process, every row count on
AMX) and prints where AMX starts to pay, the cut-off ``DOMINOTREE_AMX_MIN_ROWS`` should take;
``--amx-min-rows N`` runs the AMX arm as the automatic split does with that cut-off (whole 16-row
tiles and a last one of at least N rows on AMX, the rest on VNNI), e.g. the default's 5:

    flock /tmp/heavy.lock .venv/bin/python scripts/fast_curves.py --amx-ab --out results/amx
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from dominotree.bench.hf_generate import hf_generate, load_hf_model  # noqa: E402
from dominotree.config import DecodeConfig  # noqa: E402
from dominotree.decode import Decoder  # noqa: E402
from dominotree.models.target import cache_truncate  # noqa: E402
from dominotree.presets import Pair, load_target, preset_paths  # noqa: E402

ROWS = (1, 2, 4, 8, 17, 33)
# label -> (weights, forward, how): "" = as the CLI runs it; "torch-ops" = the fast forward without
# the fused C++ layer steps; "torch-int4" = torch's int4 kernel with bf16 activations (the earlier int4)
CONFIGS = {
    "int4-q8 / fast": ("int4-q8", "fast", ""),
    "int4 / fast": ("int4", "fast", ""),
    "int4 / fast, torch int4 (bf16 act.)": ("int4", "fast", "torch-int4"),
    "float32 / fast": ("float32", "fast", ""),
    "float32 / fast, torch ops": ("float32", "fast", "torch-ops"),
    "bf16 / fast": ("bf16", "fast", ""),
    "bf16 / hf": ("bf16", "hf", ""),
    "float32 / hf": ("float32", "hf", ""),
    "int4-q8 / fast, AMX": ("int4-q8", "fast", "amx"),     # every row count on AMX (--amx-ab)
}
AMX_AB = ("int4-q8 / fast", "int4-q8 / fast, AMX")
AMX_ROWS = (1, 2, 3, 4, 5, 6, 8, 12, 16, 17, 24, 32, 33, 48, 64)
PROMPTS = ["What is 17 times 23?", "Write a Python function that reverses a string.",
           "Give me three tips for better sleep.", "Explain what a hash table is in two sentences.",
           "Translate 'good morning' into French and Spanish."]


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load(paths, weights, forward, how=""):
    tgt = load_target(paths["target"], torch.float32, forward=forward, weights=weights, gguf=paths.get("gguf"))
    if how == "torch-ops":
        tgt.fast.kernels = tgt.fast.row_attention = False
    elif how == "torch-int4":
        from dominotree.models.fast import FastModel
        from dominotree.models.quant import gguf_q4_1
        from dominotree.models.quantcpu import int4_linear
        cfg = tgt.model.config
        blocks = gguf_q4_1(paths["gguf"], cfg.num_attention_heads, cfg.num_key_value_heads)
        src = load_target(paths["target"], torch.float32, forward="hf").model
        tgt.fast = FastModel(src, linear=int4_linear(blocks, torch.bfloat16), dtype=torch.bfloat16)
    return tgt


@torch.inference_mode()
def forward_ms(tgt, context: int, n: int) -> float:
    cache = getattr(tgt, "_bench_cache", None)
    if cache is None:
        cache = tgt.new_cache()
        ids = torch.randint(100, 20000, (1, context), generator=torch.Generator().manual_seed(0))
        tgt.forward(ids, torch.arange(context)[None], cache, last_only=True)
        tgt._bench_cache = cache
    ids = torch.randint(100, 20000, (1, n), generator=torch.Generator().manual_seed(n))
    pos = torch.arange(context, context + n)[None]
    mask = None
    if n > 1:   # the verify's 4D mask (here a chain), as decode passes it for a tree
        keep = torch.ones(n, context + n, dtype=torch.bool).tril(context)
        mask = torch.zeros(1, 1, n, context + n, dtype=tgt.dtype).masked_fill(~keep, torch.finfo(tgt.dtype).min)
    t0 = time.perf_counter()
    tgt.forward(ids, pos, cache, mask=mask)
    dt = (time.perf_counter() - t0) * 1e3
    cache_truncate(cache, context)
    return dt


def amx_switch(configs, min_rows: int = 1):
    """``switch(config)``: the AMX path on for the "AMX" configuration (from one row), off for the
    others; None when no configuration asks for AMX. Exits with the reason where AMX cannot run."""
    if not any(CONFIGS[c][2] == "amx" for c in configs):
        return None
    from dominotree.models.quantcpu import amx_why, set_amx
    why = amx_why()
    if why is not None:
        raise SystemExit(f"the AMX configuration cannot run here: {why}")
    return lambda c: set_amx(min_rows if CONFIGS[c][2] == "amx" else 0)


def amx_crossover(med: dict, rows) -> dict:
    """AMX / VNNI time per row count, and the fewest rows from which AMX is faster at every
    measured count (None: never)."""
    ratio = {n: med[AMX_AB[1]][n] / med[AMX_AB[0]][n] for n in rows}
    cut = None
    for n in sorted(rows, reverse=True):
        if ratio[n] >= 1.0:
            break
        cut = n
    return {"ratio": ratio, "min_rows": cut}


def curves(paths, configs, context: int, reps: int, lines: list, rows=ROWS, amx_min_rows: int = 1) -> dict:
    switch = amx_switch(configs, amx_min_rows)
    tgts = {c: load(paths, *CONFIGS[c]) for c in configs}
    times = {(c, n): [] for c in configs for n in rows}
    for rep in range(reps + 1):
        for c in configs[rep % len(configs):] + configs[:rep % len(configs)]:
            if switch is not None:
                switch(c)
            for n in rows:
                t = forward_ms(tgts[c], context, n)
                if rep:
                    times[(c, n)].append(t)
    med = {c: {n: statistics.median(times[(c, n)]) for n in rows} for c in configs}
    lines.append(f"per-forward ms (median of {reps}), context {context}; rows: " + " ".join(f"{n:>7}" for n in rows))
    for name, row in med.items():
        lines.append(f"  {name:<36}" + " ".join(f"{row[n]:7.2f}" for n in rows))
        lines.append(f"  {'... in one-row steps':<36}" + " ".join(f"{row[n] / row[rows[0]]:7.2f}" for n in rows))
    if switch is not None:
        switch(AMX_AB[0])
    return med


def ar_vs_generate(paths, weights_list, new: int, lines: list) -> dict:
    from dominotree.models.smollm2 import ensure_smollm2  # noqa: F401 - paths come from the preset
    decs = {w: Decoder(Pair(load(paths, *CONFIGS[w]), name="smollm2"), annotate=False) for w in weights_list}
    hf = load_hf_model(paths["target"])
    eos = next(iter(decs.values())).target.eos_ids
    tps = {k: [] for k in [*weights_list, "hf-generate"]}
    same = {w: 0 for w in weights_list}
    for p_i, prompt in enumerate([PROMPTS[0]] + PROMPTS):   # the first is a warm-up
        ids = next(iter(decs.values())).encode_prompt(prompt)
        order = [*weights_list, "hf-generate"]
        order = order[p_i % len(order):] + order[:p_i % len(order)]
        gen = None
        outs = {}
        for k in order:
            if k == "hf-generate":
                r = hf_generate(hf, ids, new, eos_ids=eos)
                gen = r["token_ids"]
                t = r["tokens_per_s"]
            else:
                tr = decs[k].generate(ids, DecodeConfig(method="ar", max_new_tokens=new))
                outs[k] = tr.token_ids
                t = tr.tokens_per_s
            if p_i:
                tps[k].append(t)
        if p_i:
            for w in weights_list:
                same[w] += outs[w] == gen[:len(outs[w])]
    med = {k: statistics.median(v) for k, v in tps.items()}
    base = med["hf-generate"]
    lines.append(f"ar tokens/s (median over {len(PROMPTS)} prompts, {new} new tokens, greedy) vs hf-generate (bf16):")
    for k, v in med.items():
        extra = "" if k == "hf-generate" else f"  x{v / base:.2f} of hf-generate; output == hf-generate on {same[k]}/{len(PROMPTS)}"
        lines.append(f"  {('ar ' + k) if k != 'hf-generate' else k:<40} {v:7.1f} tok/s{extra}")
    return {"tokens_per_s": med, "ratio": {k: med[k] / base for k in weights_list}, "same_as_hf_generate": same}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="results/fast-forward")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--skip-ar", action="store_true")
    ap.add_argument("--configs", default=";".join(c for c in CONFIGS if CONFIGS[c][2] != "amx"), help="the curves' labels separated by ';' "
                    "(some labels hold commas; default: all; e.g. 'int4 / fast;bf16 / fast')")
    ap.add_argument("--rows", default=None, help="comma list of row counts (default 1,2,4,8,17,33; "
                    "with --amx-ab 1-64 in 15 steps)")
    ap.add_argument("--amx-ab", action="store_true", help="int4-q8 with and without AMX, interleaved in one "
                    "process (a CPU with AMX-INT8), and where AMX starts to pay; implies --skip-ar")
    ap.add_argument("--amx-min-rows", type=int, default=1, help="the AMX arm's cut-off (default 1: every row "
                    "count on AMX; 5: as the automatic split runs by default)")
    a = ap.parse_args(argv)
    if a.amx_ab:
        a.configs, a.skip_ar = ";".join(AMX_AB), True
    if a.rows is None:
        a.rows = ",".join(map(str, AMX_ROWS if a.amx_ab else ROWS))
    configs = [c.strip() for c in a.configs.split(";") if c.strip()]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")
    rows = tuple(int(r) for r in a.rows.split(","))
    torch.set_num_threads(a.threads)
    paths = preset_paths("smollm2")
    lines = [f"CPU: {cpu_name()}, {a.threads} threads; torch {torch.__version__}",
             f"command: {' '.join(sys.argv)}"]
    res = {"cpu": cpu_name(), "threads": a.threads, "torch": torch.__version__}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)

    def save():
        text = "\n".join(lines)
        (out / "curves.txt").write_text(text + "\n")
        (out / "curves.json").write_text(json.dumps(res, indent=1) + "\n")
        print(text, flush=True)

    res["curves"] = curves(paths, configs, a.context, a.reps, lines, rows, a.amx_min_rows)
    res["amx_min_rows"] = a.amx_min_rows
    if a.amx_ab:
        res["amx"] = amx_crossover(res["curves"], rows)
        lines.append("AMX / VNNI per rows: " + " ".join(f"{n}:{r:.2f}" for n, r in res["amx"]["ratio"].items()))
        lines.append(f"AMX pays from {res['amx']['min_rows']} rows on (DOMINOTREE_AMX_MIN_ROWS)")
    save()
    if not a.skip_ar:
        res["ar"] = ar_vs_generate(paths, [c for c in configs if CONFIGS[c][1] == "fast"], a.new, lines)
        save()
    print(json.dumps({"ratio": res.get("ar", {}).get("ratio"), "amx": res.get("amx")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
