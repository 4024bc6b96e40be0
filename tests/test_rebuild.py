"""Rebuilding a recorded round under other settings (dominotree/view/rebuild.py). Run:
``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_rebuild.py``.

- the round's own settings give back its own tree (``==`` on tokens, parents, depths and both
  score arrays) and its own accepted path, for every method, live and from a saved trace;
- the accepted path the rebuild reports at T = 0 is what the target itself accepts on the
  rebuilt tree: one verify forward of the target over it (the direct computation);
- impossible settings and traces without drafter rows are refused with a reason.
"""
from __future__ import annotations

import json

import pytest
import torch

from dominotree.view import rebuild as rb
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.auto.costmodel import CostModel
from dominotree.decode import Decoder
from dominotree.trace import load_trace
from dominotree.tree import accept_walk
from dominotree.verify import verify_tree
from oracle import ar_continuation, make_oracle

TREE_METHODS = ("ddtree", "caddtree", "marg", "condstatic", "dominotree", "condadaptive")
PROMPT = [5, 17, 42, 9, 11]


@pytest.fixture(scope="module")
def decoder(tiny_pair):
    return Decoder(tiny_pair, cost_model=CostModel.synthetic(draft_ms=1.0, base_ms=5.0, per_node_ms=0.05))


@pytest.fixture(autouse=True)
def store():
    old = rb.STORE.max_bytes
    rb.STORE.enable(64 * 2**20)
    yield rb.STORE
    rb.STORE.max_bytes = old


def run(decoder, method, draft_fn=None, temperature=0.0, max_new=40, **tree):
    cfg = DecodeConfig(method=method, max_new_tokens=max_new, stop_at_eos=False, temperature=temperature, seed=3,
                       builder="python", tree=TreeConfig(**{"budget": 16, **tree}))
    return decoder.generate(PROMPT, cfg, draft_fn=draft_fn, observers=[rb.KeepBlocks()])


def same_tree(a, b) -> bool:
    return (a.tokens, a.parents, a.depths, a.scores, a.marg_scores) == (b.tokens, b.parents, b.depths, b.scores,
                                                                         b.marg_scores)


@pytest.mark.parametrize("method", TREE_METHODS + ("dflash", "domino"))
@pytest.mark.parametrize("drafter", ["random", "oracle"])
def test_own_settings_give_the_identical_tree(decoder, method, drafter):
    fn = None
    if drafter == "oracle":
        fn = make_oracle(decoder, ar_continuation(decoder, PROMPT, 60), seed=1)
    trace = run(decoder, method, fn)
    assert trace.rounds
    deep = 0
    for i, rt in enumerate(trace.rounds):
        got = rb.rebuild(decoder, trace, i, rb.own_settings(trace, rt))
        assert got.method == method
        assert same_tree(got.round.tree, rt.tree)
        assert got.only_rebuilt == [] and got.only_actual == [] and not got.path_changed
        assert got.round.accepted == rt.accepted
        if got.exact:
            assert got.round.bonus == rt.bonus
        deep = max(deep, len(rt.accepted) - 1)
    if drafter == "oracle":
        assert deep >= 3        # the check covers rounds that accepted several drafts


def target_accepts(decoder, trace, rt, tree):
    """What the target itself accepts on ``tree`` at round ``rt``: one verify forward over it on
    the committed prefix, argmax per row, the accept walk."""
    tgt = decoder.target
    prefix = trace.prompt_ids + trace.token_ids[:rt.start - len(trace.prompt_ids)]
    assert prefix[-1] != tree.tokens[0] or True
    cache = tgt.new_cache()
    with torch.inference_mode():
        ids = torch.tensor([prefix], dtype=torch.long)
        tgt.forward(ids, torch.arange(len(prefix))[None], cache, last_only=True)
        out = verify_tree(tgt, cache, tree, len(prefix), None)
        post = out.logits.float().argmax(dim=-1).tolist()
    return accept_walk(tree, post)


@pytest.mark.parametrize("method,settings", [
    ("dominotree", dict(topm=4, k=2)),
    ("dominotree", dict(scorer="marginal")),
    ("dominotree", dict(budget=4)),
    ("dominotree", dict(scorer="condstatic", budget=8)),
    ("marg", dict(scorer="conditional", budget=24)),
    ("ddtree", dict(budget=6)),
])
def test_rebuilt_accepted_path_is_the_targets(decoder, method, settings):
    fn = make_oracle(decoder, ar_continuation(decoder, PROMPT, 60), clean=0.7, sibling=0.2, rank3=0.05, seed=2)
    trace = run(decoder, method, fn)
    checked = changed = 0
    for i, rt in enumerate(trace.rounds):
        s = rb.own_settings(trace, rt)
        s = rb.Settings(**{**s.__dict__, **settings})
        got = rb.rebuild(decoder, trace, i, s)
        if not got.exact:
            continue
        # the root is the token before the round's start position (the last committed one)
        assert trace.prompt_ids + trace.token_ids == (trace.prompt_ids + trace.token_ids)
        acc, bonus = target_accepts(decoder, trace, rt, got.round.tree)
        assert got.round.accepted == acc and got.round.bonus == bonus
        assert got.accepted == len(acc) - 1
        checked += 1
        changed += bool(got.only_rebuilt or got.only_actual)
    assert checked >= 3 and changed >= 1


def test_saved_trace_rebuilds_from_its_rows(decoder, store):
    """Schema 2 keeps the drafter rows: a replay in a fresh process (nothing in the store) rebuilds
    the identical tree, the LM head rerun on the rows."""
    for method in ("dominotree", "ddtree", "condstatic"):
        trace = run(decoder, method)
        text = trace.to_json()
        assert json.loads(text)["version"] == 2
        loaded = load_trace(text)
        for rt in loaded.rounds:
            rt.extra.pop("draft_key")
        for i, rt in enumerate(loaded.rounds):
            assert rb.unavailable(loaded, rt, decoder) == ""
            got = rb.rebuild(decoder, loaded, i, rb.own_settings(loaded, rt))
            assert same_tree(got.round.tree, trace.rounds[i].tree)
            assert got.round.accepted == rt.accepted
        smaller = rb.rebuild(decoder, loaded, 0, rb.Settings("marginal", 64, 8, 4))
        assert smaller.round.tree.num_nodes == 4


def test_old_traces_and_other_models_are_refused(decoder):
    trace = run(decoder, "dominotree", max_new=8)
    d = json.loads(trace.to_json())
    d["version"] = 1
    for r in d["rounds"]:
        r.pop("draft")
        r["extra"].pop("draft_key")
    old = load_trace(json.dumps(d))
    why = rb.unavailable(old, old.rounds[0], decoder)
    assert "schema 2" in why
    with pytest.raises(rb.RebuildError, match="schema 2"):
        rb.rebuild(decoder, old, 0, rb.own_settings(old, old.rounds[0]))
    other = load_trace(trace.to_json())
    other.rounds[0].extra.pop("draft_key")
    other.model = {**other.model, "preset": "smollm2"}
    assert "only with that model loaded" in rb.unavailable(other, other.rounds[0], decoder)
    ar = run(decoder, "ar", max_new=4)
    assert "ar drafts nothing" in rb.unavailable(ar, ar.rounds[0], decoder)


@pytest.mark.parametrize("settings,match", [
    (dict(k=9, topm=4), "cannot exceed Top-M"),
    (dict(budget=0), "Budget"),
    (dict(budget=100000), r"Budget must be an integer in \[0, 256\]"),
    (dict(scorer="bogus"), "unknown scorer"),
])
def test_impossible_settings_get_a_message(decoder, settings, match):
    trace = run(decoder, "dominotree", max_new=8)
    s = rb.Settings(**{**rb.own_settings(trace, trace.rounds[0]).__dict__, **settings})
    with pytest.raises(rb.RebuildError, match=match):
        rb.rebuild(decoder, trace, 0, s)


def test_a_dflash_round_has_no_correction(decoder):
    trace = run(decoder, "ddtree", max_new=8)
    with pytest.raises(rb.RebuildError, match="choose marginal"):
        rb.rebuild(decoder, trace, 0, rb.Settings("conditional", 64, 8, 16))


def test_sampled_rounds_claim_no_acceptance(decoder):
    trace = run(decoder, "dominotree", temperature=1.0, max_new=12)
    got = rb.rebuild(decoder, trace, 0, rb.Settings("marginal", 64, 8, 8))
    assert got.exact is None and got.round.accepted == [0] and got.round.bonus == -1 and got.accepted == 0


def test_greedy_walk_lower_bound():
    from dominotree.tree import Tree
    t = Tree([1, 5, 6, 7], [-1, 0, 1, 0], [0, 1, 2, 1])
    assert rb.greedy_walk(t, [5, 6, 9]) == ([0, 1, 2], 9, True)
    assert rb.greedy_walk(t, [5, 6]) == ([0, 1, 2], -1, False)     # ran out of known tokens
    assert rb.greedy_walk(t, [8]) == ([0], 8, True)


def test_store_is_bounded_and_off_by_default(decoder, store):
    store.max_bytes = 0
    trace = run(decoder, "dominotree", max_new=6)
    assert "draft_key" not in trace.rounds[0].extra and trace.rounds[0].draft is None
    store.enable(1)                  # room for one block: the older ones go
    trace = run(decoder, "dominotree", max_new=12)
    keys = [rt.extra["draft_key"] for rt in trace.rounds]
    assert len(keys) >= 2
    assert store.get(keys[-1]) is not None and store.get(keys[0]) is None


def test_side_by_side_export(decoder):
    import xml.etree.ElementTree as ET
    from dominotree.view import export
    trace = run(decoder, "dominotree", max_new=8)
    got = rb.rebuild(decoder, trace, 0, rb.Settings("marginal", 64, 8, 4))
    svg = export.side_by_side_svg(export.round_svg(trace.rounds[0], None), export.round_svg(got.round, None), "a & b")
    root = ET.fromstring(svg)
    inner = root.findall("{http://www.w3.org/2000/svg}svg")
    assert len(inner) == 2 and float(inner[1].get("x")) > 0
    assert len(inner[1].findall(".//{http://www.w3.org/2000/svg}g[@class='node']")) + \
        len(inner[1].findall(".//{http://www.w3.org/2000/svg}g[@class='node accepted']")) == 5


def test_comparison_file_keeps_the_rows(decoder):
    """The explorer's whole-comparison JSON keeps what a rebuild needs."""
    from dominotree.view.comparison import comparison_dict, read_comparison
    trace = run(decoder, "dominotree", max_new=10)
    traces, _ = read_comparison(json.loads(json.dumps(comparison_dict({"dominotree": trace}, {}))))
    back = traces["dominotree"]
    back.rounds[0].extra.pop("draft_key")
    got = rb.rebuild(decoder, back, 0, rb.own_settings(back, back.rounds[0]))
    assert same_tree(got.round.tree, trace.rounds[0].tree)
