"""``scoring.top_candidates``: the Top-M candidate ids of a depth, against ``torch.topk``.

    .venv/bin/python -m pytest -q tests/test_scoring.py
"""
from __future__ import annotations

import pytest
import torch

from dominotree.scoring import top_candidates


@pytest.mark.parametrize("kind", ["normal", "integer ties", "plateau", "one hot", "bfloat16", "short"])
def test_top_candidates_are_the_top_m(kind):
    gen = torch.Generator().manual_seed(0)
    v = 1000 if kind == "short" else 49152
    for trial in range(40):
        x = torch.randn(v, generator=gen) * (0.1 + 5 * torch.rand(1, generator=gen))
        if kind == "integer ties":
            x = x.round()
        elif kind == "plateau":
            x[: v // 2] = 3.0
        elif kind == "one hot":
            x = torch.zeros(v)
            x[int(torch.randint(v, (1,), generator=gen))] = 1.0
        elif kind == "bfloat16":
            x = x.to(torch.bfloat16)
        got = top_candidates(x, 64)
        want = torch.topk(x, 64)[1]
        assert len(set(got.tolist())) == 64                       # 64 distinct ids
        assert torch.equal(x[got], x[want])                       # the same values, largest first
