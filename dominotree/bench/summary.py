"""Summaries of a bench run from its answer files: per method, scope and temperature (tau,
tokens/s, speedup over ``ar`` in the same run, stage ms), paired-bootstrap CIs, the T = 0
lossless check against ``ar``, the paper's claims; writes the tables (``report``) and returns
the result object."""
from __future__ import annotations

import json
from pathlib import Path

from ..config import STAGES
from ..errors import UserError
from . import claims, stats
from .report import ADAPTIVE, _tie_notes, ci_markdown, headline_markdown, summary_markdown
from .run import read_answers, tkey
from .variants import REFERENCE_ROWS, vocab_free


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
            if lab == "ar" or lab in REFERENCE_ROWS:
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
        raise UserError(f"no benchmark records under {out / 'answers'}")
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
                            "draft_vocab": None if is_ar else sub[0].get("draft_vocab"),
                            "mean_nodes": stats.mean(nodes) if nodes else 0.0,
                            "hit_max_frac": (sum(n >= budget for n in nodes) / len(nodes)) if nodes and budget else None,
                            "new_tokens": stats.mean(sum(c["new_tokens"]) for r in sub for c in r["choices"])})
                if scope == "overall":
                    eq = loss_by.get((t, lab))
                    row["lossless"] = (None if lab in REFERENCE_ROWS else (all(eq) if eq else None) if lab != "ar"
                                       else (True if float(t) < 1e-5 else None))
                    row["lossless_mismatches"] = (len(eq) - sum(eq)) if eq else 0
                rows.append(row)
        # paired bootstrap CIs of throughput ratios over prompts
        present = [l for l in labels if (t, l) in by]
        fcs = _find(present, focus) or _find(present, "dominotree") or \
            next((l for l in reversed(present) if l != "ar"), None)
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
                 "lossless": row.get("lossless"), "n_prompts": row["n_prompts"], "draft_vocab": row.get("draft_vocab"),
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


def _find(labels: list[str], name: str | None) -> str | None:
    """``name`` among ``labels``, or the one that is ``name`` with a draft vocabulary (``dominotree/v8192``)."""
    if name is None or name in labels:
        return name
    return next((l for l in labels if vocab_free(l) == name), None)


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
