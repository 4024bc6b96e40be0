"""Event wiring: run/stop (the model queue), scrub/autoplay/colour/focus (CPU-only redraws),
export and import. Handlers only validate input, call the backend or a renderer, and map the
results onto components."""
from __future__ import annotations

import html
import time

import gradio as gr

from dominotree.config import ConfigError

from . import backend as be
from .controls import check_request, decode_config, model_choice
from .files import read_traces, write_round, write_trace
from .panes import render_panes
from .round_view import advance, pick, render_round
from .summary import render_summary, render_timing

MODEL_QUEUE = "model"          # every listener that touches the model shares this queue (limit 1)
STREAM_INTERVAL = 0.5          # seconds between streamed updates, at least
RENDER_SHARE = 0.25            # and drawing takes at most this share of the time (it shares the GIL)


def _session(request: gr.Request | None) -> str:
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


def wire(backend: be.Backend, c: dict, demo: gr.Blocks) -> None:
    traces_state, playing = c["traces"], c["playing"]
    panes = [x for k in range(be.MAX_METHODS) for x in (c["pane_cols"][k], c["pane_heads"][k], c["pane_texts"][k])]
    round_out = [c["round"], c["captions"], c["tree"], c["mvc"], c["topm"]]
    summary_out = [c["table"], c["hist"], c["depth"], c["timing"], c["builder"]]
    everything = [traces_state, c["status"], c["focus"], *panes, *round_out, *summary_out]
    exports_out = [c["export_svg"], c["export_pdf"], c["export_png"], c["export_tikz"], c["export_json"]]
    json_cache: dict = {}

    def render_all(traces, focus, idx, show, status, running=None, pending=(), light=False):
        focus, radio = _focus(traces, focus, pending)
        out = [traces, status, radio, *render_panes(traces, running, pending),
               *render_round(traces, focus, idx, show, light=light)]
        if light:
            return out + [gr.skip(), gr.skip(), gr.skip(), *render_timing(traces, focus)]
        return out + render_summary(traces, focus)

    # --- run / stop / load (model queue) ----------------------------------------------------
    def run(prompt, methods, temperature, seed, budget, topm, topk, max_new, builder, ab_builder,
            preset, target, drafters, device, dtype, show, request: gr.Request):
        session = _session(request)
        try:
            wanted = check_request(prompt, methods, max_new)
            max_new = int(max_new)
            cfgs = [decode_config(m, temperature, seed, budget, topm, topk, max_new, builder, ab_builder)
                    for m in wanted]
            choice = model_choice(preset, target, drafters, device, dtype)
        except (ConfigError, ValueError, TypeError) as e:
            raise gr.Error(esc(e)) from None
        try:
            decoder = backend.decoder(choice)
        except Exception as e:  # noqa: BLE001 - shown to the user, who can pick another model
            raise gr.Error(esc(f"Could not load the model ({choice.label()}): {e}")) from None
        try:
            prompt_ids = decoder.encode_prompt(prompt)
        except ConfigError as e:
            raise gr.Error(esc(e)) from None
        stop = backend.stop_flag(session)
        stop.clear()
        traces: dict = {}
        interval = [STREAM_INTERVAL]     # grows when drawing is slow, so drawing never starves decoding
        for k, cfg in enumerate(cfgs):
            if stop.is_set():
                break
            try:
                decoder.check(prompt_ids, cfg)
            except Exception as e:  # noqa: BLE001 - e.g. this pair has no drafter for the method
                gr.Warning(esc(f"{cfg.method}: {e}"))
                continue
            job = backend.start(session, prompt, cfg)
            try:
                for snap in be.wait_loop(job, lambda: interval[0]):
                    traces[cfg.method] = snap
                    if job.done.is_set():
                        break
                    t0 = time.perf_counter()
                    msg = f"Decoding {cfg.method} ({k + 1}/{len(cfgs)}) · round {len(snap.rounds)} · " \
                          f"{len(snap.token_ids)}/{max_new} tokens"
                    yield render_all(traces, cfg.method, len(snap.rounds) - 1, show, status_html(msg),
                                     running=cfg.method, pending=wanted, light=True)
                    # Gradio serializes and sends the update before resuming us: that counts too
                    interval[0] = max(STREAM_INTERVAL, (time.perf_counter() - t0) / RENDER_SHARE)
            finally:
                if not job.done.is_set():      # the client went away: stop at the next round
                    stop.set()
                    job.done.wait()
            if job.error is not None:
                gr.Warning(esc(f"{cfg.method} failed: {job.error}"))
            elif job.result is not None:
                traces[cfg.method] = job.result
        if not traces:
            raise gr.Error("Nothing ran: no selected method works with this model.")
        last = list(traces)[-1]
        n = len(traces[last].rounds)
        word = "Stopped" if stop.is_set() else "Done"
        msg = f"{word} · {', '.join(traces)} · {backend.describe()}"
        yield render_all(traces, last, n - 1, show, status_html(msg, "done"))

    def stop(request: gr.Request):
        backend.request_stop(_session(request))
        return status_html("Stopping at the next round…")

    def load(preset, target, drafters, device, dtype):
        try:
            backend.decoder(model_choice(preset, target, drafters, device, dtype))
        except Exception as e:  # noqa: BLE001
            raise gr.Error(esc(f"Could not load the model: {e}")) from None
        ms = backend.methods()
        return status_html(backend.describe(), "done"), gr.CheckboxGroup(choices=ms)

    # --- redraws (CPU only) --------------------------------------------------------------------
    def show_round(traces, focus, idx, show, request: gr.Request):
        return [*render_round(traces, focus, idx, show), *quick_exports(traces, focus, idx, show, request)]

    def show_focus(traces, focus, show, request: gr.Request):
        trace = pick(traces, focus)
        idx = len(trace.rounds) - 1 if trace is not None else 0
        return [*render_round(traces, focus, idx, show), *render_timing(traces, focus),
                *quick_exports(traces, focus, idx, show, request)]

    def toggle_play(is_playing, traces, focus, idx):
        trace = pick(traces, focus)
        if is_playing or trace is None or not trace.rounds:
            return gr.Timer(active=False), gr.Button("▶ Play"), False, gr.skip()
        start = 0 if int(idx or 0) >= len(trace.rounds) - 1 else gr.skip()   # replay from the start
        return gr.Timer(active=True), gr.Button("⏸ Pause"), True, start

    def tick(traces, focus, idx, show, is_playing, request: gr.Request):
        trace = pick(traces, focus)
        if not is_playing or trace is None:
            return [gr.Timer(active=False), gr.Button("▶ Play"), False, *[gr.skip()] * (len(round_out) + 4)]
        nxt, at_end = advance(trace, idx)
        head = [gr.Timer(active=False), gr.Button("▶ Play"), False] if at_end else [gr.skip()] * 3
        return [*head, *render_round(traces, focus, nxt, show), *quick_exports(traces, focus, nxt, show, request)]

    def set_speed(speed):
        return gr.Timer(value=1.0 / max(float(speed or 1), 0.05))

    # --- export / import ---------------------------------------------------------------------------
    def exports(traces, focus, idx, show, is_playing, request: gr.Request):
        """All five files for what is on screen (PDF/PNG/JSON take a second or so)."""
        if is_playing:
            return [gr.skip()] * len(exports_out)
        folder = backend.session_dir(_session(request))
        trace = pick(traces, focus)
        key = (_session(request), id(trace), len(trace.rounds) if trace else 0, trace.stopped if trace else "")
        try:
            paths = write_round(folder, traces, focus, idx, show)
            if key not in json_cache:
                if len(json_cache) > 64:
                    json_cache.clear()
                json_cache[key] = write_trace(folder, traces, focus)
        except FileNotFoundError:          # the session ended (tab closed) while writing
            return [gr.skip()] * len(exports_out)
        paths.append(json_cache[key])
        return [gr.update(value=p, interactive=p is not None) for p in paths]

    def quick_exports(traces, focus, idx, show, request) -> list:
        """SVG and TikZ of the round now drawn, in the same update as the drawing, so a download
        never gets another round; PDF and PNG wait (disabled) for ``exports``."""
        try:
            svg, _, _, tikz = write_round(backend.session_dir(_session(request)), traces, focus, idx, show,
                                          formats=("svg", "tikz"))
        except FileNotFoundError:
            return [gr.skip()] * 4
        off = gr.update(interactive=False)
        return [gr.update(value=svg, interactive=svg is not None), off, off,
                gr.update(value=tikz, interactive=tikz is not None)]

    def import_traces(files, show):
        traces = read_traces(files)
        last = list(traces)[-1]
        n = len(traces[last].rounds)
        msg = f"Replaying {len(traces)} imported trace(s): {', '.join(traces)} (no model used)"
        off = [gr.update(interactive=False)] * len(exports_out)     # re-made by ``exports`` next
        return [*render_all(traces, last, n - 1, show, status_html(msg, "done")), *off]

    # --- listeners ---------------------------------------------------------------------------------
    run_inputs = [c[k] for k in ("prompt", "methods", "temperature", "seed", "budget", "topm_m", "topk", "max_new",
                                 "builder_choice", "ab_builder", "preset", "target", "drafters", "device", "dtype",
                                 "show")]
    view_state = [traces_state, c["focus"], c["round"], c["show"]]
    export_args = dict(fn=exports, inputs=[*view_state, playing], outputs=exports_out,
                       concurrency_id="export", concurrency_limit=2, show_progress="hidden",
                       api_visibility="undocumented")

    def start_run():   # no stale downloads or side views while a new run streams (they follow at its end)
        return [gr.Button(interactive=False), None, None] + [gr.update(interactive=False)] * len(exports_out)

    c["run"].click(start_run, None, [c["run"], c["mvc"], c["topm"], *exports_out], api_visibility="private",
                   queue=False) \
        .then(run, run_inputs, everything, api_name="run", concurrency_id=MODEL_QUEUE, concurrency_limit=1,
              show_progress="minimal") \
        .then(lambda: gr.Button(interactive=True), None, c["run"], api_visibility="private", queue=False) \
        .then(**export_args)
    c["stop"].click(stop, None, c["status"], api_name="stop", concurrency_limit=None, show_progress="hidden")
    c["load"].click(load, [c["preset"], c["target"], c["drafters"], c["device"], c["dtype"]],
                    [c["status"], c["methods"]], api_name="load_model", concurrency_id=MODEL_QUEUE,
                    concurrency_limit=1)
    c["examples"].input(lambda p: p or gr.skip(), c["examples"], c["prompt"], api_visibility="private", queue=False)

    quick_out = exports_out[:4]
    gr.on([c["round"].input, c["show"].input], show_round, view_state, [*round_out, *quick_out],
          api_name="show_round", trigger_mode="always_last", concurrency_id="render", concurrency_limit=4,
          show_progress="hidden") \
        .then(**export_args)
    c["focus"].input(show_focus, [traces_state, c["focus"], c["show"]],
                     [*round_out, c["timing"], c["builder"], *quick_out],
                     api_visibility="undocumented", trigger_mode="always_last", concurrency_id="render",
                     concurrency_limit=4, show_progress="hidden").then(**export_args)
    c["play"].click(toggle_play, [playing, traces_state, c["focus"], c["round"]],
                    [c["timer"], c["play"], playing, c["round"]], api_visibility="private",
                    show_progress="hidden").then(**export_args)
    c["timer"].tick(tick, [*view_state, playing], [c["timer"], c["play"], playing, *round_out, *quick_out],
                    api_visibility="private", trigger_mode="always_last", concurrency_id="render",
                    concurrency_limit=4, show_progress="hidden").then(**export_args)
    c["speed"].change(set_speed, c["speed"], c["timer"], api_visibility="private", queue=False)
    c["import_trace"].upload(import_traces, [c["import_trace"], c["show"]], [*everything, *exports_out],
                             api_name="import_trace",
                             concurrency_id="render", concurrency_limit=4).then(**export_args)

    def unload(request: gr.Request):
        backend.end_session(_session(request))

    demo.unload(unload)
