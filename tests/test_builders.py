"""Tree builders: every builder gives the reference's tree and menus, exactly.

    .venv/bin/python -m pytest -q tests/test_builders.py

"Identical" means Level A of the style guide: tokens, parents and depths equal, and scores and
marginal scores equal with ``==`` (no tolerance), and the children menus equal too.
"""
from __future__ import annotations

import pytest
import torch

from dominotree.builders import build_reference, get_builder
from dominotree.builders import frontier as frontier_mod
from dominotree.builders import graph as graph_mod
from dominotree.bench.build import random_block, random_head, same_build
from dominotree.config import DecodeConfig, TreeConfig
from dominotree.scoring import ConditionalScorer, MarginalScorer

BUILDERS = ["python", "graph", "frontier"]


def _scorer(drafter, embed, block, tc):
    return ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm)


def check_identical(name, drafter, embed, block, tc, max_depth):
    """Build with ``name`` and with the reference on fresh scorers; return the reference build."""
    ref = build_reference(_scorer(drafter, embed, block, tc), block.root, block.root_state, tc, max_depth)
    got = get_builder(name)(_scorer(drafter, embed, block, tc), block.root, block.root_state, tc, max_depth)
    ref.tree.validate()
    assert got.tree.same_shape(ref.tree), (name, ref.tree.to_dict(), got.tree.to_dict())
    assert got.tree.scores == ref.tree.scores          # exact: same ops, same shapes, float64 sums
    assert got.tree.marg_scores == ref.tree.marg_scores
    assert [vars(m) for m in got.menus] == [vars(m) for m in ref.menus]
    assert same_build(ref, got)
    return ref


@pytest.fixture(scope="module")
def head():
    return random_head(hidden=64, vocab=600, gru=64, emb=16, seed=1)


@pytest.fixture(scope="module")
def tie_head():
    """A head whose correction is zero: every node at a depth gets the same menu, so many paths
    share exactly equal scores and the insertion-order tie-break decides the tree."""
    d, e = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=2)
    with torch.no_grad():
        d.embed_proj[2].weight.zero_()
    return d, e


@pytest.mark.parametrize("name", BUILDERS)
def test_random_rounds(name, head):
    gen = torch.Generator().manual_seed(10)
    tc = TreeConfig(budget=16, corr_topm=64, node_topk=8)
    depths = set()
    for _ in range(12):
        block = random_block(*head, 16, gen)
        ref = check_identical(name, *head, block, tc, 16)
        depths.add(max(ref.tree.depths))
    assert max(depths) >= 3        # the rounds exercise deeper trees, not only the root's children


@pytest.mark.parametrize("name", BUILDERS)
def test_other_shapes(name):
    """Another head, budget and K (the caches key on shapes); G % 64 != 0: no row batching."""
    d, e = random_head(hidden=96, vocab=2000, gru=48, emb=32, seed=3)
    gen = torch.Generator().manual_seed(11)
    tc = TreeConfig(budget=40, corr_topm=32, node_topk=5)
    for _ in range(4):
        check_identical(name, d, e, random_block(d, e, 12, gen), tc, 12)


@pytest.mark.parametrize("name", BUILDERS)
def test_exact_ties(name, head, tie_head):
    gen = torch.Generator().manual_seed(12)
    tc = TreeConfig(budget=24, corr_topm=16, node_topk=4)
    for d_e in (head, tie_head):
        for _ in range(3):
            block = random_block(*d_e, 8, gen, ties=True)      # integer logits: duplicate values
            ref = check_identical(name, *d_e, block, tc, 8)
    assert len(set(ref.tree.scores[1:])) < ref.tree.num_nodes      # ties really occurred


@pytest.mark.parametrize("name", BUILDERS)
def test_budget_one(name, head):
    gen = torch.Generator().manual_seed(13)
    ref = check_identical(name, *head, random_block(*head, 16, gen), TreeConfig(budget=1), 16)
    assert ref.tree.num_nodes == 1 and len(ref.menus) == 1


@pytest.mark.parametrize("name", BUILDERS)
def test_heap_runs_out(name):
    """Tiny vocabulary and depth: fewer candidates than the budget asks for."""
    d, e = random_head(hidden=32, vocab=3, gru=16, emb=8, seed=4)
    gen = torch.Generator().manual_seed(14)
    ref = check_identical(name, d, e, random_block(d, e, 2, gen), TreeConfig(budget=16), 2)
    assert ref.tree.num_nodes == 3 + 3 * 3


@pytest.mark.parametrize("name", BUILDERS)
@pytest.mark.parametrize("max_depth", [1, 2])
def test_max_depth_reached(name, head, max_depth):
    gen = torch.Generator().manual_seed(15)
    ref = check_identical(name, *head, random_block(*head, 16, gen), TreeConfig(budget=16), max_depth)
    assert max(ref.tree.depths) == max_depth


@pytest.mark.parametrize("name", BUILDERS)
def test_full_vocabulary(name, head):
    gen = torch.Generator().manual_seed(16)
    tc = TreeConfig(budget=12, corr_topm=0, node_topk=4)
    for _ in range(2):
        check_identical(name, *head, random_block(*head, 16, gen), tc, 16)


@pytest.mark.parametrize("name", BUILDERS)
def test_bfloat16_head(name):
    d, e = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=5, dtype=torch.bfloat16)
    gen = torch.Generator().manual_seed(17)
    for _ in range(3):
        check_identical(name, d, e, random_block(d, e, 16, gen), TreeConfig(budget=16), 16)


@pytest.mark.parametrize("table", [True, False])
def test_child_gru_paths(table, head, monkeypatch):
    """With the per-token input table (small vocabularies) and without it (the K-row product of
    large ones), every builder gives the reference's tree."""
    from dominotree.models import childgru
    if not table:
        monkeypatch.setattr(childgru, "TABLE_MAX_BYTES", 0)
    childgru._CACHE.clear(); graph_mod._EXPANDERS.clear(); frontier_mod._PROGRAMS.clear()
    try:
        gen = torch.Generator().manual_seed(18)
        for name in ("graph", "frontier"):
            check_identical(name, *head, random_block(*head, 16, gen), TreeConfig(budget=16), 16)
        assert (childgru.child_gru(*head).table is not None) == table
    finally:
        childgru._CACHE.clear(); graph_mod._EXPANDERS.clear(); frontier_mod._PROGRAMS.clear()


@pytest.mark.parametrize("native", [True, False])
def test_graph_on_cpu_native_and_python_heaps(native, head, tie_head, monkeypatch):
    """The graph builder on CPU: the heap in one C++ op (``builders/native.py``, where the C++
    kernels are built) and the Python heap (``DOMINOTREE_NATIVE_BUILD=0``) both give the
    reference's tree and menus, ties, a heap that runs out, budget 1 and capped depth included;
    each round says which ran."""
    from dominotree.builders import native as native_mod
    from dominotree.models import cpuext
    if native and cpuext.available(verbose=False) is not None:
        pytest.skip("the C++ kernels are not built here")
    monkeypatch.setenv(native_mod.NATIVE_ENV, "1" if native else "0")
    gen = torch.Generator().manual_seed(27)
    tiny = random_head(hidden=32, vocab=3, gru=16, emb=8, seed=4)
    cases = [(head, TreeConfig(budget=16), 16, False), (head, TreeConfig(budget=40, corr_topm=32, node_topk=5), 12, False),
             (tie_head, TreeConfig(budget=24, corr_topm=16, node_topk=4), 8, True), (head, TreeConfig(budget=1), 16, False),
             (head, TreeConfig(budget=16), 2, False), (tiny, TreeConfig(budget=16), 2, False)]
    for d_e, tc, depth, ties in cases:
        for _ in range(3):
            block = random_block(*d_e, depth, gen, ties=ties)
            check_identical("graph", *d_e, block, tc, depth)
            got = get_builder("graph")(_scorer(*d_e, block, tc), block.root, block.root_state, tc, depth)
            assert got.extra["capture"]["mode"] == ("native" if native else "eager")


def test_a_build_never_loads_the_kernels(head, monkeypatch):
    """The C++ build runs only where something else loaded the kernels (a pair on them): a
    builder never compiles or loads them itself, it keeps the Python heap."""
    from dominotree.models import cpuext
    monkeypatch.setattr(cpuext, "_state", {})
    block = random_block(*head, 16, torch.Generator().manual_seed(28))
    tc = TreeConfig(budget=16)
    got = get_builder("graph")(_scorer(*head, block, tc), block.root, block.root_state, tc, 16)
    assert got.extra["capture"]["mode"] == "eager" and cpuext._state == {}
    assert same_build(build_reference(_scorer(*head, block, tc), block.root, block.root_state, tc, 16), got)


@pytest.mark.parametrize("name", ["graph", "frontier"])
def test_other_scorers_use_the_reference(name, head):
    gen = torch.Generator().manual_seed(19)
    block = random_block(*head, 16, gen)
    tc = TreeConfig(budget=16)
    a = build_reference(MarginalScorer(block, 8, 64), block.root, None, tc, 16)
    b = get_builder(name)(MarginalScorer(block, 8, 64), block.root, None, tc, 16)
    assert same_build(a, b)


def _eager(drafter, embed, block, tc):
    return ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm, lazy=False)


@pytest.mark.parametrize("name", BUILDERS)
def test_lazy_depths_equal_eager(name, head, tie_head):
    """Depths prepared only when the heap first reaches them (the default) give exactly the tree
    and menus of every depth prepared up front in batched calls, ties and bf16 included."""
    gen = torch.Generator().manual_seed(25)
    bf16 = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=5, dtype=torch.bfloat16)
    cases = [(head, TreeConfig(budget=16), False), (tie_head, TreeConfig(budget=24, corr_topm=16, node_topk=4), True),
             (head, TreeConfig(budget=12, corr_topm=0, node_topk=4), False), (bf16, TreeConfig(), True)]
    fewer = False
    for d_e, tc, ties in cases:
        for _ in range(3):
            block = random_block(*d_e, 16, gen, ties=ties)
            eager = build_reference(_eager(*d_e, block, tc), block.root, block.root_state, tc, 16)
            sc = _scorer(*d_e, block, tc)
            lazy = get_builder(name)(sc, block.root, block.root_state, tc, 16)
            assert same_build(eager, lazy)
            fewer |= sc.prepared < block.depth
    assert fewer          # some round really left depths unprepared


@torch.inference_mode()
def test_lazy_marginal_and_static_scorers_equal_eager(head):
    from dominotree.scoring import StaticScorer
    gen = torch.Generator().manual_seed(26)
    tc = TreeConfig(budget=16)
    for ties in (False, True):
        block = random_block(*head, 16, gen, ties=ties)
        for make in (lambda lazy: MarginalScorer(block, 8, 64, lazy=lazy),
                     lambda lazy: StaticScorer(block, *head, 8, 64, 16, lazy=lazy)):
            a = build_reference(make(False), block.root, None, tc, 16)
            b = build_reference(make(True), block.root, None, tc, 16)
            assert same_build(a, b)
        lazy, eager = _scorer(*head, block, tc), _eager(*head, block, tc)
        assert lazy.candidates() == eager.candidates()     # the traces' Top-M lists too


# --- end to end: decoding --------------------------------------------------------------------

@pytest.fixture(scope="module")
def decoder(tiny_decoder):
    return tiny_decoder      # random-tiny in float32 on the CPU (tests/conftest.py)


PROMPT = "Count: one two three"


@pytest.fixture(scope="module")
def ar_ids(decoder):
    return decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=24, stop_at_eos=False)).token_ids


@pytest.mark.parametrize("name", BUILDERS)
def test_decode_equals_ar(name, decoder, ar_ids):
    cfg = DecodeConfig(method="dominotree", builder=name, max_new_tokens=24, stop_at_eos=False)
    tr = decoder.generate(PROMPT, cfg)
    assert tr.token_ids == ar_ids
    assert all(r.builder == name for r in tr.rounds)


@pytest.mark.parametrize("name", ["graph", "frontier"])
def test_ab_builder_fills_traces(name, decoder, ar_ids):
    cfg = DecodeConfig(method="dominotree", builder="python", ab_builder=name, max_new_tokens=16,
                       stop_at_eos=False)
    tr = decoder.generate(PROMPT, cfg)
    assert tr.token_ids == ar_ids[:16]
    assert tr.rounds and all(r.build_ab is not None for r in tr.rounds)
    for r in tr.rounds:
        assert r.build_ab["builders"] == ["python", name]
        assert r.build_ab["identical"] is True
        assert len(r.build_ab["ms"]) == 2 and all(ms >= 0 for ms in r.build_ab["ms"])


# --- the graph-mode code paths, run eagerly on CPU ------------------------------------------

def _run_static(prog):
    """``FrontierProgram.run`` as under CUDA capture: no host-side shortcuts."""
    prog._program(eager=False)
    return [t.tolist() for t in (prog.O_nodes, prog.O_valid, prog.O_menus, prog.O_expanded)]


@pytest.mark.parametrize("budget,max_depth,vocab", [(16, 16, 600), (16, 2, 600), (16, 2, 3), (1, 16, 600)])
def test_frontier_capture_program_on_cpu(budget, max_depth, vocab, monkeypatch):
    """The program CUDA captures (fixed shapes, masking instead of early exits) gives the same tree."""
    monkeypatch.setattr(frontier_mod.FrontierProgram, "run", _run_static)
    frontier_mod._PROGRAMS.clear()
    try:
        d, e = random_head(hidden=64, vocab=vocab, gru=32, emb=16, seed=6)
        gen = torch.Generator().manual_seed(20)
        for ties in (False, True):
            check_identical("frontier", d, e, random_block(d, e, 16, gen, ties=ties), TreeConfig(budget=budget), max_depth)
    finally:
        frontier_mod._PROGRAMS.clear()


def test_node_bodies_with_static_buffers(head):
    """Owned (copied-in) buffers and a tensor row index, as under capture, give the scorer's menus."""
    gen = torch.Generator().manual_seed(23)
    tc = TreeConfig()
    for _ in range(2):
        block = random_block(*head, 16, gen)
        sc = _scorer(*head, block, tc)
        exp = graph_mod.NodeExpander(sc, use_graphs=False)
        exp.own_buffers()
        exp.begin_round(sc)
        exp.pack_outputs = True
        state = sc.child_states(block.root_state, sc.root_children[1])[0]
        for depth in (2, 7, 16):
            ch = sc.children(state, depth)
            exp.S_row, exp.S_state = torch.tensor([depth - 1]), state.view(1, -1)
            toks, lps, base, ranks = exp._corr_body()["pack"].tolist()
            assert ([int(t) for t in toks], lps, base) == (ch.tokens, ch.logprobs, ch.base_logprobs)
            assert [int(r) for r in ranks] == ch.ranks
            exp.S_toks = torch.tensor(ch.tokens)
            assert torch.equal(exp._gru_body()["states"], ch.states)
