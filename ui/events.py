"""Event wiring: which component's event calls which handler, with what inputs and outputs, in
which queue. The handlers live by concern: ``run_events`` (Run, Stop, Load model: the model
queue), ``view_events`` (scrub, focus, autoplay, rebuild view, cost panel: CPU-only redraws),
``file_events`` (downloads and trace import), ``page_sync`` (the page's draw acknowledgement,
watchdog and unload), ``share`` (share links: kept after a run, opened on page load); ``context``
holds what they share. The lecture view's keys and views are the page's own (``ui/lecture.py``)."""
from __future__ import annotations

import gradio as gr

from . import backend as be
from . import calibrate as calibrate_ui
from .context import Context, status_html
from .controls import auto_control, draft_vocab_control
from .file_events import FileEvents
from .lecture import NO_CACHE, round_cache, step_round
from .page_sync import PageSync
from .rebuild_view import own_controls
from .round_view import render_whatif
from .run_events import RunEvents
from .share import ShareEvents
from .sharestore import ShareStore
from .view_events import ViewEvents

MODEL_QUEUE = "model"          # every listener that touches the model shares this queue (limit 1)


def wire(backend: be.Backend, c: dict, demo: gr.Blocks) -> None:
    ctx = Context(backend, c)
    runs, files, sync = RunEvents(ctx), FileEvents(ctx), PageSync(ctx)
    views = ViewEvents(ctx, files)
    shares = ShareEvents(ctx, ShareStore(), files.exports)      # links last as long as this app
    traces_state, playing = c["traces"], c["playing"]
    round_out, everything, exports_out, run_out = ctx.round_out, ctx.everything, ctx.exports_out, ctx.run_out

    # --- listeners ---------------------------------------------------------------------------------
    run_inputs = [c[k] for k in ("prompt", "methods", "temperature", "seed", "budget", "budget_auto", "topm_m", "topk",
                                 "max_new", "builder_choice", "ab_builder", "draft_vocab", "preset", "target", "drafters", "device",
                                 "dtype", "show")]
    view_state = [traces_state, c["focus"], c["round"], c["show"]]
    export_args = dict(fn=files.exports, inputs=[*view_state, playing], outputs=exports_out,
                       concurrency_id="export", concurrency_limit=2, show_progress="hidden",
                       api_visibility="undocumented")

    # --- rebuild and cost panel (CPU work on the model thread, never while a run holds the model) -------
    rebuild_in = [traces_state, c["focus"], c["round"], *(c[f"rebuild_{k}"] for k in ("topm", "k", "budget", "scorer",
                                                                                     "vocab"))]
    file_kinds = ("svg", "pdf", "png", "tikz")
    rebuild_args = dict(fn=views.rebuild_view, inputs=rebuild_in,
                        outputs=[c["rebuild_caption"], c["rebuild_tree"], *(c[f"rebuild_export_{f}"] for f in file_kinds)],
                        api_name="rebuild",
                        trigger_mode="always_last", concurrency_id="rebuild", concurrency_limit=1,
                        show_progress="hidden")
    cost_args = dict(fn=views.cost_view, inputs=[traces_state],
                     outputs=[c["cost_text"], c["cost_plot"], *(c[f"cost_export_{f}"] for f in file_kinds)],
                     api_name="cost_panel", concurrency_id="rebuild",
                     concurrency_limit=1, show_progress="hidden")
    own_args = dict(fn=own_controls, inputs=[traces_state, c["focus"], c["round"]],
                    outputs=[c[f"rebuild_{k}"] for k in ("topm", "k", "budget", "scorer", "vocab")],
                    api_visibility="private", queue=False, show_progress="hidden")
    private_rebuild = {**rebuild_args, "api_name": None, "api_visibility": "private"}
    gr.on([c["round"].input, c["focus"].input, *(c[f"rebuild_{k}"].input for k in ("topm", "k", "budget", "scorer",
                                                                                   "vocab"))], **rebuild_args)

    # --- run / stop / load (model queue) ----------------------------------------------------
    save_args = dict(fn=shares.save, inputs=[traces_state], outputs=[c["share_link"]], api_visibility="private",
                     concurrency_id="share", concurrency_limit=2, show_progress="hidden")
    # the lecture view's rounds (ui/lecture.py: round_cache): cleared when a run starts, sent when it
    # ends, after a replay or an opened link, and when the run inspected or the colouring changes
    cache_args = dict(fn=round_cache, inputs=[traces_state, c["focus"], c["show"]], outputs=[c["lecture_cache"]],
                      api_visibility="private", concurrency_id="lecture-cache", concurrency_limit=1,
                      show_progress="hidden")
    c["run"].click(lambda: NO_CACHE, None, c["lecture_cache"], api_visibility="private", queue=False,
                   show_progress="hidden")
    c["run"].click(runs.start_run, None, [c["run"], c["status"], *exports_out], api_visibility="private", queue=False) \
        .then(runs.run, run_inputs, run_out, api_name="run", concurrency_id=MODEL_QUEUE, concurrency_limit=1,
              show_progress="hidden", show_progress_on=c["run"]) \
        .then(lambda: gr.Button(interactive=True), None, c["run"], api_visibility="private", queue=False) \
        .then(**save_args).then(**cache_args).then(**export_args).then(**own_args).then(**private_rebuild) \
        .then(**cost_args)
    c["stop"].click(runs.stop, None, c["status"], api_name="stop", concurrency_limit=None, show_progress="hidden")

    c["drawn"].click(sync.drawn, None, None, api_visibility="private", queue=False, show_progress="hidden")
    c["load"].click(runs.load, [c["preset"], c["target"], c["drafters"], c["device"], c["dtype"]],
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

    # --- redraws (CPU only), autoplay, import ------------------------------------------------------
    quick_out = exports_out[:4]
    c["lecture_round"].change(step_round, [traces_state, c["focus"], c["lecture_round"], c["show"]],
                              [c["round"], c["captions"], c["tree"]], api_visibility="private", trigger_mode="always_last",
                              concurrency_id="lecture", concurrency_limit=1, show_progress="hidden")
    gr.on([c["round"].input, c["show"].input], views.show_round, view_state, [*round_out, *quick_out],
          api_name="show_round", trigger_mode="always_last", concurrency_id="render", concurrency_limit=4,
          show_progress="hidden") \
        .then(**export_args)
    c["focus"].input(views.show_focus, [traces_state, c["focus"], c["show"]],
                     [*round_out, c["timing"], c["builder"], *quick_out],
                     api_visibility="undocumented", trigger_mode="always_last", concurrency_id="render",
                     concurrency_limit=4, show_progress="hidden").then(**cache_args).then(**export_args)
    c["show"].input(**cache_args, trigger_mode="always_last")
    c["play"].click(views.toggle_play, [playing, traces_state, c["focus"], c["round"], c["speed"]],
                    [c["timer"], c["play"], playing, c["round"]], api_visibility="private",
                    show_progress="hidden").then(**export_args)
    c["timer"].tick(views.tick, [*view_state, playing, c["speed"]], [c["timer"], c["play"], playing, *round_out, *quick_out],
                    api_visibility="private", trigger_mode="always_last", concurrency_id="render",
                    concurrency_limit=4, show_progress="hidden").then(**export_args)
    c["speed"].change(views.set_speed, c["speed"], c["timer"], api_visibility="private", queue=False)
    c["import_trace"].upload(files.import_traces, [c["import_trace"], c["show"]], [*everything, *exports_out],
                             api_name="import_trace", concurrency_id="render", concurrency_limit=4,
                             show_progress="hidden", show_progress_on=c["import_trace"]).then(**save_args) \
        .then(**cache_args).then(**export_args) \
        .then(**own_args).then(**private_rebuild) \
        .then(**{**cost_args, "api_name": None, "api_visibility": "private"})

    gr.on([c["whatif_budget"].input, c["round"].input, c["show"].input, c["focus"].input], render_whatif,
          [*view_state, c["whatif_budget"]], [c["whatif_caption"], c["whatif_tree"]], api_name="whatif",
          trigger_mode="always_last", concurrency_id="render", concurrency_limit=4, show_progress="hidden")

    # raw inputs (preprocess=False): a queue-less event checks the round against the slider's
    # initial range, not the one the run on screen set; ``clamp_round`` bounds it instead
    # show_progress_on: Gradio marks every output "pending" while an event runs, and "hidden" only
    # makes its timer transparent; this queue-less tick every WATCHDOG_S wrote the panes, so a
    # pending timer ("0.3s") could sit on pane 0 after a mistake. No event's timer goes on a pane.
    c["watchdog"].tick(sync.watchdog, [c["status"], *view_state], run_out, api_visibility="private", queue=False,
                       preprocess=False, show_progress="hidden", show_progress_on=c["watchdog"])

    # a page opened from a share link shows its comparison (no model run); others are left alone
    demo.load(shares.open, [c["show"]], [*everything, *exports_out, c["share_link"], c["show"]],
              api_visibility="private", concurrency_id="render", concurrency_limit=4, show_progress="hidden") \
        .then(**cache_args).then(**{**export_args, "fn": shares.exports}).then(**own_args).then(**private_rebuild) \
        .then(**{**cost_args, "api_name": None, "api_visibility": "private"})
    demo.unload(sync.unload)
