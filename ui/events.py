"""Event wiring: run/stop (the model queue), scrub/autoplay/colour/focus (CPU-only redraws),
export and import. Handlers only validate input, call the backend or a renderer, and map the
results onto components."""
from __future__ import annotations

import html
import logging
import time
from dataclasses import replace

import gradio as gr

from dominotree import live
from dominotree.config import ConfigError

from . import backend as be
from . import calibrate as calibrate_ui
from .controls import auto_budgets, auto_control, check_request, decode_config, draft_vocab_control, model_choice
from .files import read_traces, write_comparison, write_round
from .panes import auto_html, render_panes, tie_html, vocab_html
from .costpanel import render_cost
from .rebuild_view import own_controls, render_rebuild
from .round_view import autoplay_step, pick, render_round, render_whatif
from .summary import empty_table, render_summary, render_timing

log = logging.getLogger("dominotree.explorer")

MODEL_QUEUE = "model"          # every listener that touches the model shares this queue (limit 1)
STREAM_INTERVAL = 1.0          # seconds between streamed updates, at least
MAX_INTERVAL = 3.0             # and at most (the page never waits longer for news of a live run)
WATCHDOG_S = 3.0               # the page asks this often whether a run it shows as live has ended
RENDER_SHARE = 0.05            # drawing adds at most this share to a run's wall time (decoding pauses for it)
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


def diagnose_ties(decoder, prompt_ids, traces: dict) -> None:
    """In bf16 at T = 0, note in each trace that differs from ``ar``'s where and why (the bench's
    near-tie check: one fresh target forward on the shared prefix)."""
    ar = traces.get("ar")
    if ar is None or ar.config.get("temperature", 1) >= 1e-5:
        return
    for name, t in traces.items():
        if name != "ar" and t.config.get("temperature", 1) < 1e-5:
            try:
                t.config["vs_ar"] = live.tie_note(decoder, prompt_ids, ar.token_ids, t.token_ids)
            except Exception:  # noqa: BLE001 - a diagnosis that fails leaves the pane unmarked
                log.exception("tie diagnosis failed for %s", name)


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
        notes = {k: auto_html(t) + vocab_html(t) + tie_html(t) for k, t in traces.items()}
        out = [traces, status, radio, *render_panes(traces, running, pending, notes),
               *render_round(traces, focus, idx, show, light=light)]
        if light:              # the summary and timing charts follow at the end of the run
            return out + [gr.skip()] * len(summary_out)
        return out + render_summary(traces, focus)

    # --- run / stop / load (model queue) ----------------------------------------------------
    run_out = [*everything, c["run"]]

    def unchanged(message: str, kind: str = "error") -> list:
        """A user mistake: one message (toast and status line); every output keeps what it shows
        and Run is usable again."""
        if kind == "error":
            log.warning("user mistake: %s", message)
            gr.Warning(esc(message))
        out = [gr.skip()] * len(run_out)
        out[everything.index(c["status"])] = status_html(message, kind)
        out[-1] = gr.Button(interactive=True) if kind != "info" else gr.skip()
        return out

    def run(prompt, methods, temperature, seed, budget, budget_auto, topm, topk, max_new, builder, ab_builder,
            draft_vocab, preset, target, drafters, device, dtype, show, request: gr.Request):
        session = _session(request)
        backend.queue_run(session)          # a no-op when Run's click already did it
        try:
            yield from decode(session, prompt, methods, temperature, seed, budget, budget_auto, topm, topk, max_new,
                              builder, ab_builder, draft_vocab, preset, target, drafters, device, dtype, show)
        except ConfigError as e:
            yield unchanged(str(e))
        finally:
            backend.finish_run(session)

    def decode(session, prompt, methods, temperature, seed, budget, budget_auto, topm, topk, max_new, builder,
               ab_builder, draft_vocab, preset, target, drafters, device, dtype, show):
        wanted = check_request(prompt, methods, max_new)
        max_new = int(max_new)
        cfgs = [decode_config(m, temperature, seed, budget, topm, topk, max_new, builder, ab_builder, draft_vocab)
                for m in wanted]
        choice = model_choice(preset, target, drafters, device, dtype)
        cfgs, auto, auto_note = auto_budgets(cfgs, choice, bool(budget_auto))
        auto_note = f" · {auto_note}" if auto_note else ""
        stop = backend.stop_flag(session)
        if stop.is_set():
            yield unchanged("Stopped before it started (Stop was pressed while the run waited in the queue).",
                            "done")
            return
        if backend.loaded != choice:
            yield unchanged(f"Loading the model ({choice.label()}); on first use it is converted and cached, "
                            f"which can take half a minute…", "info")
        try:
            decoder = backend.decoder(choice)
        except Exception as e:  # noqa: BLE001 - shown to the user, who can pick another model
            raise ConfigError(f"Could not load the model ({choice.label()}): {e}") from None
        prompt_ids = decoder.encode_prompt(prompt)
        for k, cfg in enumerate(cfgs):
            try:     # the chosen draft vocabulary as this pair and method take it (ar drafts nothing: 0)
                cfg = cfgs[k] = replace(cfg, draft_vocab=decoder.pair.resolve_draft_vocab(cfg.draft_vocab, cfg.method))
                decoder.check(prompt_ids, cfg)
            except ConfigError as e:            # e.g. this pair has no drafter for the method
                raise ConfigError(f"{cfg.method}: {e}") from None
        traces: dict = {}
        first, started = True, time.perf_counter()
        interval = [STREAM_INTERVAL]     # grows when drawing is slow (decoding pauses while the page draws)
        for k, cfg in enumerate(cfgs):
            if stop.is_set():
                break
            job = backend.start(session, prompt, cfg, lambda: interval[0])
            try:
                for snap, silent in be.wait_loop(job):
                    traces[cfg.method] = snap
                    if job.done.is_set():
                        break
                    t0 = time.perf_counter()
                    msg = f"Decoding {cfg.method} ({k + 1}/{len(cfgs)}) · round {len(snap.rounds)} · " \
                          f"{len(snap.token_ids)}/{max_new} tokens" \
                          + (f" · no new round for {silent:.0f} s" if silent >= 5 else "") + auto_note
                    out = render_all(traces, cfg.method, len(snap.rounds), show, status_html(msg),
                                     running=cfg.method, pending=wanted, light=True)
                    if first:          # the old run's figures go with the new run's first update
                        for key in ("tree", "mvc", "topm", "hist", "depth", "timing", "builder"):
                            out[everything.index(c[key])] = None
                        out[everything.index(c["table"])] = empty_table()
                        first = False
                    yield [*out, gr.skip()]
                    # Gradio serializes and sends the update before resuming us (and the decoder): that counts too
                    interval[0] = min(MAX_INTERVAL, max(STREAM_INTERVAL, (time.perf_counter() - t0) / RENDER_SHARE))
            finally:
                if not job.done.is_set():      # the client went away: stop at the next round
                    stop.set()
                    job.done.wait()
            if job.stalled:
                log.error("%s: no new round for %.0f s; stopped", cfg.method, be.STALL_S)
                gr.Warning(esc(f"{cfg.method}: the decoder made no progress for {be.STALL_S:.0f} s and was stopped."))
            if job.error is not None:
                log.error("%s failed", cfg.method, exc_info=job.error)
                gr.Warning(esc(f"{cfg.method} failed: {job.error}"))
            elif job.result is not None:
                traces[cfg.method] = job.result
                if cfg.method in auto:
                    job.result.config["budget_auto"] = auto[cfg.method].describe()
        if not traces:
            yield (unchanged("Stopped before the first round: nothing decoded.", "done") if stop.is_set()
                   else unchanged("Nothing decoded: every method failed (see the warnings)."))
            return
        if choice.dtype != "float32":
            be.model_thread.call(diagnose_ties, decoder, prompt_ids, traces)
        last = list(traces)[-1]
        n = len(traces[last].rounds)
        word = "Stopped" if stop.is_set() else "Done"
        msg = f"{word} · {', '.join(traces)} in {time.perf_counter() - started:.1f} s{auto_note} · {backend.describe()}"
        backend.finish_run(session)         # from here Stop has nothing left to stop
        yield [*render_all(traces, last, n, show, status_html(msg, "done")), gr.Button(interactive=True)]

    def stop(request: gr.Request):
        if backend.request_stop(_session(request)):
            return status_html("Stopping at the next round…")
        return gr.skip()

    def load(preset, target, drafters, device, dtype):
        try:
            backend.decoder(model_choice(preset, target, drafters, device, dtype))
        except Exception as e:  # noqa: BLE001
            message = f"Could not load the model: {e}"
            log.warning("user mistake: %s", message)
            gr.Warning(esc(message))
            return status_html(message, "error"), gr.skip()
        ms = backend.methods()
        return status_html(backend.describe(), "done"), gr.CheckboxGroup(choices=ms)

    # --- redraws (CPU only) --------------------------------------------------------------------
    def show_round(traces, focus, idx, show, request: gr.Request):
        return [*render_round(traces, focus, idx, show), *quick_exports(traces, focus, idx, show, request)]

    def show_focus(traces, focus, show, request: gr.Request):
        trace = pick(traces, focus)
        idx = len(trace.rounds) if trace is not None else 1
        return [*render_round(traces, focus, idx, show), *render_timing(traces, focus),
                *quick_exports(traces, focus, idx, show, request)]

    def toggle_play(is_playing, traces, focus, idx, speed):
        trace = pick(traces, focus)
        if is_playing or trace is None or not trace.rounds:
            return gr.Timer(active=False), gr.Button("▶ Play"), False, gr.skip()
        k = int(idx or 1)
        r0 = 1 if k >= len(trace.rounds) else k          # at the last round: replay from the first
        play = {"t0": time.monotonic(), "r0": r0, "speed": max(float(speed or 1), 0.05)}
        return gr.Timer(active=True), gr.Button("⏸ Pause"), play, r0 if r0 != k else gr.skip()

    def tick(traces, focus, idx, show, play, speed, request: gr.Request):
        trace = pick(traces, focus)
        if not play or trace is None:
            return [gr.Timer(active=False), gr.Button("▶ Play"), False, *[gr.skip()] * (len(round_out) + 4)]
        nxt, at_end, play = autoplay_step(trace, idx, play, speed, time.monotonic())
        head = [gr.Timer(active=False), gr.Button("▶ Play"), False] if at_end else [gr.skip(), gr.skip(), play]
        if nxt is None:
            return [*head, *[gr.skip()] * (len(round_out) + 4)]
        return [*head, *render_round(traces, focus, nxt, show), *quick_exports(traces, focus, nxt, show, request)]

    def set_speed(speed):      # the timer ticks twice per round: a late tick does not slow the rate
        return gr.Timer(value=0.5 / max(float(speed or 1), 0.05))

    # --- export / import ---------------------------------------------------------------------------
    def exports(traces, focus, idx, show, is_playing, request: gr.Request):
        """All five files for what is on screen (PDF/PNG/JSON take a second or so)."""
        if is_playing:
            return [gr.skip()] * len(exports_out)
        folder = backend.session_dir(_session(request))
        key = (_session(request), tuple((k, id(t), len(t.rounds), t.stopped) for k, t in (traces or {}).items()))
        try:
            # PDF/PNG rendering and the comparison JSON take a second of CPU: never while a model
            # job runs (measured: a comparison started right after another ran `ar` at 1.8 tok/s
            # instead of 10 while these were written), so wait for the model lock
            with backend.model_lock:
                paths = write_round(folder, traces, focus, idx, show)
                if key not in json_cache:
                    if len(json_cache) > 64:
                        json_cache.clear()
                    json_cache[key] = write_comparison(folder, traces)
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
        try:
            traces, meta = read_traces(files)
        except ConfigError as e:
            out = unchanged(str(e))[:len(everything)]
            return [*out, *[gr.skip()] * len(exports_out)]
        last = list(traces)[-1]
        n = len(traces[last].rounds)
        msg = replay_message(traces, meta)
        off = [gr.update(interactive=False)] * len(exports_out)     # re-made by ``exports`` next
        return [*render_all(traces, last, n, show, status_html(msg, "done")), *off]

    # --- listeners ---------------------------------------------------------------------------------
    run_inputs = [c[k] for k in ("prompt", "methods", "temperature", "seed", "budget", "budget_auto", "topm_m", "topk",
                                 "max_new", "builder_choice", "ab_builder", "draft_vocab", "preset", "target", "drafters", "device",
                                 "dtype", "show")]
    view_state = [traces_state, c["focus"], c["round"], c["show"]]
    export_args = dict(fn=exports, inputs=[*view_state, playing], outputs=exports_out,
                       concurrency_id="export", concurrency_limit=2, show_progress="hidden",
                       api_visibility="undocumented")

    def start_run(request: gr.Request):
        """Run pressed: from now Stop applies (also while queued); no stale downloads meanwhile
        (they are re-made at the end). Run is re-enabled by every way ``run`` ends. The status
        line says the run waits for the model until ``run`` starts streaming (the run shows no
        Gradio timers: they lingered on the panes after a mistake's one-message reply)."""
        backend.queue_run(_session(request))
        return [gr.Button(interactive=False), status_html("Waiting for the model (a run or a calibration may "
                                                          "hold it)…")] + [gr.update(interactive=False)] * len(exports_out)

    # --- rebuild and cost panel (CPU work on the model thread, never while a run holds the model) -------
    rebuild_in = [traces_state, c["focus"], c["round"], *(c[f"rebuild_{k}"] for k in ("topm", "k", "budget", "scorer",
                                                                                     "vocab"))]
    def rebuild_view(traces, focus, idx, topm, k, budget, scorer, vocab, request: gr.Request):
        return render_rebuild(backend, traces, focus, idx, topm, k, budget, scorer, vocab,
                              backend.session_dir(_session(request)))

    def cost_view(traces, request: gr.Request):
        return render_cost(backend, traces, backend.session_dir(_session(request)))

    files = ("svg", "pdf", "png", "tikz")
    rebuild_args = dict(fn=rebuild_view, inputs=rebuild_in, outputs=[c["rebuild_caption"], c["rebuild_tree"],
                                                                      *(c[f"rebuild_export_{f}"] for f in files)],
                        api_name="rebuild",
                        trigger_mode="always_last", concurrency_id="rebuild", concurrency_limit=1,
                        show_progress="hidden")
    cost_args = dict(fn=cost_view, inputs=[traces_state],
                     outputs=[c["cost_text"], c["cost_plot"], *(c[f"cost_export_{f}"] for f in files)],
                     api_name="cost_panel", concurrency_id="rebuild",
                     concurrency_limit=1, show_progress="hidden")
    own_args = dict(fn=own_controls, inputs=[traces_state, c["focus"], c["round"]],
                    outputs=[c[f"rebuild_{k}"] for k in ("topm", "k", "budget", "scorer", "vocab")],
                    api_visibility="private", queue=False, show_progress="hidden")
    private_rebuild = {**rebuild_args, "api_name": None, "api_visibility": "private"}
    gr.on([c["round"].input, c["focus"].input, *(c[f"rebuild_{k}"].input for k in ("topm", "k", "budget", "scorer",
                                                                                   "vocab"))], **rebuild_args)

    c["run"].click(start_run, None, [c["run"], c["status"], *exports_out], api_visibility="private", queue=False) \
        .then(run, run_inputs, run_out, api_name="run", concurrency_id=MODEL_QUEUE, concurrency_limit=1,
              show_progress="hidden", show_progress_on=c["run"]) \
        .then(lambda: gr.Button(interactive=True), None, c["run"], api_visibility="private", queue=False) \
        .then(**export_args).then(**own_args).then(**private_rebuild).then(**cost_args)
    c["stop"].click(stop, None, c["status"], api_name="stop", concurrency_limit=None, show_progress="hidden")

    def drawn(request: gr.Request):
        backend.page_drew(_session(request))

    c["drawn"].click(drawn, None, None, api_visibility="private", queue=False, show_progress="hidden")
    c["load"].click(load, [c["preset"], c["target"], c["drafters"], c["device"], c["dtype"]],
                    [c["status"], c["methods"]], api_name="load_model", concurrency_id=MODEL_QUEUE,
                    concurrency_limit=1)
    model_in = [c[k] for k in ("preset", "target", "drafters", "device", "dtype", "draft_vocab")]
    # another pair: the draft vocabulary dropdown shows its default (8192 embedded, full otherwise)
    gr.on([c[k].change for k in ("preset", "target", "drafters")], draft_vocab_control, model_in[:5],
          c["draft_vocab"], api_visibility="private", queue=False, show_progress="hidden")
    gr.on([x.change for x in model_in], auto_control, model_in, c["budget_auto"], api_visibility="private",
          queue=False, show_progress="hidden")
    calibrate_ui.wire(backend, c, status_html, MODEL_QUEUE)
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
    c["play"].click(toggle_play, [playing, traces_state, c["focus"], c["round"], c["speed"]],
                    [c["timer"], c["play"], playing, c["round"]], api_visibility="private",
                    show_progress="hidden").then(**export_args)
    c["timer"].tick(tick, [*view_state, playing, c["speed"]], [c["timer"], c["play"], playing, *round_out, *quick_out],
                    api_visibility="private", trigger_mode="always_last", concurrency_id="render",
                    concurrency_limit=4, show_progress="hidden").then(**export_args)
    c["speed"].change(set_speed, c["speed"], c["timer"], api_visibility="private", queue=False)
    c["import_trace"].upload(import_traces, [c["import_trace"], c["show"]], [*everything, *exports_out],
                             api_name="import_trace", concurrency_id="render", concurrency_limit=4,
                             show_progress="hidden", show_progress_on=c["import_trace"]).then(**export_args) \
        .then(**own_args).then(**private_rebuild) \
        .then(**{**cost_args, "api_name": None, "api_visibility": "private"})

    gr.on([c["whatif_budget"].input, c["round"].input, c["show"].input, c["focus"].input], render_whatif,
          [*view_state, c["whatif_budget"]], [c["whatif_caption"], c["whatif_tree"]], api_name="whatif",
          trigger_mode="always_last", concurrency_id="render", concurrency_limit=4, show_progress="hidden")

    LIVE = ("Decoding", "Stopping at the next round", "Loading the model")
    suspects: dict = {}        # session -> when the page was first seen showing a run that had ended

    def watchdog(status, traces, focus, idx, show, request: gr.Request):
        """The page pulls what a push may have lost: when it still shows a run as live (or
        "Stopping…") but the session has none, redraw the run's final state from the session."""
        session = _session(request)
        if not any(w in str(status or "") for w in LIVE) or backend.busy(session):
            suspects.pop(session, None)
            return [gr.skip()] * len(run_out)
        if time.monotonic() - suspects.setdefault(session, time.monotonic()) < 1.5 * WATCHDOG_S:
            return [gr.skip()] * len(run_out)      # the final update may still be on its way
        suspects.pop(session, None)
        log.warning("page showed a finished run as live; redrawn from the session state")
        if not traces:
            return unchanged("Ready (the last run ended without output).", "done")
        return [*render_all(traces, focus, idx, show, status_html(f"Done · {', '.join(traces)} · "
                                                                  f"{backend.describe()}", "done")),
                gr.Button(interactive=True)]

    # raw inputs (preprocess=False): a queue-less event checks the round against the slider's
    # initial range, not the one the run on screen set; ``clamp_round`` bounds it instead
    # show_progress_on: Gradio marks every output "pending" while an event runs, and "hidden" only
    # makes its timer transparent; this queue-less tick every WATCHDOG_S wrote the panes, so a
    # pending timer ("0.3s") could sit on pane 0 after a mistake. No event's timer goes on a pane.
    c["watchdog"].tick(watchdog, [c["status"], *view_state], run_out, api_visibility="private", queue=False,
                       preprocess=False, show_progress="hidden", show_progress_on=c["watchdog"])

    def unload(request: gr.Request):
        backend.end_session(_session(request))

    demo.unload(unload)
