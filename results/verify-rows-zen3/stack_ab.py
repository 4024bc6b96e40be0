"""q4_stack (every layer in one op) against one q4_block op a layer, in one process, interleaved:
one int4-q8 target forward of 1 and 4 rows after 256 tokens, 11 rounds of 15 forwards each, medians.

    flock /tmp/heavy.lock .venv/bin/python results/verify-rows-zen3/stack_ab.py
"""
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import fast_curves as fc  # noqa: E402  (sets HF_HUB_OFFLINE)
import torch  # noqa: E402

from dominotree.models import fast as fast_mod  # noqa: E402
from dominotree.presets import preset_paths  # noqa: E402

torch.set_num_threads(2)
tgt = fc.load(preset_paths("smollm2"), "int4-q8", "fast")
res = {}
for rep in range(12):
    for n in (1, 4):
        for stack in (False, True):
            fast_mod.STACK = stack
            ts = [fc.forward_ms(tgt, 256, n) for _ in range(15)]
            if rep:                                   # round 0 is the warm-up
                res.setdefault((n, stack), []).append(statistics.median(ts))
print(f"CPU: {fc.cpu_name()}, 2 threads; torch {torch.__version__}")
for n in (1, 4):
    a, b = statistics.median(res[(n, False)]), statistics.median(res[(n, True)])
    print(f"rows {n}: one op a layer {a:.3f} ms, q4_stack {b:.3f} ms, ratio {b / a:.3f}")
