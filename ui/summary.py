"""Summary of a run or comparison: per-method table (τ, tokens/s, speedup over ar when ar ran),
acceptance-length histogram, per-depth acceptance, per-round stage timing and builder timing."""
from __future__ import annotations

import gradio as gr

from dominotree.view import charts

from .round_view import pick

METRICS = ("τ (tau) = tokens committed per round: accepted drafts + the bonus token. tokens/s = new tokens "
           "/ wall time of the run on this machine. Speedup is over the `ar` run of the same comparison "
           "(same prompt and settings), shown only when `ar` ran. Stage times are measured inside the "
           "decoder, and the page's drawing is kept off its clock (the decoder waits while the page "
           "draws), so the ratios here match `python -m dominotree bench`'s within a few per cent; "
           "the bench averages many prompts.")


def render_summary(traces: dict, focus: str | None) -> list:
    """Outputs for [table, accept histogram, depth acceptance, timing, builder timing]."""
    trace = pick(traces, focus)
    if trace is None:
        return [empty_table(), None, None, None, None]
    return [charts.summary_table(traces), charts.accept_hist_figure(traces),
            charts.depth_accept_figure(traces), charts.timing_figure(trace), builder_view(trace)]


def empty_table():
    return charts.summary_table({})


def builder_view(trace):
    """``ar`` builds no tree: no builder chart for it."""
    return None if trace.method == "ar" else charts.builder_figure(trace)


def render_timing(traces: dict, focus: str | None) -> list:
    """Outputs for [timing, builder timing] only (cheap enough to redraw while decoding)."""
    trace = pick(traces, focus)
    if trace is None:
        return [None, None]
    return [charts.timing_figure(trace), builder_view(trace)]


def build_timing() -> dict:
    timing = gr.Plot(label="Per-round stage time", elem_id="timing")
    builder = gr.Plot(label="Tree builder time", elem_id="builder")
    return dict(timing=timing, builder=builder)


def build_summary() -> dict:
    gr.Markdown("### Summary\n" + METRICS, elem_classes=["dt-metrics"])
    table = gr.Dataframe(empty_table(), label="Methods", elem_id="summary", interactive=False, wrap=True)
    with gr.Row():
        hist = gr.Plot(label="Acceptance length", elem_id="accept-hist")
        depth = gr.Plot(label="Acceptance by depth", elem_id="depth-accept")
    return dict(table=table, hist=hist, depth=depth)
