"""The one thread that runs the explorer's torch work: loading and warming a pair, decoding,
calibrating, near-tie checks.

Why one thread: PyTorch's CPU build parallelises with libgomp, which gives every thread that
starts parallel work its own pool of OpenMP threads. Once a process holds more of those threads
than it has CPUs, libgomp makes every pool's threads stop spin-waiting between parallel regions
almost at once (100 spins instead of 300,000) and sleep in the kernel instead, and each of the
hundreds of small parallel regions of a decoding step then waits for a wake-up. Measured on a
2-core Zen 4 in one process (a model loaded and warmed in the main thread, then the same decode
in a second thread): ``ar`` ran at 68 tok/s there against 125 in the main thread, and the tree
methods' ratio to ``ar`` read 0.60x instead of 0.39x. The explorer decoded in a new thread per
run while the pair had been loaded in another, so its live numbers carried that penalty. With
all torch work on this one thread the process holds one pool.

``call`` runs a function here and returns its result (or raises its error); called from this
thread it runs inline. Take the model lock inside the function, never around ``call``: a lock
held by a thread that waits for this one would deadlock a queued job that needs it. Not a
one-worker ``ThreadPoolExecutor``: its thread is joined at interpreter exit, so stopping the app
would wait for a running decode; this one is a daemon.
"""
from __future__ import annotations

import queue
import threading
from concurrent.futures import Future

_jobs: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_start_lock = threading.Lock()


def _loop() -> None:
    while True:
        fn, future = _jobs.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            future.set_exception(e)


def submit(fn, *args, **kwargs) -> Future:
    """Queue ``fn(*args, **kwargs)`` on the model thread (started on first use)."""
    global _thread
    with _start_lock:
        if _thread is None:
            _thread = threading.Thread(target=_loop, name="model", daemon=True)
            _thread.start()
    future: Future = Future()
    _jobs.put((lambda: fn(*args, **kwargs), future))
    return future


def on_model_thread() -> bool:
    return _thread is not None and threading.current_thread() is _thread


def call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` on the model thread, waited for."""
    if on_model_thread():
        return fn(*args, **kwargs)
    return submit(fn, *args, **kwargs).result()
