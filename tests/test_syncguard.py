"""The host-sync guard, and the graph and frontier builders' CUDA-graph capture regions run under
it on the CPU (issue 34): warm-up and recording, as ``torch.cuda.graph`` would see them.

    .venv/bin/python -m pytest -q tests/test_syncguard.py

Before the fix both capture regions failed here: the warm-up bound the round lazily, which
prepared the scorer's depths inside the region, and ``scoring._Depth`` built its rank map with
``cand.tolist()`` (``HostSyncError: ... .tolist()``); on a GPU the capture fell back to eager.
"""
from __future__ import annotations

import pytest
import torch

from dominotree.bench.build import random_block, random_head, same_build
from dominotree.builders import build_reference, get_builder
from dominotree.builders import capture as capture_mod
from dominotree.builders import frontier as frontier_mod
from dominotree.builders import graph as graph_mod
from dominotree.config import TreeConfig
from dominotree.models import cpuext
from dominotree.scoring import ConditionalScorer, MarginalScorer
from dominotree.syncguard import HostSyncError, no_host_sync

X = torch.arange(6.0)
HOST_READS = {
    "item": lambda: X[0].item(), "tolist": lambda: X.tolist(), "bool": lambda: bool(X[1]),
    "int": lambda: int(X[1]), "float": lambda: float(X[1]), "index": lambda: [0, 1, 2][X[1].long()],
    "cpu": lambda: X.cpu(), "numpy": lambda: X.numpy(), "print": lambda: repr(X),
    "nonzero": lambda: X.nonzero(), "bool mask": lambda: X[X > 2], "masked_select": lambda: X.masked_select(X > 2),
    "unique": lambda: torch.unique(X), "equal": lambda: torch.equal(X, X),
    "torch.tensor": lambda: torch.tensor([1, 2]), "meta to cpu": lambda: X.to("meta").to("cpu"),
}


@pytest.mark.parametrize("name", HOST_READS)
def test_guard_refuses_host_reads(name):
    with pytest.raises(HostSyncError, match="host sync in the test region"):
        with no_host_sync("the test region"):
            HOST_READS[name]()
    HOST_READS[name]() if name != "meta to cpu" else None       # outside the region: allowed


def test_guard_passes_device_work():
    """Kernels, views, factories with a device and index tensors are not host reads."""
    with no_host_sync():
        y = torch.zeros(3, device=X.device) + X[:3]
        i = X.argmax().view(1)
        z = torch.where(X > 2, X, float("-inf")).index_select(0, i)
        y.copy_(X[3:]).to(torch.float64)
        torch.topk(X, 2)[1].clamp(max=4)
    assert y.tolist() == [3.0, 4.0, 5.0] and z.tolist() == [5.0]


@pytest.fixture(scope="module")
def head():
    return random_head(hidden=64, vocab=600, gru=64, emb=16, seed=1)


CASES = [(TreeConfig(budget=16), False), (TreeConfig(budget=16), True), (TreeConfig(budget=12, corr_topm=0, node_topk=4), False),
         (TreeConfig(budget=24, corr_topm=16, node_topk=4), True)]


def _ref(head, block, tc, depth=16):
    return build_reference(ConditionalScorer(block, *head, tc.node_topk, tc.corr_topm), block.root,
                           block.root_state, tc, depth)


@pytest.mark.parametrize("tc,ties", CASES)
@torch.inference_mode()
def test_graph_capture_region_has_no_host_sync(head, tc, ties):
    """``NodeExpander.record`` (bind, WARMUP runs, one recording run of both bodies) on fresh,
    lazily prepared scorers; then the same static buffers serve later rounds, tree == reference."""
    gen = torch.Generator().manual_seed(30)
    block = random_block(*head, 16, gen, ties=ties)
    sc = ConditionalScorer(block, *head, tc.node_topk, tc.corr_topm)
    assert sc.prepared == 0                                    # every depth left to prepare before capture
    exp = graph_mod.NodeExpander(sc, use_graphs=False)
    graphs, outs = exp.record(sc)                              # raises HostSyncError on a host read
    assert graphs == [None, None] and set(outs[0]) == {"toks", "pack"} and outs[1]["states"].shape == (exp.k, exp.G)
    for _ in range(3):                                         # later rounds through the owned buffers
        block = random_block(*head, 16, gen, ties=ties)
        sc = ConditionalScorer(block, *head, tc.node_topk, tc.corr_topm)
        exp.begin_round(sc)
        got = graph_mod._best_first(sc, exp, block.root, block.root_state, tc, 16)
        assert same_build(_ref(head, block, tc), got)


def _replay(prog):
    """What a replay runs: the recorded program, static buffers only, under the guard."""
    with no_host_sync("replay"):
        prog._program(eager=False)
    return [t.tolist() for t in (prog.O_nodes, prog.O_valid, prog.O_menus, prog.O_expanded)]


@pytest.mark.parametrize("tc,ties", CASES)
def test_frontier_capture_region_has_no_host_sync(head, tc, ties, monkeypatch):
    """``FrontierProgram.record`` (the whole build program: bind, WARMUP runs, recording run);
    later rounds replay the program under the guard, tree == reference."""
    gen = torch.Generator().manual_seed(31)
    frontier_mod._PROGRAMS.clear()
    monkeypatch.setattr(frontier_mod.FrontierProgram, "run", _replay)
    try:
        with torch.inference_mode():
            block = random_block(*head, 16, gen, ties=ties)
            sc = ConditionalScorer(block, *head, tc.node_topk, tc.corr_topm)
            prog = frontier_mod.program_for(sc, tc.budget)
            graphs, _ = prog.record(sc, block.root_state, 16)
            assert graphs == [None] and prog.exp.owned
        for _ in range(3):
            block = random_block(*head, 16, gen, ties=ties)
            got = get_builder("frontier")(ConditionalScorer(block, *head, tc.node_topk, tc.corr_topm),
                                          block.root, block.root_state, tc, 16)
            assert same_build(_ref(head, block, tc), got)
    finally:
        frontier_mod._PROGRAMS.clear()


def test_rank_map_is_a_host_read_made_outside_the_region(head):
    """Preparing depths reads nothing on the host; the rank map (a dict) does, on first use."""
    block = random_block(*head, 16, torch.Generator().manual_seed(32))
    with torch.inference_mode():
        sc = ConditionalScorer(block, *head, 8, 64)
        with no_host_sync():
            sc.prepare_all()
            assert sc.prepared == block.depth
            with pytest.raises(HostSyncError, match="tolist"):
                sc.ranks(3, [1, 2])
        assert sc.ranks(3, sc.row(3).cand[:2].tolist()) == [0, 1]


# --- the capture record ---------------------------------------------------------------------

@pytest.mark.parametrize("name", ["graph", "frontier"])
def test_capture_recorded(name, head):
    block = random_block(*head, 16, torch.Generator().manual_seed(33))
    tc = TreeConfig(budget=16)
    native = name == "graph" and cpuext.available(verbose=False) is None   # loaded: on CPU the heap runs in C++
    built = get_builder(name)(ConditionalScorer(block, *head, 8, 64), block.root, block.root_state, tc, 16)
    if native:
        assert built.extra["capture"]["mode"] == "native" and "bestfirst.cpp" in built.extra["capture"]["reason"]
    else:
        assert built.extra["capture"] == {"mode": "eager", "reason": "cpu: CUDA graphs need a CUDA device"}
    built = get_builder(name)(MarginalScorer(block, 8, 64), block.root, None, tc, 16)
    assert built.extra["capture"]["mode"] == "reference"
    assert "MarginalScorer" in built.extra["capture"]["reason"]


def test_failed_capture_falls_back_and_says_why(head, monkeypatch):
    """A capture that raises (here: a host sync) leaves the program eager, with the reason."""
    def broken(bodies, device, where, warmup=capture_mod.WARMUP):
        with no_host_sync(where):
            torch.zeros(2, device=device).tolist()
    monkeypatch.setattr(frontier_mod, "record_bodies", broken)
    frontier_mod._PROGRAMS.clear()
    try:
        block = random_block(*head, 16, torch.Generator().manual_seed(34))
        tc = TreeConfig(budget=16)
        sc = ConditionalScorer(block, *head, 8, 64)
        prog = frontier_mod.FrontierProgram(sc, 16, use_graphs=True)
        monkeypatch.setattr(frontier_mod, "program_for", lambda scorer, budget: prog)
        with pytest.warns(UserWarning, match="capture failed"):
            got = frontier_mod.build_frontier(sc, block.root, block.root_state, tc, 16)
        assert got.extra["capture"]["mode"] == "fallback"
        assert got.extra["capture"]["reason"].startswith("capture failed: HostSyncError: host sync in the frontier")
        assert same_build(_ref(head, block, tc), got)
    finally:
        frontier_mod._PROGRAMS.clear()


def test_decode_trace_records_capture(tiny_decoder):
    from dominotree.config import DecodeConfig
    tr = tiny_decoder.generate("Count: one two", DecodeConfig(method="dominotree", builder="frontier",
                                                              max_new_tokens=8, stop_at_eos=False))
    assert tr.rounds and all(r.extra["capture"]["mode"] == "eager" for r in tr.rounds)
    from dominotree.view.charts import builder_figure            # the explorer's builder chart says so
    title = builder_figure(tr).layout.title.text
    assert "CUDA graph: frontier: eager (cpu: CUDA graphs need a CUDA device)" in title
