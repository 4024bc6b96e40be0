"""Share links: after a run (or a replay) the whole comparison is kept on the server under a random
id (``ShareStore``) and ``#share-link`` shows a link to it; the page's script adds the round, the
run inspected, the colouring and the lecture view and stage to the link's address as they change
(``assets/lecture.js``). Opening that address reopens the comparison there, without the target
(``open``, on page load). Nothing here depends on the model lock or on model switching: viewers
of a classroom server open links like anyone."""
from __future__ import annotations

import html

import gradio as gr

from dominotree.config import ConfigError

from .context import Context, status_html
from .file_events import replay_message
from .files import comparison_bytes, read_comparison_bytes
from .round_view import SHOWS
from .sharestore import ShareError, ShareStore

PARAM = "share"
NO_LINK = ('<div class="dt-share dt-hint">Run a prompt (or replay a file) for a link that reopens its rounds '
           '(the same round and view, in a new tab, without running the model).</div>')


def link_html(sid: str) -> str:
    """The link to a stored comparison; the page's script completes its address (round, view)."""
    sid = html.escape(sid)
    return (f'<div class="dt-share"><b>Share this round:</b> <a class="dt-share-url" href="?{PARAM}={sid}" '
            f'data-share="{sid}" target="_blank" rel="noopener">?{PARAM}={sid}</a><br><span class="dt-hint">opens '
            f'this comparison at this round and view in a new tab on this server, without running the model '
            f'(kept until the server restarts)</span></div>')


def error_html(text: str) -> str:
    return f'<div class="dt-share dt-share-error">No share link: {html.escape(text)}</div>'


def query_of(request: gr.Request | None) -> dict:
    try:
        return {str(k): str(v)[:200] for k, v in dict(getattr(request, "query_params", None) or {}).items()}
    except (TypeError, ValueError):
        return {}


def round_of(value) -> int:
    """The ``round`` parameter (counted from 1; anything else: 1; the views clamp it)."""
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


def shared(store: ShareStore, query: dict) -> tuple[dict, dict, str, int, str, str]:
    """What a share address opens: (traces, metadata, focus, round, colouring, id); ShareError or
    ConfigError with the reason when its id names nothing stored or the stored file is bad."""
    sid = query.get(PARAM, "")
    traces, meta = read_comparison_bytes(store.get(sid), "the shared comparison cannot be read")
    focus = query.get("focus")
    focus = focus if focus in traces else list(traces)[-1]
    show = query.get("show") if query.get("show") in SHOWS else "conditional"
    return traces, meta, focus, round_of(query.get("round")), show, sid


def build_share() -> dict:
    return dict(share_link=gr.HTML(NO_LINK, elem_id="share-link", show_label=False, padding=False))


class ShareEvents:
    """Keeping a comparison for its link (``save``) and opening a link's comparison (``open``)."""

    def __init__(self, ctx: Context, store: ShareStore, exports):
        self.ctx, self.store, self._exports = ctx, store, exports

    def save(self, traces):
        if not traces:
            return gr.skip()
        try:
            return link_html(self.store.put(comparison_bytes(traces)))
        except ShareError as e:
            return error_html(str(e))

    def open(self, show, request: gr.Request):
        """On page load: a page opened from a share address shows that comparison; any other page
        is left alone. A bad id: one message, and the page works as a fresh one."""
        ctx = self.ctx
        n = len(ctx.everything) + len(ctx.exports_out)
        query = query_of(request)
        if PARAM not in query:
            return [gr.skip()] * (n + 2)
        try:
            traces, meta, focus, idx, show, sid = shared(self.store, query)
        except (ShareError, ConfigError) as e:
            out = ctx.unchanged(f"Share link not opened: {e}. The page works as usual: run a prompt or replay a file.")
            return [*out[:len(ctx.everything)], *[gr.skip()] * len(ctx.exports_out), gr.skip(), gr.skip()]
        msg = "Shared link · " + replay_message(traces, meta)
        off = [gr.update(interactive=False)] * len(ctx.exports_out)      # re-made by the exports that follow
        return [*ctx.render_all(traces, focus, idx, show, status_html(msg, "done")), *off, link_html(sid), show]

    def exports(self, traces, focus, idx, show, playing, request: gr.Request):
        """The downloads of an opened link (none for a page opened without one)."""
        if not traces:
            return [gr.skip()] * len(self.ctx.exports_out)
        return self._exports(traces, focus, idx, show, playing, request)
