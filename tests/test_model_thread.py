"""All of the explorer's torch work runs on one thread (``ui.model_thread``): libgomp gives every
thread that starts parallel work its own OpenMP pool, and a process holding more pool threads
than CPUs stops spin-waiting in all of them (the explorer's live tok/s paid for it)."""
import threading

import pytest

pytest.importorskip("gradio")

from dominotree.config import DecodeConfig  # noqa: E402
from ui import backend as be  # noqa: E402
from ui import model_thread  # noqa: E402


def test_call_returns_raises_and_nests():
    assert model_thread.call(lambda a, b=0: a + b, 2, b=3) == 5
    with pytest.raises(ValueError, match="bad"):
        model_thread.call(lambda: (_ for _ in ()).throw(ValueError("bad")))
    # a call made from the model thread runs inline instead of waiting for itself
    assert model_thread.call(lambda: model_thread.call(lambda: threading.current_thread().name)) == "model"
    assert not model_thread.on_model_thread()


def test_loading_decoding_and_tie_checks_share_one_thread(tiny_decoder, monkeypatch):
    seen = []
    backend = be.Backend(be.ModelChoice(preset="random-tiny"))

    def load(choice):
        seen.append(("load", threading.current_thread().name))
        backend._decoder, backend._loaded = tiny_decoder, choice
        return tiny_decoder

    monkeypatch.setattr(backend, "_load", load)
    decoder = backend.decoder()
    assert decoder is tiny_decoder
    real = tiny_decoder.generate

    def recording(*args, **kw):
        seen.append(("decode", threading.current_thread().name))
        return real(*args, **kw)

    monkeypatch.setattr(tiny_decoder, "generate", recording)
    job = backend.start("s", "Hello", DecodeConfig(method="ddtree", max_new_tokens=4))
    for _ in be.wait_loop(job):
        pass
    assert job.error is None and job.result is not None
    assert seen == [("load", "model"), ("decode", "model")]
