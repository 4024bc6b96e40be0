"""The graph builder: the reference's Python heap, the per-node work on static buffers.

Same signature and the identical tree as ``reference.build_reference``. The heap stays in Python
because pops are data-dependent; only the fixed-shape per-node work is written against static
buffers, once, as two bodies that read only static inputs and write only static outputs
(style rules 5 and 7, after Domino-Tree's ``GraphNodeExpander``):

- ``_corr_body``: the children menu of a node at child depth d >= 2: ``SiLU(W1 [z_d ; s])`` on the
  Top-M candidates of depth d, log-softmax over the M, top-K, and the base log-probs.
- ``_gru_body``: the K children's GRU states from their parent's (``models/childgru.py``).

One body, two execution modes. On CUDA each body is captured once per key (shapes, dtype, device,
weights) with ``capture.record_bodies`` (warm-up on a side stream, then ``torch.cuda.graph``, all
under the host-sync guard) and replayed, with one host sync per pop (a pinned copy of the K
tokens, log-probs, base log-probs and ranks). On CPU, for the float32 Top-M scorer with the
children's GRU table, the heap and both bodies run as one C++ op (``native.py``: the same ATen ops,
the same bits); elsewhere on CPU (or with ``DOMINOTREE_GRAPH_EAGER=1``, or for a key whose capture
failed) the bodies run eagerly from Python; ``capture_info`` says which, and why.

Lifecycle: ``NodeExpander(scorer)`` allocates, ``capture(scorer)`` binds the round into owned
buffers (every depth prepared before the region: nothing in the bodies reads the host) and
records, ``begin_round(scorer)`` copies each round's Top-M setup in (the scorer computed it;
eagerly the tensors are just bound), ``menu(...)`` / ``child_states(...)`` replay.

The GRU step runs lazily: the reference computes the K children's states of every expanded node,
but a child's state is only read when that child is itself expanded, so the builder runs a
family's GRU step the first time one of its children is popped for expansion (the same call
on the same K tokens, so the same bits) and never for nodes none of whose children is expanded.

Identity: every op is the reference's op on the same shapes and dtypes (batch-1 correction, the
shared ``ChildGRU`` step of a family's K children), so results are bit-identical.
"""
from __future__ import annotations

import heapq
import warnings
from collections import OrderedDict

import torch
import torch.nn.functional as F

from ..config import TreeConfig
from ..scoring import ConditionalScorer
from ..trace import Menu
from ..tree import Tree
from .capture import CAPTURED, REFERENCE, Capture, failed, graphs_enabled, initial, record_bodies
from .native import build_native, native_inputs
from .reference import Built, build_reference

_CACHE_SIZE = 8
_ROUND_INPUTS = ("S_z", "S_base_lp", "S_cand", "S_w2c", "S_basec", "S_base_logits")


def supports(scorer) -> bool:
    """Only DominoTree's conditional scorer has per-node work; other scorers use the reference."""
    if type(scorer) is not ConditionalScorer or scorer.block.z is None:
        return False
    return min(scorer.k, scorer.V) == min(scorer.k, scorer.topm or scorer.V)   # K children fit the Top-M


def reference_capture(scorer) -> Capture:
    """The record of a round the Python heap built because ``supports(scorer)`` is False."""
    return Capture(REFERENCE, f"{type(scorer).__name__}: no per-node work to capture, the Python heap ran")


def build_by_reference(scorer, root_token: int, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """A faster builder's round for a scorer it does not support: the reference's tree, with the
    record that says so (graph and frontier both)."""
    built = build_reference(scorer, root_token, root_state, cfg, max_depth)
    built.extra["capture"] = reference_capture(scorer).to_dict()
    return built


class NodeExpander:
    """Static buffers and the per-node bodies for one key; see the module docstring.

    Static inputs carry an ``S_`` prefix and are written before a run; static outputs are the
    ``O_corr`` / ``O_gru`` dicts. Aliasing: in graph mode the next replay overwrites every
    ``O_`` tensor, so ``menu`` / ``child_states`` clone what the caller keeps.
    """

    def __init__(self, scorer: ConditionalScorer, use_graphs: bool | None = None):
        block = scorer.block
        self.drafter, self.embed = scorer.drafter, scorer.embed
        self.dtype = scorer.dtype
        self.device = block.base_logits.device
        self.full_vocab = scorer.topm == 0
        self.D, self.V = block.base_logits.shape
        self.k = int(scorer.root_children[1].shape[0])             # K children per expansion
        self.use_graphs = graphs_enabled(self.device) if use_graphs is None else use_graphs
        self.captured = False
        self.capture_info = initial(self.device, self.use_graphs)
        self.owned = False        # True once the S_ buffers are ours (begin_round copies into them)
        self.pack_outputs = self.use_graphs   # one [4, K] float64 output for a single host copy
        # weights, read in place (never copied)
        self.W1 = scorer.w1                                        # [E, H+G]
        self.W1T = self.W1.t()
        self.gru = scorer.child_step()
        self.G = scorer.gru_size
        self._allocate(scorer)

    # --- allocate -------------------------------------------------------------------------
    def _allocate(self, scorer: ConditionalScorer) -> None:
        dev, m, e = self.device, (scorer.topm or 1), self.W1.shape[0]
        self.S_z = torch.zeros_like(scorer.block.z)                             # [D, H]
        self.S_base_lp = torch.zeros(self.D, self.V, device=dev)                # [D, V] fp32
        self.S_cand = torch.zeros(self.D, scorer.m, dtype=torch.long, device=dev)   # [D, M] (ranks' list)
        self.S_w2c = torch.zeros(self.D, m, e, device=dev)                      # [D, M, E] fp32
        self.S_basec = torch.zeros(self.D, m, device=dev)                       # [D, M] fp32
        self.S_base_logits = (torch.zeros_like(scorer.block.base_logits)
                              if self.full_vocab else None)                     # [D, V] model dtype
        # the per-node inputs; eagerly they are rebound to the caller's tensors (S_row to an int)
        self._static = dict(S_row=torch.zeros(1, dtype=torch.long, device=dev),   # block row = child depth - 1
                            S_state=torch.zeros(1, self.G, dtype=self.dtype, device=dev),   # [1, G]
                            S_toks=torch.zeros(self.k, dtype=torch.long, device=dev))       # [K] children to step
        for name, t in self._static.items():
            setattr(self, name, t)
        self.O_corr = self.O_gru = None
        self._row_views: dict = {}
        self._bound = False
        if self.use_graphs:
            self.H_pack = torch.zeros(4, self.k, dtype=torch.float64, device="cpu", pin_memory=True)   # host side

    def own_buffers(self) -> None:
        """Make the per-round inputs fixed-address buffers (needed before a capture)."""
        if not self.owned:
            for name in _ROUND_INPUTS:
                t = getattr(self, name)
                if t is not None:
                    setattr(self, name, t.clone(memory_format=torch.contiguous_format))
            self.owned = True

    def begin_round(self, scorer: ConditionalScorer) -> None:
        """Copy in the round's Top-M setup (eagerly: bind the scorer, whose depths are then
        prepared lazily, row by row, as the heap reaches them; no copy)."""
        self._row_views = {}
        self.scorer = scorer
        self._bound = False
        if not self.captured:      # a graph keeps the step it recorded; eagerly, follow the weights
            self.gru = scorer.child_step()
        if not self.owned:
            self.S_z = scorer.block.z
            return
        self._bind_all()

    def _bind_all(self) -> None:
        """Every depth's inputs into the ``S_`` buffers (copied when owned, else bound): what the
        fixed-shape program needs, since it indexes rows by a device tensor."""
        scorer = self.scorer
        self._bound = True
        scorer.prepare_all()                       # every depth, batched, no host reads
        src = {"S_z": scorer.block.z, "S_base_lp": scorer.base_lp, "S_cand": scorer.cand}
        if self.full_vocab:
            src["S_base_logits"] = scorer.block.base_logits
        else:
            src.update(S_w2c=scorer.w2c, S_basec=scorer.basec)
        for name, t in src.items():
            buf = getattr(self, name)
            if t.dtype != buf.dtype or t.shape != buf.shape:   # a silent cast would change numerics
                raise ValueError(f"{name}: got {t.dtype} {tuple(t.shape)}, expected {buf.dtype} {tuple(buf.shape)}")
            if self.owned:
                buf.copy_(t)
            else:
                setattr(self, name, t)

    # --- the bodies (one definition, eager or captured) --------------------------------------
    def _rows(self) -> tuple:
        """Block row ``S_row`` of the round inputs: (z [1,H], basec [M], w2c^T [E,M], cand [M],
        base_lp [V], base_logits [1,V]); ``cand`` is the depth's Top-M list (the ranks' reference,
        also in full-vocabulary scoring). Eagerly ``S_row`` is an int and the views are made once
        per row and round; under capture it is a device tensor and these are ``index_select``s."""
        r = self.S_row
        if isinstance(r, int):
            got = self._row_views.get(r)
            if got is None:
                got = self._row_views[r] = self._scorer_rows(r)
            return got
        if not self._bound:
            self._bind_all()
        return self._select_rows(lambda t: t.index_select(0, r)[0])

    def _scorer_rows(self, r: int) -> tuple:
        """Eagerly: block row ``r`` straight from the scorer (prepared on first use), or from the
        owned buffers once they hold the round (graph mode)."""
        if self.owned:
            return self._select_rows(lambda t: t[r])
        d = self.scorer.row(r + 1)
        z = self.S_z[r].unsqueeze(0)                                          # == block.z[row:row+1]
        if self.full_vocab:
            return z, None, None, d.cand, d.lp, self.scorer.block.base_logits[r].unsqueeze(0)
        return z, d.basec, d.w2c.T, d.cand, d.lp, None

    def root_base_lp(self) -> torch.Tensor:
        """[V] fp32 base log-softmax of depth 1 (the root's children)."""
        return self.S_base_lp[0] if self.owned else self.scorer.row(1).lp

    def _select_rows(self, pick) -> tuple:
        z = pick(self.S_z).unsqueeze(0)                                       # == block.z[row:row+1]
        if self.full_vocab:
            return z, None, None, pick(self.S_cand), pick(self.S_base_lp), pick(self.S_base_logits).unsqueeze(0)
        return z, pick(self.S_basec), pick(self.S_w2c).T, pick(self.S_cand), pick(self.S_base_lp), None

    def _corr_body(self) -> dict:
        """``ConditionalScorer.corrected_logprobs`` + top-K for the node in ``S_state``."""
        state = self.S_state
        z, basec, w2cT, cand, base_lp, base_logits = self._rows()
        if self.full_vocab:
            full = (base_logits + self.drafter.correction(z, state)).float()[0]   # == reference line
            lp = torch.log_softmax(full, dim=-1)
        else:
            x = torch.cat([z, state], dim=-1)                                  # == torch.cat([z, s], -1)
            h = F.silu(torch.mm(x, self.W1T))                  # == correction_hidden(z, s) (linear -> mm)
            if h.dtype != torch.float32:
                h = h.float()                                                  # == .float()
            corrected = basec + torch.mm(h, w2cT)[0]                           # == basec[row] + (h @ w2c[row].T)[0]
            lp = torch.log_softmax(corrected, dim=-1)
        vals, local = torch.topk(lp, self.k)
        if self.full_vocab:
            toks = local
            hit = toks.unsqueeze(1) == cand.unsqueeze(0)                      # [K, M]
            ranks = torch.where(hit.any(1), hit.int().argmax(1), -1)         # == scorer.ranks (first match)
        else:
            toks = cand.index_select(0, local)                                # == cand[local]
            ranks = local                                                     # cand is sorted: rank = index
        base = base_lp.index_select(0, toks)                                  # == base_lp[row][toks]
        if not self.pack_outputs:
            return {"toks": toks, "vals": vals, "base": base, "ranks": ranks}
        return {"toks": toks, "pack": torch.stack([toks.double(), vals.double(), base.double(), ranks.double()])}

    def _gru_body(self) -> dict:
        """``ConditionalScorer.child_states(S_state, S_toks)``: the K children's states from their
        parent's ``S_state`` [1, G]."""
        return {"states": self.gru(self.S_state, self.S_toks)}              # == reference line

    # --- capture ----------------------------------------------------------------------------
    def record(self, scorer: ConditionalScorer) -> tuple[list, list]:
        """The capture region: bind ``scorer``'s round into owned buffers (host work, before the
        region), then warm up and record both bodies (``capture.record_bodies``: graphs on CUDA,
        an eager dry run under the same host-sync guard elsewhere)."""
        self.own_buffers()
        for name, t in self._static.items():          # the bodies read the static per-node inputs
            setattr(self, name, t)
        self.pack_outputs = True
        self.begin_round(scorer)
        return record_bodies([self._corr_body, self._gru_body], self.device, "the graph builder's capture")

    def capture(self, scorer: ConditionalScorer) -> bool:
        """Record both bodies as CUDA graphs. False (eager from then on, and why in
        ``capture_info``) on failure."""
        if not self.use_graphs or self.captured:
            return self.captured
        try:
            (self.g_corr, self.g_gru), (self.O_corr, self.O_gru) = self.record(scorer)
            self.captured = True
            self.capture_info = Capture(CAPTURED)
        except Exception as e:  # eager fallback for a key we cannot capture
            warnings.warn(f"graph builder: CUDA graph capture failed, running eagerly ({e})")
            self.use_graphs, self.captured = False, False
            self.capture_info = failed(e)
            for name, t in self._static.items():
                setattr(self, name, t)
        return self.captured

    def can_run(self) -> bool:
        """Whether ``menu`` / ``child_states`` replay graphs (else they run the bodies eagerly)."""
        return self.captured

    # --- replay -------------------------------------------------------------------------
    def menu(self, state: torch.Tensor, depth: int) -> tuple[list[int], list[float], list[float], list[int], torch.Tensor]:
        """Children menu at ``depth`` >= 2 of a node with GRU state ``state`` [1, G]: tokens,
        log-probs, base log-probs, ranks (host lists) and the tokens as a tensor (owned)."""
        if self.captured:
            self.S_row.fill_(depth - 1)
            self.S_state.copy_(state)
            self.g_corr.replay()
            self.H_pack.copy_(self.O_corr["pack"], non_blocking=True)
            toks_t = self.O_corr["toks"].clone()          # the next replay overwrites O_corr
            torch.cuda.current_stream(self.device).synchronize()   # the one host sync per pop
            toks, vals, base, ranks = self.H_pack.tolist()
            return [int(t) for t in toks], vals, base, [int(r) for r in ranks], toks_t
        self.S_row, self.S_state = depth - 1, state
        out = self._corr_body()
        if self.pack_outputs:     # owned buffers after a dry-run capture (tests): the packed output
            toks, vals, base, ranks = out["pack"].tolist()
            return [int(t) for t in toks], vals, base, [int(r) for r in ranks], out["toks"]
        return (out["toks"].tolist(), out["vals"].tolist(), out["base"].tolist(), out["ranks"].tolist(),
                out["toks"])

    def child_states(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        """[K, G] states of children ``toks`` of a node with state ``state`` (owned)."""
        if self.captured:
            self.S_state.copy_(state)
            self.S_toks.copy_(toks)
            self.g_gru.replay()
            return self.O_gru["states"].clone()           # the next replay overwrites O_gru
        self.S_state, self.S_toks = state, toks
        return self._gru_body()["states"]


def _key(scorer: ConditionalScorer) -> tuple:
    d, b = scorer.drafter, scorer.block
    ptrs = tuple(t.data_ptr() for t in (d.embed_proj[0].weight, d.embed_proj[2].weight,
                                        d.prefix_gru.weight_ih_l0, d.prefix_gru.weight_hh_l0))
    emb = scorer.embed.weight.data_ptr() if hasattr(scorer.embed, "weight") else id(scorer.embed)
    m = (scorer.D, scorer.topm, d.embed_proj[2].weight.shape[1]) if scorer.topm else None
    return (str(b.base_logits.device), scorer.dtype, tuple(b.base_logits.shape), tuple(b.z.shape),
            m, scorer.topm, int(scorer.root_children[1].shape[0]), ptrs, emb,
            graphs_enabled(b.base_logits.device))


_EXPANDERS: OrderedDict = OrderedDict()


def expander_for(scorer: ConditionalScorer) -> NodeExpander:
    """The cached expander for this scorer's key (allocated on first use, captured on CUDA)."""
    key = _key(scorer)
    return lru_get(_EXPANDERS, key, lambda: NodeExpander(scorer), _CACHE_SIZE)


def lru_get(cache, key, make, size: int):
    """``cache[key]`` (an OrderedDict), made with ``make()`` on a miss; keeps the ``size`` newest."""
    item = cache.get(key)
    if item is None:
        item = cache[key] = make()
        while len(cache) > size:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return item


def build_graph(scorer, root_token: int, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """``build_reference`` with the per-node work replayed from static buffers (on CPU, where it
    applies, the whole heap in one C++ op: ``native``)."""
    if not supports(scorer):
        return build_by_reference(scorer, root_token, root_state, cfg, max_depth)
    weights = native_inputs(scorer)
    if weights is not None:
        return build_native(scorer, weights, root_token, root_state, cfg, max_depth)
    with torch.inference_mode():
        exp = expander_for(scorer)
        if exp.use_graphs and not exp.captured:
            exp.capture(scorer)
        exp.begin_round(scorer)
        built = _best_first(scorer, exp, root_token, root_state, cfg, max_depth)
    built.extra["capture"] = exp.capture_info.to_dict()
    return built


class _Family:
    """An expanded node's K children: their tokens, and their states once someone needs them."""
    __slots__ = ("state", "toks", "tok_list", "states")

    def __init__(self, state, toks, tok_list):
        self.state, self.toks, self.tok_list = state, toks, tok_list
        self.states = None          # [K, G] from the family's GRU step, once needed


def _child_state(exp: NodeExpander, family: _Family, k: int):
    """The [1, G] state of child ``k`` of ``family``: the family's GRU step (exactly the
    reference's call) runs the first time one of its children needs a state."""
    if family.states is None:
        family.states = exp.child_states(family.state, family.toks)
    return family.states[k:k + 1]                      # == ch.states[k].view(1, -1)


def _best_first(scorer, exp: NodeExpander, root_token, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """The reference's heap, line for line; menus come from ``exp``, child states lazily."""
    tokens, parents, depths, scores, margs = [int(root_token)], [-1], [0], [0.0], [0.0]
    menus: list[Menu] = []
    heap: list = []
    tie = 0

    def push(row, depth, cum, marg, toks, lps, bases, ranks, family):
        nonlocal tie
        menus.append(Menu(row, depth, toks, lps, bases, ranks))
        for k, (tok, lp, blp) in enumerate(zip(toks, lps, bases)):
            heapq.heappush(heap, (-(cum + lp), tie, tok, depth, row, family, k, marg + blp))
            tie += 1

    vals, rtoks = scorer.root_children                 # depth 1: path-independent (scorer.children)
    rt = rtoks.tolist()
    push(0, 1, 0.0, 0.0, rt, vals.tolist(), scorer.base_of(1, rtoks), scorer.ranks(1, rt),
         _Family(root_state.view(1, -1), rtoks, rt))
    while heap and len(tokens) - 1 < cfg.budget:
        neg, _, tok, depth, parent, family, k, marg = heapq.heappop(heap)
        row = len(tokens)
        tokens.append(tok); parents.append(parent); depths.append(depth)
        scores.append(-neg); margs.append(marg)
        # the last node's children could never be used: skip the wasted expansion
        if depth < max_depth and len(tokens) - 1 < cfg.budget:
            state = _child_state(exp, family, k)
            toks, lps, bases, ranks, toks_t = exp.menu(state, depth + 1)
            push(row, depth + 1, -neg, marg, toks, lps, bases, ranks, _Family(state, toks_t, toks))
    return Built(Tree(tokens, parents, depths, scores, margs), menus)
