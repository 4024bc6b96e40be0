"""The explorer's library helpers: viewer-only time kept off the clock, the dtype default, the
near-tie note, comparison files and the what-if budget."""
import json
import time

import pytest

from dominotree.view import comparison, live, whatif
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.trace import TraceError
from dominotree.tree import accept_walk

PROMPT = "Explain speculative decoding."


def test_viewer_time_is_left_out_of_wall_time(tiny_decoder, monkeypatch):
    """A page that takes 50 ms per round to draw: its time is booked as viewer time, not in the
    decode's wall time. The viewer advances a virtual clock instead of sleeping, so the check is
    about the accounting, exactly, not about how fast this machine is."""
    cfg = DecodeConfig(method="dominotree", max_new_tokens=12, tree=TreeConfig(budget=16))
    seen, skew = [], [0.0]
    real = time.perf_counter
    monkeypatch.setattr(time, "perf_counter", lambda: real() + skew[0])

    def slow_viewer(trace):           # 50 ms of drawing per round, on the virtual clock
        seen.append(trace.wall_s)
        skew[0] += 0.05

    t0 = time.perf_counter()
    trace = live.generate(tiny_decoder, PROMPT, cfg, on_round=slow_viewer)
    total = time.perf_counter() - t0
    slept = 0.05 * len(seen)
    assert trace.wall_s < total - slept + 1e-3                       # the viewer's 50 ms are not in wall_s
    booked = [r.extra["viewer_ms"] for r in trace.rounds]
    assert booked and min(booked) >= 50                              # each round books its virtual 50 ms
    assert seen == sorted(seen)                                     # snapshots see the honest clock too
    assert not vars(tiny_decoder).keys() & {"annotate", "build", "draft", "rounds", "generate"}   # nothing patched
    plain = tiny_decoder.generate(PROMPT, cfg)
    assert plain.token_ids == trace.token_ids                        # same decode, only the clock differs
    assert trace.rounds[1].candidates                                # still annotated for the views


def test_native_bf16_reads_cpu_flags():
    assert live.native_bf16("flags\t: fpu avx2 avx512f avx512_bf16\n")
    assert live.native_bf16("flags\t: fpu amx_bf16 amx_tile\n")
    assert not live.native_bf16("flags\t: fpu avx2 avx512f\n")
    assert live.default_dtype("cuda") == "bfloat16"


def test_default_dtype_is_float32_for_the_int4_preset(monkeypatch):
    """The embedded preset's fastest lossless setting is its 4-bit target (the float32 dtype, 8-bit
    activation blocks in the products), also on CPUs with native bf16; a custom target (no
    preset) keeps the bf16 rule."""
    from dominotree.models import cpuext
    monkeypatch.setattr(live, "native_bf16", lambda cpuinfo=None: True)
    monkeypatch.setattr(cpuext, "unsupported", lambda: None)
    assert live.default_dtype("cpu", "smollm2") == "float32"
    assert live.default_dtype("cpu", None) == "bfloat16"
    assert live.default_dtype("cpu", "random-tiny") == "bfloat16"
    assert live.default_dtype("cuda", "smollm2") == "bfloat16"
    monkeypatch.setattr(cpuext, "unsupported", lambda: "no AVX2")
    assert live.default_dtype("cpu", "smollm2") == "bfloat16"


def test_tie_note_finds_first_difference(tiny_decoder):
    ids = tiny_decoder.encode_prompt(PROMPT)
    ar = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=6)).token_ids
    assert live.tie_note(tiny_decoder, ids, ar, ar) is None
    other = ar[:3] + [(ar[3] + 1) % 100] + ar[4:]
    note = live.tie_note(tiny_decoder, ids, ar, other)
    assert note["token"] == 3 and note["ar_token"] == ar[3] and note["method_token"] == other[3]
    assert note["gap"] >= 0 and note["rank"] >= 1              # ar's token is the target's argmax there


def test_comparison_round_trip_and_mixed_prompts(tiny_decoder):
    a = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=4))
    d = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=4))
    doc = json.loads(json.dumps(comparison.comparison_dict({"ar": a, "dominotree": d})))
    traces, meta = comparison.read_comparison(doc)
    assert list(traces) == ["ar", "dominotree"] and traces["dominotree"].token_ids == d.token_ids
    assert meta["prompt"] == PROMPT and meta["settings"]["max_new_tokens"] == 4 and meta["machine"]["cores"] >= 1
    other = tiny_decoder.generate("Something else.", DecodeConfig(method="ar", max_new_tokens=4))
    doc["traces"]["ar"] = other.to_dict()
    with pytest.raises(TraceError, match="2 different prompts"):
        comparison.read_comparison(doc)
    with pytest.raises(TraceError, match="version"):
        comparison.read_comparison({**doc, "version": 9})


def test_smaller_budget_is_the_pop_order_prefix(tiny_decoder, monkeypatch):
    from dominotree import methods
    monkeypatch.setattr(methods, "DRAFT_MIN_ROWS", 10**6)   # whole blocks at every budget: same drafts
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=24,
                                                       tree=TreeConfig(budget=32)))
    for rt in trace.rounds:
        full = whatif.at_budget(rt, rt.tree.num_nodes)
        assert (full.accepted, full.bonus) == (rt.accepted, rt.bonus)
        for b in (1, 4, 16):
            small = whatif.at_budget(rt, b)
            assert small.tree.num_nodes == min(b, rt.tree.num_nodes)
            assert all(p < i for i, p in enumerate(small.tree.parents) if i)
            assert (small.accepted, small.bonus) == accept_walk(small.tree, rt.target_tokens[:b + 1])
            assert len(small.accepted) <= len(rt.accepted)       # a sub-tree never accepts more
    # against real decodes at the smaller budgets: their first round (same context, same drafts with
    # whole blocks; a cut block drafts differently) is the what-if
    for b in (1, 4, 16):
        real = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=24,
                                                          tree=TreeConfig(budget=b))).rounds[0]
        small = whatif.at_budget(trace.rounds[0], b)
        assert small.tree.same_shape(real.tree) and small.tree.scores == real.tree.scores, b
        assert (small.accepted, small.bonus) == (real.accepted, real.bonus), b
