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
from .page_sync import PAGE_JS, WATCHDOG_S
from .panes import build_panes
from .rebuild_view import build_rebuild
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
                css_paths=[ASSETS / "style.css"], share=False, max_file_size=MAX_TRACE_BYTES,
                footer_links=["api"], ssr_mode=False, js=PAGE_JS)


def build_app(backend: Backend | None = None) -> gr.Blocks:
    backend = backend or Backend()
    from dominotree.view.rebuild import STORE
    STORE.enable()                    # live rounds keep their draft blocks for rebuilds (bounded)
    with gr.Blocks(title="DominoTree explorer", analytics_enabled=False) as demo:
        gr.Markdown(INTRO)
        c: dict = {"traces": gr.State({}), "playing": gr.State(False), "watchdog": gr.Timer(WATCHDOG_S)}
        c["status"] = gr.HTML(status_html(backend.describe()), label="Status", show_label=False, elem_id="status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                c.update(build_controls(backend))
                c.update(build_import())
            with gr.Column(scale=4):
                c.update(build_panes())
                c.update(build_round_view())
                c.update(build_whatif())
                c.update(build_rebuild())
                c.update(build_exports())
                c.update(build_round_details())
                c.update(build_timing())
                c.update(build_topm())
                c.update(build_summary())
                c.update(build_cost_panel())
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
