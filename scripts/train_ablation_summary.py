"""Summarise scripts/train_ablation.sh: held-out acceptance against training time per config.

Reads FOLDER/*.log (the trainer's own log lines; FOLDER defaults to results/train-ablation) and
writes FOLDER/README.md: one row per config (steps, step time and its parts, rows per second,
held-out greedy chain acceptance at the last evaluation) and the acceptance curves.

    python scripts/train_ablation_summary.py [FOLDER]
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "results" / "train-ablation"
EVAL = re.compile(r"eval step (\d+) \| (\d+) s \| acc dflash ([\d.]+) domino ([\d.]+) \(base ([\d.]+)\)")
STEP = re.compile(r"\] step (\d+) \| (\d+) s .*?\| rows (\d+)/(\d+).*?\| step ([\d.]+) s "
                  r"\(feat ([\d.]+) bb ([\d.]+) head\+bwd ([\d.]+)\)")
DATA = re.compile(r"data (\S+): (\d+) sequences, train (\d+) \((\d+) answer tokens")


def parse(log: Path) -> dict:
    evals, steps, data, done, start = [], [], None, None, ""
    for line in log.read_text().splitlines():
        if (m := EVAL.search(line)):
            evals.append(dict(step=int(m[1]), s=int(m[2]), dflash=float(m[3]), domino=float(m[4]), base=float(m[5])))
        elif (m := STEP.search(line)):
            steps.append(dict(rows=int(m[3]) + int(m[4]), dt=float(m[5]), feat=float(m[6]), bb=float(m[7]),
                              head=float(m[8])))
        elif (m := DATA.search(line)):
            data = dict(seqs=int(m[2]), train=int(m[3]), answer_tokens=int(m[4]))
        elif "done: " in line:
            done = json.loads(line.split("done: ", 1)[1])
        elif "start: " in line and not start:
            start = line.split("start: ", 1)[1]
    return dict(evals=evals, steps=steps, data=data, done=done, cmd=start)


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    logs = sorted(OUT.glob("*.log"), key=lambda p: p.stat().st_mtime)
    if not logs:
        print(f"no logs in {OUT}", file=sys.stderr)
        return 1
    runs = {p.stem: parse(p) for p in logs}
    machine = (OUT / "machine.txt").read_text().strip() if (OUT / "machine.txt").exists() else "(not recorded)"
    made = (OUT / "MADE_BY").read_text().strip() if (OUT / "MADE_BY").exists() else \
        "`scripts/train_ablation.sh` (each config alone on the machine, same seed, data and held-out split, same wall-clock budget)"
    lines = ["# Training ablations for the embedded drafters (issue 10)", "",
             f"Made by {made} and `python scripts/train_ablation_summary.py {OUT}`.",
             "Acceptance is the held-out greedy chain acceptance the trainer logs (tokens per block, bonus",
             "included, on the held-out sequences' blocks): `dflash`, `domino` (corrected), `base` (Domino",
             "uncorrected).", "", "Machine:", "", "```", machine, "```", ""]
    d = next((r["data"] for r in runs.values() if r["data"]), None)
    if d:
        lines += [f"Data: {d['seqs']} sequences, {d['train']} for training ({d['answer_tokens']} answer tokens).", ""]
    lines += ["| config | finished | steps | step s (feat / backbones / head+bwd) | rows/s | acc dflash | acc domino | acc base |",
              "|---|---|---:|---|---:|---:|---:|---:|"]
    for name, r in runs.items():
        st, ev = r["steps"], r["evals"]
        last = ev[-1] if ev else None
        rows_s = sum(x["rows"] for x in st) / max(1e-9, sum(x["dt"] for x in st))
        part = f"{med([x['dt'] for x in st]):.2f} ({med([x['feat'] for x in st]):.2f} / {med([x['bb'] for x in st]):.2f} / {med([x['head'] for x in st]):.2f})"
        acc = (f"{last['dflash']:.3f} | {last['domino']:.3f} | {last['base']:.3f}" if last else "- | - | -")
        lines.append(f"| `{name}` | {'yes' if r['done'] else 'no'} | {last['step'] if last else 0} | {part} | {rows_s:.0f} | {acc} |")
    lines += ["", "## Held-out acceptance (domino / dflash) against training seconds", ""]
    for name, r in runs.items():
        pts = ", ".join(f"{e['s']} s: {e['domino']:.3f} / {e['dflash']:.3f}" for e in r["evals"])
        lines += [f"- `{name}`: {pts}", f"  - `{r['cmd']}`"]
    (OUT / "README.md").write_text("\n".join(lines) + "\n")
    print((OUT / "README.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
