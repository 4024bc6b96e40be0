"""A test-double drafter that proposes the target's own greedy continuation with injected
mistakes, so tests reach deep acceptance (8+ tokens per round) and sibling acceptance (a
non-first child on the accepted path) through the real round loop."""
from __future__ import annotations

import random

import torch

from dominotree.config import DecodeConfig
from dominotree.scoring import DraftBlock


def ar_continuation(decoder, prompt_ids, n):
    cfg = DecodeConfig(method="ar", max_new_tokens=n, stop_at_eos=False)
    return list(prompt_ids) + decoder.generate(list(prompt_ids), cfg).token_ids


def make_oracle(decoder, seq, clean=0.85, sibling=0.08, rank3=0.04, seed=0, true_logits=None):
    """``seq``: prompt + the target's greedy continuation. Per (round start, depth) the true
    token is put first (``clean``), second behind a decoy (``sibling``), third (``rank3``), or
    far down (the rest). ``true_logits(start)`` may supply depth-1 logits (T > 0 tests)."""
    target = decoder.target
    vocab = target.vocab_rows

    def draft_fn(drafter, root, start, feats, feat_pos, dcache):
        depth = drafter.cfg.draft_depth
        g = torch.Generator().manual_seed(seed * 7919 + start)
        base = torch.randn(depth, vocab, generator=g)
        for d in range(1, depth + 1):
            r = random.Random(seed * 1_000_003 + start * 1009 + d)
            pos = start + d
            true = seq[pos] if pos < len(seq) else r.randrange(vocab)
            row = base[d - 1]
            top = float(row.max())
            decoys = [t for t in r.sample(range(vocab), 3) if t != true]
            u = r.random()
            if u < clean:
                row[true] = top + 6
            elif u < clean + sibling:
                row[decoys[0]] = top + 6
                row[true] = top + 5
            elif u < clean + sibling + rank3:
                row[decoys[0]] = top + 6
                row[decoys[1]] = top + 5.5
                row[true] = top + 5
            else:
                row[true] = float(row.min()) - 5
        if true_logits is not None:
            base[0] = true_logits(start, root)
        base = base.to(target.dtype)
        z = torch.zeros(depth, drafter.cfg.hidden_size, dtype=drafter.fc.weight.dtype)
        root_state = None
        if drafter.cfg.is_domino:
            emb = target.embed_tokens(torch.tensor([root])).to(drafter.fc.weight.dtype)
            root_state = drafter.gru_step(emb, None)[0]
        return DraftBlock(root, base, z, root_state)

    return draft_fn


def sibling_accepted(rt) -> bool:
    """Whether the accepted path goes through a node that is not its parent's first child."""
    first = {}
    for i in range(1, len(rt.tree.tokens)):
        first.setdefault(rt.tree.parents[i], i)
    return any(first[rt.tree.parents[i]] != i for i in rt.accepted[1:])
