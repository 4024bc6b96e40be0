"""The run pipeline (the model queue): Run pressed (``start_run``), the run itself (``run`` ->
``decode``: check the request, load the model, decode each method in turn and stream its rounds,
then the final view), Stop, and Load model."""
from __future__ import annotations

import logging
import time
from dataclasses import replace

import gradio as gr

from dominotree.view import live
from dominotree.config import ConfigError

from . import backend as be
from .context import Context, esc, session_of, status_html
from .controls import auto_budgets, check_request, decode_config, model_choice
from .summary import empty_table

log = logging.getLogger("dominotree.explorer")

STREAM_INTERVAL = 1.0          # seconds between streamed updates, at least
MAX_INTERVAL = 3.0             # and at most (the page never waits longer for news of a live run)
RENDER_SHARE = 0.05            # drawing adds at most this share to a run's wall time (decoding pauses for it)


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


class RunEvents:
    """The handlers of Run, Stop and Load model."""

    def __init__(self, ctx: Context):
        self.ctx, self.backend = ctx, ctx.backend

    def start_run(self, request: gr.Request):
        """Run pressed: from now Stop applies (also while queued); no stale downloads meanwhile
        (they are re-made at the end). Run is re-enabled by every way ``run`` ends. The status
        line says the run waits for the model until ``run`` starts streaming (the run shows no
        Gradio timers: they lingered on the panes after a mistake's one-message reply)."""
        self.backend.queue_run(session_of(request))
        return [gr.Button(interactive=False), status_html("Waiting for the model (a run or a calibration may "
                                                          "hold it)…")] + [gr.update(interactive=False)] * len(self.ctx.exports_out)

    def run(self, prompt, methods, temperature, seed, budget, budget_auto, topm, topk, max_new, builder, ab_builder,
            draft_vocab, preset, target, drafters, device, dtype, show, request: gr.Request):
        session = session_of(request)
        self.backend.queue_run(session)          # a no-op when Run's click already did it
        try:
            yield from self.decode(session, prompt, methods, temperature, seed, budget, budget_auto, topm, topk,
                                   max_new, builder, ab_builder, draft_vocab, preset, target, drafters, device, dtype,
                                   show)
        except ConfigError as e:
            yield self.ctx.unchanged(str(e))
        finally:
            self.backend.finish_run(session)

    def decode(self, session, prompt, methods, temperature, seed, budget, budget_auto, topm, topk, max_new, builder,
               ab_builder, draft_vocab, preset, target, drafters, device, dtype, show):
        ctx, backend, c = self.ctx, self.backend, self.ctx.c
        wanted = check_request(prompt, methods, max_new)
        max_new = int(max_new)
        cfgs = [decode_config(m, temperature, seed, budget, topm, topk, max_new, builder, ab_builder, draft_vocab)
                for m in wanted]
        choice = model_choice(preset, target, drafters, device, dtype)
        cfgs, auto, auto_note = auto_budgets(cfgs, choice, bool(budget_auto))
        auto_note = f" · {auto_note}" if auto_note else ""
        stop = backend.stop_flag(session)
        if stop.is_set():
            yield ctx.unchanged("Stopped before it started (Stop was pressed while the run waited in the queue).",
                                "done")
            return
        if backend.loaded != choice:
            yield ctx.unchanged(f"Loading the model ({choice.label()}); on first use it is converted and cached, "
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
                    out = ctx.render_all(traces, cfg.method, len(snap.rounds), show, status_html(msg),
                                         running=cfg.method, pending=wanted, light=True)
                    if first:          # the old run's figures go with the new run's first update
                        for key in ("tree", "mvc", "topm", "hist", "depth", "timing", "builder"):
                            out[ctx.everything.index(c[key])] = None
                        out[ctx.everything.index(c["table"])] = empty_table()
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
            yield (ctx.unchanged("Stopped before the first round: nothing decoded.", "done") if stop.is_set()
                   else ctx.unchanged("Nothing decoded: every method failed (see the warnings)."))
            return
        if choice.dtype != "float32":
            be.model_thread.call(diagnose_ties, decoder, prompt_ids, traces)
        # the last run with a round to show: a Stop right after a method's prefill leaves it none
        last = next((m for m in reversed(traces) if traces[m].rounds), list(traces)[-1])
        n = len(traces[last].rounds)
        word = "Stopped" if stop.is_set() else "Done"
        msg = f"{word} · {', '.join(traces)} in {time.perf_counter() - started:.1f} s{auto_note} · {backend.describe()}"
        backend.finish_run(session)         # from here Stop has nothing left to stop
        yield [*ctx.render_all(traces, last, n, show, status_html(msg, "done")), gr.Button(interactive=True)]

    def stop(self, request: gr.Request):
        if self.backend.request_stop(session_of(request)):
            return status_html("Stopping at the next round…")
        return gr.skip()

    def load(self, preset, target, drafters, device, dtype):
        backend = self.backend
        try:
            backend.decoder(model_choice(preset, target, drafters, device, dtype))
        except Exception as e:  # noqa: BLE001
            message = f"Could not load the model: {e}"
            log.warning("user mistake: %s", message)
            gr.Warning(esc(message))
            return status_html(message, "error"), gr.skip()
        ms = backend.methods()
        return status_html(backend.describe(), "done"), gr.CheckboxGroup(choices=ms)
