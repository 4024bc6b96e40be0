"""``python -m dominotree bench``: every method on a prompt set, measured the way the field reports it.

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

Method specs: ``NAME[@BUDGET][/mM]``: ``dominotree@32``, ``condadaptive@64`` (max budget),
``dominotree/m16`` (Top-M 16; ``/mfull`` for the full vocabulary).
Ablations: ``--ablation ladder`` (marg, condstatic, dominotree), ``--ablation topm`` (Top-M sweep),
``--ablation budget`` (budget sweep).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..config import METHODS, STAGES, ConfigError, DecodeConfig, TreeConfig
from . import claims, stats

ADAPTIVE = ("caddtree", "condadaptive")
ABLATIONS = ("ladder", "topm", "budget")
LADDER = ("marg", "condstatic", "dominotree")
SEED_BASE = 1000


def _user_error(msg: str) -> Exception:
    from ..cli import UserError
    return UserError(msg)


# --- variants ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Variant:
    """One benchmarked configuration: a method with its tree settings, named by ``label``."""
    label: str
    method: str
    tree: TreeConfig

    @property
    def budget(self) -> int:
        return self.tree.budget


_SPEC = re.compile(r"^(?P<m>[a-z]+)(?:@(?P<b>\d+))?(?:/m(?P<topm>\d+|full))?$")


def parse_variant(spec: str, base: TreeConfig) -> Variant:
    s = spec.strip().lower()
    m = _SPEC.match(s)
    if not m or m["m"] not in METHODS:
        raise _user_error(f"bad method {spec!r}: use NAME[@BUDGET][/mM] with NAME one of {', '.join(METHODS)}")
    tree = base
    label = m["m"]
    if m["b"] is not None:
        tree = replace(tree, budget=int(m["b"]))
        label += f"@{int(m['b'])}"
    if m["topm"] is not None:
        tm = 0 if m["topm"] == "full" else int(m["topm"])
        tree = replace(tree, corr_topm=tm, node_topk=min(tree.node_topk, tm) if tm else tree.node_topk)
        label += "/mfull" if tm == 0 else f"/m{tm}"
    return Variant(label, m["m"], tree)


def parse_variants(specs: str, base: TreeConfig) -> list[Variant]:
    out, seen = [], set()
    for s in specs.split(","):
        if not s.strip():
            continue
        try:
            v = parse_variant(s, base)
        except ConfigError as e:
            raise _user_error(f"method {s.strip()!r}: {e}") from None
        if v.label in seen:
            raise _user_error(f"method {v.label!r} is listed twice")
        seen.add(v.label)
        out.append(v)
    if not out:
        raise _user_error("--methods is empty")
    return out


def ablation_variants(name: str, base: TreeConfig, methods: str | None, budgets: list[int],
                      topms: list[int]) -> list[Variant]:
    """The variants of one ablation (``ar`` first so speedups are in the same run)."""
    ar = [Variant("ar", "ar", base)]
    if name == "ladder":
        return ar + [Variant(m, m, base) for m in LADDER]
    if name == "topm":
        out = []
        for tm in topms:
            tree = replace(base, corr_topm=tm, node_topk=min(base.node_topk, tm) if tm else base.node_topk)
            out.append(Variant("dominotree/mfull" if tm == 0 else f"dominotree/m{tm}", "dominotree", tree))
        return ar + out
    if name == "budget":
        ms = [m.strip() for m in (methods or "ddtree,dominotree").split(",") if m.strip() and m.strip() != "ar"]
        for m in ms:
            if m not in METHODS:
                raise _user_error(f"unknown method {m!r} in --methods")
        return ar + [Variant(f"{m}@{b}", m, replace(base, budget=b)) for m in ms for b in budgets]
    raise _user_error(f"unknown ablation {name!r}; choose {', '.join(ABLATIONS)}")


# --- machine description -------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hardware_info(device=None) -> dict:
    import torch
    info = {"device": str(device) if device is not None else "cpu", "cpu": _cpu_model(),
            "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform()}
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(torch.device(device))
        info["cuda"] = torch.version.cuda
    return info


_VERSIONS: dict | None = None


def versions_info() -> dict:
    global _VERSIONS
    if _VERSIONS is None:
        import numpy
        import torch
        v = {"python": platform.python_version(), "torch": torch.__version__, "numpy": numpy.__version__}
        for mod in ("transformers", "pandas", "plotly"):
            try:
                v[mod] = __import__(mod).__version__
            except ImportError:
                pass
        try:
            root = Path(__file__).resolve().parents[2]
            sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                                 timeout=5).stdout.strip()
            dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                   capture_output=True, text=True, timeout=5).stdout.strip()
            if sha:
                v["dominotree"] = sha + ("+dirty" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            pass
        _VERSIONS = v
    return dict(_VERSIONS)


def tkey(t: float) -> str:
    return str(float(t))


# --- one prompt --------------------------------------------------------------------------------

def _bench_decoder(pair, cost_model):
    """A decoder without the trace-only extras (Top-M lists, the counterfactual marginal tree)
    that the explorer wants: they run inside the round loop and would count in the wall time."""
    from ..decode import Decoder
    return Decoder(pair, cost_model=cost_model, annotate=False)


def encode_messages(dec, messages: list[dict], chat: bool = True) -> list[int]:
    """Token ids of a (possibly multi-turn) conversation, ending with the assistant's turn open."""
    if len(messages) == 1:
        return dec.encode_prompt(messages[0]["content"], chat)
    from ..decode import MAX_PROMPT_TOKENS
    tok = dec.target.tokenizer
    if chat and getattr(tok, "chat_template", None):
        kw = {"enable_thinking": False} if "enable_thinking" in (tok.chat_template or "") else {}
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kw)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
    else:
        ids = tok("\n\n".join(m["content"] for m in messages))["input_ids"]
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ConfigError(f"conversation is {len(ids)} tokens; the limit is {MAX_PROMPT_TOKENS}")
    return [int(i) for i in ids]


def run_choice(dec, prompt, variant: Variant, temperature: float, prompt_idx: int, max_new_tokens: int,
               builder: str, ab_builder: str | None, chat: bool, index: int = 0) -> dict:
    """All turns of one prompt with one variant: one Spec-Bench ``choice`` plus our fields."""
    messages: list[dict] = []
    ch = {"index": index, "turns": [], "new_tokens": [], "wall_time": [], "accept_lengths": [],
          "token_ids": [], "tree_nodes": [], "rounds": [], "stopped": [], "seeds": [],
          "stage_ms_total": {s: 0.0 for s in STAGES}}
    for ti, turn in enumerate(prompt.turns):
        messages.append({"role": "user", "content": turn})
        ids = encode_messages(dec, messages, chat)
        seed = SEED_BASE + 100 * prompt_idx + ti
        cfg = DecodeConfig(method=variant.method, temperature=float(temperature), max_new_tokens=max_new_tokens,
                           seed=seed, builder=builder, ab_builder=ab_builder, tree=variant.tree)
        tr = dec.generate(ids, cfg)
        messages.append({"role": "assistant", "content": tr.text})
        ch["turns"].append(tr.text)
        ch["new_tokens"].append(len(tr.token_ids))
        ch["wall_time"].append(tr.wall_s)
        ch["accept_lengths"] += [r.accept_len for r in tr.rounds]
        ch["tree_nodes"] += [r.tree.num_nodes for r in tr.rounds]
        ch["token_ids"].append(list(tr.token_ids))
        ch["rounds"].append(len(tr.rounds))
        ch["stopped"].append(tr.stopped)
        ch["seeds"].append(seed)
        for r in tr.rounds:
            for s in STAGES:
                ch["stage_ms_total"][s] += float(r.stage_ms.get(s, 0.0))
    n_rounds = max(len(ch["accept_lengths"]), 1)
    wall = sum(ch["wall_time"])
    ch["tau"] = stats.mean(ch["accept_lengths"]) if ch["accept_lengths"] else 0.0
    ch["tokens_per_s"] = sum(ch["new_tokens"]) / wall if wall > 0 else 0.0
    ch["stage_ms"] = {s: v / n_rounds for s, v in ch["stage_ms_total"].items()}
    ch["hit_max_budget"] = sum(1 for n in ch["tree_nodes"] if n >= variant.budget)
    return ch


def make_record(prompt, variant: Variant, temperature: float, choices: list[dict], ctx: dict) -> dict:
    tps = [c["tokens_per_s"] for c in choices]
    acc = [a for c in choices for a in c["accept_lengths"]]
    n_rounds = max(len(acc), 1)
    stage = {s: sum(c["stage_ms_total"][s] for c in choices) / n_rounds for s in STAGES}
    return {
        "question_id": prompt.id, "category": prompt.category, "group": prompt.group or prompt.category,
        "dataset": prompt.dataset, "model_id": variant.label, "answer_id": f"{variant.label}:{prompt.id}:{tkey(temperature)}",
        "tstamp": time.time(), "choices": choices,
        # ours
        "method": variant.method, "label": variant.label, "temperature": float(temperature),
        "budget": variant.tree.budget, "corr_topm": variant.tree.corr_topm, "node_topk": variant.tree.node_topk,
        "builder": ctx["builder"], "tau": stats.mean(acc) if acc else 0.0, "tokens_per_s": stats.median(tps),
        "stage_ms": stage, "preset": ctx["preset"], "dtype": ctx["dtype"], "max_new_tokens": ctx["max_new_tokens"],
        "hardware": ctx["hardware"], "versions": ctx["versions"],
    }


# --- the run -----------------------------------------------------------------------------------

def answers_path(out: Path, temperature: float, label: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9@._-]+", "_", label)
    return out / "answers" / f"T{tkey(temperature)}" / f"{safe}.jsonl"


def read_answers(out: Path) -> list[dict]:
    """Every record under ``OUT/answers`` (a torn last line from a crash is skipped)."""
    recs = []
    for f in sorted((Path(out) / "answers").glob("T*/*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return recs


def _append(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_prompts(dec, prompts, max_new_tokens: int, chat: bool) -> None:
    """Fail before the run, naming the prompt, when a first turn cannot fit the context."""
    limit = dec.target.max_positions
    for p in prompts:
        try:
            ids = encode_messages(dec, [{"role": "user", "content": p.turns[0]}], chat)
        except ConfigError as e:
            raise _user_error(f"prompt {p.id!r}: {e}") from None
        if len(ids) + max_new_tokens + 17 > limit:
            raise _user_error(f"prompt {p.id!r} ({len(ids)} tokens) + --max-new-tokens {max_new_tokens} exceeds "
                              f"the target's context of {limit}")


def run_bench(dec, prompts, variants: list[Variant], temperatures: list[float], out: Path, *, max_new_tokens: int,
              repeats: int = 1, builder: str = "python", ab_builder: str | None = None, chat: bool = True,
              warmup: bool = True, resume: bool = False, progress: bool = True, ctx: dict | None = None) -> int:
    """Decode every (temperature, prompt, variant, repeat), appending records as they finish.

    Returns the number of records written. On any exception the records already written stay.
    """
    from tqdm import tqdm
    ctx = dict(ctx or {})
    ctx.setdefault("builder", builder)
    ctx.setdefault("preset", dec.pair.name)
    ctx.setdefault("dtype", str(dec.target.dtype).replace("torch.", ""))
    ctx.setdefault("max_new_tokens", max_new_tokens)
    ctx.setdefault("hardware", hardware_info(dec.target.device))
    ctx.setdefault("versions", versions_info())
    done = set()
    if resume:
        for r in read_answers(out):
            done.add((tkey(r["temperature"]), r["label"], r["question_id"]))
    todo = [(t, pi, p, v) for t in temperatures for pi, p in enumerate(prompts)
            for v in _rotate(variants, pi) if (tkey(t), v.label, p.id) not in done]
    if warmup and todo:
        for v in variants:   # one short decode per method: allocator, kernels, caches
            dec.generate("Warmup", DecodeConfig(method=v.method, temperature=float(temperatures[0]), max_new_tokens=16,
                                                seed=0, builder=builder, tree=v.tree))
    bar = tqdm(total=len(todo) * repeats, desc="bench", unit="decode", file=sys.stderr, disable=not progress,
               mininterval=1.0, dynamic_ncols=True)
    written = 0
    try:
        for t, pi, p, v in todo:
            bar.set_postfix_str(f"T={tkey(t)} {p.id} {v.label}", refresh=False)
            choices = []
            for r in range(repeats):
                choices.append(run_choice(dec, p, v, t, pi, max_new_tokens, builder, ab_builder, chat, r))
                bar.update(1)
            _append(answers_path(out, t, v.label), make_record(p, v, t, choices, ctx))
            written += 1
    except BaseException:
        bar.close()
        n = len(read_answers(out))
        print(f"bench stopped: {n} finished records are kept in {out / 'answers'} "
              f"(continue with --resume --out {out}; tables with --summarize {out})", file=sys.stderr)
        raise
    bar.close()
    return written


def _rotate(variants, k):
    k %= max(len(variants), 1)
    return variants[k:] + variants[:k]


# --- summaries ---------------------------------------------------------------------------------

def _per_prompt(recs: list[dict]) -> dict:
    """{(tkey, label): {question_id: record}} (the last record wins when a prompt repeats)."""
    out: dict = {}
    for r in recs:
        out.setdefault((tkey(r["temperature"]), r["label"]), {})[r["question_id"]] = r
    return out


def _label_order(recs: list[dict], preferred: list[str] | None = None) -> list[str]:
    seen = list(preferred or [])
    for r in recs:
        if r["label"] not in seen:
            seen.append(r["label"])
    present = {r["label"] for r in recs}
    return [l for l in seen if l in present]


def _lossless_rows(by: dict, temps: list[str], labels: list[str]) -> list[dict]:
    rows = []
    for t in temps:
        if float(t) >= 1e-5 or (t, "ar") not in by:
            continue
        ar = by[(t, "ar")]
        for lab in labels:
            if lab == "ar":
                continue
            for qid, rec in by.get((t, lab), {}).items():
                if qid not in ar:
                    continue
                where = stats.first_difference(rec["choices"][0]["token_ids"], ar[qid]["choices"][0]["token_ids"])
                first = None if where is None else (f"turn {where[0]}" if where[1] is None
                                                    else f"turn {where[0]} token {where[1]}")
                rows.append({"temperature": float(t), "label": lab, "question_id": qid,
                             "category": rec["category"], "equal": first is None, "first_difference": first or ""})
    return rows


def summarize(out: Path, order: list[str] | None = None, focus: str | None = None, n_boot: int = 10000) -> dict:
    """Tables, CIs and the final JSON object from the answer files of ``out``."""
    import pandas as pd
    out = Path(out)
    recs = read_answers(out)
    if not recs:
        raise _user_error(f"no benchmark records under {out / 'answers'}")
    if order is None:
        try:
            order = [m["label"] for m in json.loads((out / "run.json").read_text())["methods"]]
        except (OSError, ValueError, KeyError, TypeError):
            order = None
    by = _per_prompt(recs)
    temps = sorted({k[0] for k in by}, key=float)
    labels = _label_order(recs, order)
    lossless = _lossless_rows(by, temps, labels)
    loss_by = {}
    for row in lossless:
        loss_by.setdefault((tkey(row["temperature"]), row["label"]), []).append(row["equal"])

    rows, ci_rows, result = [], [], {}
    for t in temps:
        ar = by.get((t, "ar"), {})
        cats = sorted({r["category"] for (tt, _), d in by.items() if tt == t for r in d.values()})
        groups = sorted({r.get("group") or r["category"] for (tt, _), d in by.items() if tt == t for r in d.values()})
        scopes = [("overall", None)] + [(c, ("category", c)) for c in cats]
        if groups != cats:
            scopes += [(f"[{g}]", ("group", g)) for g in groups]
        for lab in labels:
            d = by.get((t, lab))
            if not d:
                continue
            for scope, sel in scopes:
                qs = [q for q, r in d.items() if sel is None or (r.get(sel[0]) or r["category"]) == sel[1]]
                if not qs:
                    continue
                sub = [d[q] for q in qs]
                tps = {q: d[q]["tokens_per_s"] for q in qs}
                nodes = [n for r in sub for c in r["choices"] for n in c.get("tree_nodes", [])]
                budget = sub[0].get("budget")
                row = {"temperature": float(t), "label": lab, "method": sub[0]["method"], "scope": scope,
                       "n_prompts": len(qs), "tau": stats.tau([[a for c in r["choices"] for a in c["accept_lengths"]]
                                                              for r in sub]),
                       "tokens_per_s": stats.mean(tps.values()), "speedup": None}
                if ar:
                    keys, a, b = stats.paired(tps, {q: r["tokens_per_s"] for q, r in ar.items()})
                    row["speedup"] = stats.speedup(a, b) if keys else None
                for s in STAGES:
                    row[f"{s}_ms"] = stats.mean(r["stage_ms"][s] for r in sub)
                is_ar = sub[0]["method"] == "ar"
                row.update({"budget": None if is_ar else budget, "corr_topm": None if is_ar else sub[0].get("corr_topm"),
                            "mean_nodes": stats.mean(nodes) if nodes else 0.0,
                            "hit_max_frac": (sum(n >= budget for n in nodes) / len(nodes)) if nodes and budget else None,
                            "new_tokens": stats.mean(sum(c["new_tokens"]) for r in sub for c in r["choices"])})
                if scope == "overall":
                    eq = loss_by.get((t, lab))
                    row["lossless"] = (all(eq) if eq else None) if lab != "ar" else (True if float(t) < 1e-5 else None)
                    row["lossless_mismatches"] = (len(eq) - sum(eq)) if eq else 0
                rows.append(row)
        # paired bootstrap CIs of throughput ratios over prompts
        present = [l for l in labels if (t, l) in by]
        fcs = focus if focus in present else ("dominotree" if "dominotree" in present else
                                             next((l for l in reversed(present) if l != "ar"), None))
        pairs = [(l, "ar") for l in present if l != "ar" and "ar" in present]
        if fcs:
            pairs += [(fcs, l) for l in present if l not in ("ar", fcs)]
        for a_lab, b_lab in pairs:
            da, db = by[(t, a_lab)], by[(t, b_lab)]
            for scope, sel in scopes:
                qa = {q: r["tokens_per_s"] for q, r in da.items()
                      if sel is None or (r.get(sel[0]) or r["category"]) == sel[1]}
                keys, xa, xb = stats.paired(qa, {q: r["tokens_per_s"] for q, r in db.items()})
                if not keys:
                    continue
                ci = stats.paired_bootstrap_ratio(xa, xb, n_boot=n_boot, seed=0)
                ci_rows.append({"temperature": float(t), "a": a_lab, "b": b_lab, "scope": scope, **ci.to_dict(),
                                "text": ci.fmt()})
        # the JSON object
        methods = {}
        for row in rows:
            if row["temperature"] != float(t) or row["scope"] != "overall":
                continue
            m = {"tau": _r(row["tau"]), "tokens_per_s": _r(row["tokens_per_s"]), "speedup": _r(row["speedup"]),
                 "lossless": row.get("lossless"), "n_prompts": row["n_prompts"],
                 "stage_ms": {s: _r(row[f"{s}_ms"]) for s in STAGES}}
            if row["method"] in ADAPTIVE:
                m.update({"mean_budget": _r(row["mean_nodes"]), "max_budget": row["budget"],
                          "hit_max_frac": _r(row["hit_max_frac"])})
            methods[row["label"]] = m
        cis = {f"{c['a']} vs {c['b']}": {"pct": _r(c["pct"]), "lo": _r(c["lo"]), "hi": _r(c["hi"]),
                                         "excludes_zero": c["excludes_zero"], "n": c["n"]}
               for c in ci_rows if c["temperature"] == float(t) and c["scope"] == "overall"}
        result[t] = {"methods": methods, "ci": cis}

    df = pd.DataFrame(rows)
    cdf = pd.DataFrame(ci_rows)
    ldf = pd.DataFrame(lossless, columns=["temperature", "label", "question_id", "category", "equal",
                                          "first_difference"])
    df.to_csv(out / "summary.csv", index=False)
    cdf.to_csv(out / "ci.csv", index=False)
    ldf.to_csv(out / "lossless.csv", index=False)
    (out / "summary.md").write_text(summary_markdown(df, cdf, out, _tie_notes(out, lossless)), encoding="utf-8")
    (out / "ci.md").write_text(ci_markdown(cdf), encoding="utf-8")
    (out / "headline.md").write_text(headline_markdown(df, labels), encoding="utf-8")
    res = {"temps": temps, "labels": labels, "summary": df, "ci": cdf, "lossless": ldf, "result": result,
           "records": recs}
    found = claims.evaluate(res)
    if found:       # runs without a plain `dominotree` label (sweeps, subsets) have no claims to decide
        (out / "claims.md").write_text(claims.to_markdown(found, _run_line(out)), encoding="utf-8")
    else:
        (out / "claims.md").unlink(missing_ok=True)
    for t in temps:
        result[t]["claims"] = {c.key: c.reproduced for c in found if c.temperature == float(t)}
    res["claims"] = found
    return res


def _run_line(out: Path) -> str:
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return ""
    hw = run.get("hardware", {})
    return (f"Command: `{run.get('command', '')}`  \nPair: {run.get('preset')} ({run.get('dtype')}) on "
            f"{hw.get('gpu') or hw.get('cpu')}, {hw.get('torch_threads')} torch threads.")


def _r(x, nd: int = 4):
    if x is None:
        return None
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return round(x, nd) if x == x else None


def md_table(df, cols: list[str], floatfmt: dict | None = None) -> str:
    """A GitHub markdown table (no tabulate dependency)."""
    floatfmt = floatfmt or {}
    if df is None or len(df) == 0:
        return "_(no rows)_\n"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        cells = []
        for c in cols:
            v = r.get(c)
            if v is None or (isinstance(v, float) and v != v):
                cells.append("")
            elif isinstance(v, float):
                cells.append(format(v, floatfmt.get(c, ".3f")))
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


SUMMARY_COLS = ["label", "scope", "n_prompts", "tau", "tokens_per_s", "speedup", "draft_ms", "build_ms", "verify_ms",
                "commit_ms", "mean_nodes", "lossless"]
FMT = {"temperature": ".1f", "budget": ".0f", "corr_topm": ".0f", "tau": ".2f", "tokens_per_s": ".1f", "speedup": ".2f", "draft_ms": ".2f", "build_ms": ".2f", "verify_ms": ".2f",
       "commit_ms": ".2f", "mean_nodes": ".1f", "hit_max_frac": ".2f", "pct": "+.2f", "lo": ".2f", "hi": ".2f"}


def _tie_notes(out: Path, lossless: list[dict]) -> dict[float, str]:
    """{temperature: paragraph} from ``ties.csv`` when the run wrote one."""
    import pandas as pd
    from . import ties
    path = out / "ties.csv"
    if not path.is_file():
        return {}
    try:
        tdf = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.EmptyDataError):
        return {}
    notes = {}
    for t in sorted({r["temperature"] for r in lossless}):
        rows = tdf[tdf["temperature"] == t].to_dict("records") if len(tdf) else []
        notes[float(t)] = ties.summary_line(rows, sum(1 for r in lossless if r["temperature"] == t))
    return notes


def summary_markdown(df, cdf, out: Path, notes: dict[float, str] | None = None) -> str:
    run = {}
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        pass
    parts = ["# Benchmark summary\n"]
    if run:
        hw = run.get("hardware", {})
        parts.append(f"- command: `{run.get('command', '')}`\n- preset: {run.get('preset')} ({run.get('dtype')}), "
                     f"device: {hw.get('gpu') or hw.get('cpu')} ({hw.get('torch_threads')} torch threads)\n"
                     f"- versions: {', '.join(f'{k} {v}' for k, v in run.get('versions', {}).items())}\n"
                     f"- tau = mean over prompts of mean (accepted drafts + 1) per round; speedup = mean "
                     f"per-prompt tokens/s / mean `ar` tokens/s on the same prompts in this run; stage ms are "
                     f"means per round.\n")
    for t in sorted(df["temperature"].unique()) if len(df) else []:
        sub = df[df["temperature"] == t]
        parts.append(f"\n## T = {t}\n\n### Overall\n\n")
        parts.append(md_table(sub[sub["scope"] == "overall"], SUMMARY_COLS, FMT))
        if notes and notes.get(float(t)):
            parts.append("\n`lossless`: every output equals `ar`'s token for token. " + notes[float(t)] + "\n")
        ad = sub[(sub["scope"] == "overall") & sub["method"].isin(ADAPTIVE)]
        if len(ad):
            parts.append("\n### Adaptive budgets\n\n")
            parts.append(md_table(ad, ["label", "budget", "mean_nodes", "hit_max_frac", "tau", "tokens_per_s",
                                       "speedup"], FMT))
        parts.append("\n### By category\n\n")
        parts.append(md_table(sub[sub["scope"] != "overall"].sort_values(["scope", "label"], kind="stable"),
                              ["scope", "label", "n_prompts", "tau", "tokens_per_s", "speedup"], FMT))
        if cdf is not None and len(cdf):
            c = cdf[(cdf["temperature"] == t) & (cdf["scope"] == "overall")]
            parts.append("\n### Throughput ratios, paired bootstrap 95 % CI over prompts (overall)\n\n")
            parts.append(md_table(c, ["a", "b", "n", "text", "excludes_zero"], FMT))
    return "".join(parts)


def headline_markdown(df, labels: list[str]) -> str:
    """One row per method, tau / tokens per s / speedup per temperature (the README's table)."""
    if df is None or not len(df):
        return "_(no rows)_\n"
    ov = df[df["scope"] == "overall"]
    temps = sorted(ov["temperature"].unique())
    head = "| method | " + " | ".join(f"T={t:g} tau | T={t:g} tok/s | T={t:g} speedup" for t in temps) + " |"
    lines = [head, "|---|" + "---:|" * (3 * len(temps))]
    for lab in labels:
        cells = []
        for t in temps:
            r = ov[(ov["label"] == lab) & (ov["temperature"] == t)]
            if not len(r):
                cells += ["", "", ""]
                continue
            r = r.iloc[0]
            sp = r["speedup"]
            cells += [f"{r['tau']:.2f}", f"{r['tokens_per_s']:.1f}",
                      f"{sp:.2f}x" if sp is not None and sp == sp else ""]
        lines.append(f"| {lab} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def ci_markdown(cdf) -> str:
    if cdf is None or not len(cdf):
        return "# Paired-bootstrap CIs\n\n_(no pairs)_\n"
    parts = ["# Throughput ratio a/b: percent change, paired bootstrap 95 % CI over prompts\n"]
    for t in sorted(cdf["temperature"].unique()):
        parts.append(f"\n## T = {t}\n\n")
        parts.append(md_table(cdf[cdf["temperature"] == t], ["a", "b", "scope", "n", "pct", "lo", "hi",
                                                              "excludes_zero"], FMT))
    return "".join(parts)


def final_object(res: dict, preset: str, device: str, out: Path, hardware: str) -> dict:
    obj = {"preset": preset, "device": device, "hardware": hardware, "out": str(out)}
    temps = res["temps"]
    if len(temps) == 1:
        obj.update(res["result"][temps[0]])
        obj["temperature"] = float(temps[0])
    else:
        obj["by_temperature"] = {t: res["result"][t] for t in temps}
    return obj


def human_table(res: dict) -> str:
    df = res["summary"]
    lines = []
    for t in res["temps"]:
        sub = df[(df["temperature"] == float(t)) & (df["scope"] == "overall")]
        lines.append(f"T={t}")
        lines.append(f"{'method':<22}{'tau':>7}{'tok/s':>9}{'speedup':>9}{'build ms':>10}{'verify ms':>11}  lossless")
        for _, r in sub.iterrows():
            sp = f"{r['speedup']:.2f}x" if r["speedup"] == r["speedup"] and r["speedup"] is not None else "-"
            ll = {True: "yes", False: "NO"}.get(r.get("lossless"), "-")
            lines.append(f"{r['label']:<22}{r['tau']:>7.2f}{r['tokens_per_s']:>9.1f}{sp:>9}{r['build_ms']:>10.2f}"
                         f"{r['verify_ms']:>11.2f}  {ll}")
        c = res["ci"]
        if len(c):
            c = c[(c["temperature"] == float(t)) & (c["scope"] == "overall")]
            for _, r in c.iterrows():
                lines.append(f"  {r['a']} vs {r['b']}: {r['text']}")
        found = [c for c in res.get("claims", []) if c.temperature == float(t)]
        if found:
            ok = sum(c.reproduced for c in found)
            lines.append(f"  paper claims reproduced: {ok} of {len(found)}"
                         + "".join(f"\n    no: {c.claim} ({c.evidence})" for c in found if not c.reproduced))
    return "\n".join(lines)


def write_ablation(res: dict, name: str, out: Path) -> None:
    df = res["summary"]
    sub = df[df["scope"] == "overall"].copy()
    cols = ["temperature", "label", "method", "budget", "corr_topm", "tau", "tokens_per_s", "speedup", "build_ms",
            "mean_nodes"]
    sub = sub[cols]
    sub.to_csv(out / f"ablation_{name}.csv", index=False)
    title = {"ladder": "Conditioning ladder (marg < condstatic < dominotree in tau?)",
             "topm": "Top-M sweep: tau and build time (0 = full vocabulary)",
             "budget": "Budget sweep: tau and throughput vs budget"}[name]
    (out / f"ablation_{name}.md").write_text(f"# {title}\n\n" + md_table(sub, cols, FMT), encoding="utf-8")


# --- CLI ---------------------------------------------------------------------------------------

def _floats(s: str, name: str) -> list[float]:
    try:
        out = [float(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise _user_error(f"{name} must be a comma-separated list of numbers, got {s!r}") from None
    if not out:
        raise _user_error(f"{name} is empty")
    for t in out:
        if not 0 <= t <= 100:
            raise _user_error(f"{name}: temperature must be in [0, 100], got {t}")
    return out


def _ints(s: str, name: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise _user_error(f"{name} must be a comma-separated list of integers, got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    from ..cli import add_model_args, add_tree_args
    p = argparse.ArgumentParser(prog="python -m dominotree bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p)
    add_tree_args(p)
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
                   help="comma list of NAME[@BUDGET][/mM] (default: every method the pair has drafters for)")
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
    g.add_argument("--no-warmup", action="store_true")
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads")
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
    from .cost import CostModel, default_path, load_cost_model, profile
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
        raise _user_error("--max-new-tokens must be >= 1")
    if a.repeats < 1:
        raise _user_error("--repeats must be >= 1")
    from .datasets import load_prompts
    prompts = load_prompts(a.prompts, a.dataset, a.limit)
    if a.prepare_only:
        print(json.dumps({"prompts": len(prompts), "categories": sorted({p.category for p in prompts})}))
        return 0
    temps = list(dict.fromkeys(_floats(a.temperatures, "--temperatures")))
    try:
        base = TreeConfig(budget=a.budget, corr_topm=a.corr_topm, node_topk=a.node_topk)
    except ConfigError as e:
        raise _user_error(str(e)) from None
    if a.ablation:
        variants = ablation_variants(a.ablation, base, a.methods, _ints(a.budgets, "--budgets"),
                                     _ints(a.topms, "--topms"))
        for v in variants:   # validate every config before loading models
            TreeConfig(**{k: getattr(v.tree, k) for k in ("budget", "corr_topm", "node_topk", "max_depth")})
    else:
        variants = parse_variants(a.methods, base) if a.methods else None
    if a.threads:
        import torch
        torch.set_num_threads(a.threads)
    from ..cli import load_pair_from_args
    from .cost import device_slug
    pair = load_pair_from_args(a)
    if variants is None:
        variants = [Variant(m, m, base) for m in METHODS if _has_drafter(pair, m)]
    for v in variants:
        pair.drafter_for(v.method)   # clear error when a drafter is missing or mismatched
    out = Path(a.out) if a.out else Path("results") / f"bench-{pair.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    if (out / "answers").is_dir() and any((out / "answers").rglob("*.jsonl")):
        if a.overwrite:
            shutil.rmtree(out / "answers")
        elif not a.resume:
            raise _user_error(f"{out} already holds answers: pass --resume to continue it or --overwrite to replace them")
    out.mkdir(parents=True, exist_ok=True)
    cm = resolve_cost_model(a, pair, any(v.method in ADAPTIVE for v in variants), out)
    dec = _bench_decoder(pair, cm)
    chat = not a.no_chat
    check_prompts(dec, prompts, a.max_new_tokens, chat)
    hw = hardware_info(pair.target.device)
    run_meta = {"command": "python -m dominotree bench " + " ".join(argv if argv is not None else sys.argv[1:]),
                "preset": pair.name, "paths": pair.paths, "dtype": str(pair.target.dtype).replace("torch.", ""),
                "device": device_slug(pair.target.device), "hardware": hw, "versions": versions_info(),
                "methods": [{"label": v.label, "method": v.method, "budget": v.tree.budget,
                             "corr_topm": v.tree.corr_topm, "node_topk": v.tree.node_topk} for v in variants],
                "temperatures": temps, "max_new_tokens": a.max_new_tokens, "repeats": a.repeats,
                "prompts": a.prompts or a.dataset or "eval", "n_prompts": len(prompts), "limit": a.limit,
                "builder": a.builder, "ablation": a.ablation, "chat": chat, "resumed": bool(a.resume),
                "seeds": f"{SEED_BASE} + 100*prompt_idx + turn_idx",
                "cost_model": (cm.meta if cm is not None else None),
                "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out / "run.json").write_text(json.dumps(run_meta, indent=1, default=str))
    from .datasets import write_jsonl
    write_jsonl(prompts, out / "prompts.jsonl")
    ctx = {"builder": a.builder, "preset": pair.name, "dtype": run_meta["dtype"], "max_new_tokens": a.max_new_tokens,
           "hardware": {k: hw[k] for k in ("device", "cpu", "torch_threads") if k in hw} | (
               {"gpu": hw["gpu"]} if "gpu" in hw else {}),
           "versions": versions_info()}
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
    from . import ties
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
    figs = []
    if not a.no_figures:
        from .figures import make_figures
        figs = make_figures(res, out / "figures")
    obj = final_object(res, run.get("preset", ""), run.get("device", ""), out, hw.get("gpu") or hw.get("cpu") or "")
    obj["figures"] = [str(f) for f in figs]
    (out / "results.json").write_text(json.dumps(obj, indent=1))
    if not a.json:
        print(human_table(res))
        print(f"tables: {out / 'summary.md'}, {out / 'ci.md'}; answers: {out / 'answers'}", file=sys.stderr)
    print(json.dumps(obj))
    return 0
