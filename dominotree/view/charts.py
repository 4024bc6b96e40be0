"""Plotly charts and tables of whole runs, the explorer's run summary: stage time per round,
the builders' A/B build times, tokens committed per round, acceptance by depth, the generated
text marked by provenance (accepted draft vs bonus token) and the summary table. Pure functions
of traces (no gradio, no model); the per-round tree views are in figures.py, whose font,
escaping and empty figure these share.

Figure data are plain Python lists (plotly 6+ sends NumPy arrays as typed arrays that older
plotly.js renders as nothing).

Text from the run goes through html.escape: plotly renders a subset of HTML in titles, legends
and hover labels, and provenance_html is an HTML fragment whose tokens are model output
(untrusted text).
"""
from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go

from ..colors import STAGE_COLORS, method_color
from ..config import STAGES
from .export import ACCEPT_COLOR
from .figures import FONT, empty_figure, esc
from .layout import token_piece
from ..trace import DecodeTrace


def _round_axis(trace: DecodeTrace) -> dict:
    """Integer round ticks, at most about 20 of them."""
    return dict(title="round", tick0=0, dtick=max(1, math.ceil(len(trace.rounds) / 20)))


def timing_figure(trace: DecodeTrace) -> go.Figure:
    """Stacked per-round stage times (draft, build, verify, commit) in ms."""
    if not trace.rounds:
        return empty_figure("No rounds to time")
    x = [rt.round + 1 for rt in trace.rounds]
    fig = go.Figure([go.Bar(x=x, y=[float(rt.stage_ms.get(s, 0.0)) for rt in trace.rounds], name=s,
                            marker_color=STAGE_COLORS[s]) for s in STAGES])
    mean = trace.stage_ms()
    fig.update_layout(
        barmode="stack", template="plotly_white", font=FONT, height=340,
        title=dict(text=f"Stage time per round · {esc(trace.method)} · mean {sum(mean.values()):.1f} ms/round"
                        "<br><sup>" + " · ".join(f"{s} {mean[s]:.2f}" for s in STAGES) + " ms</sup>"),
        xaxis=_round_axis(trace), yaxis=dict(title="ms"),
        legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right", traceorder="normal"),
        margin=dict(l=50, r=20, t=80, b=40))
    return fig


def builder_figure(trace: DecodeTrace) -> go.Figure:
    """Per round, the build time of each of the two builders that ran (``build_ab``), with
    rounds whose trees differ marked; without any A/B record, the verified builder's build stage
    time alone, and the title says so."""
    if not trace.rounds:
        return empty_figure("No rounds recorded")
    ab = [rt for rt in trace.rounds if rt.build_ab]
    fig = go.Figure()
    if not ab:
        names = sorted({rt.builder for rt in trace.rounds})
        fig.add_trace(go.Bar(x=[rt.round + 1 for rt in trace.rounds],
                             y=[float(rt.stage_ms.get("build", 0.0)) for rt in trace.rounds],
                             name=", ".join(names), marker_color=STAGE_COLORS["build"]))
        title = (f"Build time per round: {esc(', '.join(names))} builder only "
                 "<br><sup>no second builder ran on these rounds (no A/B record)</sup>")
    else:
        by_name: dict[str, tuple[list, list]] = {}
        for rt in ab:
            for name, ms in zip(rt.build_ab["builders"], rt.build_ab["ms"]):
                xs, ys = by_name.setdefault(str(name), ([], []))
                xs.append(rt.round + 1); ys.append(float(ms))
        for k, (name, (xs, ys)) in enumerate(by_name.items()):
            fig.add_trace(go.Bar(x=xs, y=ys, name=esc(name), marker_color=["#E69F00", "#56B4E9", "#999999"][min(k, 2)]))
        same = [rt for rt in ab if rt.build_ab.get("identical")]
        diff = [rt for rt in ab if not rt.build_ab.get("identical")]
        top = {rt.round: max(float(v) for v in rt.build_ab["ms"]) for rt in ab}
        fig.add_trace(go.Scatter(x=[rt.round + 1 for rt in same], y=[top[rt.round] * 1.08 for rt in same],
                                 mode="markers", name="identical trees",
                                 marker=dict(symbol="circle", size=7, color="#009E73")))
        fig.add_trace(go.Scatter(x=[rt.round + 1 for rt in diff], y=[top[rt.round] * 1.08 for rt in diff],
                                 mode="markers", name="trees differ",
                                 marker=dict(symbol="x", size=11, color=ACCEPT_COLOR)))
        names = " vs ".join(esc(n) for n in by_name)
        title = (f"Build time per round: {names}"
                 f"<br><sup>{len(same)}/{len(ab)} A/B rounds built identical trees"
                 + (f" · {len(trace.rounds) - len(ab)} round(s) without an A/B record" if len(ab) < len(trace.rounds) else "")
                 + "</sup>")
    title += _capture_note(trace)
    fig.update_layout(barmode="group", template="plotly_white", font=FONT, height=340,
                      title=dict(text=title), xaxis=_round_axis(trace), yaxis=dict(title="ms"),
                      legend=dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right"),
                      margin=dict(l=50, r=20, t=80, b=40))
    return fig


def _capture_note(trace: DecodeTrace) -> str:
    """The graph builders' CUDA-graph record (``extra["capture"]``, builders/capture.py) as one line."""
    seen = dict.fromkeys(f"{rt.builder}: {c['mode']}" + (f" ({c['reason']})" if c.get("reason") else "")
                         for rt in trace.rounds if (c := rt.extra.get("capture")))
    return f"<br><sup>CUDA graph: {esc('; '.join(seen))}</sup>" if seen else ""


_BOTTOM_LEGEND = dict(orientation="h", y=-0.22, yanchor="top", x=0, xanchor="left")


def accept_hist_figure(traces: dict[str, DecodeTrace]) -> go.Figure:
    """Share of rounds committing n tokens (accepted drafts + bonus) per method; τ is its mean."""
    traces = {k: t for k, t in traces.items() if t.rounds}
    if not traces:
        return empty_figure("No rounds recorded")
    top = max(rt.accept_len for t in traces.values() for rt in t.rounds)
    xs = list(range(1, top + 1))
    fig = go.Figure()
    for name, t in traces.items():
        counts = [0] * (top + 1)
        for rt in t.rounds:
            counts[rt.accept_len] += 1
        n = len(t.rounds)
        fig.add_trace(go.Bar(x=xs, y=[counts[k] / n for k in xs], name=esc(f"{name} (τ = {t.tau:.2f})"),
                             customdata=[counts[k] for k in xs], marker_color=method_color(name, t),
                             hovertemplate="%{x} tokens: %{y:.1%} of rounds (%{customdata})<extra></extra>"))
    fig.update_layout(
        barmode="group", template="plotly_white", font=FONT, height=380,
        title=dict(text="Tokens committed per round<br><sup>accepted drafts + the bonus token; τ = the mean</sup>"),
        xaxis=dict(title="tokens committed in the round", dtick=1), yaxis=dict(title="share of rounds", tickformat=".0%"),
        legend=_BOTTOM_LEGEND, margin=dict(l=50, r=20, t=80, b=90))
    return fig


def depth_accept_figure(traces: dict[str, DecodeTrace]) -> go.Figure:
    """Per depth d, the share of rounds that accepted at least d draft tokens, per method, up to
    the deepest tree that method drafted (plain AR drafts nothing and draws no line). The same
    ``reach`` as the acceptance yardstick (``python -m dominotree acceptance``)."""
    from ..trace import reach
    fig = go.Figure()
    for name, t in traces.items():
        if not t.rounds:
            continue
        deepest = max(max(rt.tree.depths) for rt in t.rounds)
        if deepest < 1:
            continue
        n = len(t.rounds)
        drafts = [rt.accept_len - 1 for rt in t.rounds]
        ds = list(range(1, deepest + 1))
        hits = [sum(a >= d for a in drafts) for d in ds]
        fig.add_trace(go.Scatter(x=ds, y=reach(drafts, deepest), mode="lines+markers", name=esc(name),
                                 line=dict(color=method_color(name, t)), customdata=hits, hovertemplate=(
                                     "depth %{x}: %{y:.1%} of rounds (%{customdata}/" + str(n) + ")<extra></extra>")))
    if not fig.data:
        return empty_figure("No drafted rounds to measure acceptance by depth")
    fig.update_layout(
        template="plotly_white", font=FONT, height=380,
        title=dict(text="Acceptance by depth<br><sup>share of rounds accepting at least d draft tokens</sup>"),
        xaxis=dict(title="depth d", dtick=1), yaxis=dict(title="rounds", tickformat=".0%", range=[0, 1.05]),
        legend=_BOTTOM_LEGEND, margin=dict(l=50, r=20, t=80, b=90))
    return fig


_PROV = {   # class -> (legend, background, underline)
    "draft": ("accepted draft token", "#cfe3ff", "2px solid #2166ac"),
    "bonus": ("bonus token (the target's own)", "#ffe0b3", "2px dashed #b35806"),
    "prefill": ("first token (sampled by the target after the prompt)", "#e6f5d0", "2px solid #4d9221"),
    "unknown": ("provenance not recorded", "#eeeeee", "1px dotted #666666"),
}


def provenance_html(trace: DecodeTrace, token_text: dict | None = None) -> str:
    """The generated text, one ``<span>`` per token, marking accepted draft tokens vs bonus
    tokens (the round and depth in the title attribute). Everything is HTML-escaped; the
    styles are inline so the fragment renders anywhere."""
    token_text = trace.token_text if token_text is None else token_text
    # token_ids[0] is sampled from the prefill logits and belongs to no round
    prov: list[tuple[str, int, int]] = [("prefill", -1, 0)]   # (kind, round, depth) per token
    for rt in trace.rounds:
        for k, row in enumerate(rt.accepted[1:], 1):
            prov.append(("draft", rt.round + 1, k))
        prov.append(("bonus", rt.round + 1, len(rt.accepted)))
    committed = trace.token_ids[:1] + [t for rt in trace.rounds for t in rt.committed]
    spans = []
    for pos, tok in enumerate(trace.token_ids):
        if pos < len(prov) and committed[pos] == tok:
            kind, rnd, depth = prov[pos]
            tip = (f"round {rnd} · accepted draft token at depth {depth}" if kind == "draft"
                   else "first token, sampled by the target from the prompt" if kind == "prefill"
                   else f"round {rnd} · bonus token (target) after {depth - 1} accepted drafts")
        else:
            kind, tip = "unknown", "provenance not recorded for this token"
        _, bg, line = _PROV[kind]
        spans.append(f'<span class="dt-tok dt-{kind}" title="{html.escape(f"{tip} · token {tok}", quote=True)}" '
                     f'style="background:{bg};color:#111111;border-bottom:{line};border-radius:2px;'
                     f'box-shadow:inset -1px 0 0 #ffffff">'
                     f'{html.escape(token_piece(tok, token_text), quote=True)}</span>')
    legend = " ".join(
        f'<span class="dt-tok dt-{k}" style="background:{bg};color:#111111;border-bottom:{line};'
        f'border-radius:2px;padding:0 4px">{html.escape(name)}</span>'
        for k, (name, bg, line) in _PROV.items() if k != "unknown" or any("dt-unknown" in s for s in spans))
    return ('<div class="dt-provenance">'
            f'<div class="dt-legend" style="margin-bottom:6px;font-size:0.9em;'
            f'font-family:DejaVu Sans,Helvetica,Arial,sans-serif">{legend}</div>'
            '<div class="dt-text" style="white-space:pre-wrap;word-break:break-word;line-height:1.8;'
            'font-family:DejaVu Sans Mono,Menlo,Consolas,monospace">' + "".join(spans) + "</div></div>")


def summary_table(traces: dict[str, DecodeTrace]) -> pd.DataFrame:
    """One row per run: rounds, new tokens, τ (tokens per round incl. the bonus), tokens/s,
    speedup over the ``ar`` run when one is present (same prompt and machine), and the mean
    per-round time of each stage."""
    ar = traces.get("ar") or next((t for t in traces.values() if t.method == "ar"), None)
    ar_tps = ar.tokens_per_s if ar is not None else 0.0
    rows = []
    for name, t in traces.items():
        row = {"method": name, "rounds": len(t.rounds), "new tokens": len(t.token_ids),
               "tau": round(t.tau, 3), "tokens/s": round(t.tokens_per_s, 2),
               "speedup vs ar": round(t.tokens_per_s / ar_tps, 3) if ar_tps > 0 else float("nan")}
        row.update({f"{s} ms": round(v, 3) for s, v in t.stage_ms().items()})
        rows.append(row)
    cols = ["method", "rounds", "new tokens", "tau", "tokens/s", "speedup vs ar"] + [f"{s} ms" for s in STAGES]
    return pd.DataFrame(rows, columns=cols)
