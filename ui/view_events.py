"""Redraws of a run on screen (CPU only, no model queue): scrubbing the rounds and switching the
focus (``show_round``, ``show_focus``), autoplay (``toggle_play``, ``tick``, ``set_speed``), and
the rebuild view and cost panel (``rebuild_view``, ``cost_view``; their CPU work runs on the model
thread, never while a run holds the model)."""
from __future__ import annotations

import time

import gradio as gr

from .context import Context, session_of
from .costpanel import render_cost
from .file_events import FileEvents
from .rebuild_view import render_rebuild
from .round_view import autoplay_step, pick, render_round
from .summary import render_timing


class ViewEvents:
    """The handlers that redraw what a run on screen shows; each redraw of the round carries the
    SVG and TikZ downloads of it (``FileEvents.quick_exports``)."""

    def __init__(self, ctx: Context, files: FileEvents):
        self.ctx, self.backend, self.quick_exports = ctx, ctx.backend, files.quick_exports

    def show_round(self, traces, focus, idx, show, request: gr.Request):
        return [*render_round(traces, focus, idx, show), *self.quick_exports(traces, focus, idx, show, request)]

    def show_focus(self, traces, focus, show, request: gr.Request):
        trace = pick(traces, focus)
        idx = len(trace.rounds) if trace is not None else 1
        return [*render_round(traces, focus, idx, show), *render_timing(traces, focus),
                *self.quick_exports(traces, focus, idx, show, request)]

    def toggle_play(self, is_playing, traces, focus, idx, speed):
        trace = pick(traces, focus)
        if is_playing or trace is None or not trace.rounds:
            return gr.Timer(active=False), gr.Button("▶ Play"), False, gr.skip()
        k = int(idx or 1)
        r0 = 1 if k >= len(trace.rounds) else k          # at the last round: replay from the first
        play = {"t0": time.monotonic(), "r0": r0, "speed": max(float(speed or 1), 0.05)}
        return gr.Timer(active=True), gr.Button("⏸ Pause"), play, r0 if r0 != k else gr.skip()

    def tick(self, traces, focus, idx, show, play, speed, request: gr.Request):
        skips = [gr.skip()] * (len(self.ctx.round_out) + 4)
        trace = pick(traces, focus)
        if not play or trace is None:
            return [gr.Timer(active=False), gr.Button("▶ Play"), False, *skips]
        nxt, at_end, play = autoplay_step(trace, idx, play, speed, time.monotonic())
        head = [gr.Timer(active=False), gr.Button("▶ Play"), False] if at_end else [gr.skip(), gr.skip(), play]
        if nxt is None:
            return [*head, *skips]
        return [*head, *render_round(traces, focus, nxt, show), *self.quick_exports(traces, focus, nxt, show, request)]

    def set_speed(self, speed):      # the timer ticks twice per round: a late tick does not slow the rate
        return gr.Timer(value=0.5 / max(float(speed or 1), 0.05))

    def rebuild_view(self, traces, focus, idx, topm, k, budget, scorer, vocab, request: gr.Request):
        return render_rebuild(self.backend, traces, focus, idx, topm, k, budget, scorer, vocab,
                              self.backend.session_dir(session_of(request)))

    def cost_view(self, traces, request: gr.Request):
        return render_cost(self.backend, traces, self.backend.session_dir(session_of(request)))
