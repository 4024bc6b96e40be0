"""The cost panel: why each method on the page wins or loses on this machine, and on a GPU.

Numbers come from ``dominotree.view.costpanel`` / ``dominotree.auto.curve``; this module draws them
(plotly) and writes the captions. This machine's curve is measured once per machine and weights
(a few seconds, on the model thread, after a run) and read from the cache afterwards."""
from __future__ import annotations

import html

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dominotree.auto import curve as costcurve
from dominotree.view import costpanel
from dominotree.colors import method_color

from . import backend as be

EMPTY = '<div class="dt-cost-panel">Run a prompt to see what its rounds cost on this machine.</div>'


def cost_figure(panel: costpanel.CostPanel) -> go.Figure:
    mc, pr = panel.machine, panel.projection
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.07, subplot_titles=(
        "a forward of n rows (one-row steps)", "rounds here", "rounds projected (not measured)"))
    n = list(range(1, 34))
    fig.add_trace(go.Scatter(x=n, y=[mc.steps(x) for x in n], mode="lines+markers", name=html.escape(mc.label),
                             marker=dict(size=4), line=dict(color="#0072B2")), row=1, col=1)
    fig.add_trace(go.Scatter(x=n, y=[pr.steps(x) for x in n], mode="lines", name=html.escape(pr.label),
                             line=dict(color="#D55E00", dash="dash")), row=1, col=1)
    for col, pts_of, cost_of in ((2, lambda m: m.points, lambda m: m.cost),
                                 (3, lambda m: m.projected_points, lambda m: m.projected_cost)):
        top = max([p[0] for m in panel.methods for p in pts_of(m)] + [1.0]) * 1.1
        ymax = max([p[1] for m in panel.methods for p in pts_of(m)] + [2.0]) * 1.15
        fig.update_yaxes(range=[0, ymax], row=1, col=col)
        fig.update_xaxes(range=[0, top * 1.08], row=1, col=col)
        for s in costpanel.SPEEDUP_LINES:
            fig.add_trace(go.Scatter(x=[0, top], y=[0, s * top], mode="lines", showlegend=col == 2 and s == 1.0,
                                     name="speedup = 1, 1.5, 2 (tokens = s × cost)", hoverinfo="skip",
                                     line=dict(color="#888888", width=1, dash="dot" if s != 1.0 else "solid")),
                          row=1, col=col)
            fig.add_annotation(x=min(top, ymax / s), y=s * min(top, ymax / s), text=f"{s:g}×", showarrow=False, xanchor="left",
                               font=dict(size=10, color="#666666"), row=1, col=col)
        for m in panel.methods:
            pts = pts_of(m)
            fig.add_trace(go.Scatter(
                x=[p[0] for p in pts], y=[p[1] for p in pts], mode="markers", name=html.escape(m.method),
                showlegend=col == 2, marker=dict(size=7, opacity=0.55, color=method_color(m.method)),
                hovertemplate=f"{html.escape(m.method)}: %{{x:.2f}} steps, %{{y}} tokens<extra></extra>"), row=1, col=col)
            fig.add_trace(go.Scatter(x=[cost_of(m)], y=[m.tau], mode="markers", showlegend=False,
                                     marker=dict(size=15, symbol="x", color=method_color(m.method)),
                                     hovertemplate=f"{html.escape(m.method)} mean: %{{x:.2f}} steps, τ %{{y:.2f}}"
                                                   "<extra></extra>"), row=1, col=col)
    fig.update_xaxes(title_text="rows (budget + 1)", row=1, col=1)
    fig.update_yaxes(title_text="one-row steps", rangemode="tozero", row=1, col=1)
    for col in (2, 3):
        fig.update_xaxes(title_text="round cost (ar steps)", row=1, col=col)
        fig.update_yaxes(title_text="tokens committed", row=1, col=col)
    fig.update_layout(template="plotly_white", height=420, margin=dict(l=50, r=30, t=60, b=100),
                      legend=dict(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0),
                      font=dict(family="DejaVu Sans, Helvetica, Arial, sans-serif", size=12))
    return fig


def panel_html(panel: costpanel.CostPanel) -> str:
    items = "".join(f"<li>{html.escape(c)}</li>" for c in costpanel.captions(panel))
    rows = "".join(f"<tr><td>{html.escape(m.method)}</td><td>{m.tau:.2f}</td><td>{m.cost:.2f}</td>"
                   f"<td>{m.speedup:.2f}×</td><td>{m.breakeven:.2f} (budget {m.budget})</td>"
                   f"<td>{m.projected_cost:.2f}</td><td>{m.projected_speedup:.2f}×</td></tr>" for m in panel.methods)
    return ('<div class="dt-cost-panel"><ul>' + items + "</ul><table class=\"dt-cost-table\"><tr><th>method</th>"
            "<th>τ</th><th>round cost here (steps)</th><th>speedup here</th><th>break-even τ here</th>"
            "<th>projected round cost</th><th>projected speedup (GPU projection)</th></tr>" + rows + "</table></div>")


def make_panel(backend: be.Backend, traces: dict):
    """(CostPanel, None) or (None, message); measures this machine's curve once when needed."""
    if not traces or not any(t.rounds for t in traces.values()):
        return None, EMPTY
    decoder = backend._decoder
    if decoder is None:
        return None, ('<div class="dt-cost-panel">A replay: this machine\'s cost curve is measured with the model '
                      "loaded (run a prompt or press Load model).</div>")

    def work():
        with backend.model_lock:
            return costcurve.cached_curve(decoder.pair)
    curve = be.model_thread.call(work)
    return costpanel.cost_panel(traces, curve, costcurve.projection()), None


def render_cost(backend: be.Backend, traces: dict, folder=None) -> list:
    """Outputs for [panel text, panel plot, SVG, PDF, PNG, TikZ downloads]."""
    from dominotree.view.costexport import cost_svg, cost_tikz
    from .rebuild_view import NO_FILES, write_files
    try:
        panel, msg = make_panel(backend, traces)
    except Exception as e:  # noqa: BLE001 - the panel explains; a failed measurement must not break the page
        return [f'<div class="dt-cost-panel">The cost curve could not be measured: {html.escape(str(e))}</div>', None,
                *NO_FILES]
    if panel is None:
        return [msg, None, *NO_FILES]
    files = write_files(folder, "dominotree-cost-panel", cost_svg(panel), cost_tikz(panel)) if folder else NO_FILES
    return [panel_html(panel), cost_figure(panel), *files]


def build_cost_panel() -> dict:
    with gr.Accordion("Why it wins or loses here: the cost panel", open=True):
        with gr.Column(elem_id="cost-panel"):
            text = gr.HTML(EMPTY, elem_id="cost-text", show_label=False)
            plot = gr.Plot(label="Cost of a round, here and projected", elem_id="cost-plot")
        from .rebuild_view import export_buttons
        files = export_buttons("cost", "Download the cost panel")
    return dict(cost_text=text, cost_plot=plot, **files)
