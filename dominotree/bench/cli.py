"""``python -m dominotree bench``: every method on a prompt set, measured the way the field reports it.

This module parses the arguments and drives the run (``run``), the summaries (``summary``), the
reports (``report``) and the ablations (``ablation``).

Methods run interleaved per prompt (the order rotates from prompt to prompt) after one warm-up
decode per method, with the per-prompt seed ``1000 + 100 * prompt_idx + turn_idx``. Each finished
(prompt, method) is appended at once to ``OUT/answers/T<temp>/<method>.jsonl`` in the Spec-Bench
layout (``question_id``, ``category``, ``choices: [{index, turns, new_tokens, wall_time,
accept_lengths}]``) plus our fields (tau, stage_ms, token ids, tree sizes, builder, hardware,
versions), so a crash loses nothing (``--resume`` continues a run, ``--summarize DIR`` rebuilds
the tables and figures from the answer files).

Then: ``summary.csv/.md`` (tau, tokens/s, speedup over ``ar`` in the same run, stage ms, by
category and overall), ``ci.csv/.md`` (paired-bootstrap 95 % intervals of throughput ratios over
prompts), ``lossless.csv`` (per prompt at T=0: output token ids equal to ``ar``'s), ``results.json``,
``run.json`` (command, hardware, versions), ``figures/`` (PNG + PDF), a human table on stdout and
ONE JSON line last on stdout.

Method specs: ``NAME[@BUDGET][/mM][/vN]``: ``dominotree@32``, ``condadaptive@64`` (max budget),
``dominotree/m16`` (Top-M 16; ``/mfull`` for the full vocabulary), ``dominotree/v16384`` (draft
vocabulary; ``/vfull`` for the full one). Without ``/vN`` a method drafts over the pair's default
vocabulary (8192 tokens for the embedded pair, the full one for others), and its label says so
(``dominotree/v8192``).
Ablations: ``--ablation ladder`` (marg, condstatic, dominotree), ``--ablation topm`` (Top-M sweep),
``--ablation budget`` (budget sweep).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from .. import pairargs
from ..config import METHODS, ConfigError, TreeConfig
from ..errors import UserError
from ..machine import hardware_info, versions_info
from .ablation import ABLATIONS, ablation_variants, write_ablation
from .report import final_object, human_table
from .run import SEED_BASE, _bench_decoder, check_prompts, encode_messages, read_answers, run_bench
from .summary import ADAPTIVE, _per_prompt, summarize
from .variants import HF_GENERATE, Variant, parse_variants, resolve_variants


def _floats(s: str, name: str) -> list[float]:
    try:
        out = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{name} must be a comma-separated list of numbers, got {s!r}") from None
    if not out:
        raise UserError(f"{name} is empty")
    for t in out:
        if not 0 <= t <= 100:
            raise UserError(f"{name}: temperature must be in [0, 100], got {t}")
    return out


def _ints(s: str, name: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{name} must be a comma-separated list of integers, got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dominotree bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    pairargs.add_model_args(p)
    pairargs.add_tree_args(p)
    g = p.add_argument_group("prompts")
    g.add_argument("--prompts", default=None, help="JSONL file: 'prompt' or 'turns', optional 'id', 'category'")
    g.add_argument("--dataset", default=None,
                   help="gsm8k, math500, aime25, humaneval, mbpp, livecodebench, mt-bench, alpaca, or our sets "
                        "eval (default), chat, math, code; comma-separated for several")
    g.add_argument("--limit", type=int, default=None, help="first N prompts of each source (the paper: 50)")
    g.add_argument("--no-chat", action="store_true", help="do not wrap prompts in the chat template")
    g.add_argument("--prepare-only", action="store_true", help="load and cache the dataset(s), then exit")
    g = p.add_argument_group("run")
    g.add_argument("--methods", default=None,
                   help="comma list of NAME[@BUDGET][/mM][/vN] (default: every method the pair has drafters for); "
                        "/vN: a draft vocabulary of N tokens, /vfull the full one; without it the pair's default "
                        "(8192 for the embedded pair, full for others), named in the label")
    g.add_argument("--temperatures", default="0", help="comma list, e.g. 0,0.5,1")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--repeats", type=int, default=1, help="decodes per prompt and method (timing noise)")
    g.add_argument("--ablation", choices=ABLATIONS, default=None,
                   help="ladder: marg, condstatic, dominotree; topm: Top-M sweep; budget: budget sweep")
    g.add_argument("--budgets", default="4,8,16,32,64", help="budgets of --ablation budget")
    g.add_argument("--topms", default="16,32,64,128,0", help="Top-M values of --ablation topm (0 = full vocab)")
    g.add_argument("--cost-model", default=None,
                   help="verify-cost model JSON for caddtree / condadaptive (default: "
                        "results/cost_model_<preset>_<device>.json, profiled now if missing)")
    g.add_argument("--calibration", default=None,
                   help="budget calibration for NAME@auto: a file, or a folder holding (or getting) each variant's "
                        "own budget_<preset>_<device>_<method>[_v<N>].json (default results/, made now if missing; "
                        "the verify-cost profile comes from --cost-model or its default)")
    g.add_argument("--no-warmup", action="store_true")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    from .raybench import add_ray_args
    add_ray_args(p)
    g = p.add_argument_group("output")
    g.add_argument("--out", default=None, help="output folder (default results/bench-<preset>-<time>)")
    g.add_argument("--resume", action="store_true", help="continue a run in --out, skipping finished prompts")
    g.add_argument("--overwrite", action="store_true", help="replace the answers already in --out")
    g.add_argument("--summarize", default=None, metavar="DIR", help="only rebuild tables and figures of DIR")
    g.add_argument("--focus", default=None, help="method compared with every other in the CIs (default dominotree)")
    g.add_argument("--bootstrap", type=int, default=10000, help="bootstrap resamples")
    g.add_argument("--no-figures", action="store_true")
    g.add_argument("--no-progress", action="store_true")
    g.add_argument("--json", action="store_true", help="print only the JSON line on stdout")
    return p


def resolve_cost_model(a, pair, needed: bool, out: Path):
    """The cost model for the adaptive methods: --cost-model, the default file, or profile now."""
    from ..auto.costmodel import default_path, load_cost_model
    from ..auto.profile import profile
    if not needed:
        return None
    if a.cost_model:
        cm = load_cost_model(a.cost_model)
    else:
        path = default_path(pair.name, pair.target.device)
        if path.is_file():
            cm = load_cost_model(path)
            print(f"using cost model {path}", file=sys.stderr)
        else:
            print(f"no cost model at {path}: profiling this machine first (python -m dominotree profile-cost "
                  f"does it separately)", file=sys.stderr)
            cm = profile(pair, contexts=(128, 512, 1024), repeats=3, progress=not a.no_progress)
            cm.save(path)
            print(f"saved {path}", file=sys.stderr)
    want = cm.meta.get("preset")
    if want and want != pair.name and not cm.meta.get("synthetic"):
        print(f"warning: the cost model was profiled for preset {want!r}, this run uses {pair.name!r}", file=sys.stderr)
    cm.save(out / "cost_model.json")
    return cm


def calibration_file(given: str | None, pair, method: str, draft_vocab: int) -> str | None:
    """``--calibration`` for one auto variant: the file given, or in a given folder the variant's
    own default file name (so ``dominotree@auto`` and ``dominotree@auto/v8192`` each read theirs)."""
    if given is None or not Path(given).is_dir():
        return given
    from ..auto.files import default_path
    return str(Path(given) / default_path(pair.name, pair.target.device, method, draft_vocab).name)


def resolve_auto_variants(a, pair, variants: list) -> dict:
    """Replace every ``NAME@auto`` variant's budget by the auto choice; {label: choice and curve}."""
    auto = {}
    for i, v in enumerate(variants):
        if v.auto:
            from ..auto.calibrate import resolve_auto
            cal = calibration_file(a.calibration, pair, v.method, v.draft_vocab)
            b, info = resolve_auto(pair, v.method, a.cost_model, cal, tree=v.tree, builder=a.builder,
                                   progress=not a.no_progress, draft_vocab=v.draft_vocab)
            variants[i] = replace(v, tree=replace(v.tree, budget=b))
            auto[v.label] = {**info, "draft_vocab": v.draft_vocab}
            print(f"{v.label}: {info['reason']} ({info['calibration']})", file=sys.stderr)
    return auto


def auto_report(res: dict, auto: dict) -> dict:
    """{label: chosen budget, its measured speedup over ar and over the same method at 16}."""
    out = {}
    for t, r in res["result"].items():
        ms = r["methods"]
        for label, info in auto.items():
            vocab = f"/v{info['draft_vocab']}" if info.get("draft_vocab") else ""     # the same draft vocabulary
            b16 = next((l for l in (info["method"] + vocab, f"{info['method']}@16{vocab}") if l in ms), None)
            got = ms.get(label, {})
            ratio = (got.get("tokens_per_s") / ms[b16]["tokens_per_s"]) if b16 and got.get("tokens_per_s") and \
                ms[b16].get("tokens_per_s") else None
            out.setdefault(t, {})[label] = {"budget": info["budget"], "reason": info.get("reason"),
                                            "speedup": got.get("speedup"),
                                            "vs_budget_16": round(ratio, 4) if ratio else None}
    return out


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    if a.summarize:
        out = Path(a.summarize)
        res = summarize(out, focus=a.focus, n_boot=a.bootstrap)
        try:
            abl = json.loads((out / "run.json").read_text()).get("ablation")
        except (OSError, ValueError):
            abl = None
        if abl in ABLATIONS:
            write_ablation(res, abl, out)
        return _finish(a, res, out)
    if a.max_new_tokens < 1:
        raise UserError("--max-new-tokens must be >= 1")
    if a.repeats < 1:
        raise UserError("--repeats must be >= 1")
    from .datasets import load_prompts
    prompts = load_prompts(a.prompts, a.dataset, a.limit)
    if a.prepare_only:
        print(json.dumps({"prompts": len(prompts), "categories": sorted({p.category for p in prompts})}))
        return 0
    temps = list(dict.fromkeys(_floats(a.temperatures, "--temperatures")))
    if a.budget == "auto":
        raise UserError("bench chooses auto budgets per method: list them as --methods ...,dominotree@auto")
    if a.draft_vocab is not None:
        raise UserError("bench takes draft vocabularies per method: list them as --methods ...,dominotree/v16384 "
                        "(or dominotree/vfull); without /vN a method drafts over the pair's default")
    try:
        base = TreeConfig(budget=a.budget, corr_topm=a.corr_topm, node_topk=a.node_topk)
    except ConfigError as e:
        raise UserError(str(e)) from None
    if a.ablation:
        variants = ablation_variants(a.ablation, base, a.methods, _ints(a.budgets, "--budgets"),
                                     _ints(a.topms, "--topms"))
        for v in variants:   # validate every config before loading models
            TreeConfig(**{k: getattr(v.tree, k) for k in ("budget", "corr_topm", "node_topk", "max_depth")})
    else:
        variants = parse_variants(a.methods, base) if a.methods else None
    if variants and any(v.method == HF_GENERATE for v in variants) and any(t > 0 for t in temps):
        raise UserError(f"{HF_GENERATE} is the greedy reference: run it with --temperatures 0")
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    from ..auto.costmodel import device_slug
    pair = pairargs.load_pair_from_args(a)
    if a.builder is None:
        from ..config import default_builder
        a.builder = default_builder(pair.target.device)
    if variants is None:
        variants = [Variant(m, m, base, draft_vocab=None) for m in METHODS if _has_drafter(pair, m)]
    for v in variants:
        if v.method != HF_GENERATE:
            pair.drafter_for(v.method)   # clear error when a drafter is missing or mismatched
    variants = resolve_variants(pair, variants)     # the pair's default draft vocabulary, named in the labels
    out = Path(a.out) if a.out else Path("results") / f"bench-{pair.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (out / "answers").is_dir() and any((out / "answers").rglob("*.jsonl")):
        if a.overwrite:
            shutil.rmtree(out / "answers")
        elif not a.resume:
            raise UserError(f"{out} already holds answers: pass --resume to continue it or --overwrite to replace them")
    out.mkdir(parents=True, exist_ok=True)
    cm = resolve_cost_model(a, pair, any(v.method in ADAPTIVE for v in variants), out)
    auto = resolve_auto_variants(a, pair, variants)
    dec = _bench_decoder(pair, cm)
    chat = not a.no_chat
    check_prompts(dec, prompts, a.max_new_tokens, chat)
    hw = hardware_info(pair.target.device)
    run_meta = {"command": "python -m dominotree bench " + " ".join(argv if argv is not None else sys.argv[1:]),
                "preset": pair.name, "paths": pair.paths, "dtype": str(pair.target.dtype).replace("torch.", ""),
                "device": device_slug(pair.target.device), "hardware": hw, "versions": versions_info(),
                "methods": [{"label": v.label, "method": v.method, "budget": v.tree.budget,
                             "corr_topm": v.tree.corr_topm, "node_topk": v.tree.node_topk,
                             "draft_vocab": v.draft_vocab} for v in variants],
                "temperatures": temps, "max_new_tokens": a.max_new_tokens, "repeats": a.repeats,
                "prompts": a.prompts or a.dataset or "eval", "n_prompts": len(prompts), "limit": a.limit,
                "builder": a.builder, "ablation": a.ablation, "chat": chat, "resumed": bool(a.resume),
                "seeds": f"{SEED_BASE} + 100*prompt_idx + turn_idx",
                "cost_model": (cm.meta if cm is not None else None), "auto_budget": auto,
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out / "run.json").write_text(json.dumps(run_meta, indent=1, default=str))
    from .datasets import write_jsonl
    write_jsonl(prompts, out / "prompts.jsonl")
    ctx = {"builder": a.builder, "preset": pair.name, "dtype": run_meta["dtype"], "max_new_tokens": a.max_new_tokens,
           "hardware": {k: hw[k] for k in ("device", "cpu", "torch_threads") if k in hw} | (
               {"gpu": hw["gpu"]} if "gpu" in hw else {}),
           "versions": versions_info()}
    if a.ray:
        from .raybench import cluster_hardware, run_bench_ray
        run_meta["ray"] = run_bench_ray(a.ray, a, prompts, variants, temps, out, cost_model=cm,
                                        max_new_tokens=a.max_new_tokens, repeats=a.repeats, builder=a.builder,
                                        ab_builder=a.ab_builder, chat=chat, warmup=not a.no_warmup, resume=a.resume,
                                        progress=not a.no_progress, ctx=ctx, workers=a.ray_workers,
                                        cpus_per_worker=a.ray_cpus_per_worker)
        run_meta["hardware"] = cluster_hardware(hw, run_meta["ray"])
    else:
        run_bench(dec, prompts, variants, temps, out, max_new_tokens=a.max_new_tokens, repeats=a.repeats,
                  builder=a.builder, ab_builder=a.ab_builder, chat=chat, warmup=not a.no_warmup, resume=a.resume,
                  progress=not a.no_progress, ctx=ctx)
    if any(t < 1e-5 for t in temps):
        write_ties(dec, prompts, out, chat)
    run_meta["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (out / "run.json").write_text(json.dumps(run_meta, indent=1, default=str))
    res = summarize(out, order=[v.label for v in variants], focus=a.focus, n_boot=a.bootstrap)
    if a.ablation:
        write_ablation(res, a.ablation, out)
    return _finish(a, res, out)


def write_ties(dec, prompts, out: Path, chat: bool) -> None:
    """``ties.csv``: the target's logit gap at each T = 0 output's first difference from ``ar``."""
    import pandas as pd
    from . import tiecheck as ties
    rows = ties.diagnose(dec, {p.id: p for p in prompts}, _per_prompt(read_answers(out)), encode_messages, chat)
    pd.DataFrame(rows, columns=ties.COLUMNS).to_csv(out / "ties.csv", index=False)


def _has_drafter(pair, method: str) -> bool:
    try:
        pair.drafter_for(method)
        return True
    except Exception:
        return False


def _finish(a, res: dict, out: Path) -> int:
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        run = {}
    hw = run.get("hardware", {})
    auto = run.get("auto_budget") or {}
    res["auto_budget"] = auto
    figs = []
    if not a.no_figures:
        from .plots import make_figures
        figs = make_figures(res, out / "figures")
    obj = final_object(res, run.get("preset", ""), run.get("device", ""), out, hw.get("gpu") or hw.get("cpu") or "")
    obj["figures"] = [str(f) for f in figs]
    if auto:
        obj["auto_budget"] = auto_report(res, auto)
        (out / "budget_auto.json").write_text(json.dumps({"choice": obj["auto_budget"], "auto": auto}, indent=1))
    (out / "results.json").write_text(json.dumps(obj, indent=1))
    if not a.json:
        print(human_table(res))
        for t, labels in obj.get("auto_budget", {}).items():
            for label, r in labels.items():
                vs = f", {r['vs_budget_16']:.2f}x the budget-16 tok/s" if r["vs_budget_16"] else ""
                print(f"T={t} {label}: budget {r['budget']}{vs}")
        print(f"tables: {out / 'summary.md'}, {out / 'ci.md'}; answers: {out / 'answers'}", file=sys.stderr)
    print(json.dumps(obj))
    return 0
