"""Could a per-round switch between a tree and a plain step make trees pay on a CPU?

At T = 0 the decoded text is fixed, so what a DominoTree round started at any position would commit
is a property of the position. This script measures it at every position of every prompt's `ar`
output: one budget-16 tree (whose first ``b`` pops are the budget-``b`` tree, the prefix property
of ``auto/budget.py``), verified, then the decode advances by one token as `ar` does. With the
round costs measured in the same run (real decodes of `ar` and of `dominotree` at each budget,
interleaved per prompt), it replays policies over those positions:

- fixed budgets and plain decoding (what `--budget auto` chooses between);
- the oracle: per position the best of a plain step and a round at any budget, knowing what each
  would commit (a ceiling no rule reaches);
- rules that decide before drafting: the target's probability of the root token (known from the
  previous step) above a threshold; after a round that committed one token, k plain steps;
- a rule that decides after drafting and building: verify the budget whose predicted tokens per
  ms (1 + the sum of the tree's path probabilities) is highest, or only the root.

    PYTHONPATH=. .venv/bin/python scripts/experiments/round_gate.py --per-category 12 \
        --max-new-tokens 48 --out results/round-gate-zen3

Writes ``positions.jsonl.gz`` (a header line with the costs and the machine, then per prompt:
tokens, per position the commits at b = 1..16 and the signals) and ``summary.md`` (the costs, the
policies' speedups over `ar`); ``--replay`` writes the summary again from the positions.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
from pathlib import Path

import torch

from dominotree.auto.budget import prefix_accept
from dominotree.bench.datasets import load_prompts
from dominotree.builders import get_builder
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.decode import Decoder
from dominotree.machine import hardware_info
from dominotree.methods import usable_depths
from dominotree.models.childgru import child_gru
from dominotree.models.drafter import DraftCache
from dominotree.models.target import cache_compact
from dominotree.observe import StageClock
from dominotree.presets import load_pair
from dominotree.verify import TreeRows, sample, verify_tree

BUDGETS = (1, 2, 3, 4, 6, 8, 16)
STAGES = ("draft", "build", "verify", "commit")


def select(per_category: int):
    by: dict[str, list] = {}
    for p in load_prompts(dataset="eval"):
        by.setdefault(p.category, []).append(p)
    return [p for c in by for p in by[c][:per_category]]


def round_costs(dec: Decoder, prompts, n_tokens: int, vocab: int) -> dict[int, float]:
    """Mean ms of a round (its timed stages) per budget, 0 = `ar`, decoded interleaved per prompt."""
    ms: dict[int, list[float]] = {b: [] for b in (0, *BUDGETS)}
    for p in prompts:
        for b in ms:
            cfg = DecodeConfig(method="ar" if b == 0 else "dominotree", max_new_tokens=n_tokens,
                               tree=TreeConfig(budget=max(b, 1)), draft_vocab=0 if b == 0 else vocab,
                               builder="graph", stop_at_eos=False)
            t = dec.generate(p.turns[0], cfg)
            ms[b] += [sum(r.stage_ms[s] for s in STAGES) for r in t.rounds]
    return {b: statistics.fmean(v) for b, v in ms.items()}


@torch.inference_mode()
def positions(dec: Decoder, prompt_ids: list[int], n_tokens: int, vocab_size: int) -> dict:
    """Per position of the T = 0 output: tokens a round there commits at b = 1..16, and signals."""
    pair, tgt = dec.pair, dec.target
    drafter = pair.drafter_for("dominotree")
    cfg = DecodeConfig(method="dominotree", max_new_tokens=n_tokens, tree=TreeConfig(budget=16),
                       draft_vocab=vocab_size, builder="graph")
    vocab = dec.draft_vocab(vocab_size)
    child_gru(vocab.restrict(drafter), vocab.embed)
    builder, depths, taps = get_builder(cfg.builder), usable_depths(cfg), drafter.cfg.target_layer_ids
    cache, dcache = tgt.new_cache(), DraftCache()
    n = len(prompt_ids)
    out = tgt.forward(torch.tensor([prompt_ids]), torch.arange(n)[None], cache, taps=taps, last_only=True)
    root = sample(out.logits[-1:], 0.0, None)[0]
    conf = float(torch.softmax(out.logits[-1].float(), -1).max())
    feats, feat_pos, start = out.feats, torch.arange(n), n
    tokens, recs = [root], []
    for _ in range(n_tokens):
        block = dec.draft(drafter, root, start, feats, feat_pos, dcache, vocab, depths)
        built, _, _ = dec.build(cfg, drafter, block, root, start, builder, None, StageClock(tgt.device), vocab)
        tree = built.tree
        vout = verify_tree(tgt, cache, tree, start, taps, lazy_head=True)
        got = TreeRows(tgt, tree, vout, 0.0, None).read_all()
        recs.append({"commit": prefix_accept(tree, got, 16), "root_p": conf,
                     "scores": [round(float(s), 5) for s in tree.scores[1:]]})
        conf = float(torch.softmax(tgt.head_logits(vout.hidden[:1]).float()[0], -1).max())
        cache_compact(cache, start, [0])          # advance by one token, as ar
        feats, feat_pos = vout.feats[:, [0]], torch.arange(start, start + 1)
        root, start = got[0], start + 1
        tokens.append(root)
        if root in tgt.eos_ids:
            break
    return {"tokens": tokens, "positions": recs}


# --- policies over the recorded positions ------------------------------------------------------
def replay(rows: list[dict], cost: dict[int, float], policy) -> float:
    """Total ms to decode the recorded positions under ``policy(rows, p, state) -> budget`` (0: a
    plain step); ``state['last']`` is what the last tree round committed."""
    p, ms, state = 0, 0.0, {}
    while p < len(rows):
        b = policy(rows, p, state)
        step = 1 if b == 0 else rows[p]["commit"][b - 1]
        ms += cost[b]
        if b:
            state["last"] = step
        p += step
    return ms


def oracle(rows: list[dict], cost: dict[int, float], budgets) -> float:
    """Least ms to decode the positions choosing, per position, a plain step or a round at any of
    ``budgets``, knowing what each commits."""
    n = len(rows)
    best = [0.0] * (n + 1)
    for p in range(n - 1, -1, -1):
        best[p] = cost[0] + best[p + 1]
        for b in budgets:
            best[p] = min(best[p], cost[b] + best[min(n, p + rows[p]["commit"][b - 1])])
    return best[0]


def after_draft(cost):
    """Draft and build, then verify the budget (1-4) with the most predicted tokens per ms (1 + the
    sum of the tree's path probabilities), or the root only; ``cost[0]`` is then a plain step plus
    the draft and build it paid for nothing."""
    def policy(rows, p, state):
        e, best, pick = 1.0, 1.0 / cost[0], 0
        for b in range(1, 5):
            e += math.exp(rows[p]["scores"][b - 1])
            if b in cost and e / cost[b] > best:
                best, pick = e / cost[b], b
        return pick
    return policy


def backoff(k: int, b: int):
    """Rounds at ``b``; after a round that committed one token, ``k`` plain steps, then a round."""
    def policy(rows, p, state):
        if state.get("plain", 0) > 0:
            state["plain"] -= 1
            return 0
        if state.pop("last", None) == 1:
            state["plain"] = k - 1
            return 0
        return b
    return policy


def running_mean(alpha: float, probe: int, b: int, even: float):
    """Rounds at ``b`` while the request's running mean of tokens per round (an EMA, starting at
    ``even``) is at least ``even``, the round's cost in plain steps; else plain steps, with a round
    every ``probe`` of them to notice when the text turns predictable."""
    def policy(rows, p, state):
        ema = state.get("ema", even)
        if "last" in state:
            ema, state["since"] = (1 - alpha) * ema + alpha * state.pop("last"), 0
        state["ema"] = ema
        if ema >= even:
            return b
        state["since"] = state.get("since", 0) + 1
        return b if state["since"] >= probe else 0
    return policy


def policies(cost: dict[int, float], wasted_ms: float) -> dict:
    """name -> (policy, the costs it is replayed with)."""
    out = {"ar (plain steps)": (lambda r, p, s: 0, cost)}
    out.update({f"dominotree@{b}": ((lambda b: lambda r, p, s: b)(b), cost) for b in BUDGETS})
    for th in (0.5, 0.7, 0.9, 0.95):
        out[f"@2 when the root's target p >= {th}, else plain"] = (
            (lambda th: lambda r, p, s: 2 if r[p]["root_p"] >= th else 0)(th), cost)
    for k in (1, 2, 4, 8):
        out[f"@2, after a 1-token round {k} plain step(s)"] = (backoff(k, 2), cost)
    for probe in (4, 16):
        out[f"@2 while the request's running mean tokens/round (EMA 0.3) >= its cost in steps, else plain, a probe every {probe}"] = (
            running_mean(0.3, probe, 2, cost[2] / cost[0]), cost)
    paid = {**cost, 0: cost[0] + wasted_ms}
    out["after drafting: the best predicted budget 1-4, or the root only"] = (after_draft(paid), paid)
    return out


def summarize(records, cost, stage_ms, machine, args) -> str:
    pol = policies(cost, stage_ms["draft"] + stage_ms["build"])
    cats = sorted({r["category"] for r in records})
    scopes = [("all", records)] + [(c, [r for r in records if r["category"] == c]) for c in cats]
    lines = ["# Per-round switching between a tree and a plain step (the T = 0 positions replayed)", "",
             f"- command: `PYTHONPATH=. .venv/bin/python scripts/experiments/round_gate.py "
             f"--per-category {args.per_category} --max-new-tokens {args.max_new_tokens} --out {args.out}`",
             f"- machine: {machine}",
             f"- prompts: the first {args.per_category} of each category of the `eval` set, "
             f"{sum(len(r['positions']) for r in records)} positions; the embedded pair on its default weights, "
             f"draft vocabulary {args.vocab}, graph builder",
             "- round cost (timed stages, mean ms over the same prompts decoded for real, in `ar` steps): " +
             ", ".join(f"{'ar' if b == 0 else f'b{b}'} {cost[b]:.2f} ms" + ("" if b == 0 else f" ({cost[b] / cost[0]:.2f})")
                       for b in sorted(cost)),
             "- a budget-2 round's stages: " + ", ".join(f"{k} {v:.2f} ms" for k, v in stage_ms.items()),
             "", "Speedup over `ar` (tokens / ms against plain steps over the same positions):", "",
             "| policy | " + " | ".join(s for s, _ in scopes) + " |", "|---|" + "---:|" * len(scopes)]

    def speed(recs, fn):
        ms = sum(fn(r["positions"]) for r in recs)
        return sum(len(r["positions"]) for r in recs) * cost[0] / ms

    for name, (p, c) in pol.items():
        fn = (lambda c, f: lambda rows: replay(rows, c, f))(c, p)
        lines.append(f"| {name} | " + " | ".join(f"{speed(rs, fn):.3f}" for _, rs in scopes) + " |")
    for label, bs in (("oracle: plain or @2", (2,)), ("oracle: plain or @3", (3,)), ("oracle: plain or any budget", BUDGETS)):
        lines.append(f"| {label} | " + " | ".join(f"{speed(rs, lambda rows, bs=bs: oracle(rows, cost, bs)):.3f}"
                                                for _, rs in scopes) + " |")
    pairs = [(r["positions"][i]["commit"][1], r["positions"][i + 1]["commit"][1])
             for r in records for i in range(len(r["positions"]) - 1)]
    lines += ["", f"Correlation of neighbouring positions' budget-2 commits: {statistics.correlation(*zip(*pairs)):.2f}."]
    lines += ["", "The oracle knows what every round would commit; the other rows use only what a decoder "
              "knows when it decides. Thresholds are chosen on these same prompts (an optimistic reading)."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-category", type=int, default=12)
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--vocab", type=int, default=8192, help="draft vocabulary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay", action="store_true", help="summarize OUT's positions again (no decoding)")
    args = ap.parse_args(argv)
    if args.replay:
        with gzip.open(Path(args.out) / "positions.jsonl.gz", "rt") as f:
            head, *records = [json.loads(line) for line in f]
        cost = {int(b): v for b, v in head["cost_ms"].items()}
        text = summarize(records, cost, head["budget2_stage_ms"], head["machine"], args)
        (Path(args.out) / "summary.md").write_text(text)
        print(text)
        return 0
    torch.set_num_threads(2)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pair = load_pair("smollm2")
    dec = Decoder(pair, annotate=False)
    dec.warm_up()
    prompts = select(args.per_category)
    costs_on = [p for i, p in enumerate(prompts) if i % 3 == 0]
    cost = round_costs(dec, costs_on, args.max_new_tokens, args.vocab)
    cfg2 = DecodeConfig(method="dominotree", max_new_tokens=args.max_new_tokens, tree=TreeConfig(budget=2),
                        draft_vocab=args.vocab, builder="graph", stop_at_eos=False)
    traces = [dec.generate(p.turns[0], cfg2) for p in costs_on]
    stage_ms = {s: statistics.fmean(r.stage_ms[s] for t in traces for r in t.rounds) for s in STAGES}
    records = []
    for p in prompts:
        rec = positions(dec, dec.encode_prompt(p.turns[0]), args.max_new_tokens, args.vocab)
        records.append({"id": p.id, "category": p.category, **rec})
        print(p.id, len(rec["positions"]), file=sys.stderr, flush=True)
    hw = hardware_info()
    machine = f"{hw['cpu']} ({hw['cpu_signature']}; {hw['cpu_isa']}), torch {torch.__version__}, 2 threads"
    with gzip.open(out / "positions.jsonl.gz", "wt") as f:    # a header line, then one line a prompt
        f.write(json.dumps({"cost_ms": cost, "budget2_stage_ms": stage_ms, "machine": machine}) + "\n")
        for r in records:
            f.write(json.dumps(r) + "\n")
    text = summarize(records, cost, stage_ms, machine, args)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
