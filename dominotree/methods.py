"""The method family, one row per method: which drafter a method needs, the children function
(scorer) its heap reads, its builder and stop rule, and how many block depths it can use. The
round loop (``decode.Decoder.rounds``) reads this table and nothing else about a method's name.
"""
from __future__ import annotations

from dataclasses import dataclass


from .builders import Built, adaptive, build_lazy, build_reference
from .config import METHOD_DRAFTER, DecodeConfig
from .draftvocab import DraftVocab
from .scoring import MarginalScorer, StaticScorer, ConditionalScorer, domino_chain, greedy_chain, top_logprobs
from .tree import Tree


def _global(built: Built, vocab: DraftVocab | None) -> Built:
    return built if vocab is None else vocab.globalize(built)


def _chain(root, toks, lps, margs):
    cum, mcum, s, m = 0.0, 0.0, [], []
    for lp, mg in zip(lps, margs):
        cum += lp; mcum += mg
        s.append(cum); m.append(mcum)
    return Built(Tree.chain(root, toks, s, m))


# --- the family, one row per method ----------------------------------------------------------------

@dataclass(frozen=True)
class MethodRow:
    """How a method drafts and builds: the drafter kind it needs, the children function (scorer)
    its heap reads, the builder, and the stop rule (``cost``: CaDDTree's throughput rule over the
    verify-cost model; None: the fixed budget)."""
    drafter: str | None
    scorer: str | None
    builder: str
    stop: str | None = None


SCORERS = {   # name -> (block, drafter, embed, tree config, depth) -> scorer
    "marginal": lambda b, d, e, tc, depth: MarginalScorer(b, tc.node_topk, tc.corr_topm),
    "static": lambda b, d, e, tc, depth: StaticScorer(b, d, e, tc.node_topk, tc.corr_topm, depth),
    "conditional": lambda b, d, e, tc, depth: ConditionalScorer(b, d, e, tc.node_topk, tc.corr_topm),
}


def _greedy_chain(block, drafter, embed, scorer, root, tc, depth, stop):
    toks, lps = greedy_chain(block)
    return _chain(root, toks[:depth], lps[:depth], lps[:depth])


def _domino_chain(block, drafter, embed, scorer, root, tc, depth, stop):
    toks, lps, margs = domino_chain(block, drafter, embed, depth)
    return _chain(root, toks, lps, margs)


def _marginal_lazy(block, drafter, embed, scorer, root, tc, depth, stop):
    """DDTree's lazy heap over the per-depth top-``budget`` marginals (CaDDTree with ``stop``)."""
    logits = block.base_logits[:depth]
    vals, ids = top_logprobs(logits, min(tc.budget, logits.shape[-1]))
    return build_lazy(ids.tolist(), vals.tolist(), root, tc.budget, stop=stop)


def _heap(block, drafter, embed, scorer, root, tc, depth, stop):
    """The reference best-first heap (CondAdaptive with ``stop``)."""
    if stop is not None:
        return adaptive.build_adaptive(scorer, root, block.root_state, tc, depth, stop)
    return build_reference(scorer, root, None, tc, depth)


# builder name -> fn; "selected" is the builder named in DecodeConfig (python, graph, frontier)
FIXED_BUILDERS = {"greedy-chain": _greedy_chain, "domino-chain": _domino_chain, "lazy": _marginal_lazy,
                  "heap": _heap}

METHOD_TABLE = {
    #               drafter    scorer          builder          stop rule
    "ar":           MethodRow(None,     None,          "root"),
    "dflash":       MethodRow("dflash", None,          "greedy-chain"),
    "ddtree":       MethodRow("dflash", None,          "lazy"),
    "caddtree":     MethodRow("dflash", None,          "lazy",          "cost"),
    "domino":       MethodRow("domino", None,          "domino-chain"),
    "marg":         MethodRow("domino", "marginal",    "heap"),
    "condstatic":   MethodRow("domino", "static",      "heap"),
    "dominotree":   MethodRow("domino", "conditional", "selected"),
    "condadaptive": MethodRow("domino", "conditional", "heap",          "cost"),
}
assert {m: r.drafter for m, r in METHOD_TABLE.items()} == METHOD_DRAFTER, "METHOD_TABLE and config disagree"


def usable_depths(cfg: DecodeConfig) -> int | None:
    """How many depths of a draft block the method can use, when fewer than the block: a tree of
    ``budget`` nodes reaches depth ``budget`` at most (chains use the whole block), and
    ``max_depth`` caps both. None: all of them."""
    limits = [cfg.tree.max_depth] if cfg.tree.max_depth is not None else []
    if METHOD_TABLE[cfg.method].builder not in ("greedy-chain", "domino-chain", "root"):
        limits.append(cfg.tree.budget)
    return min(limits) if limits else None


# A block's draft rows cost the drafter in proportion (its products are compute-bound on a CPU),
# while a small tree reads only its first few depths. Cut to those depths alone, the block loses
# the trailing masks the drafter was trained with: on 18 held-out prompts (embedded pair, T = 0,
# draft vocabulary 8192) dominotree@2's tau fell from 1.52 to 1.42 with 2 rows, but 8 rows kept
# every tau measured (dominotree@2/@3, ddtree@3 within 0.01; scripts/experiments/draft_rows_tau.py,
# results/cheap-rounds/draft_rows_tau.txt) at 0.8x the 16-row backbone time.
DRAFT_MIN_ROWS = 8


def block_rows(cfg, depths: int | None) -> int:
    """Rows of the drafter's block for a tree that reads ``depths`` depths (None: all): enough for
    them, at least ``DRAFT_MIN_ROWS``, at most the trained block."""
    if depths is None:
        return cfg.block_size
    need = depths if cfg.shift_label else depths + 1     # a DFlash block's first row is the root
    return min(cfg.block_size, max(DRAFT_MIN_ROWS, need))
