"""Rebuild a recorded round under other settings, from that round's drafter outputs, without the target.

A round's tree is a pure function of its draft block (per-depth base logits, the drafter's rows
``z`` that the GRU correction reads, the GRU's root state) and the build settings (method, Top-M,
K, budget, draft vocabulary). Keep the block, and any setting can be changed after the fact: the
tree is built again by ``Decoder.build``, the same code path and ``METHOD_TABLE`` row as the
round itself, so the round's own settings give back its own tree exactly
(``tests/test_rebuild.py`` checks ``==`` for every method).

What the rebuilt tree would have accepted is exact at T = 0: the target's token at a tree row is
its greedy continuation of that row's path, and the continuation of the round's root is what the
run committed from this round on (the rounds are lossless: every method's T = 0 output equals
``ar``'s), so the accepted path is the longest path of the rebuilt tree that follows it. When a
path follows it to the end of what was decoded the count is a lower bound (``exact`` False). At
T > 0 the accepted path depends on the target's samples, which a different tree would have drawn
differently: nothing about acceptance is claimed then.

Where the block comes from:
- live rounds: the ``KeepBlocks`` observer (after the timed stages; ``live.generate`` passes it)
  calls ``keep``, which stores the block in ``STORE`` (bounded, off unless a viewer enables it)
  under a key in ``rt.extra``, and the drafter's rows in ``rt.draft`` for saved traces;
- saved traces (schema 2): ``rt.draft`` holds the rows ``z`` and the root state (float32, base64,
  ``D x H`` floats a round, about 49 KB for the embedded pair's 16 x 576); the base logits are the
  loaded target's LM head on them again, so a replay rebuilds only with the model that decoded it.
  Older traces carry no rows: ``unavailable`` says why.
"""
from __future__ import annotations

import base64
import dataclasses
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import torch

from ..config import BOUNDS, METHOD_DRAFTER, ConfigError, DecodeConfig, TreeConfig
from ..methods import METHOD_TABLE
from ..observe import Observer, RoundState, StageClock
from ..scoring import DraftBlock
from ..trace import DecodeTrace, RoundTrace
from ..tree import Tree, child_maps

SCORERS = ("conditional", "marginal", "condstatic")
# the scorer each method's tree is built with (None: a chain, which has no scorer to change)
def _scorer_of(row) -> str | None:
    """The scorer a ``METHOD_TABLE`` row builds its tree with, by the names a viewer picks from
    (DDTree's lazy heap reads the marginals; a chain has no scorer to change)."""
    if row.scorer is not None:
        return {"static": "condstatic"}.get(row.scorer, row.scorer)
    return "marginal" if row.builder == "lazy" else None


# the scorer each method's tree is built with, read off the one method table
SCORER_OF = {m: _scorer_of(row) for m, row in METHOD_TABLE.items()}
# a scorer on a drafter kind -> the method whose build that is
METHOD_OF = {("domino", "conditional"): "dominotree", ("domino", "marginal"): "marg",
             ("domino", "condstatic"): "condstatic", ("dflash", "marginal"): "ddtree"}
UNKNOWN = -1            # a tree row whose target token is not known exactly


class RebuildError(ConfigError):
    """A rebuild that cannot be made; the message says why and what would work."""


@dataclass(frozen=True)
class Settings:
    """What a rebuild may change. ``draft_vocab`` 0 is the full vocabulary."""
    scorer: str | None
    topm: int
    k: int
    budget: int
    draft_vocab: int = 0


def own_settings(trace: DecodeTrace, rt: RoundTrace) -> Settings:
    """The settings the round was built with."""
    cfg = trace.config if isinstance(trace.config, dict) else {}
    tc = cfg.get("tree") if isinstance(cfg.get("tree"), dict) else {}
    d = TreeConfig()
    return Settings(SCORER_OF.get(rt.method), int(tc.get("corr_topm", d.corr_topm)), int(tc.get("node_topk", d.node_topk)),
                    int(tc.get("budget", d.budget)), int(cfg.get("draft_vocab") or 0))


# --- what a round keeps ----------------------------------------------------------------------------

@dataclass
class Kept:
    """One round's draft block and the config it was built with."""
    block: DraftBlock
    cfg: DecodeConfig

    @property
    def nbytes(self) -> int:
        b = self.block
        return sum(t.numel() * t.element_size() for t in (b.base_logits, b.z, b.root_state) if t is not None)


class DraftStore:
    """Kept blocks of live rounds by key, the oldest dropped past ``max_bytes`` (0: keep nothing;
    a viewer turns it on with ``enable``). A full-vocabulary block of the embedded pair is about
    3 MB (16 x 49152 float32 logits), so 512 MiB holds some 170 rounds."""

    def __init__(self, max_bytes: int = 0):
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, Kept] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def enable(self, max_bytes: int = 512 * 2**20) -> None:
        self.max_bytes = max_bytes

    def put(self, key: str, kept: Kept) -> None:
        with self._lock:
            self._items[key] = kept
            self._bytes += kept.nbytes
            while self._bytes > self.max_bytes and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= old.nbytes

    def get(self, key) -> Kept | None:
        with self._lock:
            return self._items.get(key) if isinstance(key, str) else None

    def __len__(self) -> int:
        return len(self._items)


STORE = DraftStore()


def keep(store: DraftStore, rt: RoundTrace, block: DraftBlock, cfg: DecodeConfig) -> None:
    """Keep ``block`` in ``store`` for live rebuilds, and the drafter's rows in the trace for saved
    ones (nothing while the store is off)."""
    if store.max_bytes <= 0 or block is None or block.z is None:
        return
    kept = Kept(DraftBlock(block.root, block.base_logits.detach().clone(), block.z.detach().clone(),
                           None if block.root_state is None else block.root_state.detach().clone()), cfg)
    key = uuid.uuid4().hex
    store.put(key, kept)
    rt.extra["draft_key"] = key
    rt.draft = rows_dict(kept.block, cfg)


class KeepBlocks(Observer):
    """Keeps every round's draft block (``keep``), after the round's timed stages; a viewer's
    decode passes it to ``Decoder.generate`` (``live.generate``)."""

    def __init__(self, store: DraftStore | None = None):
        self.store = STORE if store is None else store

    def after_round(self, decoder, state: RoundState, rt: RoundTrace) -> None:
        keep(self.store, rt, state.block, state.cfg)


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.detach().to("cpu", torch.float32).contiguous().numpy().tobytes()).decode("ascii")


def _unb64(s: str, shape) -> torch.Tensor:
    import numpy as np
    raw = base64.b64decode(s.encode("ascii"), validate=True)
    if list(shape) == [-1]:            # a vector of whatever length it holds
        shape = [len(raw) // 4]
    n = 1
    for x in shape:
        n *= int(x)
    if len(raw) != 4 * n:
        raise RebuildError(f"the trace's drafter rows hold {len(raw) // 4} numbers, not {n}")
    return torch.from_numpy(np.frombuffer(raw, dtype=np.float32).copy()).view(*[int(x) for x in shape])


def rows_dict(block: DraftBlock, cfg: DecodeConfig) -> dict:
    """The part of a block a saved trace keeps (``RoundTrace.draft``): the drafter's rows and the
    root state, float32 (exact for float32 and bfloat16 drafters), and the draft vocabulary."""
    d = {"rows": _b64(block.z), "shape": list(block.z.shape), "draft_vocab": int(cfg.draft_vocab)}
    if block.root_state is not None:
        d["root_state"] = _b64(block.root_state)
    return d


def unavailable(trace: DecodeTrace, rt: RoundTrace, decoder=None) -> str:
    """Why this round cannot be rebuilt ('' when it can)."""
    if rt.method == "ar":
        return "ar drafts nothing: there is no draft block to rebuild a tree from"
    if STORE.get(rt.extra.get("draft_key")) is not None:
        return ""
    if not rt.draft:
        return ("this trace keeps no drafter rows (saved before trace schema 2, or decoded without a viewer); "
                "run the prompt again to rebuild its rounds")
    if decoder is None:
        return "rebuilding a saved round needs the model that decoded it loaded"
    mine, theirs = model_key(decoder), {k: (trace.model or {}).get(k) for k in ("preset", "paths", "dtype", "weights")}
    if mine != theirs:
        return (f"this trace was decoded by {theirs.get('preset')} ({theirs.get('dtype')}, {theirs.get('weights')}); "
                f"its rounds rebuild only with that model loaded (loaded: {mine.get('preset')}, {mine.get('dtype')}, "
                f"{mine.get('weights')})")
    return ""


def model_key(decoder) -> dict:
    """What a saved trace's ``model`` must match for its rows to rebuild here (``Decoder.generate``)."""
    t = decoder.target
    return {"preset": decoder.pair.name, "paths": decoder.pair.paths,
            "dtype": str(t.dtype).replace("torch.", ""), "weights": t.weights}


def _kept(decoder, trace: DecodeTrace, rt: RoundTrace) -> Kept:
    why = unavailable(trace, rt, decoder)
    if why:
        raise RebuildError(why)
    kept = STORE.get(rt.extra.get("draft_key"))
    if kept is not None:
        return kept
    # a saved round: the rows again, and the base logits from the loaded target's head on them
    d = rt.draft
    try:
        z = _unb64(d["rows"], d["shape"])
        state = _unb64(d["root_state"], [-1]) if d.get("root_state") else None
        n = int(d.get("draft_vocab") or 0)
    except (KeyError, TypeError, ValueError) as e:
        raise RebuildError(f"the trace's drafter rows cannot be read ({e})") from None
    drafter = decoder.pair.drafter_for(rt.method)
    dtype, tgt = drafter.fc.weight.dtype, decoder.target
    z = z.to(tgt.device, dtype)
    rows = z.to(tgt.dtype)
    base = tgt.logits(rows) if n == 0 else decoder.draft_vocab(n).logits(rows)
    cfg = trace_config(trace, rt)
    return Kept(DraftBlock(int(rt.tree.tokens[0]), base, z, None if state is None else state.to(tgt.device, dtype)), cfg)


def trace_config(trace: DecodeTrace, rt: RoundTrace) -> DecodeConfig:
    """The DecodeConfig a recorded round ran with (from the trace's config dict)."""
    c = dict(trace.config) if isinstance(trace.config, dict) else {}
    fields = {f.name for f in dataclasses.fields(DecodeConfig)}
    tree = TreeConfig(**{k: v for k, v in (c.get("tree") or {}).items() if k in {f.name for f in dataclasses.fields(TreeConfig)}})
    kw = {k: v for k, v in c.items() if k in fields and k != "tree"}
    return DecodeConfig(**{**kw, "method": rt.method, "tree": tree})


# --- the rebuild -----------------------------------------------------------------------------------

@dataclass
class Rebuilt:
    """A rebuilt round: ``round`` is drawable like any RoundTrace (its accepted path and bonus are
    the exact T = 0 ones; at T > 0 only the root, with bonus -1). ``exact``: True when the accepted
    count is exact, False when it is a lower bound, None at T > 0."""
    round: RoundTrace
    settings: Settings
    method: str
    exact: bool | None
    accepted_tokens: list[int]
    only_rebuilt: list[int] = field(default_factory=list)    # rows whose path is not in the actual tree
    only_actual: list[int] = field(default_factory=list)     # actual rows whose path is not rebuilt
    path_changed: bool = False
    notes: list[str] = field(default_factory=list)
    ms: float = 0.0

    @property
    def accepted(self) -> int:
        """Draft tokens the rebuilt tree accepts (a lower bound when ``exact`` is False)."""
        return len(self.accepted_tokens)


def method_for(round_method: str, scorer: str | None) -> str:
    """The method whose build a scorer change on a round of ``round_method`` makes."""
    if scorer is None or scorer == SCORER_OF.get(round_method):
        return round_method
    if scorer not in SCORERS:
        raise RebuildError(f"unknown scorer {scorer!r}; choose one of {', '.join(SCORERS)}")
    kind = METHOD_DRAFTER.get(round_method)
    m = METHOD_OF.get((kind, scorer))
    if m is None:
        raise RebuildError(f"the {scorer} scorer needs Domino's GRU correction, and this round drafted with "
                           f"{kind} (no correction head): choose marginal")
    return m


def check_settings(s: Settings) -> None:
    """Refuse impossible settings with a message (the rebuild changes nothing then)."""
    for name, label, v in (("corr_topm", "Top-M", s.topm), ("node_topk", "K", s.k), ("budget", "Budget", s.budget),
                           ("draft_vocab", "Draft vocabulary", s.draft_vocab)):
        try:
            BOUNDS[name].check(v, label)
        except ConfigError as e:
            raise RebuildError(str(e)) from None
    if s.budget == 0:
        raise RebuildError("Budget 0 is plain decoding: there is no tree to rebuild; choose 1 or more")
    if s.topm and s.k > s.topm:
        raise RebuildError(f"K ({s.k}) cannot exceed Top-M ({s.topm}): a node's children are drawn from the "
                           f"Top-M candidates; raise Top-M or lower K")


def continuation(trace: DecodeTrace, i: int) -> list[int]:
    """The tokens the run committed from round ``i`` on: at T = 0, the target's greedy
    continuation of round ``i``'s root."""
    return [t for rt in trace.rounds[i:] for t in rt.committed]


def greedy_walk(tree: Tree, cont: list[int]) -> tuple[list[int], int, bool]:
    """(accepted rows from the root, bonus token, exact) of ``tree`` against the greedy
    continuation ``cont``; not exact (a lower bound, bonus -1) when the walk uses all of it."""
    maps, rows = child_maps(tree), [0]
    for tok in cont:
        nxt = maps[rows[-1]].get(tok)
        if nxt is None:
            return rows, tok, True
        rows.append(nxt)
    return rows, -1, False


def _path_keys(tree: Tree) -> list[tuple[int, ...]]:
    keys: list[tuple[int, ...]] = [()]
    for i in range(1, len(tree.tokens)):
        keys.append(keys[tree.parents[i]] + (tree.tokens[i],))
    return keys


def tree_diff(actual: Tree, rebuilt: Tree) -> tuple[list[int], list[int]]:
    """(rebuilt rows whose root path the actual tree lacks, actual rows the rebuilt tree lacks)."""
    ka, kr = _path_keys(actual), _path_keys(rebuilt)
    sa, sr = set(ka), set(kr)
    return [i for i, k in enumerate(kr) if k not in sa], [i for i, k in enumerate(ka) if k not in sr]


@torch.inference_mode()
def rebuild(decoder, trace: DecodeTrace, i: int, settings: Settings) -> Rebuilt:
    """Round ``i`` of ``trace`` rebuilt with ``settings`` from its kept draft block (no target
    forward; the draft vocabulary, when changed, reruns only the LM head on the drafter's rows).
    Run it where the model's torch work runs (the explorer's model thread)."""
    from ..builders import get_builder
    from ..config import default_builder
    t0 = time.perf_counter()
    if not 0 <= i < len(trace.rounds):
        raise RebuildError(f"no round {i + 1} in this run ({len(trace.rounds)} rounds)")
    rt = trace.rounds[i]
    check_settings(settings)
    method = method_for(rt.method, settings.scorer)
    kept = _kept(decoder, trace, rt)
    block, cfg = kept.block, kept.cfg
    drafter = decoder.pair.drafter_for(method)
    notes = []
    n = settings.draft_vocab
    vocab = decoder.draft_vocab(n) if n else None
    if n != cfg.draft_vocab:         # the LM head again on the drafter's rows, over the other vocabulary
        rows = block.z.to(decoder.target.dtype)
        base = decoder.target.logits(rows) if vocab is None else vocab.logits(rows)
        block = DraftBlock(block.root, base, block.z, block.root_state)
    try:
        tree_cfg = TreeConfig(budget=settings.budget, corr_topm=settings.topm, node_topk=settings.k,
                              max_depth=cfg.tree.max_depth)
    except ConfigError as e:
        raise RebuildError(str(e)) from None
    new_cfg = replace(cfg, method=method, tree=tree_cfg, draft_vocab=n, ab_builder=None)
    try:
        decoder.check([block.root], new_cfg)     # the drafter, the draft vocabulary, a cost model where needed
    except ConfigError as e:
        raise RebuildError(str(e)) from None
    limit = min(settings.budget, drafter.cfg.block_size if drafter is not None else settings.budget)
    if block.depth < limit:
        notes.append(f"this round drafted {block.depth} depths (its budget was {cfg.tree.budget}), so the rebuilt "
                     f"tree is at most {block.depth} deep")
    if settings.budget < 16 and cfg.tree.budget >= 16:
        notes.append("a run at this budget drafts with a block cut to its depths (at least 8 rows), so its drafts "
                     "could differ slightly")
    builder = get_builder(cfg.builder or default_builder(decoder.target.device))
    built, _, _ = decoder.build(cfg=new_cfg, drafter=drafter, block=block, root=block.root, start=rt.start,
                                builder=builder, ab=None, clock=StageClock(), vocab=vocab)
    tree = built.tree
    only_r, only_a = tree_diff(rt.tree, tree)
    greedy = rt.temperature < 1e-5
    if greedy:
        rows, bonus, exact = greedy_walk(tree, continuation(trace, i))
        target = [UNKNOWN] * len(tree.tokens)
        for a, b in zip(rows, rows[1:]):
            target[a] = tree.tokens[b]
        if bonus >= 0:
            target[rows[-1]] = bonus
        acc_tokens = [tree.tokens[r] for r in rows[1:]]
        changed = acc_tokens != [rt.tree.tokens[r] for r in rt.accepted[1:]]
    else:
        rows, bonus, exact, target, acc_tokens, changed = [0], -1, None, [UNKNOWN] * len(tree.tokens), [], False
    ms = (time.perf_counter() - t0) * 1e3
    new_rt = RoundTrace(round=rt.round, start=rt.start, method=method, builder=rt.builder, temperature=rt.temperature,
                        tree=tree, target_tokens=target, accepted=rows, bonus=bonus, stage_ms={"build": ms},
                        menus=built.menus, extra={"rebuilt_from": rt.method, "settings": dataclasses.asdict(settings)})
    return Rebuilt(new_rt, settings, method, exact, acc_tokens, only_r, only_a, changed, notes, ms)
