"""CUDA device checks for the tree builders (skipped without a GPU).

    python3 -m pytest -q -m cuda tests/test_cuda.py
    python3 tests/test_cuda.py          # the same checks without pytest (writes nothing)

Imports only torch, transformers and dominotree (no gradio): the GPU machine has its own Python.

- Levels A/B: the graph and frontier builders, with their CUDA graphs really captured and
  replayed over several rounds (static buffers reused), give the reference's trees and menus
  exactly, in float32 and bfloat16.
- Level C: decoding with each builder (and ``condstatic``, whose scorer once indexed a CUDA tensor
  with a CPU one) equals ``ar`` in float32 on random-tiny, up to rounding ties: CUDA has no
  row-invariant kernels, so where the outputs first differ the target's logit gap must be within
  ``ties.ROUNDING_GAP`` with the method's token ranked first or second (``scripts/gpu_decode.py``
  does the same for every method and the embedded drafters).
"""
from __future__ import annotations

import os
import sys

import torch

try:
    import pytest
except ImportError:  # the fallback runner at the bottom needs no pytest
    pytest = None

if pytest is not None:
    pytestmark = [pytest.mark.cuda,
                  pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")]

SHAPES = [  # (hidden, vocab, gru, emb, dtype): the embedded pair's head and a small one
    (576, 49152, 256, 128, torch.float32),
    (576, 49152, 256, 128, torch.bfloat16),
    (64, 600, 32, 16, torch.float32),
]
ROUNDS = 6


def _check(name: str, hidden: int, vocab: int, gru: int, emb: int, dtype, rounds: int = ROUNDS,
           budget: int = 16, depth: int = 16) -> None:
    from dominotree.builders import build_reference, get_builder
    from dominotree.builders import frontier as frontier_mod
    from dominotree.builders import graph as graph_mod
    from dominotree.bench.build import random_block, random_head, same_build
    from dominotree.config import TreeConfig
    from dominotree.scoring import ConditionalScorer

    drafter, embed = random_head(hidden=hidden, vocab=vocab, gru=gru, emb=emb, seed=7, dtype=dtype, device="cuda")
    gen = torch.Generator().manual_seed(21)
    tc = TreeConfig(budget=budget)
    fn = get_builder(name)
    for r in range(rounds):
        block = random_block(drafter, embed, depth, gen, ties=(r % 3 == 2))
        mk = lambda: ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm)   # noqa: E731
        ref = build_reference(mk(), block.root, block.root_state, tc, depth)
        got = fn(mk(), block.root, block.root_state, tc, depth)
        assert got.tree.same_shape(ref.tree), (name, r, ref.tree.to_dict(), got.tree.to_dict())
        assert got.tree.scores == ref.tree.scores and got.tree.marg_scores == ref.tree.marg_scores, (name, r)
        assert same_build(ref, got), (name, r, "menus differ")
    # the graphs were really captured and replayed (not the eager fallback)
    sc = ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm)
    if name == "graph":
        assert graph_mod.expander_for(sc).can_run(), "graph builder fell back to eager mode"
    elif name == "frontier":
        assert frontier_mod.program_for(sc, budget).captured, "frontier builder fell back to eager mode"


def _equal_or_tie(dec, prompt_ids, ar, got, label) -> None:
    """``got == ar``, or a rounding tie at the first difference (see the module docstring)."""
    from dominotree.ties import ROUNDING_GAP, gap_at
    if got == ar:
        return
    k = next((i for i, (a, b) in enumerate(zip(ar, got)) if a != b), None)
    assert k is not None, (label, "lengths differ", len(got), len(ar))
    gap, rank = gap_at(dec, prompt_ids + ar[:k], ar[k], got[k])
    assert abs(gap) <= ROUNDING_GAP and rank <= 1, (label, "a real difference", k, gap, rank)


def _decode_equals_ar(name: str) -> None:
    from dominotree.config import DecodeConfig
    from dominotree.decode import Decoder
    from dominotree.presets import load_pair
    dec = Decoder(load_pair("random-tiny", dtype="float32", device="cuda"))
    prompt = dec.encode_prompt("Count: one two three")
    ar = dec.generate(prompt, DecodeConfig(method="ar", max_new_tokens=24, stop_at_eos=False)).token_ids
    method, builder = ("condstatic", None) if name == "condstatic" else ("dominotree", name)
    tr = dec.generate(prompt, DecodeConfig(method=method, builder=builder, max_new_tokens=24, stop_at_eos=False))
    _equal_or_tie(dec, prompt, ar, tr.token_ids, name)
    if name in ("graph", "frontier"):
        assert {r.extra["capture"]["mode"] for r in tr.rounds} == {"captured"}, [r.extra["capture"] for r in tr.rounds][:1]
        ab = dec.generate(prompt, DecodeConfig(method="dominotree", builder="python", ab_builder=name,
                                               max_new_tokens=12, stop_at_eos=False))
        assert all(r.build_ab["identical"] for r in ab.rounds), name


CASES = [(f"identity[{n}-{h}-{str(dt).replace('torch.', '')}]", _check, (n, h, v, g, e, dt))
         for n in ("graph", "frontier") for (h, v, g, e, dt) in SHAPES]
CASES += [(f"identity_eager_fallback[{n}]", None, (n,)) for n in ("graph", "frontier")]
DECODES = ("python", "graph", "frontier", "condstatic")
CASES += [(f"decode_equals_ar[{n}]", _decode_equals_ar, (n,)) for n in DECODES]


def _eager_fallback(name: str) -> None:
    """DOMINOTREE_GRAPH_EAGER=1: the same bodies run eagerly on the GPU, same trees."""
    from dominotree.builders import frontier as frontier_mod
    from dominotree.builders import graph as graph_mod
    old = os.environ.get("DOMINOTREE_GRAPH_EAGER")
    os.environ["DOMINOTREE_GRAPH_EAGER"] = "1"
    graph_mod._EXPANDERS.clear(); frontier_mod._PROGRAMS.clear()
    try:
        from dominotree.builders import build_reference, get_builder
        from dominotree.bench.build import random_block, random_head, same_build
        from dominotree.config import TreeConfig
        from dominotree.scoring import ConditionalScorer
        d, e = random_head(hidden=64, vocab=600, gru=32, emb=16, seed=8, device="cuda")
        gen = torch.Generator().manual_seed(22)
        tc = TreeConfig(budget=16)
        for _ in range(3):
            b = random_block(d, e, 16, gen)
            ref = build_reference(ConditionalScorer(b, d, e, 8, 64), b.root, b.root_state, tc, 16)
            got = get_builder(name)(ConditionalScorer(b, d, e, 8, 64), b.root, b.root_state, tc, 16)
            assert same_build(ref, got), name
    finally:
        if old is None:
            os.environ.pop("DOMINOTREE_GRAPH_EAGER", None)
        else:
            os.environ["DOMINOTREE_GRAPH_EAGER"] = old
        graph_mod._EXPANDERS.clear(); frontier_mod._PROGRAMS.clear()


if pytest is not None:
    @pytest.mark.parametrize("name", ["graph", "frontier"])
    @pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}-{str(s[4]).replace('torch.', '')}")
    def test_identity_under_replay(name, shape):
        _check(name, *shape)

    @pytest.mark.parametrize("name", ["graph", "frontier"])
    def test_identity_eager_fallback(name):
        _eager_fallback(name)

    @pytest.mark.parametrize("name", DECODES)
    def test_decode_equals_ar(name):
        _decode_equals_ar(name)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not torch.cuda.is_available():
        print("no CUDA device: all skipped")
        raise SystemExit(0)
    failed = 0
    for label, fn, args in CASES:
        try:
            (fn or _eager_fallback)(*args)
            print(f"PASS {label}")
        except Exception as ex:  # report every case, then fail
            failed += 1
            print(f"FAIL {label}: {type(ex).__name__}: {ex}"[:2000])
    raise SystemExit(1 if failed else 0)
