"""``python -m dominotree profile-rounds``: where a round's time goes, as multiples of an ``ar`` step.

For each dtype (default bfloat16 and float32) the pair is loaded, and ``ar`` plus the tree methods
decode the same prompts, interleaved, after one warm-up decode each. Module hooks split the
stages further, on the machine at hand:

- draft: drafter backbone, LM head over the block's rows, other (block embedding, the root's
  GRU step);
- build: the whole build stage (scorer set-up and the heap);
- verify: decoder layers without attention, attention, final norm + LM head, sampling, other
  (tree mask, positions, the embedding);
- commit: the accept walk and KV compaction.

Every figure is the mean per round in ms divided by the mean ``ar`` step (one ``ar`` round) of
the same dtype in the same run. Prints a table, then ONE JSON line last. The hooks add a few
timer calls per layer (microseconds per round).

    python -m dominotree profile-rounds [--preset smollm2] [--dtypes bfloat16,float32]
        [--methods ar,ddtree,dominotree] [--prompts 3] [--max-new-tokens 48] [--builder NAME]
        [--threads N] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from .. import pairargs
from ..config import STAGES, DecodeConfig, TreeConfig, default_builder
from ..errors import UserError

PARTS = {"draft": ("backbone", "draft_lm_head", "draft_other"),
         "verify": ("layers", "attention", "head", "sampling", "verify_other")}
LABELS = {"backbone": "draft: backbone", "draft_lm_head": "draft: LM head", "draft_other": "draft: other",
          "build": "build", "layers": "verify: decoder layers (excl. attention)", "attention": "verify: attention",
          "head": "verify: final norm + LM head", "sampling": "verify: sampling", "verify_other": "verify: other",
          "commit": "commit", "round": "round"}
ROWS = ("backbone", "draft_lm_head", "draft_other", "build", "layers", "attention", "head", "sampling",
        "verify_other", "commit", "round")


class StageHooks:
    """Timers on the target's decoder layers, attention blocks, final norm and LM head, and on the
    drafter; each measured interval is booked to the stage the decoder is in."""

    def __init__(self, dec):
        import torch
        self.torch = torch
        self.dec = dec
        self.stage = None
        self.acc: dict[str, float] = {}
        self._t: dict[int, float] = {}
        self.handles = []
        self.fast = getattr(dec.target, "fast", None)
        if self.fast is not None:   # the fast forward has no modules to hook: it calls our timer
            self.fast.timer = self._timed
        m = dec.target.model
        core = getattr(m, "model", m)
        for layer in core.layers:
            self._hook(layer, "layer")
            attn = getattr(layer, "self_attn", None)
            if attn is not None:
                self._hook(attn, "attention")
        if getattr(core, "norm", None) is not None:
            self._hook(core.norm, "head")
        self._hook(dec.target.lm_head, "lm_head")     # the transformers forward calls the module
        # the drafters' head runs as a product, not as the module: time the calls that make logits
        from ..draftvocab import DraftVocab
        tgt_logits, vocab_logits = dec.target.logits, DraftVocab.logits
        self._patched = [(DraftVocab, "logits", vocab_logits)]
        if type(dec.target.lm_head) is torch.nn.Linear:   # otherwise logits() calls the hooked module
            self._patched.append((dec.target, "logits", tgt_logits))

        def target_head(hidden):
            with self._timed("lm_head"):
                return tgt_logits(hidden)

        def vocab_head(vocab, rows):
            with self._timed("lm_head"):
                return vocab_logits(vocab, rows)
        DraftVocab.logits = vocab_head
        if len(self._patched) > 1:
            dec.target.logits = target_head
        for d in dec.pair.drafters.values():
            self._hook(d, "backbone")

    def _now(self) -> float:
        if self.dec.target.device.type == "cuda":
            self.torch.cuda.synchronize()
        return time.perf_counter()

    def _hook(self, module, name: str) -> None:
        key = id(module)

        def pre(mod, args, kwargs=None):
            self._t[key] = self._now()

        def post(mod, args, out):
            t0 = self._t.pop(key, None)
            if t0 is not None and self.stage is not None:
                part = self._part(name)
                self.acc[part] = self.acc.get(part, 0.0) + (self._now() - t0) * 1e3
        self.handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]

    @contextmanager
    def _timed(self, name: str):
        t0 = self._now()
        try:
            yield
        finally:
            if self.stage is not None:
                part = self._part(name)
                self.acc[part] = self.acc.get(part, 0.0) + (self._now() - t0) * 1e3

    def _part(self, name: str) -> str:
        if name == "lm_head":
            return "draft_lm_head" if self.stage == "draft" else "head"
        return {"layer": "layers"}.get(name, name)

    @contextmanager
    def booked(self, stage: str):
        prev, self.stage = self.stage, stage
        try:
            yield
        finally:
            self.stage = prev

    def take(self) -> dict[str, float]:
        out, self.acc = self.acc, {}
        return out

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        for obj, name, real in self._patched:
            if isinstance(obj, type):
                setattr(obj, name, real)
            else:
                delattr(obj, name)       # the instance attribute goes; the method shows through
        if self.fast is not None:
            self.fast.timer = None


@contextmanager
def instrumented(dec):
    """Wrap the decoder's draft, verify and sampling calls so the hooks know the stage, and time
    sampling; yields the hooks. Everything is restored on exit."""
    from .. import decode as D
    from .. import verify as V
    hooks = StageHooks(dec)
    real_draft, real_verify, real_sample, real_rows = dec.draft, D.verify_tree, V.sample_with, D.TreeRows

    def draft(*a, **k):
        with hooks.booked("draft"):
            return real_draft(*a, **k)

    def verify(*a, **k):
        with hooks.booked("verify"):
            return real_verify(*a, **k)

    class Rows(real_rows):      # the accept walk's reads: LM head and draw of the rows it needs
        def __getitem__(self, i):
            with hooks.booked("verify"):
                return super().__getitem__(i)

    def sample(*a, **k):
        t0 = hooks._now()
        out = real_sample(*a, **k)
        if hooks.stage is not None:
            hooks.acc["sampling"] = hooks.acc.get("sampling", 0.0) + (hooks._now() - t0) * 1e3
        return out
    dec.draft, D.verify_tree, V.sample_with, D.TreeRows = draft, verify, sample, Rows
    try:
        yield hooks
    finally:
        dec.draft, D.verify_tree, V.sample_with, D.TreeRows = real_draft, real_verify, real_sample, real_rows
        hooks.remove()


def round_parts(rt, parts: dict[str, float]) -> dict[str, float]:
    """One round's ms by part: the hooks' figures plus each stage's remainder."""
    ms = dict(rt.stage_ms)
    layers_total = parts.get("layers", 0.0)
    attn = parts.get("attention", 0.0)
    out = {"backbone": parts.get("backbone", 0.0), "draft_lm_head": parts.get("draft_lm_head", 0.0),
           "build": ms.get("build", 0.0), "layers": max(layers_total - attn, 0.0), "attention": attn,
           "head": parts.get("head", 0.0), "sampling": parts.get("sampling", 0.0), "commit": ms.get("commit", 0.0)}
    out["draft_other"] = max(ms.get("draft", 0.0) - out["backbone"] - out["draft_lm_head"], 0.0)
    out["verify_other"] = max(ms.get("verify", 0.0) - layers_total - out["head"] - out["sampling"], 0.0)
    out["round"] = sum(ms.get(s, 0.0) for s in STAGES)
    return out


def profile_dtype(dec, prompts: list[str], methods: list[str], max_new_tokens: int, builder: str,
                  tree: TreeConfig, draft_vocab: int | None = 0) -> dict:
    """Mean ms per round and part for each method; the rounds of all prompts pooled. ``draft_vocab``
    None: the pair's default (``Pair.resolve_draft_vocab``)."""
    vocab = {m: dec.pair.resolve_draft_vocab(draft_vocab, m) for m in methods}
    sums = {m: {} for m in methods}
    rounds = {m: 0 for m in methods}
    with instrumented(dec) as hooks:
        def run(method, prompt, seed, n, record):
            cfg = DecodeConfig(method=method, max_new_tokens=n, seed=seed, builder=builder, tree=tree,
                               stop_at_eos=False, draft_vocab=vocab[method])
            done = 0
            for rt, committed in dec.rounds(dec.encode_prompt(prompt), cfg):
                parts = hooks.take()
                done += len(committed)
                if rt is not None and record:
                    for k, v in round_parts(rt, parts).items():
                        sums[method][k] = sums[method].get(k, 0.0) + v
                    rounds[method] += 1
                if done >= n:      # rounds() runs until told to stop
                    return
        for m in methods:                     # warm-up: allocator, kernels, caches
            run(m, "Warm-up", 0, 16, False)
        for pi, p in enumerate(prompts):
            for m in methods[pi % len(methods):] + methods[:pi % len(methods)]:
                run(m, p, 1000 + 100 * pi, max_new_tokens, True)
    mean = {m: {k: v / max(rounds[m], 1) for k, v in sums[m].items()} for m in methods}
    ar = mean.get("ar", {}).get("round") or float("nan")
    return {"ar_step_ms": ar, "rounds": rounds, "draft_vocab": vocab,
            "ms": {m: {k: round(v, 4) for k, v in d.items()} for m, d in mean.items()},
            "x_ar": {m: {k: round(v / ar, 4) for k, v in d.items()} for m, d in mean.items()}}


def table(res: dict) -> str:
    lines = []
    for dt, r in res["dtypes"].items():
        methods = list(r["x_ar"])
        vocab = {v for v in r.get("draft_vocab", {}).values() if v}
        lines.append(f"{dt}: ar step {r['ar_step_ms']:.2f} ms; figures are multiples of it (ms in brackets)"
                     + (f"; draft vocabulary {', '.join(map(str, sorted(vocab)))} tokens" if vocab else ""))
        lines.append(f"{'part':<42}" + "".join(f"{m:>22}" for m in methods))
        for k in ROWS:
            cells = "".join(f"{r['x_ar'][m].get(k, 0.0):>10.3f} ({r['ms'][m].get(k, 0.0):>8.2f})" for m in methods)
            lines.append(f"{LABELS[k]:<42}{cells}")
        lines.append("")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dominotree profile-rounds", description=__doc__.split("\n\n")[0])
    pairargs.add_model_args(p)
    p.add_argument("--dtypes", default="bfloat16,float32", help="comma list (each loads the pair once)")
    p.add_argument("--methods", default="ar,ddtree,dominotree", help="comma list; ar is always included")
    p.add_argument("--prompts", type=int, default=3, help="first N held-out prompts (assets/prompts/eval.jsonl, "
                                                          "one per category in turn)")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--budget", type=int, default=16)
    p.add_argument("--builder", default=None, help="tree builder (default: the device's default)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--json-out", default=None, help="also write the JSON result here")
    pairargs.add_draft_vocab_arg(p)
    a = p.parse_args(argv)
    from ..config import METHODS
    methods = ["ar"] + [m.strip() for m in a.methods.split(",") if m.strip() and m.strip() != "ar"]
    bad = [m for m in methods if m not in METHODS]
    if bad or a.prompts < 1 or a.max_new_tokens < 1:
        raise UserError(f"--methods must name methods of {', '.join(METHODS)}; --prompts and --max-new-tokens >= 1")
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    from ..decode import Decoder
    from .datasets import load_prompts
    from ..machine import hardware_info, versions_info
    pool = load_prompts(None, "eval", None)
    by_cat: dict[str, list] = {}
    for q in pool:
        by_cat.setdefault(q.category, []).append(q)
    cats = sorted(by_cat)
    prompts = [by_cat[cats[i % len(cats)]][i // len(cats)].turns[0] for i in range(a.prompts)]
    res = {"command": "python -m dominotree profile-rounds " + " ".join(argv if argv is not None else sys.argv[1:]),
           "methods": methods, "prompts": a.prompts, "max_new_tokens": a.max_new_tokens, "budget": a.budget,
           "dtypes": {}}
    for dt in [d.strip() for d in a.dtypes.split(",") if d.strip()]:
        a.dtype = dt
        pair = pairargs.load_pair_from_args(a)
        builder = a.builder or default_builder(pair.target.device)
        dec = Decoder(pair, annotate=False)
        r = profile_dtype(dec, prompts, methods, a.max_new_tokens, builder, TreeConfig(budget=a.budget),
                          a.draft_vocab)
        r["builder"] = builder
        res["dtypes"][dt] = r
        res.update(preset=pair.name, hardware=hardware_info(pair.target.device), versions=versions_info())
        del dec, pair
    print(table(res))
    line = json.dumps(res, separators=(",", ":"))
    if a.json_out:
        Path(a.json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json_out).write_text(json.dumps(res, indent=1) + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
