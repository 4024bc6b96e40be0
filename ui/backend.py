"""The explorer's backend: the loaded model pair, one lock for model work, per-session stop
flags and export folders. No Gradio here, and no model math: decoding is ``Decoder.generate``.

A run happens on the model thread (``model_thread``: all of the explorer's torch work runs on
that one thread, for libgomp's sake); after every round the worker stores a snapshot of the
growing trace (copies of its lists, so the UI thread never reads a list being appended to). When
the page is due an update, the worker pauses at that round's end until the page has drawn the
snapshot and Gradio has sent it (``wait_loop`` resumes it): drawing never shares the cores or the
GIL with decoding, and the pause is off the decoder's clock (``live.generate`` leaves the whole
per-round callback out of ``wall_s``). Stop sets a flag that ``generate`` checks before the next
round.
"""
from __future__ import annotations

import dataclasses
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from dominotree.view import live
from dominotree.config import METHOD_DRAFTER, METHODS, ConfigError, DecodeConfig
from dominotree.models.cpuext import unsupported as kernels_unsupported
from dominotree.presets import ASSETS, HUB_PAIRS, PRESETS  # noqa: F401
from dominotree.trace import DecodeTrace, RoundTrace

from . import model_thread

MAX_PROMPT_CHARS = 4000        # the decoder also refuses prompts over MAX_PROMPT_TOKENS tokens
MAX_NEW_TOKENS = 1024
MAX_METHODS = 4                # side-by-side panes
ADAPTIVE = ("caddtree", "condadaptive")   # need a verify-cost model: shown only when it exists
CUSTOM = "custom folders"
LOCKED_NOTE = ("this server is shared beyond this machine, so the model cannot be switched here (its operator "
               "can start it with --allow-model-switch)")


@dataclass(frozen=True)
class ModelChoice:
    """What to load: a preset, or a target folder with drafter folders."""
    preset: str | None = None
    target: str | None = None
    drafters: tuple[str, ...] = ()
    dtype: str = "float32"
    device: str = "cpu"

    @property
    def pair_name(self) -> str:
        """The loaded pair's name (``Pair.name``): the preset, or ``custom`` for folders."""
        return self.preset if self.target is None else "custom"

    @property
    def weights(self) -> str:
        """The target weights this choice loads (``Target.weights``): the preset's default here,
        else the dtype's (what ``--budget auto``'s files are kept by)."""
        import torch
        from dominotree.presets import default_weights
        w = default_weights(self.preset, getattr(torch, self.dtype), self.device) if self.target is None else None
        return w or {"float32": "float32", "bfloat16": "bf16"}.get(self.dtype, self.dtype)

    def label(self) -> str:
        what = self.preset if self.target is None else f"custom target {Path(self.target).name}"
        return f"{what} · {self.dtype} · {self.device}"

    def dtype_note(self) -> str:
        if self.dtype == "float32":
            return "float32: outputs equal ar's exactly"
        if self.device == "cpu" and kernels_unsupported() is None:
            return f"{self.dtype}: outputs equal ar's exactly (the C++ kernels' row-independent attention)"
        return f"{self.dtype}: outputs may differ from ar's at near-ties (marked in the panes)"


from dominotree.presets import available_presets, default_preset, smollm2_installed  # noqa: E402,F401


def weights_label(target) -> str:
    """``int4 (Q4_1, float32 activations)``, ``float32``: what the target's products read."""
    if target.weights == "int4-q8":
        return "int4 (Q4_1, 8-bit activation blocks)"
    if target.weights != "int4":
        return target.weights
    return f"int4 (Q4_1, {str(target.fast.dtype).replace('torch.', '')} activations)"


def devices() -> list[str]:
    import torch
    return ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]


def cost_model(choice: ModelChoice):
    """The verify-cost model ``profile-cost`` saved for this preset and device, if any: with it
    the adaptive methods (caddtree, condadaptive) can run."""
    try:
        from dominotree.auto.costmodel import default_path, load_cost_model
        path = default_path(choice.pair_name, choice.device)
        return load_cost_model(path) if path.is_file() else None
    except Exception:  # noqa: BLE001 - an unreadable profile just leaves those methods out
        return None


def round_token_ids(rt: RoundTrace) -> set[int]:
    return rt.token_ids()


class Job:
    """One ``generate`` call on the model thread, with the latest per-round snapshot."""

    def __init__(self, decoder, prompt: str, cfg: DecodeConfig, stop: threading.Event, lock: threading.Lock,
                 interval=None, drawn: threading.Event | None = None):
        self.decoder, self.prompt, self.cfg, self.stop = decoder, prompt, cfg, stop
        self.drawn = drawn                # set by the page when it has drawn an update (None: no page)
        self.lock = lock
        self.latest: DecodeTrace | None = None
        self.version = 0
        self.result: DecodeTrace | None = None
        self.error: BaseException | None = None
        self.stalled = False           # set by wait_loop when the decoder went silent for STALL_S
        self.updated = threading.Event()  # set when the worker pauses for the page, and when done
        self.done = threading.Event()
        self.resume = threading.Event()   # cleared while the worker waits for the page to draw a round
        self.resume.set()
        self.interval = interval          # seconds between page updates (a callable); None: no pauses
        self.shown = float("-inf")        # when the worker last paused for the page
        # the worker's pause, snapshot, version and done change together under this lock, and
        # wait_loop reads them together: it never pairs "not paused" with a snapshot paused for
        self.mutex = threading.Lock()

    def _snapshot(self, trace: DecodeTrace) -> None:
        text = dict(trace.token_text)
        new = set(trace.token_ids)
        if trace.rounds:
            new |= round_token_ids(trace.rounds[-1])
        text.update(self.decoder.token_text(sorted(i for i in new if str(i) not in text)))
        trace.token_text = text
        interval = self.interval
        pause = interval is not None and time.perf_counter() - self.shown >= interval()
        snap = dataclasses.replace(trace, rounds=list(trace.rounds), token_ids=list(trace.token_ids),
                                   token_text=dict(text))
        with self.mutex:          # whoever sees the snapshot sees the pause
            if pause:
                self.resume.clear()
                if self.drawn is not None:
                    self.drawn.clear()
            self.latest = snap
            self.version += 1
        if pause:
            self.updated.set()
            self.resume.wait(PAUSE_LIMIT_S)    # Gradio sends this round (off the decoder's clock)
            if self.drawn is not None:         # and the browser draws it: on a small machine its
                self.drawn.wait(DRAW_LIMIT_S)  # drawing would take cores from the next rounds
            self.shown = time.perf_counter()

    def _run(self) -> None:
        try:
            with self.lock:
                self.result = live.generate(self.decoder, self.prompt, self.cfg, should_stop=self.stop.is_set,
                                            on_round=self._snapshot)
            with self.mutex:
                self.latest = self.result
                self.version += 1
                self.done.set()
        except BaseException as e:  # reported to the UI thread, which shows it
            self.error = e
        finally:
            self.done.set()
            self.updated.set()

    def start(self) -> "Job":
        model_thread.submit(self._run)
        return self

    def wait(self, timeout: float) -> None:
        self.updated.wait(timeout)
        self.updated.clear()


class Backend:
    """Holds the loaded pair and its Decoder. Loading is lazy (first run or Load)."""

    def __init__(self, choice: ModelChoice | None = None, decoder=None, locked: bool = False):
        """``decoder``: an already loaded Decoder for ``choice`` (tests share one). ``locked``: a
        shared (classroom) server: only ``choice`` is ever loaded, no other model or folder."""
        self.locked = locked
        from dominotree.presets import default_device
        self.choice = choice or ModelChoice(preset=default_preset(), device=default_device())
        self.model_lock = threading.Lock()      # one model job at a time (loading or decoding)
        self._decoder = decoder
        self._loaded: ModelChoice | None = self.choice if decoder is not None else None
        self._stops: dict[str, threading.Event] = {}
        self._drawn: dict[str, threading.Event] = {}
        self._busy: set[str] = set()            # sessions with a queued or running run
        self._busy_lock = threading.Lock()
        self._dirs: dict[str, Path] = {}

    # --- model ------------------------------------------------------------------------
    @property
    def loaded(self) -> ModelChoice | None:
        return self._loaded

    @property
    def loaded_decoder(self):
        """The loaded pair's Decoder, or None before the first load (nothing is loaded here)."""
        return self._decoder if self._loaded is not None else None

    def decoder(self, choice: ModelChoice | None = None):
        """The Decoder for ``choice`` (default: the start-up choice), loading it if needed."""
        choice = choice or self._loaded or self.choice
        if self._decoder is not None and choice == self._loaded:
            return self._decoder
        if self.locked and choice != self.choice:
            raise ConfigError(LOCKED_NOTE)
        return model_thread.call(self._load, choice)

    def _load(self, choice: ModelChoice):
        from dominotree.decode import Decoder
        from dominotree.presets import load_pair
        with self.model_lock:
            if choice.target is not None:
                for p in (choice.target, *choice.drafters):
                    if not Path(p).is_dir():
                        raise ConfigError(f"folder does not exist: {p}")
            elif choice.preset not in PRESETS:
                raise ConfigError(f"unknown preset {choice.preset!r}")
            if choice.device not in devices():
                raise ConfigError(f"device {choice.device!r} is not available here")
            self._decoder = None                 # free the old pair before loading the next
            pair = load_pair(choice.preset if choice.target is None else None, choice.target,
                             list(choice.drafters) or None, dtype=choice.dtype, device=choice.device)
            decoder = Decoder(pair, cost_model=cost_model(choice))
            decoder.warm_up()          # the first run on the page is timed warm, as the bench's are
            n = pair.default_draft_vocab
            for m in ("ddtree", "dominotree") if n else ():   # and with the default draft vocabulary's set-up
                if METHOD_DRAFTER[m] in pair.drafters:
                    decoder.generate("Warm up", DecodeConfig(method=m, max_new_tokens=8, stop_at_eos=False,
                                                             draft_vocab=n))
            self._decoder, self._loaded = decoder, choice
        return self._decoder

    def methods(self) -> list[str]:
        """Methods the loaded pair can run (before loading: all but the adaptive ones)."""
        if self._decoder is None:
            return [m for m in METHODS if m not in ADAPTIVE]
        out = []
        for m in METHODS:
            try:
                self._decoder.check([0], DecodeConfig(method=m, max_new_tokens=1))
                out.append(m)
            except Exception:
                pass
        return out

    def describe(self) -> str:
        if self._loaded is None:
            return f"Model: {self.choice.label()} (loads on the first run) · {self.choice.dtype_note()}"
        p = self._decoder.pair
        kinds = ", ".join(sorted(p.drafters)) or "none"
        return (f"Model: {self._loaded.label()} · target weights: {weights_label(p.target)} · drafters: {kinds} · "
                f"{self._loaded.dtype_note()}")

    # --- runs -------------------------------------------------------------------------
    def start(self, session: str, prompt: str, cfg: DecodeConfig, interval=None) -> Job:
        """A started Job; with ``interval`` (seconds between page updates, a callable) its worker
        pauses for the page from the first round on (``wait_loop``)."""
        return Job(self.decoder(), prompt, cfg, self.stop_flag(session), self.model_lock, interval,
                   self.drawn_flag(session) if interval is not None else None).start()

    def drawn_flag(self, session: str) -> threading.Event:
        """Set when the session's page reports it has drawn a streamed update (``page_drew``)."""
        return self._drawn.setdefault(session, threading.Event())

    def page_drew(self, session: str) -> None:
        self.drawn_flag(session).set()

    def stop_flag(self, session: str) -> threading.Event:
        return self._stops.setdefault(session, threading.Event())

    def queue_run(self, session: str) -> None:
        """A run was asked for (Run pressed): from now until ``finish_run`` Stop applies to it,
        also while it still waits in the queue."""
        with self._busy_lock:
            if session not in self._busy:
                self.stop_flag(session).clear()
            self._busy.add(session)

    def busy(self, session: str) -> bool:
        with self._busy_lock:
            return session in self._busy

    def finish_run(self, session: str) -> None:
        with self._busy_lock:
            self._busy.discard(session)
            self.stop_flag(session).clear()

    def request_stop(self, session: str) -> bool:
        """Stop the session's queued or running run; False when it has none."""
        with self._busy_lock:
            if session not in self._busy:
                return False
            self.stop_flag(session).set()
            return True

    # --- per-session files --------------------------------------------------------------
    def session_dir(self, session: str) -> Path:
        d = self._dirs.get(session)
        if d is None or not d.is_dir():
            d = self._dirs[session] = Path(tempfile.mkdtemp(prefix="dominotree-"))
        return d

    def end_session(self, session: str) -> None:
        self.request_stop(session)
        with self._busy_lock:
            self._busy.discard(session)
            self._stops.pop(session, None)
            self._drawn.pop(session, None)
        d = self._dirs.pop(session, None)
        if d is not None:
            shutil.rmtree(d, ignore_errors=True)


STALL_S = 120.0     # a decoder silent this long is stopped and reported (a round takes < 10 s here)
PAUSE_LIMIT_S = 10.0  # a worker paused for the page goes on after this long whatever the page does
DRAW_LIMIT_S = 2.0    # and waits at most this long for the browser to say it has drawn the update


def wait_loop(job: Job, heartbeat: float = 3.0):
    """Yield ``(snapshot, silent_s)`` for the page: a round's snapshot when the worker paused for
    it (at most once per ``job.interval()`` seconds; the worker stays paused until the caller asks
    for the next item, i.e. until the page has drawn it and Gradio has sent it), a heartbeat at
    least every ``heartbeat`` seconds (so the page shows how long the decoder has been silent), and
    the last one. A decoder silent for ``STALL_S`` is asked to stop."""
    interval = job.interval or (lambda: heartbeat)
    seen, last, news = -1, 0.0, time.perf_counter()
    try:
        while True:
            job.wait(min(interval(), heartbeat))
            with job.mutex:
                done, paused = job.done.is_set(), not job.resume.is_set()
                version, snap = job.version, job.latest
            now = time.perf_counter()
            if version != seen:
                news = now
            silent = now - news
            if silent > STALL_S and not job.stop.is_set():
                job.stalled = True
                job.stop.set()
            fresh = version != seen and (done or paused)
            # a heartbeat only while the worker computes: paused with nothing new is the moment
            # between its pause and its snapshot, and a stale heartbeat must not release the pause
            if snap is not None and (fresh or (now - last >= heartbeat and not paused)):
                seen, last = version, now
                yield snap, silent
                if paused and fresh:
                    job.resume.set()
            if done:
                return
    finally:
        job.interval = None           # a page that went away never holds the worker
        job.resume.set()
