"""The acceptance yardstick: how many draft tokens each drafter and tree method gets accepted on
held-out prompts at T = 0, by depth and by budget, with loop positions apart.

    python -m dominotree acceptance                       # 36 held-out prompts x 64 tokens
    python -m dominotree acceptance --drafter DIR --drafter DIR --out results/x --baseline results/y/summary.json
                                           # the embedded target and weights with other drafters

Every configuration decodes every prompt for real (``decode.py``'s round loop, greedy), and every
output is checked equal to ``ar``'s token for token; nothing is simulated. Definitions:

- a round's **accepted** count is its accepted draft tokens (the bonus token not counted);
- **reach@d** is the share of rounds accepting at least ``d`` draft tokens, d = 1..8;
- **tau** is the tokens a round commits (accepted + the bonus), averaged over all rounds of all
  prompts (pooled, so long answers weigh more);
- a round is a **loop** round when its first draft position continues a 5-gram already seen in
  the same answer (that token and the 4 before it occurred together earlier in the answer), else
  **fresh**. Loops are easy to predict; the fresh rounds are the honest figure.

The explorer's "Acceptance by depth" plot draws ``reach`` of this module. Output: a human table,
then one JSON line last; ``--out`` gets ``summary.json``, ``acceptance.csv`` and ``acceptance.png``.

Each configuration also keeps its per-prompt counts (rounds, accepted draft tokens), so that an A/B
against an earlier run (``--baseline``) gives every tau difference a paired-bootstrap 95 % interval
over the prompts (``stats.paired_bootstrap_pooled_delta``): whether a change moved tau by more than
the choice of prompts does.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

from ..trace import MAX_D, reach
from .stats import DeltaCI, paired, paired_bootstrap_pooled_delta
from .plots import palette_png
from ..train.loops import LOOP_N, loop_flags  # noqa: F401 - the yardstick's subsets

BUDGETS = (1, 2, 4, 8, 16)
CHAINS = ("dflash", "domino")
TREES = ("ddtree", "dominotree")
SUBSETS = ("all", "fresh", "loop")


def round_rows(trace, n_prompt: int) -> list[tuple[int, bool]]:
    """(accepted draft tokens, loop) per round of ``trace``; loop is judged on its own answer. A
    round starting at position s has its root at answer index s - n_prompt; its first draft
    position is the next index."""
    answer = list(trace.token_ids)
    flags = loop_flags(answer)
    rows = []
    for rt in trace.rounds:
        i = rt.start - n_prompt + 1
        rows.append((len(rt.accepted) - 1, bool(flags[i]) if i < len(flags) else False))
    return rows


def summarize_rows(rows: list[tuple[int, bool]], max_d: int = MAX_D) -> dict:
    """Per subset (all / fresh / loop): rounds, tau, reach@1..max_d."""
    out = {}
    for sub in SUBSETS:
        acc = [a for a, loop in rows if sub == "all" or loop == (sub == "loop")]
        out[sub] = {"rounds": len(acc), "tau": (sum(acc) / len(acc) + 1) if acc else None,
                    "reach": reach(acc, max_d)}
    return out


def variants(methods: list[str], budgets: list[int]) -> list[tuple[str, str, int | None]]:
    """(label, method, budget): chains once (a chain ignores the budget), trees at each budget."""
    out = []
    for m in methods:
        if m in CHAINS:
            out.append((m, m, None))
        else:
            out += [(f"{m}@{b}", m, b) for b in budgets]
    return out


def heldout_check(prompts, data: Path | None, tokenizer) -> dict:
    """Whether any prompt shares an 8-word n-gram with (or equals, or is contained in) a training
    request of the self-distillation data under ``data`` (the whole prompt side of each record,
    decoded, so multi-turn histories count too)."""
    if data is None or not Path(data).is_dir() or tokenizer is None:
        return {"checked": False, "why": f"no training data at {data}"}
    from ..train.data import read_records
    from ..train.overlap import DEFAULT_N, EvalIndex
    idx = EvalIndex([t for p in prompts for t in p.turns])
    recs = read_records(Path(data))
    hits = []
    for r in recs:
        text = tokenizer.decode(r["ids"][:int(r["prompt_len"])], skip_special_tokens=True)
        o = idx.find(text)
        if o is not None:
            hits.append({"train": r.get("id"), "eval": o.eval[:80], "shared": " ".join(o.shared)})
    return {"checked": True, "data": str(data), "records": len(recs), "ngram": DEFAULT_N, "overlaps": hits}


def run(dec, prompts, specs, max_new_tokens: int, chat: bool = True, corr_topm: int = 64, node_topk: int = 8,
        draft_vocab: int = 0, log=None, draft_for=None) -> dict:
    """Decode every prompt with ``ar`` and every (label, method, budget) of ``specs`` at T = 0.
    ``draft_for(prompt_ids, ar_tokens)`` may give a ``draft_fn`` that replaces the drafters (tests)."""
    from ..config import DecodeConfig, TreeConfig
    rows: dict[str, list[tuple[int, bool]]] = {lab: [] for lab, _, _ in specs}
    per_prompt: dict[str, dict[str, list[int]]] = {lab: {} for lab, _, _ in specs}
    equal: dict[str, list[str]] = {lab: [] for lab, _, _ in specs}
    differ: dict[str, list[str]] = {lab: [] for lab, _, _ in specs}
    loop_share = [0, 0]
    for k, p in enumerate(prompts):
        ids = dec.encode_prompt(p.turns[0], chat)
        ar = dec.generate(ids, DecodeConfig(method="ar", max_new_tokens=max_new_tokens)).token_ids
        flags = loop_flags(ar)
        loop_share[0] += sum(flags)
        loop_share[1] += len(flags)
        draft_fn = draft_for(ids, ar) if draft_for is not None else None
        for lab, method, budget in specs:
            tree = TreeConfig(budget=budget or 16, corr_topm=corr_topm, node_topk=node_topk)
            cfg = DecodeConfig(method=method, max_new_tokens=max_new_tokens, tree=tree, draft_vocab=draft_vocab)
            t = dec.generate(ids, cfg, draft_fn=draft_fn)
            (equal if t.token_ids == ar else differ)[lab].append(p.id)
            got = round_rows(t, len(ids))
            rows[lab] += got
            per_prompt[lab][p.id] = [len(got), sum(a for a, _ in got)]
        if log is not None:
            log(f"[{k + 1}/{len(prompts)}] {p.id}: {len(ar)} tokens")
    out = {}
    for lab, method, budget in specs:
        out[lab] = {"method": method, "budget": budget, **summarize_rows(rows[lab]),
                    "equal_ar": len(equal[lab]), "differ_ar": differ[lab], "per_prompt": per_prompt[lab]}
    return {"variants": out, "loop_token_share": loop_share[0] / max(1, loop_share[1]),
            "answer_tokens": loop_share[1]}


# --- output -----------------------------------------------------------------------------------

def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def table(res: dict) -> str:
    n = res["prompts"]
    lines = [f"acceptance at T = 0 on {n} held-out prompts x {res['max_new_tokens']} tokens "
             f"({res['weights']} target, {res['cpu']}); loop tokens {res['loop_token_share']:.1%} of "
             f"{res['answer_tokens']} answer tokens",
             f"{'config':16} {'subset':6} {'rounds':>6} {'tau':>5} " + " ".join(f"{'>=' + str(d):>5}" for d in
                                                                           range(1, MAX_D + 1)) + "  =ar"]
    for lab, v in res["variants"].items():
        for sub in SUBSETS:
            s = v[sub]
            eq = f"  {v['equal_ar']}/{n}" if sub == "all" else ""
            lines.append(f"{lab:16} {sub:6} {s['rounds']:>6} {_f(s['tau']):>5} "
                         + " ".join(f"{x:>5.1%}" for x in s["reach"]) + eq)
    return "\n".join(lines)


def _paired_counts(res: dict, base: dict, labels: list[str]) -> tuple[list[str], list] | None:
    """The prompts every one of ``labels`` has per-prompt counts for in both runs, and per label
    (old accepted, old rounds, new accepted, new rounds) on them; None when fewer than two."""
    have = [(res["variants"].get(lab) or {}).get("per_prompt") for lab in labels] + \
           [(base["variants"].get(lab) or {}).get("per_prompt") for lab in labels]
    if any(h is None for h in have):
        return None
    ids = sorted(set.intersection(*(set(h) for h in have)))
    if len(ids) < 2:
        return None
    new, old = have[:len(labels)], have[len(labels):]
    return ids, [[[o[i][1] for i in ids], [o[i][0] for i in ids], [w[i][1] for i in ids], [w[i][0] for i in ids]]
                 for o, w in zip(old, new)]


def delta_tau(res: dict, base: dict, n_boot: int = 10000) -> dict[str, DeltaCI]:
    """tau(res) - tau(base) (all rounds, pooled) with its paired-bootstrap 95 % interval over the
    common prompts: per configuration both runs kept per-prompt counts for, and per drafter
    (``drafter:dflash``, ``drafter:domino``) the mean over the configurations it serves (its chain
    and its tree method's budgets; ``config.METHOD_DRAFTER``), resampled together."""
    from ..config import METHOD_DRAFTER
    out = {}
    serves: dict[str, list[str]] = {}
    for lab, v in res["variants"].items():
        got = _paired_counts(res, base, [lab])
        if got is None:
            continue
        out[lab] = paired_bootstrap_pooled_delta(*got[1][0], n_boot=n_boot)
        serves.setdefault(METHOD_DRAFTER[v["method"]], []).append(lab)
    for drafter, labs in serves.items():
        got = _paired_counts(res, base, labs)
        if got is not None and len(labs) > 1:
            cols = got[1]
            out[f"drafter:{drafter}"] = paired_bootstrap_pooled_delta(
                *[[c[k] for c in cols] for k in range(4)], n_boot=n_boot)
    return out


def compare(res: dict, base: dict, deltas: dict[str, DeltaCI] | None = None) -> str:
    """A/B lines against an earlier ``summary.json``: tau and reach@1 (all and fresh rounds) per
    configuration both runs have, and tau's difference with its 95 % interval where both runs kept
    per-prompt counts (``*``: the interval excludes 0), then each drafter's mean over its columns."""
    from ..config import METHOD_DRAFTER
    deltas = delta_tau(res, base) if deltas is None else deltas
    was = ", ".join(str(base.get("paths", {}).get(k)) for k in ("dflash", "domino") if base.get("paths", {}).get(k))
    lines = [f"A/B against {was or 'the baseline'}: tau all (fresh), reach@1 all (fresh)"
             + (", tau all difference [paired-bootstrap 95 % over prompts]" if deltas else "")]
    for lab, v in res["variants"].items():
        b = base["variants"].get(lab)
        if b is None:
            continue
        d = deltas.get(lab)
        lines.append(f"{lab:16} tau {_f(b['all']['tau'])} -> {_f(v['all']['tau'])} ({_f(b['fresh']['tau'])} -> "
                     f"{_f(v['fresh']['tau'])})   reach@1 {b['all']['reach'][0]:.1%} -> {v['all']['reach'][0]:.1%} "
                     f"({b['fresh']['reach'][0]:.1%} -> {v['fresh']['reach'][0]:.1%})"
                     + (f"   {d.fmt()}{' *' if d.excludes_zero else ''}" if d else ""))
    for key, d in deltas.items():
        if key.startswith("drafter:"):
            name = key.split(":", 1)[1]
            labs = [lab for lab, v in res["variants"].items() if lab in deltas and METHOD_DRAFTER[v["method"]] == name]
            lines.append(f"the {name} drafter, mean over {', '.join(labs)}: {d.fmt()}{' *' if d.excludes_zero else ''}")
    if not deltas and any("per_prompt" in v for v in res["variants"].values()):
        lines.append("(the baseline kept no per-prompt counts, so no intervals: rerun it with this version)")
    return "\n".join(lines)


def write_csv(res: dict, path: Path) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "method", "budget", "subset", "rounds", "tau"] + [f"reach{d}" for d in range(1, MAX_D + 1)])
        for lab, v in res["variants"].items():
            for sub in SUBSETS:
                s = v[sub]
                w.writerow([lab, v["method"], v["budget"] or "", sub, s["rounds"],
                            "" if s["tau"] is None else round(s["tau"], 4)] + [round(x, 4) for x in s["reach"]])


def figure(res: dict):
    """Left: reach@d of the chains and of each tree method at its largest budget (solid: all
    rounds, dotted: fresh). Right: tau against the budget (chains as flat lines)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from ..colors import method_color
    v = res["variants"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("share of rounds accepting at least d draft tokens",
                                                        "tau (tokens per round) against the budget"))
    ds = list(range(1, MAX_D + 1))
    top = {}
    for lab, x in v.items():
        if x["budget"] is None or x["budget"] >= top.get(x["method"], (0, ""))[0]:
            top[x["method"]] = (x["budget"] or 0, lab)
    for method, (_, lab) in top.items():
        for sub, dash in (("all", "solid"), ("fresh", "dot")):
            fig.add_trace(go.Scatter(x=ds, y=v[lab][sub]["reach"], mode="lines+markers", name=f"{lab} ({sub})",
                                     line=dict(color=method_color(method), dash=dash)), row=1, col=1)
    budgets = sorted({x["budget"] for x in v.values() if x["budget"]})
    for method in dict.fromkeys(x["method"] for x in v.values()):
        labs = [lab for lab, x in v.items() if x["method"] == method]
        for sub, dash in (("all", "solid"), ("fresh", "dot")):
            if v[labs[0]]["budget"] is None:
                xs, ys = budgets, [v[labs[0]][sub]["tau"]] * len(budgets)
            else:
                xs, ys = [v[lab]["budget"] for lab in labs], [v[lab][sub]["tau"] for lab in labs]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"{method} tau ({sub})",
                                     line=dict(color=method_color(method), dash=dash), showlegend=False),
                          row=1, col=2)
    fig.update_xaxes(title_text="depth d", dtick=1, row=1, col=1)
    fig.update_yaxes(tickformat=".0%", range=[0, 1], row=1, col=1)
    fig.update_xaxes(title_text="budget (draft nodes)", type="log", tickvals=budgets, row=1, col=2)
    fig.update_yaxes(title_text="tau", row=1, col=2)
    fig.update_layout(template="plotly_white", width=1100, height=460, font=dict(size=12),
                      title=dict(text=f"Acceptance at T = 0, {res['prompts']} held-out prompts x {res['max_new_tokens']} "
                                      f"tokens<br><sup>{res['weights']} target, {res['cpu']}; dotted: fresh rounds "
                                      f"(not continuing a 5-gram of the same answer)</sup>", x=0.01),
                      margin=dict(l=60, r=20, t=90, b=60))
    return fig


def write_outputs(res: dict, out: Path, png: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "summary.json", out / "acceptance.csv"]
    paths[0].write_text(json.dumps(res, indent=1) + "\n")
    write_csv(res, paths[1])
    if png:
        try:
            figure(res).write_image(str(out / "acceptance.png"), scale=2)
            palette_png(out / "acceptance.png")
            paths.append(out / "acceptance.png")
        except Exception as e:   # no kaleido / Chromium: the numbers are written anyway
            print(f"warning: no PNG ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__})", file=sys.stderr)
    return paths


def last_line(res: dict, out: Path | None) -> dict:
    v = res["variants"]
    n = res["prompts"]
    return {"cmd": "acceptance", "prompts": n, "max_new_tokens": res["max_new_tokens"], "weights": res["weights"],
            "tau": {lab: round(x["all"]["tau"], 3) if x["all"]["tau"] else None for lab, x in v.items()},
            "tau_fresh": {lab: round(x["fresh"]["tau"], 3) if x["fresh"]["tau"] else None for lab, x in v.items()},
            "reach1": {lab: round(x["all"]["reach"][0], 3) for lab, x in v.items()},
            "all_equal_ar": all(x["equal_ar"] == n for x in v.values()), "out": str(out) if out else None}


def read_baseline(path: Path) -> dict:
    """An earlier run's ``summary.json`` for ``--baseline``, or a UserError saying what is wrong."""
    from ..errors import UserError
    if not path.is_file():
        raise UserError(f"--baseline: no such file {path}")
    try:
        base = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"--baseline: {path} is not JSON ({e})") from None
    if not isinstance(base, dict) or not isinstance(base.get("variants"), dict) or not all(
            isinstance(v, dict) and isinstance(v.get("all"), dict) and isinstance(v.get("fresh"), dict)
            for v in base["variants"].values()):
        raise UserError(f"--baseline: {path} is not an acceptance summary.json (no per-configuration 'variants')")
    for lab, v in base["variants"].items():
        pp = v.get("per_prompt")
        if pp is not None and not (isinstance(pp, dict) and all(
                isinstance(c, list) and len(c) == 2 and all(isinstance(x, int) and x >= 0 for x in c) for c in pp.values())):
            raise UserError(f"--baseline: {path}: {lab}'s per_prompt must map prompt ids to [rounds, accepted] counts")
    return base


def _int_list(s: str) -> list[int]:
    try:
        xs = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {s!r}") from None
    if not xs or any(x < 1 for x in xs):
        raise argparse.ArgumentTypeError(f"budgets must be positive integers, got {s!r}")
    return xs


def parse_args(argv):
    from ..pairargs import add_draft_vocab_arg, add_model_args
    ap = argparse.ArgumentParser(prog="python -m dominotree acceptance",
                                 description="Acceptance by depth and budget at T = 0 on held-out prompts (every "
                                             "output checked equal to ar).")
    add_model_args(ap)
    ap.add_argument("--dataset", default="eval", help="prompt set (default: eval, the 36 held-out prompts)")
    ap.add_argument("--prompts", default=None, help="a JSONL prompt file instead of --dataset")
    ap.add_argument("--limit", type=int, default=None, help="first N prompts only")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--methods", default="dflash,domino,ddtree,dominotree",
                    help=f"comma-separated, from {', '.join(CHAINS + TREES)}")
    ap.add_argument("--budgets", type=_int_list, default=list(BUDGETS), help="tree budgets (default 1,2,4,8,16)")
    ap.add_argument("--corr-topm", type=int, default=64)
    ap.add_argument("--node-topk", type=int, default=8)
    add_draft_vocab_arg(ap)
    ap.add_argument("--no-chat", action="store_true")
    ap.add_argument("--train-data", type=Path, default=Path(__file__).resolve().parents[2] / "assets" / "distill",
                    help="self-distillation data to check the prompts against (no shared 8-word n-gram)")
    ap.add_argument("--out", type=Path, default=None, help="folder for summary.json, acceptance.csv, acceptance.png")
    ap.add_argument("--no-png", action="store_true")
    ap.add_argument("--baseline", type=Path, default=None, help="an earlier summary.json: print the A/B per configuration")
    return ap.parse_args(argv)


def main(argv=None) -> int:
    from ..errors import UserError
    from ..pairargs import load_pair_from_args
    a = parse_args(argv)
    methods = [m.strip() for m in a.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in CHAINS + TREES]
    if bad or not methods:
        raise UserError(f"--methods: unknown {', '.join(bad) or '(none)'}; choose from {', '.join(CHAINS + TREES)}")
    if a.max_new_tokens < 1:
        raise UserError("--max-new-tokens must be >= 1")
    from ..decode import Decoder
    from .datasets import load_prompts
    from ..machine import cpu_isa, cpu_model
    base = read_baseline(a.baseline) if a.baseline is not None else None   # before the long run
    prompts = load_prompts(a.prompts, None if a.prompts else a.dataset, a.limit)
    if a.drafter and a.target is None:   # the preset's target and default weights, other drafters
        from ..presets import load_pair
        for d in a.drafter:
            if not Path(d).is_dir():
                raise UserError(f"folder does not exist: {d}")
        pair = load_pair(a.preset, None, a.drafter, dtype=a.dtype, device=a.device, forward=a.forward,
                         weights=a.weights)
    else:
        pair = load_pair_from_args(a)
    for m in methods:
        pair.drafter_for(m)          # a missing or mismatched drafter fails here, with its message
    a.draft_vocab = pair.resolve_draft_vocab(a.draft_vocab)     # None: the pair's default (8192 embedded)
    dec = Decoder(pair, annotate=False)
    held = heldout_check(prompts, a.train_data, dec.target.tokenizer)
    if held["checked"]:
        print(f"held-out check: {len(held['overlaps'])} of {held['records']} training records in {held['data']} share "
              f"an {held['ngram']}-word n-gram with the {len(prompts)} prompts", file=sys.stderr)
    t0 = time.perf_counter()
    res = run(dec, prompts, variants(methods, a.budgets), a.max_new_tokens, chat=not a.no_chat,
              corr_topm=a.corr_topm, node_topk=a.node_topk, draft_vocab=a.draft_vocab,
              log=lambda s: print(s, file=sys.stderr, flush=True))
    res = {"prompts": len(prompts), "dataset": a.prompts or a.dataset, "max_new_tokens": a.max_new_tokens,
           "preset": pair.name, "paths": pair.paths, "weights": dec.target.weights,
           "cpu": f"{cpu_model()} ({cpu_isa()})", "temperature": 0.0, "draft_vocab": a.draft_vocab,
           "definition": __doc__.split("Definitions:")[1].split("The explorer")[0].strip(),
           "heldout": held, "wall_s": round(time.perf_counter() - t0, 1), **res}
    print(table(res))
    if a.baseline is not None:
        deltas = delta_tau(res, base)
        print(compare(res, base, deltas))
        res["ab"] = {"baseline": str(a.baseline), "tau_delta": {lab: d.to_dict() for lab, d in deltas.items()}}
    if a.out is not None:
        for p in write_outputs(res, a.out, png=not a.no_png):
            print(f"wrote {p}", file=sys.stderr)
    print(json.dumps(last_line(res, a.out)))
    return 0
