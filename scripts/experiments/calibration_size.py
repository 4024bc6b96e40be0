"""How many calibration prompts ``--budget auto`` needs: its choice on subsets of one calibration.

Takes one calibration made on many prompts (``python -m dominotree calibrate-budget --per-category
16 --out FILE``: all 48 of ``assets/prompts/calibrate.jsonl``, categories interleaved) and the
verify-cost profile beside it, cuts the rounds into prompts (a round whose start is not after the
last one's opens the next prompt; the count must equal the file's ``meta.prompts``) and, for each
N per category, asks ``auto.budget`` again on

- the first N prompts of each category (what ``--per-category N`` would have decoded), and
- ``--draws`` bootstrap draws of N prompts from each category (with replacement, seeded, so the
  spread stands for new prompts of the same kind, not for re-shuffles of these): how often the
  choice is a tree, and the spread of the best tree's predicted speedup.

Only acceptance and the per-round times are subset; the grid medians (draft, build and verify times
at each budget) stay the whole file's, so the spread measured is the sample's text, not the
clock. Prints a markdown table.

    PYTHONPATH=. .venv/bin/python scripts/experiments/calibration_size.py CAL.json COST_MODEL.json \
        [--draws 400] [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import statistics
from dataclasses import replace

from dominotree.auto.budget import _choose, curve, load_calibration
from dominotree.auto.costmodel import load_cost_model

CATEGORIES = 3      # the calibration set's chat, code, math, interleaved


def prompt_spans(starts: list[int]) -> list[range]:
    """Index ranges of consecutive rounds of one prompt (starts rise within a prompt)."""
    cuts = [0] + [i for i in range(1, len(starts)) if starts[i] <= starts[i - 1]] + [len(starts)]
    return [range(a, b) for a, b in zip(cuts, cuts[1:])]


def subset(cal, spans, ar_spans, picks: list[int]):
    """The calibration restricted to the prompts ``picks`` (indices into the file's prompt order)."""
    rows = [i for p in picks for i in spans[p]]
    ar_rows = [i for p in picks for i in ar_spans[p]]
    return replace(cal, starts=[cal.starts[i] for i in rows], accept=[cal.accept[i] for i in rows],
                   verify_ms=None if cal.verify_ms is None else [cal.verify_ms[i] for i in rows],
                   ar_starts=[cal.ar_starts[i] for i in ar_rows], ar_ms=[cal.ar_ms[i] for i in ar_rows])


def verdict(cal, cm) -> tuple[int, float, float]:
    """(auto's budget, the best tree's predicted speedup, tau at budget 3)."""
    rows = curve(cal, cm)
    best = max(rows[1:], key=lambda r: (r["predicted_tokens_per_s"], -r["budget"]))
    return _choose(rows), best["speedup"], rows[3]["tau"] if len(rows) > 3 else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("calibration")
    ap.add_argument("cost_model")
    ap.add_argument("--draws", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    cal, cm = load_calibration(a.calibration), load_cost_model(a.cost_model)
    spans, ar_spans = prompt_spans(cal.starts), prompt_spans(cal.ar_starts)
    n = cal.meta.get("prompts")
    if len(spans) != n or len(ar_spans) != n or n % CATEGORIES:
        raise SystemExit(f"cut {len(spans)} tree / {len(ar_spans)} ar prompts, the file says {n}: "
                         "not a calibration this script can split")
    per_cat = n // CATEGORIES
    by_cat = [list(range(c, n, CATEGORIES)) for c in range(CATEGORIES)]
    rng = random.Random(a.seed)
    b, s, t = verdict(cal, cm)
    print(f"all {n} prompts ({len(cal.starts)} rounds): auto budget {b}, best tree predicted {s:.3f}x, tau@3 {t:.2f}\n")
    print("| per category | prompts | first N: auto | its best tree | bootstrap draws: a tree | predicted speedup "
          "(median, 10-90 %) | tau@3 (10-90 %) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for k in range(2, per_cat + 1):
        b, s, _ = verdict(subset(cal, spans, ar_spans, [p for grp in zip(*(c[:k] for c in by_cat)) for p in grp]), cm)
        draws = [verdict(subset(cal, spans, ar_spans, [p for c in by_cat for p in rng.choices(c, k=k)]), cm)
                 for _ in range(a.draws)]
        sp, tau = sorted(d[1] for d in draws), sorted(d[2] for d in draws)
        q = lambda xs, f: xs[min(len(xs) - 1, int(f * len(xs)))]   # noqa: E731
        tree = sum(d[0] > 0 for d in draws) / len(draws)
        print(f"| {k} | {CATEGORIES * k} | {b or 'plain'} | {s:.3f}x | {tree:.0%} | {statistics.median(sp):.3f}x "
              f"({q(sp, .1):.3f}-{q(sp, .9):.3f}) | {statistics.median(tau):.2f} ({q(tau, .1):.2f}-{q(tau, .9):.2f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
