"""What the explorer's event handlers share: the backend, the page's components, the output lists
the listeners write, and the two ways a handler fills them (``render_all``: a run's full view;
``unchanged``: one message, every other output kept); plus the status line and toast escaping."""
from __future__ import annotations

import html
import logging
from dataclasses import dataclass, field

import gradio as gr

from . import backend as be
from .panes import auto_html, render_panes, tie_html, vocab_html
from .round_view import render_round
from .summary import render_summary

log = logging.getLogger("dominotree.explorer")


def session_of(request: gr.Request | None) -> str:
    return (getattr(request, "session_hash", None) or "default") if request is not None else "default"


def esc(text) -> str:
    """Messages can carry untrusted text (file names, paths, trace fields); Gradio's toasts
    render HTML, so escape it."""
    return html.escape(str(text), quote=False)


def status_html(text: str, kind: str = "info") -> str:
    return f'<div class="dt-status dt-status-{kind}">{html.escape(text)}</div>'


def _focus(traces: dict, focus: str | None, pending=()) -> tuple[str | None, gr.Radio]:
    """The run to inspect (``focus`` when it exists, else the latest) and the radio showing it."""
    names = list(traces) + [m for m in pending if m not in traces]
    focus = focus if focus in names else (names[-1] if names else None)
    return focus, gr.Radio(choices=names, value=focus)


@dataclass
class Context:
    """The backend, the components (``c``, by name) and the output lists built from them."""
    backend: be.Backend
    c: dict
    json_cache: dict = field(default_factory=dict)      # the comparison JSON of what is on screen, by traces
    panes: list = field(init=False)
    round_out: list = field(init=False)
    summary_out: list = field(init=False)
    everything: list = field(init=False)                # what a run (or an import) redraws
    exports_out: list = field(init=False)
    run_out: list = field(init=False)                   # ``everything`` and the Run button

    def __post_init__(self):
        c = self.c
        self.panes = [x for k in range(be.MAX_METHODS) for x in (c["pane_cols"][k], c["pane_heads"][k],
                                                                 c["pane_texts"][k])]
        self.round_out = [c["round"], c["captions"], c["tree"], c["mvc"], c["topm"]]
        self.summary_out = [c["table"], c["hist"], c["depth"], c["timing"], c["builder"]]
        self.everything = [c["traces"], c["status"], c["focus"], *self.panes, *self.round_out, *self.summary_out]
        self.exports_out = [c["export_svg"], c["export_pdf"], c["export_png"], c["export_tikz"], c["export_json"]]
        self.run_out = [*self.everything, c["run"]]

    def render_all(self, traces, focus, idx, show, status, running=None, pending=(), light=False) -> list:
        focus, radio = _focus(traces, focus, pending)
        notes = {k: auto_html(t) + vocab_html(t) + tie_html(t) for k, t in traces.items()}
        out = [traces, status, radio, *render_panes(traces, running, pending, notes),
               *render_round(traces, focus, idx, show, light=light)]
        if light:              # the summary and timing charts follow at the end of the run
            return out + [gr.skip()] * len(self.summary_out)
        return out + render_summary(traces, focus)

    def unchanged(self, message: str, kind: str = "error") -> list:
        """A user mistake: one message (toast and status line); every output keeps what it shows
        and Run is usable again."""
        if kind == "error":
            log.warning("user mistake: %s", message)
            gr.Warning(esc(message))
        out = [gr.skip()] * len(self.run_out)
        out[self.everything.index(self.c["status"])] = status_html(message, kind)
        out[-1] = gr.Button(interactive=True) if kind != "info" else gr.skip()
        return out
