"""The Decoder is observed, not patched (``dominotree/observe.py``): observers see every stage's
result, their time stays off the stage clocks and out of ``wall_s``, and the calibration measures
through an observer, leaving the Decoder as it found it."""
import time

from dominotree.auto.calibrate import calibrate
from dominotree.config import STAGES, DecodeConfig, TreeConfig
from dominotree.decode import Decoder
from dominotree.observe import Observer, StageClock

PROMPT = [5, 17, 42, 9, 11]
HOOK_S = 10_000.0        # virtual seconds an observer hook takes: far beyond any real stage


class Recorder(Observer):
    """Notes what each hook saw and spends HOOK_S seconds of a virtual clock in each (an
    accounting check: no real time is measured against a limit)."""

    def __init__(self, skew):
        self.seen, self.skew = [], skew

    def after_draft(self, decoder, s):
        self.seen.append(("draft", s.start, s.block.depth))
        self.skew[0] += HOOK_S

    def after_build(self, decoder, s):
        self.seen.append(("build", s.start, len(s.built.tree.tokens)))
        self.skew[0] += HOOK_S

    def after_round(self, decoder, s, rt):
        self.seen.append(("round", rt.start, len(rt.tree.tokens)))
        rt.extra["seen_by"] = "recorder"
        self.skew[0] += HOOK_S


def test_observers_see_every_stage_off_the_clock(tiny_pair, monkeypatch):
    dec = Decoder(tiny_pair, annotate=False)
    cfg = DecodeConfig(method="dominotree", max_new_tokens=20, stop_at_eos=False, tree=TreeConfig(budget=8))
    plain = dec.generate(PROMPT, cfg)
    skew = [0.0]
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + skew[0])
    rec = Recorder(skew)
    t0 = time.perf_counter()
    trace = dec.generate(PROMPT, cfg, observers=[rec])
    total = time.perf_counter() - t0
    assert trace.token_ids == plain.token_ids
    n = len(trace.rounds)
    assert [k for k, *_ in rec.seen] == ["draft", "build", "round"] * n
    assert [s for k, s, _ in rec.seen if k == "round"] == [rt.start for rt in trace.rounds]
    assert [m for k, _, m in rec.seen if k == "build"] == [len(rt.tree.tokens) for rt in trace.rounds]
    for rt in trace.rounds:
        assert rt.extra["seen_by"] == "recorder"
        assert rt.extra["viewer_ms"] >= 3 * HOOK_S * 1e3           # three hooks a round, booked as viewer time
        assert all(rt.stage_ms[s] < HOOK_S * 1e3 for s in STAGES)  # and not in any stage
    assert trace.wall_s < total - 3 * HOOK_S * n + 1e-3            # nor in the wall time
    assert "viewer_ms" not in plain.rounds[0].extra                 # no observer, nothing booked


def test_ar_rounds_tell_only_build_and_round(tiny_pair):
    rec = Recorder([0.0])
    Decoder(tiny_pair, annotate=False).generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=4, stop_at_eos=False),
                                                observers=[rec])
    assert {k for k, *_ in rec.seen} == {"build", "round"}       # nothing drafted, so no after_draft


def test_stage_clock_adds_laps():
    c = StageClock()
    t = c.now()
    t = c.lap("draft", t)
    c.lap("draft", t)
    assert set(c.ms) == set(STAGES) and c.ms["draft"] >= 0 and c.ms["verify"] == 0.0


def test_calibration_measures_through_an_observer_and_patches_nothing(tiny_pair):
    dec = Decoder(tiny_pair, annotate=False)
    before = dict(vars(dec))
    cal = calibrate(dec, ["Hello there", "Count to five"], "dominotree", budget_max=8, max_new_tokens=8,
                    progress=False)
    assert vars(dec).keys() == before.keys()                       # no method swapped in, no flag left on
    assert cal.build_grid[-1] == 8 and len(cal.build_ms) == len(cal.build_grid) and all(b > 0 for b in cal.build_ms)
    assert len(cal.accept) == len(cal.starts) > 0
