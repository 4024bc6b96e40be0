"""T = 0 decodes of every method against ``ar`` on one device, tie-aware, for the GPU check.

    python scripts/gpu_decode.py --device cuda --json-out OUT/decode.json
    python scripts/gpu_decode.py --device cpu --quick             # the plumbing, on the CPU

Two pairs, no download: ``random-tiny`` (the preset, float32), and the embedded drafters
(``assets/drafters``, trained) on a random target with SmolLM2-135M's shapes (the real target's
GGUF is a 94 MB package the GPU machine has not got), so the drafters' shapes and code paths run
on the device though their proposals are mostly rejected. Each method's output is compared with
``ar``'s; where they first differ, a fresh target forward on the shared prefix gives the logit gap
and the method token's rank (``dominotree.ties.gap_at``, as the bench's ``ties.csv``): a gap within
``ROUNDING_GAP`` with rank <= 1 is a rounding tie (the n-row verify and the one-row step round
differently: CUDA has no row-invariant kernels), anything else is a real difference and fails.
On CUDA the graph and frontier builders must also report ``captured`` on every round.

The JSON file is rewritten after every decode (a timeout keeps what finished); one JSON line
is printed last. Imports torch, transformers and dominotree only.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
               rope_theta=100000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, initializer_range=0.1)
GRAPH_BUILDERS = ("graph", "frontier")


def embedded_pair(device: str, dtype: torch.dtype):
    """The shipped drafters on a random SmolLM2-shaped target (seed 0)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from dominotree.models.checkpoint import check_pair, load_drafter
    from dominotree.models.fast import FastModel, fast_support
    from dominotree.models.target import Target
    from dominotree.presets import EMBEDDED_DRAFTER_DIRS, Pair
    cfg = LlamaConfig(**SMOLLM2)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype).eval()
    fast = FastModel(model) if fast_support(cfg) is None else None
    pair = Pair(Target(model, None, name="smollm2-shaped-random", fast=fast), name="embedded-drafters")
    for kind in ("dflash", "domino"):
        d = load_drafter(EMBEDDED_DRAFTER_DIRS[kind], dtype=dtype, device=device)
        check_pair("dominotree" if kind == "domino" else "ddtree", d.cfg, pair.target)
        pair.drafters[kind] = d
    return pair


def runs(quick: bool) -> list[tuple[str, str | None]]:
    """(method, builder) pairs: every method without a cost model; dominotree on each builder."""
    from dominotree.config import BUILDERS, METHODS
    from dominotree.methods import METHOD_TABLE
    if quick:
        return [("dominotree", "graph"), ("dominotree", "frontier"), ("condstatic", None)]
    out = []
    for m in METHODS:
        if m == "ar" or METHOD_TABLE[m].stop == "cost":
            continue
        out += [(m, b) for b in BUILDERS] if m == "dominotree" else [(m, None)]
    return out


def check(dec, prompt_ids: list[int], ar_ids: list[int], method: str, builder, max_new: int, device: str) -> dict:
    from dominotree.config import DecodeConfig
    from dominotree.ties import ROUNDING_GAP, gap_at
    rec = {"method": method, "builder": builder}
    try:
        t0 = time.perf_counter()
        tr = dec.generate(prompt_ids, DecodeConfig(method=method, builder=builder, max_new_tokens=max_new,
                                                   stop_at_eos=False))
        rec["s"] = round(time.perf_counter() - t0, 3)
    except Exception as e:  # noqa: BLE001 - every method is reported, then the check fails
        rec.update(verdict="error", error=f"{type(e).__name__}: {e}"[:500])
        return rec
    ids = tr.token_ids
    rec["tau"] = round(len(ids) / max(1, len(tr.rounds)), 3)
    caps = sorted({r.extra["capture"]["mode"] for r in tr.rounds if "capture" in r.extra})
    rec["capture"] = caps
    k = next((i for i, (a, b) in enumerate(zip(ar_ids, ids)) if a != b), None)
    if k is None and len(ids) == len(ar_ids):
        rec["verdict"] = "equal"
    elif k is None:
        rec.update(verdict="DIFFERENT", error=f"lengths differ: {len(ids)} vs ar {len(ar_ids)}")
    else:
        gap, rank = gap_at(dec, prompt_ids + ar_ids[:k], ar_ids[k], ids[k])
        tie = abs(gap) <= ROUNDING_GAP and rank <= 1
        rec.update(verdict="tie" if tie else "DIFFERENT", first_diff=k, ar_token=ar_ids[k], method_token=ids[k],
                   gap=gap, rank=rank)
    if device.startswith("cuda") and (builder or "") in GRAPH_BUILDERS and caps != ["captured"]:
        rec.update(verdict="not-captured" if rec["verdict"] in ("equal", "tie") else rec["verdict"],
                   capture_reasons=sorted({str(r.extra["capture"].get("reason")) for r in tr.rounds}))
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--quick", action="store_true", help="3 runs, 8 tokens (the CPU plumbing check)")
    ap.add_argument("--pairs", default="random-tiny,embedded-drafters")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    import transformers

    from dominotree.config import DecodeConfig
    from dominotree.decode import Decoder
    from dominotree.presets import load_pair
    max_new = 8 if a.quick else a.max_new
    res = {"device": a.device, "torch": torch.__version__, "transformers": transformers.__version__,
           "dtype": "float32", "max_new_tokens": max_new, "pairs": {}}
    if a.device.startswith("cuda"):
        res["gpu"] = torch.cuda.get_device_name(0)

    def save():
        res["ok"] = all(r["verdict"] in ("equal", "tie") for p in res["pairs"].values() for r in p.get("runs", [])) \
            and all("error" not in p for p in res["pairs"].values())
        if a.json_out:
            Path(a.json_out).write_text(json.dumps(res, indent=1) + "\n")

    for name in [p.strip() for p in a.pairs.split(",") if p.strip()]:
        entry = res["pairs"][name] = {}
        try:
            if name == "random-tiny":
                dec = Decoder(load_pair("random-tiny", dtype="float32", device=a.device))
                prompt = dec.encode_prompt("Count: one two three four")
            else:
                dec = Decoder(embedded_pair(a.device, torch.float32))
                prompt = list(range(1000, 1032))
            ar = dec.generate(prompt, DecodeConfig(method="ar", max_new_tokens=max_new, stop_at_eos=False)).token_ids
        except Exception as e:  # noqa: BLE001 - reported, and the check fails
            entry["error"] = f"{type(e).__name__}: {e}"[:500]
            save()
            continue
        entry.update(prompt_len=len(prompt), ar_len=len(ar), runs=[])
        for method, builder in runs(a.quick):
            entry["runs"].append(check(dec, prompt, ar, method, builder, max_new, a.device))
            save()
    save()
    print(json.dumps({"ok": res["ok"], "verdicts": {n: {f"{r['method']}/{r['builder'] or '-'}": r["verdict"]
                                                        for r in p.get("runs", [])} | ({"error": p["error"]} if "error" in p else {})
                                                    for n, p in res["pairs"].items()}}))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
