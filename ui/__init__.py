"""The DominoTree explorer (Gradio 6). ``build_app(backend)`` lays out the page from the
``build_*`` modules and wires the events; ``launch_kwargs()`` holds the offline-safe launch
settings (theme with system fonts only, local CSS, upload size limit, no share link).

    demo = build_app(Backend())
    demo.launch(server_name="127.0.0.1", **launch_kwargs())
"""
from __future__ import annotations

import gradio as gr

from dominotree.presets import ASSETS
from dominotree.trace import MAX_TRACE_BYTES

from .backend import Backend
from .controls import build_controls
from .costpanel import build_cost_panel
from .context import status_html
from .events import wire
from .files import build_exports, build_import
from .lecture import build_lecture_bar, lecture_js, lv, page_js
from .page_sync import PAGE_JS, WATCHDOG_S
from .panes import build_panes
from .rebuild_view import build_rebuild
from .share import build_share
from .round_view import build_round_details, build_round_view, build_topm, build_whatif
from .summary import build_summary, build_timing

INTRO = """# DominoTree explorer
Speculative decoding, one round at a time: a small **drafter** proposes a tree of continuations, the
**target** checks every branch in one forward pass, and the longest branch it agrees with is kept (plus
one **bonus** token of its own). Pick methods, run a prompt, then scrub the rounds below.
"""

SYSTEM_SANS = ["system-ui", "-apple-system", "Segoe UI", "DejaVu Sans", "Helvetica", "Arial", "sans-serif"]
SYSTEM_MONO = ["DejaVu Sans Mono", "Menlo", "Consolas", "monospace"]


def launch_kwargs() -> dict:
    """Settings for ``demo.launch``: no external fonts, no share link, bounded uploads."""
    return dict(theme=gr.themes.Default(font=SYSTEM_SANS, font_mono=SYSTEM_MONO),
                css_paths=[ASSETS / "style.css", ASSETS / "lecture.css"], share=False, max_file_size=MAX_TRACE_BYTES,
                footer_links=["api"], ssr_mode=False, js=page_js(PAGE_JS, lecture_js()))


def build_app(backend: Backend | None = None) -> gr.Blocks:
    backend = backend or Backend()
    from dominotree.view.rebuild import STORE
    STORE.enable()                    # live rounds keep their draft blocks for rebuilds (bounded)
    with gr.Blocks(title="DominoTree explorer", analytics_enabled=False) as demo:
        gr.Markdown(INTRO, elem_classes=["dt-full-only"])
        c: dict = {"traces": gr.State({}), "playing": gr.State(False), "watchdog": gr.Timer(WATCHDOG_S)}
        c.update(build_lecture_bar())
        with gr.Column(elem_classes=lv(1)):
            c["status"] = gr.HTML(status_html(backend.describe()), label="Status", show_label=False, elem_id="status")
        # the lecture view shows one group at a time (ui/lecture.py: VIEWS); the full page shows them all
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300, elem_classes=[*lv(1), "dt-left"]):
                c.update(build_controls(backend))
                c.update(build_import())
            with gr.Column(scale=4):
                for views, build in [((1,), build_panes), ((2,), build_round_view), ((5,), build_whatif),
                                     ((6,), build_rebuild), ((10,), build_exports), ((3,), build_round_details),
                                     ((8,), build_timing), ((4,), build_topm), ((7,), build_summary),
                                     ((9,), build_cost_panel), ((10,), build_share)]:
                    extra = ["dt-view-tree"] if build is build_round_view else []
                    with gr.Column(elem_classes=[*lv(*views), *extra]):
                        c.update(build())
        # clicked by the page's script when it has drawn a streamed update (page_sync.PAGE_JS)
        c["drawn"] = gr.Button("drawn", elem_id="drawn", elem_classes=["dt-offscreen"])
        wire(backend, c, demo)
    return demo


def serve_locally(backend: Backend) -> tuple[gr.Blocks, str]:
    """Build and launch the app on a free loopback port in this process (scripts, tests):
    returns the demo (``demo.close()`` when done) and its URL."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    demo = build_app(backend)
    demo.queue(default_concurrency_limit=1).launch(server_name="127.0.0.1", server_port=port,
                                                   prevent_thread_lock=True, quiet=True, **launch_kwargs())
    return demo, f"http://127.0.0.1:{port}/"


__all__ = ["Backend", "build_app", "launch_kwargs", "serve_locally"]
