"""Export of the round on screen (SVG, PDF, PNG, TikZ) and of whole runs (trace JSON), and
import of trace JSON files for replay without a model. Writers are ``dominotree.export``."""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import gradio as gr

from dominotree import export
from dominotree.trace import MAX_TRACE_BYTES, TraceError, load_trace

from .backend import MAX_METHODS
from .round_view import SHOWS, clamp_round, pick

ROUND_FORMATS = ("svg", "pdf", "png", "tikz")
_EXAMPLE = {"path": "trace.json", "orig_name": "trace.json", "meta": {"_type": "gradio.FileData"}}


def _local_examples(component, multiple: bool = False):
    """Replace a file component's API-docs example (a github URL in stock Gradio) with a local
    name, so the served page names no outside address. Set on the instance: subclassing a
    component makes Gradio write a .pyi stub next to this module."""
    component.example_payload = lambda: [dict(_EXAMPLE)] if multiple else dict(_EXAMPLE)
    component.example_value = lambda: ["trace.json"] if multiple else "trace.json"
    return component


def _stem(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", s).strip("-") or "run"


def write_round(folder: Path, traces: dict, focus: str | None, idx, show: str,
                formats=ROUND_FORMATS) -> list:
    """Files for the round on screen, one per format in ROUND_FORMATS (None when nothing shows
    or the format was not asked for). SVG and TikZ take milliseconds; PDF and PNG are rendered
    from the SVG by cairosvg and take longer."""
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return [None] * len(ROUND_FORMATS)
    rt = trace.rounds[clamp_round(trace, idx)]
    show = show if show in SHOWS else "conditional"
    stem = folder / f"dominotree-{_stem(trace.method)}-round{rt.round}-{show}"
    svg = export.round_svg(rt, trace.token_text, show=show)
    out = {"svg": svg.encode("utf-8")}
    if "tikz" in formats:
        out["tikz"] = export.round_tikz(rt, trace.token_text, show=show).encode("utf-8")
    try:
        if "pdf" in formats:
            out["pdf"] = export.round_pdf(svg)
        if "png" in formats:
            out["png"] = export.round_png(svg)
    except RuntimeError as e:       # cairosvg/libcairo missing: SVG and TikZ still work
        gr.Warning(html.escape(str(e), quote=False))
    paths = []
    for fmt in ROUND_FORMATS:
        if fmt not in out or fmt not in formats:
            paths.append(None)
            continue
        p = stem.with_suffix(".tex" if fmt == "tikz" else f".{fmt}")
        p.write_bytes(out[fmt])
        paths.append(str(p))
    return paths


def write_trace(folder: Path, traces: dict, focus: str | None) -> str | None:
    trace = pick(traces, focus)
    if trace is None:
        return None
    p = folder / f"dominotree-{_stem(trace.method)}-trace.json"
    trace.to_json(p)
    return str(p)


def _check_fields(trace) -> None:
    """Scalar fields the views print: load_trace checks structure, not these types, and a
    shared trace file is untrusted."""
    num = (int, float)
    if not isinstance(trace.method, str) or not isinstance(trace.wall_s, num) or not isinstance(trace.stopped, str):
        raise TraceError("method, stopped must be strings and wall_s a number")
    for rt in trace.rounds:
        if not all(isinstance(v, int) for v in (rt.round, rt.start, rt.bonus)) or not isinstance(rt.method, str):
            raise TraceError("every round needs integer round, start and bonus and a string method")
        if not isinstance(rt.stage_ms, dict) or not all(isinstance(v, num) for v in rt.stage_ms.values()):
            raise TraceError(f"round {rt.round}: stage_ms must map stages to numbers")


def read_traces(paths) -> dict:
    """Validated traces from uploaded files; raises gr.Error (and changes nothing) on any problem."""
    if not paths:
        raise gr.Error("no file received")
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if len(paths) > MAX_METHODS:
        raise gr.Error(f"import at most {MAX_METHODS} traces at once (got {len(paths)})")
    out: dict = {}
    for p in paths:
        p = Path(getattr(p, "name", p))
        name = p.name[:80]
        try:
            if p.stat().st_size > MAX_TRACE_BYTES:
                raise TraceError(f"file is larger than {MAX_TRACE_BYTES // 2**20} MiB")
            trace = load_trace(p)
            _check_fields(trace)
            if trace.rounds:      # a trace that loads but cannot be drawn is refused too
                from dominotree import figures
                figures.tree_figure(trace.rounds[0], trace.token_text)
        except TraceError as e:
            raise gr.Error(html.escape(f"{name}: {e}", quote=False), title="Trace not imported") from None
        except Exception as e:  # noqa: BLE001 - any other defect of an untrusted file
            raise gr.Error(html.escape(f"{name}: malformed trace ({type(e).__name__}: {e})", quote=False),
                           title="Trace not imported") from None
        key, n = trace.method, 2
        while key in out:
            key, n = f"{trace.method} ({n})", n + 1
        out[key] = trace
    return out


def build_exports() -> dict:
    """Download buttons for the round on screen and for the whole run (filled once a run shows)."""
    with gr.Row(elem_classes=["dt-exports"]):
        gr.HTML("<b>Download this round</b> (as drawn):", elem_classes=["dt-export-label"], padding=False)
        buttons = {f"export_{fmt}": _local_examples(gr.DownloadButton(
            label, elem_id=f"export-{fmt}", size="sm", interactive=False, scale=0, min_width=80))
            for fmt, label in [("svg", "SVG"), ("pdf", "PDF"), ("png", "PNG"), ("tikz", "TikZ")]}
        gr.HTML("<b>Whole run:</b>", elem_classes=["dt-export-label"], padding=False)
        buttons["export_json"] = _local_examples(gr.DownloadButton(
            "Trace JSON", elem_id="export-json", size="sm", interactive=False, scale=0, min_width=110))
    return buttons


def build_import() -> dict:
    imp = gr.File(label=f"Replay: import trace JSON (no model needed; up to {MAX_METHODS} files, "
                        f"{MAX_TRACE_BYTES // 2**20} MiB each)", file_count="multiple", file_types=[".json"],
                  elem_id="import-trace", height=120)
    return dict(import_trace=_local_examples(imp, multiple=True))
