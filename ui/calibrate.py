"""The "Calibrate this machine" button: what ``Budget: auto`` needs for the loaded pair, made here.

A budget that wins on one CPU loses on another (a wide verify is nearly free with AMX and costs
several one-row steps without it), so ``auto`` reads a calibration made on this machine. The
button runs ``dominotree.auto.calibrate.calibrate_here`` (the verify-cost profile, then the budget
calibration of ``dominotree`` for the chosen dtype and draft vocabulary; the files the CLI's
``profile-cost`` and ``calibrate-budget`` write) on the model thread holding the model lock, so a
Run waits for it. The page streams what runs; at the end the auto checkbox is on, saying what
it chose. On a shared (classroom) server only the operator calibrates, from the command line.
"""
from __future__ import annotations

import logging
import time
from concurrent.futures import wait

import gradio as gr

from . import backend as be
from .controls import auto_budget_control, draft_vocab_size, model_choice

log = logging.getLogger("dominotree.explorer")
POLL_S = 1.0


class Calibration:
    """One ``calibrate_here`` call on the model thread: its stage text and, in ``future``, its
    result or error."""

    def __init__(self, backend: be.Backend, decoder, draft_vocab: int):
        self.stage = "waiting for the model"
        self.backend, self.decoder, self.draft_vocab = backend, decoder, draft_vocab
        self.future = None

    def _say(self, text: str) -> None:
        self.stage = text

    def _work(self):
        from dominotree.auto.calibrate import calibrate_here
        with self.backend.model_lock:
            cm, choice = calibrate_here(self.decoder, draft_vocab=self.draft_vocab, on_stage=self._say)
            self.decoder.cost_model = cm        # the adaptive methods (caddtree, condadaptive) can run now
        return choice

    def start(self) -> "Calibration":
        self.future = be.model_thread.submit(self._work)
        return self


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
        job.start()
        while not wait([job.future], timeout=POLL_S).done:
            yield status_html(f"Calibrating this machine · {job.stage} · {time.perf_counter() - started:.0f} s "
                              "(a Run waits until it ends)"), gr.skip(), gr.skip()
        took = time.perf_counter() - started
        error = job.future.exception()
        if error is not None:
            log.warning("calibration failed: %s", error)
            yield status_html(f"Calibration failed after {took:.0f} s: {error}", "error"), gr.skip(), gr.skip()
            return
        ch = job.future.result()
        at = {r["budget"]: r["predicted_tokens_per_s"] for r in ch.curve}
        vs16 = f" (predicted {at[ch.budget]:.1f} tok/s against {at[16]:.1f} at budget 16)" if 16 in at else ""
        yield (status_html(f"Calibrated in {took:.0f} s: auto = dominotree budget {ch.budget}{vs16} ({ch.reason}); saved "
                           f"{ch.calibration} and {ch.cost_model}. Budget: auto is on.", "done"),
               gr.Checkbox(**{**auto_budget_control(choice, n), "value": True}),
               gr.CheckboxGroup(choices=backend.methods()))   # the adaptive methods need the profile

    c["calibrate"].click(calibrate, [c[k] for k in ("preset", "target", "drafters", "device", "dtype", "draft_vocab")],
                         [c["status"], c["budget_auto"], c["methods"]], api_name="calibrate", concurrency_id=model_queue,
                         concurrency_limit=1, show_progress="minimal")
