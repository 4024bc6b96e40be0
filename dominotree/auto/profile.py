"""Measure this machine's verify cost: the latency of one verify forward against tree nodes and
context length, and the draft cost per round; ``profile`` fits them into a ``costmodel.CostModel``.

Used by ``python -m dominotree profile-cost`` (``bench/cost.py``), by the budget calibration
(``calibrate.calibrate_here``, the explorer's "Calibrate this machine") and by ``bench`` when an
adaptive method needs a profile that is not there yet.
"""
from __future__ import annotations

import random
import sys
import time

import numpy as np

from .costmodel import CostModel
from ..machine import hardware_info, versions_info

DEFAULT_CONTEXTS = (128, 512, 1024, 2048)
DEFAULT_NODES = (0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def _random_tree(n: int, seed: int):
    """A fixed bushy tree of n nodes (parents drawn among earlier rows, favouring shallow ones)."""
    from ..tree import Tree
    rng = random.Random(seed)
    parents, depths = [-1], [0]
    for i in range(1, n + 1):
        p = min(rng.randrange(i), rng.randrange(i))   # skewed toward early (shallow) rows
        parents.append(p)
        depths.append(depths[p] + 1)
    return Tree([0] * (n + 1), parents, depths)


def profile_verify(pair, contexts, nodes, repeats: int = 5, seed: int = 0, progress=None) -> list[list[float]]:
    """Median verify latency (ms) for each context length and node count, on this machine."""
    import torch
    from ..models.target import cache_truncate
    from ..verify import verify_tree
    from ..observe import StageClock
    tgt = pair.target
    taps = None
    for kind in ("domino", "dflash"):
        if kind in pair.drafters:
            taps = tuple(pair.drafters[kind].cfg.target_layer_ids)
            break
    vocab = min(tgt.vocab_rows, int(getattr(tgt.config, "vocab_size", tgt.vocab_rows)))
    g = torch.Generator().manual_seed(seed)
    clock = StageClock(tgt.device)
    out = []
    with torch.inference_mode():
        for ctx in contexts:
            cache = tgt.new_cache()
            ids = torch.randint(0, vocab, (1, ctx), generator=g).to(tgt.device)
            tgt.forward(ids, torch.arange(ctx, device=tgt.device)[None], cache, taps=taps, last_only=True)
            trees = {n: _random_tree(n, seed + n) for n in nodes}
            for t in trees.values():   # warm-up, and fills token ids
                t.tokens[:] = torch.randint(0, vocab, (len(t.tokens),), generator=g).tolist()
            verify_tree(tgt, cache, trees[nodes[-1]], ctx, taps)
            cache_truncate(cache, ctx)
            times = {n: [] for n in nodes}
            order = list(nodes)
            rng = random.Random(seed + ctx)
            for _ in range(repeats):
                rng.shuffle(order)       # interleave node counts so drift does not bias the fit
                for n in order:
                    t0 = clock.now()
                    verify_tree(tgt, cache, trees[n], ctx, taps)
                    times[n].append((clock.now() - t0) * 1e3)
                    cache_truncate(cache, ctx)
                    if progress is not None:
                        progress.update(1)
            out.append([float(np.median(times[n])) for n in nodes])
    return out


def profile_draft(pair, repeats: int = 3, max_new_tokens: int = 24) -> dict[str, float]:
    """Median draft-stage ms per round for each drafter kind (from short real decodes)."""
    from ..config import DecodeConfig
    from ..decode import Decoder
    dec = Decoder(pair)
    out = {}
    for kind, method in (("dflash", "dflash"), ("domino", "domino")):
        if kind not in pair.drafters:
            continue
        ms = []
        for r in range(repeats):
            tr = dec.generate("Count from one to twenty, please.",
                              DecodeConfig(method=method, max_new_tokens=max_new_tokens, seed=r, stop_at_eos=False))
            ms += [rt.stage_ms["draft"] for rt in tr.rounds[1:] or tr.rounds]
        out[kind] = float(np.median(ms)) if ms else 0.0
    return out


def profile(pair, contexts=DEFAULT_CONTEXTS, nodes=DEFAULT_NODES, repeats: int = 5, draft_ms: float | None = None,
            progress: bool = True, meta: dict | None = None) -> CostModel:
    """Profile this machine and fit the model (contexts are clipped to the target's context)."""
    from tqdm import tqdm
    nodes = sorted(set(int(n) for n in nodes))
    room = pair.target.max_positions - nodes[-1] - 2
    contexts = sorted(set(min(int(c), room) for c in contexts if c > 0))
    if not contexts or contexts[0] < 1:
        raise ValueError("no context length fits the target's context window")
    bar = tqdm(total=len(contexts) * len(nodes) * repeats, desc="profile verify", file=sys.stderr,
               disable=not progress, mininterval=1.0)
    t0 = time.perf_counter()
    raw = profile_verify(pair, contexts, nodes, repeats, progress=bar)
    bar.close()
    by_kind = {} if draft_ms is not None else profile_draft(pair)
    cd = float(draft_ms) if draft_ms is not None else (float(np.mean(list(by_kind.values()))) if by_kind else 0.0)
    m = {"preset": pair.name, "paths": pair.paths, "dtype": str(pair.target.dtype).replace("torch.", ""),
         "weights": pair.target.weights, "device": str(pair.target.device), "repeats": repeats, "hardware": hardware_info(pair.target.device),
         "versions": versions_info(), "profile_s": round(time.perf_counter() - t0, 2),
         "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    m.update(meta or {})
    return CostModel.fit(contexts, nodes, raw, cd, by_kind, m)
