"""Up to four side-by-side panes, one per method run on the same prompt: a header with the
run's numbers and the generated text coloured by token provenance (with its legend)."""
from __future__ import annotations

import html

import gradio as gr

from dominotree import figures
from dominotree.trace import DecodeTrace

from .backend import MAX_METHODS


def header_html(name: str, trace: DecodeTrace | None, ar_tps: float, running: bool) -> str:
    if trace is None:
        return f'<div class="dt-pane-head"><b>{html.escape(name)}</b> · waiting…</div>'
    bits = [f"{len(trace.rounds)} rounds", f"{len(trace.token_ids)} tokens", f"τ = {trace.tau:.2f}",
            f"{trace.tokens_per_s:.1f} tok/s"]
    if ar_tps > 0 and trace.method != "ar" and not running:
        bits.append(f"{trace.tokens_per_s / ar_tps:.2f}× ar")
    state = "decoding…" if running else (f"stopped: {html.escape(trace.stopped)}" if trace.stopped else "")
    return (f'<div class="dt-pane-head"><b>{html.escape(name)}</b>'
            + (f' <span class="dt-state">{state}</span>' if state else "")
            + f'<br><span class="dt-stats">{" · ".join(bits)}</span></div>')


def render_panes(traces: dict, running: str | None = None, pending: list[str] = ()) -> list:
    """Outputs for every pane: [column, header, text] x MAX_METHODS."""
    names = list(traces) + [m for m in pending if m not in traces]
    ar = traces.get("ar")
    ar_tps = ar.tokens_per_s if ar is not None and ar.stopped else 0.0
    out = []
    for k in range(MAX_METHODS):
        if k < len(names):
            name = names[k]
            t = traces.get(name)
            text = figures.provenance_html(t) if t is not None and t.token_ids else ""
            out += [gr.Column(visible=True), header_html(name, t, ar_tps, name == running), text]
        else:
            out += [gr.Column(visible=False), "", ""]
    return out


def build_panes() -> dict:
    cols, heads, texts = [], [], []
    with gr.Row(equal_height=False):
        for k in range(MAX_METHODS):
            with gr.Column(visible=False, min_width=220, elem_classes=["dt-pane"]) as col:
                heads.append(gr.HTML(label=f"Pane {k + 1} header", show_label=False, elem_id=f"pane-{k}-head"))
                texts.append(gr.HTML(label=f"Pane {k + 1} text", show_label=False, elem_id=f"pane-{k}-text"))
            cols.append(col)
    return dict(pane_cols=cols, pane_heads=heads, pane_texts=texts)
