"""The held-out acceptance curve of the embedded drafters' training stages (issue 10): each
stage's periodic evaluations (greedy chain acceptance of DFlash and Domino on the held-out
blocks, from its ``train_log.txt``) against training minutes, one line per stage and drafter.

    .venv/bin/python scripts/experiments/heldout_curve.py [--out results/train-stage7/heldout_curve]

Writes OUT.png and OUT.csv. Stages 3-4 and 6-7 each started from the pair shipped before them
(5 did not ship); all are judged on the same held-out blocks (the first 24 shards' 64 sequences).
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

ROOT = Path(__file__).resolve().parents[2]
EVAL = re.compile(r"eval step (\d+) \| (\d+) s \| acc dflash ([\d.]+) domino ([\d.]+)")


def read_stage(log: Path) -> pd.DataFrame:
    rows = [dict(step=int(m[1]), minutes=int(m[2]) / 60, dflash=float(m[3]), domino=float(m[4]))
            for m in EVAL.finditer(log.read_text(errors="replace"))]
    return pd.DataFrame(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "train-stage7" / "heldout_curve"))
    a = ap.parse_args()
    frames = []
    for log in sorted(ROOT.glob("results/train-stage*/train_log.txt")):
        df = read_stage(log)
        if len(df):
            frames.append(df.assign(stage=int(re.search(r"stage(\d+)", str(log))[1])))
    data = pd.concat(frames, ignore_index=True)
    out = Path(a.out)
    data.to_csv(out.with_suffix(".csv"), index=False)
    fig = go.Figure()
    colors = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#000000"]
    for i, (stage, df) in enumerate(data.groupby("stage")):
        for kind, dash in (("domino", "solid"), ("dflash", "dot")):
            fig.add_scatter(x=df["minutes"], y=df[kind], mode="lines+markers",
                            line=dict(dash=dash, color=colors[i % len(colors)]),
                            name=f"stage {stage} {'Domino' if kind == 'domino' else 'DFlash'}")
    fig.update_layout(title="Held-out greedy chain acceptance while training (64 held-out sequences; "
                            "stages 3-6 float32 on an AVX2 EPYC, 7 bf16 on a Zen 4)",
                      xaxis_title="training minutes in the stage", yaxis_title="acceptance length",
                      template="plotly_white", width=900, height=500)
    fig.write_image(str(out.with_suffix(".png")), scale=2)
    print(data.to_string(index=False))
    print(out.with_suffix(".png"))


if __name__ == "__main__":
    main()
