"""Command line: ``python -m dominotree {generate,train,bench,bench-build,profile-cost,profile-rounds,calibrate-budget}``.

User mistakes end with one readable line on stderr and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

from . import pairargs
from .config import METHODS, DecodeConfig, TreeConfig
from .errors import USER_ERRORS, UserError  # noqa: F401 - UserError importable here, as before
from .pairargs import add_model_args, add_tree_args, budget_arg, load_pair_from_args  # noqa: F401 - likewise


def cmd_generate(a) -> int:
    if not a.prompt or not a.prompt.strip():
        raise UserError("--prompt is empty")
    def config(budget, draft_vocab):
        return DecodeConfig(method=a.method, temperature=a.temperature, max_new_tokens=a.max_new_tokens,
                            seed=a.seed, builder=a.builder, ab_builder=a.ab_builder, draft_vocab=draft_vocab,
                            tree=TreeConfig(budget=budget, corr_topm=a.corr_topm, node_topk=a.node_topk))
    config(1 if a.budget == "auto" else a.budget, 0)       # every other setting checked before the pair loads
    if a.trace and not Path(a.trace).resolve().parent.is_dir():
        raise UserError(f"cannot write trace: folder {Path(a.trace).parent} does not exist")
    pair, auto = pairargs.load_pair_from_args(a), None
    draft_vocab = pair.resolve_draft_vocab(a.draft_vocab, a.method)     # None: the pair's default
    if a.budget == "auto":
        from .auto.calibrate import resolve_auto
        a.budget, auto = resolve_auto(pair, a.method, a.cost_model, a.calibration, builder=a.builder,
                                      tree=TreeConfig(corr_topm=a.corr_topm, node_topk=a.node_topk),
                                      draft_vocab=draft_vocab)
        print(f"--budget auto: {auto['reason']} ({auto['calibration']}, {auto['cost_model']})", file=sys.stderr)
    cfg = config(a.budget, draft_vocab)
    from .decode import Decoder
    dec = Decoder(pair, annotate=bool(a.trace))    # trace-only extras only for --trace
    if not a.no_warm_up:     # tok/s as bench and the explorer time it: first-call costs paid before
        dec.warm_up(methods=[a.method])
        if cfg.draft_vocab:  # and the draft vocabulary's own (its head rows, the GRU's token table)
            dec.generate("Warm up", replace(cfg, max_new_tokens=8, stop_at_eos=False))
    trace = dec.generate(a.prompt, cfg, chat=not a.no_chat)
    if auto is not None:     # what auto chose and why, with the run (budget 0: plain decoding)
        trace.config["auto"] = {k: auto[k] for k in ("budget", "reason", "calibration", "cost_model")}
    if a.trace:
        trace.to_json(a.trace)
    if a.json:
        out = {"method": trace.method, "weights": dec.target.weights, "forward": dec.target.forward_kind,
               "draft_vocab": cfg.draft_vocab, "token_ids": trace.token_ids, "text": trace.text,
               "tau": round(trace.tau, 4), "rounds": len(trace.rounds), "new_tokens": len(trace.token_ids),
               "tokens_per_s": round(trace.tokens_per_s, 3),
               "stage_ms": {k: round(v, 3) for k, v in trace.stage_ms().items()}}
        if auto is not None:
            out["budget"], out["auto"] = a.budget, trace.config["auto"]
        print(json.dumps(out, ensure_ascii=False))
    else:
        print(trace.text)
        print(f"[{trace.method}] {len(trace.token_ids)} tokens in {len(trace.rounds)} rounds, "
              f"tau {trace.tau:.2f}, {trace.tokens_per_s:.1f} tok/s", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m dominotree", description="DominoTree speculative decoding")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="decode one prompt with one method")
    add_model_args(g)
    add_tree_args(g)
    g.add_argument("--method", default="dominotree", choices=METHODS)
    g.add_argument("--prompt", required=True)
    g.add_argument("--no-chat", action="store_true", help="do not wrap the prompt in the chat template")
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-warm-up", action="store_true",
                   help="time the first decode of a fresh process as it comes (default: one short untimed "
                        "decode first, so tok/s leaves out one-time set-up, as bench and the explorer do)")
    g.add_argument("--trace", default=None, help="write the run's trace JSON here")
    g.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    g.add_argument("--cost-model", default=None, help="verify-cost profile for --budget auto "
                                                       "(default results/cost_model_<preset>_<device>.json)")
    g.add_argument("--calibration", default=None, help="budget calibration for --budget auto "
                                                        "(default: this machine's budget_<method>[_v<N>].json, "
                                                        "N the run's draft vocabulary, measured on first use)")
    g.set_defaults(func=cmd_generate)
    for name, mod, hlp in (("train", "dominotree.train.trainer", "train the embedded DFlash + Domino drafters"),
                           ("bench", "dominotree.bench.cli", "benchmark methods on a prompt set"),
                           ("bench-build", "dominotree.bench.build", "time tree builders per round"),
                           ("profile-cost", "dominotree.bench.cost", "profile verify cost for caddtree / condadaptive"),
                           ("profile-rounds", "dominotree.bench.rounds", "per-stage time per round, in ar steps"),
                           ("calibrate-budget", "dominotree.bench.calibrate_budget", "calibrate --budget auto"),
                           ("acceptance", "dominotree.bench.acceptance", "acceptance by depth and budget, T = 0")):
        s = sub.add_parser(name, help=hlp, add_help=False)
        s.set_defaults(func=None, module=mod)
    return p


def main(argv=None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    p = build_parser()
    if argv and argv[0] in ("train", "bench", "bench-build", "profile-cost", "profile-rounds", "calibrate-budget",
                                   "acceptance"):
        ns, rest = p.parse_known_args(argv[:1])
        if argv[0] == "train" and any(x == "--ray" or x.startswith("--ray=") for x in argv[1:]):
            ns.module = "dominotree.train.distributed"     # the trainer's flags plus --ray*: Ray Train
        import importlib
        try:
            mod = importlib.import_module(ns.module)
        except ModuleNotFoundError as e:
            print(f"error: `{argv[0]}` is not available in this build ({e.name})", file=sys.stderr)
            return 2
        return _guard(lambda: mod.main(argv[1:]))
    a = p.parse_args(argv)
    return _guard(lambda: a.func(a))


def _guard(fn) -> int:
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:
        pass
    try:
        return int(fn() or 0)
    except USER_ERRORS as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
