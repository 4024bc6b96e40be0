"""Markdown and console reports of a bench run: tables, the README headline, CIs, the final JSON
object and the human table printed before it."""
from __future__ import annotations

import json
from pathlib import Path

ADAPTIVE = ("caddtree", "condadaptive")


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
    from . import tiecheck as ties
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
