"""The Domino head's children GRU step (``models/childgru.py``) against ``nn.GRU``.

    .venv/bin/python -m pytest -q tests/test_childgru.py

It rearranges nn.GRU's sums (the input product from a per-token table, the hidden product once
per parent), so it agrees to float32 rounding: a 256-wide state after one step is within 1e-5
of nn.GRU's (values are O(1); the products sum a few hundred terms, each rounding ~6e-8).
"""
from __future__ import annotations

import pytest
import torch

from dominotree.bench.build import random_head
from dominotree.models import childgru


@pytest.fixture()
def head():
    childgru._CACHE.clear()
    yield random_head(hidden=96, vocab=500, gru=64, emb=16, seed=3)
    childgru._CACHE.clear()


def _reference(drafter, embed, state, toks):
    return drafter.gru_step(embed(toks), state.view(1, -1).expand(toks.shape[0], -1))


@pytest.mark.parametrize("table", [True, False])
def test_matches_nn_gru(head, table, monkeypatch):
    if not table:
        monkeypatch.setattr(childgru, "TABLE_MAX_BYTES", 0)
    drafter, embed = head
    gen = torch.Generator().manual_seed(0)
    step = childgru.child_gru(drafter, embed)
    assert (step.table is not None) == table
    with torch.inference_mode():
        for k in (1, 8):
            state = torch.randn(1, 64, generator=gen)
            toks = torch.randint(0, 500, (k,), generator=gen)
            got = step(state, toks)
            assert got.shape == (k, 64)
            torch.testing.assert_close(got, _reference(drafter, embed, state, toks), rtol=0, atol=1e-5)


def test_one_object_per_pair_remade_after_a_weight_change(head):
    drafter, embed = head
    a = childgru.child_gru(drafter, embed)
    assert childgru.child_gru(drafter, embed) is a          # shared by every builder: same table
    other = torch.nn.Embedding(500, 96)
    assert childgru.child_gru(drafter, other) is not a
    with torch.no_grad():
        drafter.prefix_gru.weight_ih_l0.mul_(0.5)           # a training step changes the weights
    b = childgru.child_gru(drafter, embed)
    assert b is not a
    state, toks = torch.randn(1, 64), torch.tensor([3, 7])
    with torch.inference_mode():
        torch.testing.assert_close(b(state, toks), _reference(drafter, embed, state, toks), rtol=0, atol=1e-5)


def test_table_only_where_small(head, monkeypatch):
    drafter, embed = head
    need = 500 * 3 * 64 * 4                                   # V x 3G float32
    monkeypatch.setattr(childgru, "TABLE_MAX_BYTES", need)
    assert childgru.ChildGRU(drafter.prefix_gru, embed, torch.float32).table is not None
    monkeypatch.setattr(childgru, "TABLE_MAX_BYTES", need - 1)
    assert childgru.ChildGRU(drafter.prefix_gru, embed, torch.float32).table is None


def test_first_state_matches_nn_gru(head):
    """The state after the root (``Drafter.first_state``, the decoder's) against ``nn.GRU`` from
    the zero state, to float32 rounding."""
    drafter, embed = head
    toks = torch.tensor([0, 7, 499])
    with torch.inference_mode():
        want = drafter.gru_step(embed(toks), None)
        got = drafter.first_state(embed(toks))
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-6, rtol=0)
    assert not torch.equal(got, torch.zeros_like(got))
