"""Export of the round on screen (SVG, PDF, PNG, TikZ) and of whole runs (trace JSON), and
import of trace JSON files for replay without a model. Writers are ``dominotree.view.export``."""
from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path

import gradio as gr

from dominotree.view import comparison, export
from dominotree.config import ConfigError
from dominotree.machine import describe
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
    stem = folder / f"dominotree-{_stem(trace.method)}-round{rt.round + 1}-{show}"
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


_MACHINE: dict = {}


def comparison_bytes(traces: dict) -> bytes:
    """The comparison JSON (every pane, its prompt, settings, model and machine) as UTF-8 bytes."""
    if not _MACHINE:
        _MACHINE.update(describe())
    return json.dumps(comparison.comparison_dict(traces, dict(_MACHINE)), ensure_ascii=False).encode("utf-8")


def write_comparison(folder: Path, traces: dict) -> str | None:
    """Every pane of the comparison in one file, with its prompt, settings, model and machine."""
    if not traces:
        return None
    p = folder / f"dominotree-comparison-{_stem('-'.join(traces))[:60]}.json"
    p.write_bytes(comparison_bytes(traces))
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


def _load(p: Path) -> tuple[dict, dict | None]:
    """({name: trace}, comparison metadata or None) of one uploaded file; TraceError on defects."""
    if p.stat().st_size > MAX_TRACE_BYTES:
        raise TraceError(f"file is larger than {MAX_TRACE_BYTES // 2**20} MiB")
    return _parse(p.read_bytes())


def _parse(raw: bytes) -> tuple[dict, dict | None]:
    try:
        d = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"not valid JSON: {e}") from None
    if isinstance(d, dict) and d.get("schema") == comparison.SCHEMA:
        return comparison.read_comparison(d)
    trace = load_trace(raw)
    return {trace.method: trace}, None


def read_traces(paths) -> tuple[dict, dict]:
    """Validated traces from uploaded files (trace or comparison JSON) and what they share
    {prompt, settings, model, machine, settings_differ}; raises ConfigError naming the file (the
    caller changes nothing) on any problem, and when the files are of different prompts."""
    if not paths:
        raise ConfigError("Trace not imported: no file received.")
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if len(paths) > MAX_METHODS:
        raise ConfigError(f"Trace not imported: import at most {MAX_METHODS} files at once (got {len(paths)}).")
    out: dict = {}
    meta: dict = {}
    for p in paths:
        p = Path(getattr(p, "name", p))
        got, info = _checked(lambda: _load(p), f"Trace not imported: {p.name[:80]}")
        meta = meta or info or {}
        for key0, trace in got.items():
            key, n = key0, 2
            while key in out:
                key, n = f"{key0} ({n})", n + 1
            out[key] = trace
    if len(out) > MAX_METHODS:
        raise ConfigError(f"Trace not imported: {len(out)} traces; the page shows at most {MAX_METHODS}.")
    mixed = comparison.different_prompts(out)
    if mixed:
        raise ConfigError(f"Trace not imported: {mixed}.")
    return out, _meta(out, meta)


def _meta(traces: dict, meta: dict) -> dict:
    first = next(iter(traces.values()))
    return {"prompt": first.prompt, "settings": comparison.settings_of(first), "model": first.model,
            "machine": {}, **meta, "settings_differ": comparison.settings_differ(traces)}


def _checked(load, what: str) -> tuple[dict, dict | None]:
    """``load()``'s traces, each checked as the views need it (ConfigError "``what``: why" else)."""
    try:
        got, info = load()
        for trace in got.values():
            _check_fields(trace)
            if trace.rounds:      # a trace that loads but cannot be drawn is refused too
                from dominotree.view import figures
                figures.tree_figure(trace.rounds[0], trace.token_text)
    except TraceError as e:
        raise ConfigError(f"{what}: {e}") from None
    except Exception as e:  # noqa: BLE001 - any other defect of an untrusted file
        raise ConfigError(f"{what}: malformed trace ({type(e).__name__}: {e})") from None
    return got, info


def read_comparison_bytes(raw: bytes, what: str = "Not opened") -> tuple[dict, dict]:
    """Validated traces and metadata of one comparison (or trace) JSON held in memory, as
    ``read_traces`` gives them; ConfigError "``what``: why" on any defect."""
    got, info = _checked(lambda: _parse(raw), what)
    if not got or len(got) > MAX_METHODS:
        raise ConfigError(f"{what}: {len(got)} traces; the page shows 1 to {MAX_METHODS}.")
    return got, _meta(got, info or {})


def build_exports() -> dict:
    """Download buttons for the round on screen and for the whole run (filled once a run shows)."""
    with gr.Row(elem_classes=["dt-exports"]):
        gr.HTML("<b>Download this round</b> (as drawn):", elem_classes=["dt-export-label"], padding=False)
        buttons = {f"export_{fmt}": _local_examples(gr.DownloadButton(
            label, elem_id=f"export-{fmt}", size="sm", interactive=False, scale=0, min_width=80))
            for fmt, label in [("svg", "SVG"), ("pdf", "PDF"), ("png", "PNG"), ("tikz", "TikZ")]}
        gr.HTML("<b>Whole comparison:</b>", elem_classes=["dt-export-label"], padding=False)
        buttons["export_json"] = _local_examples(gr.DownloadButton(
            "Comparison JSON", elem_id="export-json", size="sm", interactive=False, scale=0, min_width=140))
    return buttons


def build_import() -> dict:
    imp = gr.File(label="Replay saved runs (JSON)", file_count="multiple", file_types=[".json"],
                  elem_id="import-trace", height=120)
    gr.Markdown(f"A comparison or trace JSON exported here; no model needed. Up to {MAX_METHODS} files, "
                f"{MAX_TRACE_BYTES // 2**20} MiB each.", elem_classes=["dt-note"])
    return dict(import_trace=_local_examples(imp, multiple=True))
