"""Interleaved A/B of the round on the default weights: the verify's lazy LM head (``TreeRows``:
head and draw on the rows the accept walk reads) against the all-rows head it replaced, at small
and full budgets, in one process on the same prompts. Outputs are == in every pair (asserted);
the figures are per-round verify ms and tokens/s, medians over prompts, and their ratios.

    HF_HUB_OFFLINE=1 flock /tmp/cpu.lock .venv/bin/python scripts/experiments/round_ab.py --prompts 12 \
        > results/round-floor-zen5/round_ab.txt
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import dominotree.decode as D  # noqa: E402
from dominotree.config import DecodeConfig, TreeConfig  # noqa: E402
from dominotree.machine import hardware_info  # noqa: E402
from dominotree.presets import load_pair  # noqa: E402
from dominotree.promptfiles import load_assets  # noqa: E402
from dominotree.verify import TreeRows  # noqa: E402


class AllRows(TreeRows):
    """The verify before the lazy head: every row's head and draw at once, then the walk."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.read_all()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--budgets", default="3,16")
    a = ap.parse_args()
    torch.set_num_threads(2)
    pair = load_pair("smollm2")
    dec = D.Decoder(pair, annotate=False)
    prompts = [q.turns[0] for q in load_assets("eval")[:a.prompts]]
    heads = {"lazy": TreeRows, "all rows": AllRows}
    budgets = [int(b) for b in a.budgets.split(",")]
    dec.warm_up(methods=["dominotree"])
    res = {(b, h): {"verify_ms": [], "tok_s": []} for b in budgets for h in heads}
    for i, p in enumerate(prompts):
        for b in budgets:
            order = list(heads) if i % 2 == 0 else list(heads)[::-1]        # alternate who goes first
            outs = {}
            for h in order:
                D.TreeRows = heads[h]
                try:
                    tr = dec.generate(p, DecodeConfig(method="dominotree", max_new_tokens=a.max_new_tokens,
                                                      stop_at_eos=False, tree=TreeConfig(budget=b)))
                finally:
                    D.TreeRows = TreeRows
                outs[h] = tr.token_ids
                res[(b, h)]["verify_ms"].append(statistics.mean(r.stage_ms["verify"] for r in tr.rounds))
                res[(b, h)]["tok_s"].append(tr.tokens_per_s)
            assert outs["lazy"] == outs["all rows"], (p, b)
    print(f"# {hardware_info('cpu')}; {len(prompts)} held-out prompts x {a.max_new_tokens} tokens, default weights "
          f"({pair.target.weights}), T = 0, dominotree; outputs == in every pair")
    print(f"{'budget':>6} {'head':>9} {'verify ms':>10} {'tok/s':>8}")
    summary = {}
    for b in budgets:
        for h in heads:
            v, t = statistics.median(res[(b, h)]["verify_ms"]), statistics.median(res[(b, h)]["tok_s"])
            summary[f"{b}/{h}"] = {"verify_ms": round(v, 3), "tokens_per_s": round(t, 2)}
            print(f"{b:>6} {h:>9} {v:>10.2f} {t:>8.1f}")
        ratio = statistics.median(x / y for x, y in zip(res[(b, "lazy")]["tok_s"], res[(b, "all rows")]["tok_s"]))
        summary[f"{b}/lazy_vs_all_rows_tok_s"] = round(ratio, 4)
        print(f"budget {b}: lazy head tok/s = {ratio:.3f}x the all-rows head (median of per-prompt ratios)")
    print(json.dumps({"hardware": hardware_info("cpu"), "prompts": len(prompts), "summary": summary}))


if __name__ == "__main__":
    main()
