"""The fast forward's attention op alone (``kernels/attention.cpp``) at the embedded target's
shapes: ms for one forward's 30 layers (9 query heads, 3 KV heads, head size 64) for n query
rows after a context, the verify's causal chain mask as a float mask, median of ``--reps``.

    flock /tmp/heavy.lock .venv/bin/python scripts/attention_rows.py --rows 1,4,17,33 --context 256
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from dominotree.models import cpuext  # noqa: E402

LAYERS, HEADS, KV_HEADS, HEAD_DIM = 30, 9, 3, 64


def attention_ms(n: int, context: int, reps: int) -> float:
    g = torch.Generator().manual_seed(n)
    kv = torch.randn(2, KV_HEADS, context + n + 8, HEAD_DIM, generator=g)
    q = torch.randn(HEADS, n, HEAD_DIM, generator=g)
    L = context + n
    keep = torch.ones(n, L, dtype=torch.bool).tril(context)
    mask = torch.zeros(n, L).masked_fill(~keep, torch.finfo(torch.float32).min) if n > 1 else None
    op = torch.ops.dominotree_attn.attention

    def once() -> float:
        t = time.perf_counter()
        for _ in range(LAYERS):
            op(q, kv, context, mask, n == 1)
        return (time.perf_counter() - t) * 1e3

    for _ in range(3):
        once()
    return statistics.median(once() for _ in range(reps))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1,4,17,33")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--reps", type=int, default=31)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    why = cpuext.available()
    if why is not None:
        raise SystemExit(f"the attention kernel is not available here: {why}")
    torch.set_num_threads(a.threads)
    print(f"CPU: {cpuext.cpu_model()}, {a.threads} threads; context {a.context}; ms per forward ({LAYERS} layers)")
    for n in (int(r) for r in a.rows.split(",")):
        print(f"  {n:>3} rows: {attention_ms(n, a.context, a.reps):7.3f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
