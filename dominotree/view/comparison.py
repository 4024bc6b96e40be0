"""A comparison: several methods' traces of one prompt and settings, in one versioned JSON file
with the model and the machine they ran on, so that a replay shows the whole comparison.

    doc = comparison_dict({"ar": t1, "dominotree": t2})
    traces, meta = read_comparison(json.loads(text))
"""
from __future__ import annotations

from ..machine import describe
from ..trace import DecodeTrace, TraceError, trace_from_dict

SCHEMA = "dominotree.comparison"
SCHEMA_VERSION = 1
MAX_TRACES = 16


def settings_of(trace: DecodeTrace) -> dict:
    """The settings every method of a comparison shares (the method itself left out)."""
    cfg = dict(trace.config) if isinstance(trace.config, dict) else {}
    for k in ("method", "vs_ar"):
        cfg.pop(k, None)
    return cfg


def comparison_dict(traces: dict[str, DecodeTrace], machine_info: dict | None = None) -> dict:
    if not traces:
        raise ValueError("a comparison needs at least one trace")
    first = next(iter(traces.values()))
    return {"schema": SCHEMA, "version": SCHEMA_VERSION, "prompt": first.prompt, "settings": settings_of(first),
            "model": first.model, "machine": machine_info if machine_info is not None else describe(),
            "methods": list(traces), "traces": {k: t.to_dict() for k, t in traces.items()}}


def read_comparison(d: dict) -> tuple[dict[str, DecodeTrace], dict]:
    """The traces of a comparison file and its metadata {prompt, settings, model, machine};
    raises TraceError naming the problem."""
    if d.get("version") != SCHEMA_VERSION:
        raise TraceError(f"comparison schema version {d.get('version')!r} is not supported "
                         f"(expected {SCHEMA_VERSION})")
    raw = d.get("traces")
    if not isinstance(raw, dict) or not raw or len(raw) > MAX_TRACES:
        raise TraceError(f"a comparison must hold 1 to {MAX_TRACES} traces")
    traces = {}
    for name, td in raw.items():
        if not isinstance(name, str) or len(name) > 80:
            raise TraceError("trace names must be short strings")
        traces[name] = trace_from_dict(td)
    meta = {k: d.get(k) for k in ("prompt", "settings", "model", "machine")}
    if not isinstance(meta["prompt"], str):
        raise TraceError("field 'prompt' must be a string")
    for k in ("settings", "model", "machine"):
        if not isinstance(meta[k], dict):
            raise TraceError(f"field {k!r} must be an object")
    mixed = different_prompts(traces)
    if mixed:
        raise TraceError(mixed)
    return traces, meta


def different_prompts(traces: dict[str, DecodeTrace]) -> str:
    """A message when the traces are not all of one prompt and settings, else ''."""
    prompts = {t.prompt for t in traces.values()}
    if len(prompts) > 1:
        shown = "; ".join(f"{k}: {t.prompt[:40]!r}" for k, t in traces.items())
        return f"these traces are of {len(prompts)} different prompts ({shown}); import one prompt at a time"
    return ""


def settings_differ(traces: dict[str, DecodeTrace]) -> bool:
    return len({repr(sorted(settings_of(t).items())) for t in traces.values()}) > 1
