"""Keeping the page and the server in step: the page says when it has drawn a streamed update
(``PAGE_JS`` clicks the hidden "drawn" button), pulls a finished run's final state when a push was
lost (``watchdog``, every ``WATCHDOG_S``), and ends its session when it is closed (``unload``)."""
from __future__ import annotations

import logging
import time

import gradio as gr

from .context import Context, session_of, status_html

log = logging.getLogger("dominotree.explorer")

WATCHDOG_S = 3.0               # the page asks this often whether a run it shows as live has ended
LIVE = ("Decoding", "Stopping at the next round", "Loading the model")     # status lines of a live run
# The page tells the server when it has drawn a streamed update (PAGE_JS clicks the hidden
# "drawn" button once the browser is idle after it), and the worker stays paused, off its clock,
# until then (ui/backend.py: Job, DRAW_LIMIT_S). The run's first update, which clears every figure,
# is the browser's heaviest draw; on a 2-core machine with the browser on it, `ar`, first in a
# comparison, read 20-30 % slow while that draw overlapped its rounds (results/explorer_vs_cli.json).
PAGE_JS = """() => {
  let last = "";
  const ack = () => document.getElementById("drawn")?.click();
  const changed = () => {
    const text = document.querySelector("#status .dt-status")?.textContent ?? "";
    if (!text.startsWith("Decoding") || text === last) return;
    last = text;
    requestAnimationFrame(() => requestAnimationFrame(() => requestIdleCallback(ack, {timeout: 1500})));
  };
  const watch = () => {          // the status line only: the rest of the page mutates all the time
    const status = document.getElementById("status");
    if (!status) return setTimeout(watch, 200);
    new MutationObserver(changed).observe(status, {childList: true, subtree: true, characterData: true});
  };
  watch();
}"""


class PageSync:
    """The handlers of the hidden "drawn" button, the watchdog timer and the page's unload."""

    def __init__(self, ctx: Context):
        self.ctx, self.backend = ctx, ctx.backend
        self.suspects: dict = {}        # session -> when the page was first seen showing a run that had ended

    def drawn(self, request: gr.Request):
        self.backend.page_drew(session_of(request))

    def watchdog(self, status, traces, focus, idx, show, request: gr.Request):
        """The page pulls what a push may have lost: when it still shows a run as live (or
        "Stopping…") but the session has none, redraw the run's final state from the session."""
        ctx, suspects = self.ctx, self.suspects
        session = session_of(request)
        if not any(w in str(status or "") for w in LIVE) or self.backend.busy(session):
            suspects.pop(session, None)
            return [gr.skip()] * len(ctx.run_out)
        if time.monotonic() - suspects.setdefault(session, time.monotonic()) < 1.5 * WATCHDOG_S:
            return [gr.skip()] * len(ctx.run_out)      # the final update may still be on its way
        suspects.pop(session, None)
        log.warning("page showed a finished run as live; redrawn from the session state")
        if not traces:
            return ctx.unchanged("Ready (the last run ended without output).", "done")
        return [*ctx.render_all(traces, focus, idx, show, status_html(f"Done · {', '.join(traces)} · "
                                                                      f"{self.backend.describe()}", "done")),
                gr.Button(interactive=True)]

    def unload(self, request: gr.Request):
        self.backend.end_session(session_of(request))
