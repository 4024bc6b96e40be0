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


def test_domino_chain_is_the_corrected_greedy_chain_of_its_definition():
    """``domino_chain`` (childgru's step, W2 through ``_full_correction``, one logsumexp): its
    tokens are the argmax of base + W2 SiLU(W1 [z; s]) along its own states stepped by
    ``nn.GRU`` (float rounding apart, no near-ties here), its log-probs the log-softmax of those
    logits, and ``depth`` cuts it without changing the rest."""
    from dominotree.bench.build import random_block, random_head
    from dominotree.scoring import domino_chain
    drafter, embed = random_head(96, 300, 32, 48, seed=3, depth=8)
    gen = torch.Generator().manual_seed(4)
    with torch.inference_mode():
        for _ in range(5):
            block = random_block(drafter, embed, 8, gen)
            toks, lps, margs = domino_chain(block, drafter, embed)
            assert len(toks) == 8 and domino_chain(block, drafter, embed, 3) == (toks[:3], lps[:3], margs[:3])
            state = block.root_state.view(1, -1)
            base_lp = torch.log_softmax(block.base_logits.float(), -1)
            assert toks[0] == int(block.base_logits[0].argmax())
            for i in range(1, 8):
                state = drafter.gru_step(embed(torch.tensor([toks[i - 1]])), state)
                logits = block.base_logits[i] + drafter.correction(block.z[i:i + 1], state)[0]
                assert toks[i] == int(logits.argmax()), i
                assert lps[i] == pytest.approx(float(torch.log_softmax(logits, -1)[toks[i]]), abs=1e-4)
                assert margs[i] == pytest.approx(float(base_lp[i, toks[i]]), abs=1e-5)
