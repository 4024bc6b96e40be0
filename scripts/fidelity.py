"""How close each target-weights setting of the embedded target is to its float32 weights.

    flock /tmp/cpu.lock .venv/bin/python scripts/fidelity.py --out results/fidelity/zen4.json

Losslessness is per setting (every method equals that setting's own ``ar``); this measures what a
setting costs against the float32 model itself. Sequences: each held-out prompt (chat template)
followed by the float32 target's greedy continuation (``--new`` tokens). Every setting reads the
same sequences teacher-forced in one forward; per continuation position it reports
- top-1: the share of positions whose argmax equals float32's (the greedy token),
- KL: mean KL(float32 || setting) of the next-token distributions, in nats,
- gen-equal: the share of prompts whose own greedy continuation equals float32's token for token.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from dominotree.bench.datasets import load_prompts  # noqa: E402
from dominotree.machine import hardware_info  # noqa: E402
from dominotree.config import DecodeConfig  # noqa: E402
from dominotree.decode import Decoder  # noqa: E402
from dominotree.presets import Pair, load_target, preset_paths  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", default="float32,bf16,int4,int4-q8", help="comma list; float32 is the reference")
    ap.add_argument("--limit", type=int, default=4, help="held-out prompts per category")
    ap.add_argument("--new", type=int, default=48)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    paths = preset_paths("smollm2")
    settings = [w for w in a.weights.split(",") if w]
    if settings[0] != "float32":
        settings.insert(0, "float32")
    prompts = load_prompts(dataset="chat,math,code", limit=a.limit)
    seqs, gens, rows = [], {}, {}
    for w in settings:
        dtype = torch.bfloat16 if w == "bf16" else torch.float32
        tgt = load_target(paths["target"], dtype, weights=w, gguf=paths["gguf"])
        dec = Decoder(Pair(tgt, name="smollm2", paths=paths), annotate=False)
        gens[w] = []
        for p in prompts:
            ids = dec.encode_prompt(p.turns[0])
            gens[w].append(dec.generate(ids, DecodeConfig(method="ar", max_new_tokens=a.new, stop_at_eos=False)).token_ids)
            if w == "float32":
                seqs.append((ids, gens[w][-1]))
        logits = []
        with torch.inference_mode():
            for ids, cont in seqs:
                full = torch.tensor([ids + cont])
                out = tgt.forward(full, torch.arange(full.shape[1])[None], tgt.new_cache())
                logits.append(out.logits[len(ids) - 1:-1].float())     # the positions predicting cont
        rows[w] = logits
        print(f"{w}: done", file=sys.stderr, flush=True)
    ref = rows["float32"]
    table = {}
    for w in settings:
        agree = kl = n = 0
        for r, g in zip(ref, rows[w]):
            lp_r, lp_g = torch.log_softmax(r, -1), torch.log_softmax(g, -1)
            agree += int((r.argmax(-1) == g.argmax(-1)).sum())
            kl += float((lp_r.exp() * (lp_r - lp_g)).sum())
            n += r.shape[0]
        same = sum(x == y for x, y in zip(gens[w], gens["float32"]))
        table[w] = {"top1": round(agree / n, 4), "kl": round(kl / n, 5), "gen_equal": f"{same}/{len(prompts)}",
                    "positions": n}
    print(f"{'weights':10} {'top-1':>7} {'KL (nats)':>10} {'gen-equal':>10}")
    for w, r in table.items():
        print(f"{w:10} {r['top1']:7.4f} {r['kl']:10.5f} {r['gen_equal']:>10}")
    out = {"command": "python scripts/fidelity.py " + " ".join(sys.argv[1:]), "prompts": len(prompts),
           "new_tokens": a.new, "reference": "float32", "settings": table, "hardware": hardware_info("cpu")}
    print(json.dumps(out))
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
