"""Downloads and trace import: the five export files of what is on screen (``exports``; SVG and
TikZ at once with each redraw, ``quick_exports``) and a replay of uploaded traces
(``import_traces``, with ``replay_message`` as its status line)."""
from __future__ import annotations

import gradio as gr

from dominotree.config import ConfigError

from .context import Context, session_of, status_html
from .files import read_traces, write_comparison, write_round


def replay_message(traces: dict, meta: dict) -> str:
    """The status line of a replay: what was compared, on which prompt, settings, model, machine."""
    st = meta.get("settings") or {}
    tree = st.get("tree") if isinstance(st.get("tree"), dict) else {}
    settings = ", ".join(f"{k} {v}" for k, v in [("T", st.get("temperature")), ("seed", st.get("seed")),
                                                   ("max new", st.get("max_new_tokens")), ("budget", tree.get("budget")),
                                                   ("Top-M", tree.get("corr_topm")), ("K", tree.get("node_topk")),
                                                   ("draft vocabulary", st.get("draft_vocab") or None)]
                         if v is not None)
    model = meta.get("model") or {}
    mach = meta.get("machine") or {}
    bits = [f"Replaying {len(traces)} trace(s): {', '.join(traces)} (no model used)",
            f"prompt: {str(meta.get('prompt', ''))[:200]!r}", f"settings: {settings}"
            + (" (they differ between traces)" if meta.get("settings_differ") else "")]
    if model:
        bits.append("model: " + " ".join(str(model.get(k, "")) for k in ("preset", "dtype", "device")).strip())
    if mach.get("cpu"):
        bits.append(f"timed on {mach['cpu']} ({mach.get('cores', '?')} cores)")
    return " · ".join(str(b)[:300] for b in bits)


class FileEvents:
    """The handlers that write downloads and read uploaded traces."""

    def __init__(self, ctx: Context):
        self.ctx, self.backend = ctx, ctx.backend

    def exports(self, traces, focus, idx, show, is_playing, request: gr.Request):
        """All five files for what is on screen (PDF/PNG/JSON take a second or so)."""
        exports_out, json_cache, backend = self.ctx.exports_out, self.ctx.json_cache, self.backend
        session = session_of(request)
        # during this page's run the traces are a part of it (an event chain queued before Run, such
        # as the page load's, reads them mid-run): the run's own end makes the files, and until
        # then the buttons stay off (a JSON of `ar` alone was downloaded after a four-method run)
        if is_playing or backend.busy(session):
            return [gr.skip()] * len(exports_out)
        folder = backend.session_dir(session)
        key = (session, tuple((k, id(t), len(t.rounds), t.stopped) for k, t in (traces or {}).items()))
        try:
            # PDF/PNG rendering and the comparison JSON take a second of CPU: never while a model
            # job runs (measured: a comparison started right after another ran `ar` at 1.8 tok/s
            # instead of 10 while these were written), so wait for the model lock
            with backend.model_lock:
                if backend.busy(session):        # Run was pressed while this waited (the lock is
                    return [gr.skip()] * len(exports_out)   # free between a run's methods)
                paths = write_round(folder, traces, focus, idx, show)
                if key not in json_cache:
                    if len(json_cache) > 64:
                        json_cache.clear()
                    json_cache[key] = write_comparison(folder, traces)
        except FileNotFoundError:          # the session ended (tab closed) while writing
            return [gr.skip()] * len(exports_out)
        paths.append(json_cache[key])
        return [gr.update(value=p, interactive=p is not None) for p in paths]

    def quick_exports(self, traces, focus, idx, show, request) -> list:
        """SVG and TikZ of the round now drawn, in the same update as the drawing, so a download
        never gets another round; PDF and PNG wait (disabled) for ``exports``."""
        try:
            svg, _, _, tikz = write_round(self.backend.session_dir(session_of(request)), traces, focus, idx, show,
                                          formats=("svg", "tikz"))
        except FileNotFoundError:
            return [gr.skip()] * 4
        off = gr.update(interactive=False)
        return [gr.update(value=svg, interactive=svg is not None), off, off,
                gr.update(value=tikz, interactive=tikz is not None)]

    def import_traces(self, files, show):
        ctx = self.ctx
        try:
            traces, meta = read_traces(files)
        except ConfigError as e:
            out = ctx.unchanged(str(e))[:len(ctx.everything)]
            return [*out, *[gr.skip()] * len(ctx.exports_out)]
        last = list(traces)[-1]
        n = len(traces[last].rounds)
        msg = replay_message(traces, meta)
        off = [gr.update(interactive=False)] * len(ctx.exports_out)     # re-made by ``exports`` next
        return [*ctx.render_all(traces, last, n, show, status_html(msg, "done")), *off]
