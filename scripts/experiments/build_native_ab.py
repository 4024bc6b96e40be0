"""Interleaved A/B in one process: DominoTree's build on CPU with the heap in one C++ op
(``builders/native.py``, on) against the Python heap calling the same ops (off,
``DOMINOTREE_NATIVE_BUILD=0``). The 36 `eval` prompts, 48 tokens, draft vocabulary 8192, the order
of the arms alternating per prompt; outputs, trees and menus must be `==`.

    PYTHONPATH=. .venv/bin/python scripts/experiments/build_native_ab.py > results/round-gate-zen3/build_native_ab.txt
"""
import os
import statistics

import torch

from dominotree.bench.datasets import load_prompts
from dominotree.builders import native
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.decode import Decoder
from dominotree.machine import hardware_info
from dominotree.presets import load_pair

torch.set_num_threads(2)
pair = load_pair("smollm2")
dec = Decoder(pair, annotate=False)
dec.warm_up()
hw = hardware_info()
print(f"# {hw['cpu']} ({hw['cpu_signature']}; {hw['cpu_isa']}), torch {torch.__version__}, 2 threads")
prompts = load_prompts(dataset="eval")
for budget in (2, 3, 16):
    cfg = DecodeConfig(method="dominotree", max_new_tokens=48, tree=TreeConfig(budget=budget), draft_vocab=8192,
                       builder="graph")
    arms = {"off": [], "on": []}
    for i, p in enumerate(prompts):
        out = {}
        for arm in (("off", "on") if i % 2 == 0 else ("on", "off")):
            os.environ[native.NATIVE_ENV] = "1" if arm == "on" else "0"
            out[arm] = t = dec.generate(p.turns[0], cfg)
            arms[arm].append(t)
        a, b = out["off"], out["on"]
        assert a.token_ids == b.token_ids
        assert all(x.tree.tokens == y.tree.tokens and x.tree.parents == y.tree.parents and x.tree.scores == y.tree.scores
                   and x.tree.marg_scores == y.tree.marg_scores and [vars(m) for m in x.menus] == [vars(m) for m in y.menus]
                   for x, y in zip(a.rounds, b.rounds))
        assert all(r.extra["capture"]["mode"] == "native" for r in b.rounds)
    os.environ.pop(native.NATIVE_ENV, None)
    build = {k: statistics.median(r.stage_ms["build"] for t in v for r in t.rounds) for k, v in arms.items()}
    rnd = {k: statistics.median(sum(r.stage_ms.values()) for t in v for r in t.rounds) for k, v in arms.items()}
    ratio = statistics.median(len(y.token_ids) / y.wall_s / (len(x.token_ids) / x.wall_s) for x, y in zip(arms["off"], arms["on"]))
    print(f"dominotree@{budget}: build ms median off {build['off']:.3f} on {build['on']:.3f}; round ms median "
          f"off {rnd['off']:.2f} on {rnd['on']:.2f}; per-prompt tok/s on/off median {ratio:.3f}; outputs, trees and menus ==",
          flush=True)
