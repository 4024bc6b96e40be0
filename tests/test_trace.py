"""Traces: JSON round trip with a schema version, and malformed traces refused clearly.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_trace.py
"""
import json

import pytest

from dominotree.config import STAGES, DecodeConfig
from dominotree.trace import TraceError, counterfactual_accept, load_trace
from dominotree.tree import Tree


@pytest.fixture(scope="module")
def trace(tiny_decoder):
    return tiny_decoder.generate("Tell me about trees", DecodeConfig(method="dominotree", max_new_tokens=24))


def test_round_trace_contents(trace):
    rt = trace.rounds[0]
    assert set(rt.stage_ms) == set(STAGES)
    assert len(rt.target_tokens) == len(rt.tree.tokens) and rt.accepted[0] == 0
    assert rt.candidates and len(rt.candidates[0]) == 64 and len(rt.candidate_logprobs[0]) == 64
    assert rt.menus and rt.menus[0].node == 0 and rt.menus[0].depth == 1
    assert rt.marginal_tree is not None and rt.marginal_tree.num_nodes == 16
    assert len(rt.tree.scores) == len(rt.tree.marg_scores) == len(rt.tree.tokens)
    for m in rt.menus:
        assert len(m.tokens) == len(m.logprobs) == len(m.base_logprobs) == len(m.ranks)
    assert all(str(t) in trace.token_text for t in rt.tree.tokens)
    assert sum(r.accept_len for r in trace.rounds) + 1 >= len(trace.token_ids)


def test_json_round_trip(trace, tmp_path):
    p = tmp_path / "t.json"
    trace.to_json(p)
    back = load_trace(p)
    assert back.to_dict() == json.loads(p.read_text())
    assert back.token_ids == trace.token_ids and back.tau == trace.tau
    assert back.rounds[0].tree == trace.rounds[0].tree
    assert load_trace(p.read_bytes()).token_ids == trace.token_ids


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d.update(schema="other"), "not a DominoTree trace"),
    (lambda d: d.update(version=99), "version"),
    (lambda d: d["rounds"][0]["tree"].update(parents=[5] * len(d["rounds"][0]["tree"]["parents"])), "malformed|parent"),
    (lambda d: d["rounds"][0].update(accepted=[3, 1]), "accepted"),
    (lambda d: d["rounds"][0].update(target_tokens=[1]), "target_tokens"),
    (lambda d: d["rounds"][0].pop("tree"), "malformed"),
    (lambda d: d.update(unknown_field=1), "malformed"),
])
def test_malformed_traces_refused(trace, mutate, msg):
    d = json.loads(trace.to_json())
    mutate(d)
    with pytest.raises(TraceError, match=msg):
        load_trace(json.dumps(d))


def test_not_json_and_too_big(tmp_path, monkeypatch):
    with pytest.raises(TraceError, match="not valid JSON"):
        load_trace(b"\xff\xfe garbage")
    with pytest.raises(TraceError, match="not found"):
        load_trace(tmp_path / "missing.json")
    import dominotree.trace as tr
    monkeypatch.setattr(tr, "MAX_TRACE_BYTES", 10)
    with pytest.raises(TraceError, match="larger than"):
        load_trace(b'{"schema": "dominotree.trace"}')


def test_counterfactual_accept():
    t = Tree([0, 5, 6, 7], [-1, 0, 1, 2], [0, 1, 2, 3])
    assert counterfactual_accept(t, [5, 6, 9]) == (2, True)
    assert counterfactual_accept(t, [5, 6, 7]) == (3, False)
    assert counterfactual_accept(t, [4]) == (0, True)


@pytest.mark.parametrize("mutate", [
    lambda d: d["rounds"][0].update(round="<b>1</b>"),
    lambda d: d["rounds"][0].update(bonus=1.5),
    lambda d: d["rounds"][0].update(stage_ms={"draft": "x"}),
    lambda d: d.update(wall_s="fast"),
    lambda d: d.update(token_ids=["a"]),
    lambda d: d.update(token_text={"1": 5}),
])
def test_wrong_field_types_refused(trace, mutate):
    d = json.loads(trace.to_json())
    mutate(d)
    with pytest.raises(TraceError):
        load_trace(json.dumps(d))
