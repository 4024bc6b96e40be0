"""The "Calibrate this machine" button: what ``Budget: auto`` needs for the loaded pair, made here.

A budget that wins on one CPU loses on another (a wide verify is nearly free with AMX and costs
several one-row steps without it), so ``auto`` reads a calibration made on this machine. The
button runs ``bench.calibrate.calibrate_here`` (the verify-cost profile, then the budget
calibration of ``dominotree`` for the chosen dtype and draft vocabulary; the files the CLI's
``profile-cost`` and ``calibrate-budget`` write) in a worker thread holding the model lock, so a
Run waits for it. The page streams what runs; at the end the auto checkbox is on, saying what
it chose. On a shared (classroom) server only the operator calibrates, from the command line.
"""
from __future__ import annotations

import logging
import threading
import time

import gradio as gr

from . import backend as be
from .controls import auto_budget_control, draft_vocab_size, model_choice

log = logging.getLogger("dominotree.explorer")
POLL_S = 1.0


class Calibration:
    """One ``calibrate_here`` call on the model thread, waited for in a thread of its own that the
    page polls: its stage text, result or error."""

    def __init__(self, backend: be.Backend, decoder, draft_vocab: int):
        self.stage = "waiting for the model"
        self.result = self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(backend, decoder, draft_vocab), daemon=True,
                                       name="calibrate")

    def _say(self, text: str) -> None:
        self.stage = text

    def _run(self, backend, decoder, draft_vocab) -> None:
        from dominotree.bench.calibrate import calibrate_here
        def work():
            with backend.model_lock:
                cm, choice = calibrate_here(decoder, draft_vocab=draft_vocab, on_stage=self._say)
                decoder.cost_model = cm            # the adaptive methods (caddtree, condadaptive) can run now
            return choice
        try:
            self.result = be.model_thread.call(work)   # this thread only waits for it
        except BaseException as e:  # reported to the page
            self.error = e
        finally:
            self.done.set()


def wire(backend: be.Backend, c: dict, status_html, model_queue: str) -> None:
    """Connect the button (component ``calibrate``) to the status line and the auto checkbox."""

    def calibrate(preset, target, drafters, device, dtype, draft_vocab):
        if backend.locked:
            yield status_html(f"Calibration is off: {be.LOCKED_NOTE}; the operator can run "
                              "python -m dominotree calibrate-budget.", "error"), gr.skip(), gr.skip()
            return
        try:
            choice = model_choice(preset, target, drafters, device, dtype)
            n = draft_vocab_size(draft_vocab)
            yield status_html("Calibrating this machine · loading the model…"), gr.skip(), gr.skip()
            job = Calibration(backend, backend.decoder(choice), n)
        except Exception as e:  # noqa: BLE001 - a user mistake (bad folder, unknown setting): say it
            log.warning("user mistake: could not calibrate: %s", e)
            yield status_html(f"Could not calibrate: {e}", "error"), gr.skip(), gr.skip()
            return
        started = time.perf_counter()
        job.thread.start()
        while not job.done.wait(POLL_S):
            yield status_html(f"Calibrating this machine · {job.stage} · {time.perf_counter() - started:.0f} s "
                              "(a Run waits until it ends)"), gr.skip(), gr.skip()
        took = time.perf_counter() - started
        if job.error is not None:
            log.warning("calibration failed: %s", job.error)
            yield status_html(f"Calibration failed after {took:.0f} s: {job.error}", "error"), gr.skip(), gr.skip()
            return
        ch = job.result
        at = {r["budget"]: r["predicted_tokens_per_s"] for r in ch.curve}
        vs16 = f" (predicted {at[ch.budget]:.1f} tok/s against {at[16]:.1f} at budget 16)" if 16 in at else ""
        yield (status_html(f"Calibrated in {took:.0f} s: auto = dominotree budget {ch.budget}{vs16}; saved "
                           f"{ch.calibration} and {ch.cost_model}. Budget: auto is on.", "done"),
               gr.Checkbox(**{**auto_budget_control(choice, n), "value": True}),
               gr.CheckboxGroup(choices=backend.methods()))   # the adaptive methods need the profile

    c["calibrate"].click(calibrate, [c[k] for k in ("preset", "target", "drafters", "device", "dtype", "draft_vocab")],
                         [c["status"], c["budget_auto"], c["methods"]], api_name="calibrate", concurrency_id=model_queue,
                         concurrency_limit=1, show_progress="minimal")
