"""Benchmark figures, PNG and PDF (plotly + kaleido; kaleido drives the system Chromium).

From a ``run.summarize`` result:
- ``speedup``: speedup over ``ar`` by method and category (one panel per temperature);
- ``tau_hist``: the accept-length histogram per method (fraction of rounds, first temperature);
- ``stages``: mean ms per round of draft / build / verify / commit, stacked, per method;
- ``budget_curve``: tau and speedup against the node budget (methods run at 2+ budgets);
- ``adaptive_budget``: the per-round budget chosen by caddtree / condadaptive, with the share of
  rounds that hit the maximum (the CondAdaptive saturation of the paper).
All images of a run are written in one kaleido batch (one browser start).
"""
from __future__ import annotations

import io
import math
import re
import sys
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..colors import STAGE_COLORS
from ..config import STAGES
from . import stats

PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442", "#000000", "#999999",
           "#882255", "#44AA99", "#117733"]
_FONT = dict(family="DejaVu Sans, Helvetica, Arial, sans-serif", size=12)
ADAPTIVE = ("caddtree", "condadaptive")


def _num(v) -> float | None:
    """A summary cell as a float, or None where it is missing (None or NaN: no ``ar`` to compare)."""
    return None if v is None or v != v else float(v)


def _layout(fig: go.Figure, title: str, hardware: str = "", width: int = 900, height: int = 450) -> go.Figure:
    sub = f"<br><sup>{hardware}</sup>" if hardware else ""
    fig.update_layout(title=dict(text=title + sub, x=0.01), font=_FONT, template="plotly_white", width=width,
                      height=height, margin=dict(l=60, r=20, t=70, b=60), legend=dict(orientation="v"))
    return fig


_COLOR_ORDER: list[str] = []


def _colors(labels):
    """One colour per method label, stable across the figures of a run (set by ``build_figures``)."""
    order = _COLOR_ORDER + [l for l in labels if l not in _COLOR_ORDER]
    return {l: PALETTE[order.index(l) % len(PALETTE)] for l in labels}


def speedup_figure(res: dict, hardware: str = "") -> go.Figure | None:
    df = res["summary"]
    if not len(df) or df["speedup"].isna().all():
        return None
    temps = res["temps"]
    labels = [l for l in res["labels"] if l != "ar"]
    col = _colors(labels)
    fig = make_subplots(rows=1, cols=len(temps), subplot_titles=[f"T = {t}" for t in temps], shared_yaxes=True)
    for j, t in enumerate(temps, start=1):
        sub = df[(df["temperature"] == float(t)) & ~df["scope"].str.startswith("[")]
        scopes = ["overall"] + sorted(s for s in sub["scope"].unique() if s != "overall")
        for lab in labels:
            d = sub[sub["label"] == lab].set_index("scope")
            ys = [_num(d.loc[s, "speedup"]) if s in d.index else None for s in scopes]
            fig.add_trace(go.Bar(name=lab, x=scopes, y=ys, marker_color=col[lab], showlegend=j == 1,
                                 legendgroup=lab, text=[f"{y:.2f}" if y is not None and len(labels) <= 4 else "" for y in ys],
                                 textposition="outside"), row=1, col=j)
    top = max([1.0] + [v for v in map(_num, df["speedup"]) if v is not None])
    fig.add_hline(y=1.0, line_dash="dot", line_color="#666")
    fig.update_layout(barmode="group")
    fig.update_yaxes(range=[0, top * 1.18])
    fig.update_yaxes(title_text="speedup over ar (x)", row=1, col=1)
    fig = _layout(fig, "Speedup over autoregressive decoding, by category", hardware,
                  width=max(700, 380 * len(temps)))
    fig.update_layout(margin=dict(t=100))
    return fig


def tau_histogram(res: dict, hardware: str = "") -> go.Figure | None:
    recs = res["records"]
    t0 = res["temps"][0]
    labels = res["labels"]
    col = _colors([l for l in labels if l != "ar"])
    acc = {l: [] for l in labels}
    for r in recs:
        if str(float(r["temperature"])) == t0 and r["label"] in acc:
            for c in r["choices"]:
                acc[r["label"]] += c["accept_lengths"]
    top = max((max(v) for v in acc.values() if v), default=1)
    fig = go.Figure()
    for lab in labels:
        if lab == "ar" or not acc[lab]:
            continue
        h = stats.accept_histogram(acc[lab], top)
        fig.add_trace(go.Bar(name=f"{lab} (tau {stats.mean(acc[lab]):.2f})", x=list(range(1, top + 1)), y=h[1:],
                             marker_color=col[lab]))
    if not fig.data:
        return None
    fig.update_layout(barmode="group", xaxis_title="tokens committed per round (accepted drafts + bonus)",
                      yaxis_title="fraction of rounds", xaxis=dict(dtick=1))
    return _layout(fig, f"Accept-length histogram (T = {t0})", hardware)


def stage_figure(res: dict, hardware: str = "") -> go.Figure | None:
    df = res["summary"]
    t0 = float(res["temps"][0])
    sub = df[(df["temperature"] == t0) & (df["scope"] == "overall")]
    if not len(sub):
        return None
    labels = list(sub["label"])
    fig = go.Figure()
    for s in STAGES:
        fig.add_trace(go.Bar(name=s, x=labels, y=[float(v) for v in sub[f"{s}_ms"]], marker_color=STAGE_COLORS[s]))
    tot = [sum(float(r[f"{s}_ms"]) for s in STAGES) for _, r in sub.iterrows()]
    fig.add_trace(go.Scatter(x=labels, y=tot, mode="text", showlegend=False,
                             text=[f"tau {r['tau']:.2f}<br>{r['tokens_per_s']:.1f} tok/s" for _, r in sub.iterrows()],
                             textposition="top center"))
    fig.update_layout(barmode="stack", yaxis_title="ms per round (mean)",
                      yaxis=dict(range=[0, max(tot + [1e-3]) * 1.3]))
    return _layout(fig, f"Stage time per round (T = {res['temps'][0]})", hardware)


def budget_curve(res: dict, hardware: str = "") -> go.Figure | None:
    df = res["summary"]
    t0 = float(res["temps"][0])
    sub = df[(df["temperature"] == t0) & (df["scope"] == "overall") & (df["method"] != "ar")
             & ~df["method"].isin(ADAPTIVE)]
    if not len(sub):
        return None
    sub = sub[sub["corr_topm"] == sub.groupby("method")["corr_topm"].transform("first")]
    methods = [m for m in sub["method"].unique() if sub[sub["method"] == m]["budget"].nunique() >= 2]
    if not methods:
        return None
    col = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(methods)}
    fig = make_subplots(rows=1, cols=2, subplot_titles=["tau", "speedup over ar"])
    for m in methods:
        d = sub[sub["method"] == m].sort_values("budget")
        for j, y in enumerate(("tau", "speedup"), start=1):
            fig.add_trace(go.Scatter(x=[int(b) for b in d["budget"]], y=[_num(v) for v in d[y]],
                                     mode="lines+markers", name=m, marker_color=col[m], legendgroup=m,
                                     showlegend=j == 1), row=1, col=j)
    fig.update_xaxes(type="log", title_text="node budget", tickvals=sorted({int(b) for b in sub["budget"]}))
    fig = _layout(fig, f"Budget curve (T = {res['temps'][0]})", hardware, width=1000)
    fig.update_layout(margin=dict(t=100))
    return fig


def topm_curve(res: dict, hardware: str = "") -> go.Figure | None:
    """Top-M sweep: tau and build time of the same method at several ``corr_topm`` (0 = full vocab)."""
    df = res["summary"]
    t0 = float(res["temps"][0])
    sub = df[(df["temperature"] == t0) & (df["scope"] == "overall") & (df["method"] == "dominotree")]
    if not len(sub) or sub["corr_topm"].nunique() < 2:
        return None
    sub = sub.assign(order=[int(m) if int(m) > 0 else 10 ** 9 for m in sub["corr_topm"]]).sort_values("order")
    xs = [str(int(m)) if int(m) > 0 else "full vocab" for m in sub["corr_topm"]]
    fig = make_subplots(rows=1, cols=3, subplot_titles=["tau", "build ms per round", "speedup over ar"])
    for j, (y, fmt) in enumerate((("tau", ".2f"), ("build_ms", ".1f"), ("speedup", ".2f")), start=1):
        vals = [_num(v) for v in sub[y]]
        fig.add_trace(go.Scatter(x=xs, y=vals, mode="lines+markers+text", marker_color=PALETTE[0], showlegend=False,
                                 text=[format(v, fmt) if v is not None else "" for v in vals],
                                 textposition="top center"), row=1, col=j)
    fig.update_xaxes(type="category")
    fig.update_xaxes(title_text="Top-M (base candidates the correction rescores)", row=1, col=2)
    for j, y in enumerate(("tau", "build_ms", "speedup"), start=1):
        vals = [v for v in map(_num, sub[y]) if v is not None]
        if vals:
            lo, hi = min(vals), max(vals)
            pad = (hi - lo) * 0.25 or abs(hi) * 0.1 or 1.0
            fig.update_yaxes(range=[lo - pad, hi + pad], row=1, col=j)
    fig = _layout(fig, f"Top-M sweep, dominotree (T = {res['temps'][0]})", hardware, width=1100)
    fig.update_layout(margin=dict(t=100))
    return fig


def adaptive_budget_figure(res: dict, hardware: str = "") -> go.Figure | None:
    recs = res["records"]
    t0 = res["temps"][0]
    nodes, maxb = {}, {}
    for r in recs:
        if r["method"] in ADAPTIVE and str(float(r["temperature"])) == t0:
            for c in r["choices"]:
                nodes.setdefault(r["label"], []).extend(c.get("tree_nodes", []))
            maxb[r["label"]] = r["budget"]
    if not nodes:
        return None
    col = _colors(list(nodes))
    fig = go.Figure()
    for lab, ns in nodes.items():
        hit = sum(n >= maxb[lab] for n in ns) / max(len(ns), 1)
        top = max(maxb[lab], max(ns, default=0))
        counts = [0] * (top + 1)
        for n in ns:
            counts[min(n, top)] += 1
        fig.add_trace(go.Bar(name=f"{lab}: max {maxb[lab]}, hits max in {hit:.0%} of {len(ns)} rounds",
                             x=list(range(top + 1)), y=[c / max(len(ns), 1) for c in counts], marker_color=col[lab]))
        fig.add_vline(x=maxb[lab], line_dash="dot", line_color=col[lab])
    fig.update_layout(barmode="group", xaxis_title="tree nodes chosen per round", yaxis_title="fraction of rounds",
                      )
    fig = _layout(fig, f"Adaptive budget distribution (T = {t0})", hardware, height=520)
    fig.update_layout(legend=dict(orientation="h", x=0, xanchor="left", y=-0.2, yanchor="top"),
                      margin=dict(b=140))
    return fig


def auto_budget_figure(res: dict, hardware: str = "") -> go.Figure | None:
    """``NAME@auto``'s budget curve from the one calibration run: tau and predicted tokens/s against
    b, with this bench's measured points of the same method (fixed budgets and the auto choice)."""
    auto = res.get("auto_budget") or {}
    if not auto:
        return None
    df = res["summary"]
    t0 = float(res["temps"][0])
    fig = make_subplots(rows=1, cols=2, subplot_titles=["tau (tokens per round)", "tokens/s"])
    vocab = lambda lab: lab.split("/", 1)[1] if "/" in lab else ""      # noqa: E731 ("v8192" of "x@auto/v8192")
    for i, (label, info) in enumerate(auto.items()):
        c = PALETTE[i % len(PALETTE)]
        rows = [r for r in info["curve"] if r["budget"] > 0]       # budget 0 (plain decoding) is the ar line
        xs = [r["budget"] for r in rows]
        fig.add_trace(go.Scatter(x=xs, y=[r["tau"] for r in rows], mode="lines", line_color=c,
                                 name=f"{label}: calibration"), row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[r["predicted_tokens_per_s"] for r in rows], mode="lines",
                                 line_color=c, showlegend=False), row=1, col=2)
        sub = df[(df["temperature"] == t0) & (df["scope"] == "overall") & (df["method"] == info["method"])]
        sub = sub[[vocab(lab) == vocab(label) for lab in sub["label"]]]
        sub = sub[sub["budget"].astype(float) > 0].sort_values("budget")
        for j, y in enumerate(("tau", "tokens_per_s"), start=1):
            fig.add_trace(go.Scatter(x=[int(b) for b in sub["budget"]], y=[float(v) for v in sub[y]], mode="markers",
                                     marker=dict(color=c, size=9, symbol="circle-open", line_width=2),
                                     text=list(sub["label"]), name=f"{label}: measured here",
                                     showlegend=j == 1), row=1, col=j)
        if info["budget"] > 0:
            fig.add_vline(x=info["budget"], line_dash="dot", line_color=c)
            # a log axis places annotations at log10(x) (a vline's own annotation would sit at 10**b)
            fig.add_annotation(x=math.log10(info["budget"]), xref="x", y=0.02 + 0.07 * i, yref="paper",
                               text=f"auto = {info['budget']}", showarrow=False, xanchor="left", font_color=c)
        else:      # no budget pays: auto decodes plainly (a log axis has no 0 to mark)
            fig.add_annotation(x=0.01, xref="paper", y=0.02 + 0.07 * i, yref="paper", xanchor="left",
                               text=f"{label}: auto = 0 (plain decoding: no tree pays)", showarrow=False, font_color=c)
    ar = df[(df["temperature"] == t0) & (df["scope"] == "overall") & (df["method"] == "ar")]
    if len(ar):
        fig.add_hline(y=float(ar["tokens_per_s"].iloc[0]), line_dash="dash", line_color="#999999",
                      annotation_text="ar (measured)", annotation_position="bottom right", row=1, col=2)
    fig.update_xaxes(type="log", title_text="node budget b")
    fig = _layout(fig, f"--budget auto: the budget curve from one calibration run (T = {res['temps'][0]})", hardware,
                  width=1000)
    fig.update_layout(margin=dict(t=100))
    return fig


FIGURES = {"speedup": speedup_figure, "tau_hist": tau_histogram, "stages": stage_figure,
           "budget_curve": budget_curve, "topm_curve": topm_curve, "adaptive_budget": adaptive_budget_figure,
           "budget_auto": auto_budget_figure}


# figures drawn at one temperature: the first one keeps the plain name, later ones get ``_t<T>`` (``tau_hist_t0_5``)
PER_TEMPERATURE = ("tau_hist", "stages", "adaptive_budget")


def build_figures(res: dict, hardware: str = "") -> dict[str, go.Figure]:
    _COLOR_ORDER[:] = [l for l in res.get("labels", []) if l != "ar"]
    temps = list(res.get("temps", []))
    out = {}
    for name, fn in FIGURES.items():
        variants = [(name, res)]
        if name in PER_TEMPERATURE:
            variants += [(f"{name}_t{str(t).replace('.', '_')}", {**res, "temps": [t]}) for t in temps[1:]]
        for key, r in variants:
            fig = fn(r, hardware)
            if fig is not None:
                out[key] = fig
    return out


def _hardware(res: dict) -> str:
    for r in res.get("records", [])[:1]:
        hw = r.get("hardware") or {}
        dev = hw.get("gpu") or hw.get("cpu") or hw.get("device", "")
        thr = f", {hw['torch_threads']} threads" if hw.get("torch_threads") and not hw.get("gpu") else ""
        return f"{r.get('preset', '')} {r.get('dtype', '')} on {dev}{thr}".strip()
    return ""


def palette_png(path: str | Path) -> None:
    """Rewrite a chart's PNG with a 256-colour palette (no dithering) when that is smaller: flat
    plot colours survive exactly, antialiased edges nearly, and the file shrinks about 4x (the
    tracked tree must fit the GPU machine's 64 MiB transfer). Other files are left alone."""
    from PIL import Image
    path = Path(path)
    if path.suffix != ".png" or not path.is_file():
        return
    with Image.open(path) as im:
        im.load()
    if im.mode == "P":
        return
    q = im.quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    buf = io.BytesIO()
    q.save(buf, "PNG", optimize=True)
    if buf.tell() < path.stat().st_size:
        path.write_bytes(buf.getvalue())


def make_figures(res: dict, folder: str | Path, formats=("png", "pdf")) -> list[Path]:
    """Write every applicable figure as PNG and PDF; returns the written paths.

    Without a working kaleido/Chromium the figures are written as standalone HTML instead and a
    warning says so (the benchmark itself never fails on figures).
    """
    import plotly.io as pio
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    figs = build_figures(res, _hardware(res))
    if not figs:
        return []
    items, paths, widths, heights = [], [], [], []
    for name, fig in figs.items():
        for fmt in formats:
            items.append(fig)
            paths.append(folder / f"{re.sub(r'[^a-z0-9_]+', '_', name)}.{fmt}")
            widths.append(fig.layout.width or 900)
            heights.append(fig.layout.height or 450)
    try:
        if hasattr(pio, "write_images"):
            pio.write_images(items, [str(p) for p in paths], width=widths, height=heights, scale=[2] * len(items))
        else:   # older plotly: one browser start per image
            for fig, p, w, h in zip(items, paths, widths, heights):
                fig.write_image(str(p), width=w, height=h, scale=2)
        for p in paths:
            palette_png(p)
        return paths
    except Exception as e:   # no kaleido / no Chromium: keep the figures as HTML
        print(f"warning: static figure export failed ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__}); "
              f"writing HTML figures instead", file=sys.stderr)
        out = []
        for name, fig in figs.items():
            p = folder / f"{name}.html"
            fig.write_html(str(p), include_plotlyjs=True, full_html=True)
            out.append(p)
        return out
