"""Interleaved A/B in one process: the drafter's last layer on every block row (off) vs its output
product and MLP on the rows the tree reads only (on, ``Drafter.forward(keep=)``). The 36 `eval`
prompts, 48 tokens, the order of the arms alternating per prompt; outputs and trees must be `==`.

    PYTHONPATH=. .venv/bin/python scripts/experiments/draft_keep_ab.py > results/round-gate-zen3/draft_keep_ab.txt
"""
import statistics

import torch

from dominotree.presets import load_pair
from dominotree.decode import Decoder
from dominotree.models import draftcpu
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.bench.datasets import load_prompts
torch.set_num_threads(2)
pair = load_pair("smollm2")
dec = Decoder(pair, annotate=False)
dec.warm_up()
orig = draftcpu.forward


def no_keep(drafter, weights, feats, noise, cos, sin, cache=None, keep=None):
    """``draftcpu.forward`` with every block row through the last layer (as before ``keep``)."""
    return orig(drafter, weights, feats, noise, cos, sin, cache)


ps = load_prompts(dataset="eval")
for meth, B in (("dominotree", 2), ("dominotree", 3), ("ddtree", 3), ("dominotree", 16)):
    cfg = DecodeConfig(method=meth, max_new_tokens=48, tree=TreeConfig(budget=B), draft_vocab=8192, builder="graph")
    arms = {"off": [], "on": []}
    for i, p in enumerate(ps):
        order = ("off", "on") if i % 2 == 0 else ("on", "off")
        out = {}
        for arm in order:
            draftcpu.forward = no_keep if arm == "off" else orig
            t = dec.generate(p.turns[0], cfg)
            out[arm] = t
            arms[arm].append((t.wall_s, len(t.token_ids), [r.stage_ms["draft"] for r in t.rounds]))
        a, b = out["off"], out["on"]
        assert a.token_ids == b.token_ids
        assert all(x.tree.tokens == y.tree.tokens and x.tree.scores == y.tree.scores for x, y in zip(a.rounds, b.rounds))
    draftcpu.forward = orig
    d_off = statistics.median([m for _, _, ds in arms["off"] for m in ds]); d_on = statistics.median([m for _, _, ds in arms["on"] for m in ds])
    tps = {k: statistics.median(n / w for w, n, _ in v) for k, v in arms.items()}
    ratio = statistics.median(n2 / w2 / (n1 / w1) for (w1, n1, _), (w2, n2, _) in zip(arms["off"], arms["on"]))
    print(f"{meth}@{B}: draft ms median off {d_off:.3f} on {d_on:.3f}; tok/s median off {tps['off']:.1f} on {tps['on']:.1f}; per-prompt on/off median {ratio:.3f}; outputs and trees ==", flush=True)
