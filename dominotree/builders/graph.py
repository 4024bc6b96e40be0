"""The graph builder: the reference's Python heap, the per-node work on static buffers.

Same signature and the identical tree as ``reference.build_reference``. The heap stays in Python
because pops are data-dependent; only the fixed-shape per-node work is written against static
buffers, once, as two bodies that read only static inputs and write only static outputs
(style rules 5 and 7, after Domino-Tree's ``GraphNodeExpander``):

- ``_node_body``: children at depth >= 2 of the node whose state is ``S_state``: the correction
  ``SiLU(W1 [z_d ; s])`` on the Top-M candidates of depth d, log-softmax over the M, top-K, and
  the K-way GRU step for the children's states.
- ``_base_body``: the root's children (depth 1 is path-independent): the K-way GRU step only.

One body, two execution modes. On CUDA each body is captured once per key (shapes, dtype,
device, weights) with ``torch.cuda.graph`` after warm-up on a side stream and replayed per pop,
with one host sync per pop (pinned copy of K tokens / log-probs / base log-probs). On CPU (or
with ``DOMINOTREE_GRAPH_EAGER=1``, or for a key whose capture failed) the same bodies run
eagerly, which already removes most of the reference's per-node Python and operator overhead.

Lifecycle: ``NodeExpander(...)`` allocates, ``capture()`` records, ``begin_round(scorer)``
copies the round's Top-M setup in (the scorer has already computed it), ``expand(...)`` replays.

Identity: every op is the reference's op on the same shapes and dtypes (batch-1 correction,
K-row GRU), so results are bit-identical. The one substitution is on CPU: the GRU step is
written out as torch ops (``mm`` + gates, the exact sequence ``aten::gru`` runs on CPU) to skip
``nn.GRU``'s overhead; it is used only after a self-check against ``drafter.gru_step`` on this
machine passes bit for bit, otherwise the module itself is called.
"""
from __future__ import annotations

import heapq
import os
import warnings
from collections import OrderedDict

import torch
import torch.nn.functional as F

from ..config import TreeConfig
from ..scoring import ConditionalScorer
from ..trace import Menu
from ..tree import Tree
from .reference import Built, build_reference

EAGER_ENV = "DOMINOTREE_GRAPH_EAGER"
WARMUP = 3
_CACHE_SIZE = 8


def graphs_enabled(device: torch.device) -> bool:
    """CUDA graphs are used on CUDA unless ``DOMINOTREE_GRAPH_EAGER=1``."""
    return device.type == "cuda" and os.environ.get(EAGER_ENV, "").lower() not in ("1", "true", "yes")


def supports(scorer) -> bool:
    """Only DominoTree's conditional scorer has per-node work; other scorers use the reference."""
    return type(scorer) is ConditionalScorer and scorer.block.z is not None


class NodeExpander:
    """Static buffers and the per-node bodies for one key; see the module docstring.

    Static inputs (``S_`` prefix) are written before a replay; static outputs (``O_`` prefix)
    are what the last run wrote. Aliasing: in graph mode the next replay overwrites every
    ``O_`` tensor, so callers clone what they keep (``expand`` does).
    """

    def __init__(self, scorer: ConditionalScorer, use_graphs: bool | None = None):
        block, drafter = scorer.block, scorer.drafter
        self.drafter, self.embed = drafter, scorer.embed
        self.dtype = scorer.dtype
        self.device = block.base_logits.device
        self.full_vocab = scorer.topm == 0
        d, v = block.base_logits.shape
        self.D, self.V = d, v
        self.k1 = int(scorer.root_children[1].shape[0])            # root's children
        self.k2 = min(scorer.k, scorer.topm or v)                  # deeper children
        self.use_graphs = graphs_enabled(self.device) if use_graphs is None else use_graphs
        self.captured = False
        # weights, read in place (never copied: the graphs see later in-place weight updates)
        self.W1 = drafter.embed_proj[0].weight                     # [E, H+G]
        self.W2 = drafter.embed_proj[2].weight                     # [V, E] (full-vocab mode)
        gru = drafter.prefix_gru
        self.WihT, self.WhhT = gru.weight_ih_l0.t(), gru.weight_hh_l0.t()
        self.G = gru.hidden_size
        self.gru_mode = "module" if self.device.type != "cpu" else self._pick_gru_mode()
        self._allocate(scorer)

    # --- allocate -------------------------------------------------------------------------
    def _allocate(self, scorer: ConditionalScorer) -> None:
        z = scorer.block.z
        dev, m = self.device, (scorer.topm or 1)
        e = self.W1.shape[0]
        self.S_z = torch.zeros_like(z)                                          # [D, H]
        self.S_base_lp = torch.zeros(self.D, self.V, device=dev)                # [D, V] fp32
        self.S_cand = torch.zeros(self.D, m, dtype=torch.long, device=dev)      # [D, M]
        self.S_w2c = torch.zeros(self.D, m, e, device=dev)                      # [D, M, E] fp32
        self.S_basec = torch.zeros(self.D, m, device=dev)                       # [D, M] fp32
        self.S_base_logits = (torch.zeros_like(scorer.block.base_logits)
                              if self.full_vocab else None)                     # [D, V] model dtype
        self.S_row = torch.zeros(1, dtype=torch.long, device=dev)               # block row = child depth - 1
        self.S_state = torch.zeros(1, self.G, dtype=self.dtype, device=dev)     # [1, G]
        self.S_root_toks = torch.zeros(self.k1, dtype=torch.long, device=dev)   # [K1]
        self.O_node = self.O_base = None
        if self.use_graphs:
            self.H_pack = torch.zeros(3, self.k2, dtype=torch.float64, pin_memory=True)

    def begin_round(self, scorer: ConditionalScorer) -> None:
        """Copy in the round's Top-M setup (in eager mode: bind the scorer's tensors, no copy)."""
        src = {"S_z": scorer.block.z, "S_base_lp": scorer.base_lp}
        if self.full_vocab:
            src["S_base_logits"] = scorer.block.base_logits
        else:
            src.update(S_cand=scorer.cand, S_w2c=scorer.w2c, S_basec=scorer.basec)
        for name, t in src.items():
            buf = getattr(self, name)
            if t.dtype != buf.dtype or t.shape != buf.shape:   # a silent cast would change numerics
                raise ValueError(f"{name}: got {t.dtype} {tuple(t.shape)}, expected {buf.dtype} {tuple(buf.shape)}")
            if self.captured:
                buf.copy_(t)
            else:
                setattr(self, name, t)

    # --- the bodies (one definition, eager or captured) --------------------------------------
    def _gru(self, emb: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """K-way GRU step from one state: ``scorer.child_states`` (``drafter.gru_step``)."""
        h0 = state.expand(emb.shape[0], -1)                           # == state.view(1,-1).expand(K,-1)
        if self.gru_mode == "module":
            return self.drafter.gru_step(emb, h0)                     # == reference line
        # aten::gru's CPU cell, op for op (checked bit-exact in _pick_gru_mode)
        h0 = h0.contiguous()
        ig = torch.mm(emb, self.WihT)                                 # linear_ih (folded to mm)
        hg = torch.mm(h0, self.WhhT)                                  # linear_hh
        i_r, i_z, i_n = ig.unsafe_chunk(3, 1)
        h_r, h_z, h_n = hg.unsafe_chunk(3, 1)
        r = h_r.add_(i_r).sigmoid_()
        u = h_z.add_(i_z).sigmoid_()
        n = i_n.add(h_n.mul_(r)).tanh_()
        return (h0 - n).mul_(u).add_(n)

    def _embed(self, toks: torch.Tensor) -> torch.Tensor:
        emb = self.embed
        if type(emb) is torch.nn.Embedding and emb.max_norm is None:
            out = F.embedding(toks, emb.weight)                       # == self.embed(toks)
        else:
            out = emb(toks)
        return out.to(self.dtype)

    def _node_body(self) -> dict:
        """Children at depth row+1 >= 2 of the node in ``S_state`` (ConditionalScorer.children)."""
        row, state = self.S_row, self.S_state
        z = self.S_z.index_select(0, row)                                      # == block.z[row:row+1]
        if self.full_vocab:
            corr = self.drafter.correction(z, state)
            full = (self.S_base_logits.index_select(0, row) + corr).float()[0]  # == reference line
            lp, cand = torch.log_softmax(full, dim=-1), None
        else:
            x = torch.cat([z, state], dim=-1)                                  # == torch.cat([z, s])
            h = F.silu(F.linear(x, self.W1)).float()                           # == correction_hidden(z, s).float()
            w2c = self.S_w2c.index_select(0, row)[0]                           # == w2c[row]
            basec = self.S_basec.index_select(0, row)[0]                       # == basec[row]
            corrected = basec + (h @ w2c.T)[0]                                 # == reference line
            lp = torch.log_softmax(corrected, dim=-1)
            cand = self.S_cand.index_select(0, row)[0]
        vals, local = torch.topk(lp, self.k2)
        toks = cand.index_select(0, local) if cand is not None else local    # == cand[local]
        base = self.S_base_lp.view(-1).index_select(0, row * self.V + toks)  # == base_lp[row][toks]
        states = self._gru(self._embed(toks), state)
        pack = torch.stack([toks.double(), vals.double(), base.double()])    # [3, K] for one host copy
        return {"pack": pack, "states": states}

    def _base_body(self) -> dict:
        """The root's children's states (their tokens and scores are the scorer's root_children)."""
        return {"states": self._gru(self._embed(self.S_root_toks), self.S_state)}

    # --- capture ----------------------------------------------------------------------------
    def capture(self) -> bool:
        """Warm up on a side stream, then record both bodies. False (eager from then on) on failure."""
        if not self.use_graphs or self.captured:
            return self.captured
        for name in ("S_z", "S_base_lp", "S_cand", "S_w2c", "S_basec", "S_base_logits"):
            t = getattr(self, name)
            if t is not None and not t.is_contiguous():
                setattr(self, name, t.contiguous())
            if t is not None:   # own the buffers from now on (begin_round copies into them)
                setattr(self, name, getattr(self, name).clone())
        try:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            prev = torch.cuda.get_sync_debug_mode()
            torch.cuda.set_sync_debug_mode("error")       # a body that syncs the host cannot be captured
            try:
                with torch.cuda.stream(side):
                    for _ in range(WARMUP):
                        self._node_body()
                        self._base_body()
            finally:
                torch.cuda.set_sync_debug_mode(prev)
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.g_node, self.g_base = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.g_node):
                self.O_node = self._node_body()
            with torch.cuda.graph(self.g_base, pool=self.g_node.pool()):
                self.O_base = self._base_body()
            self.captured = True
        except Exception as e:  # eager fallback for a key we cannot capture
            warnings.warn(f"graph builder: CUDA graph capture failed, running eagerly ({e})")
            self.use_graphs, self.captured = False, False
        return self.captured

    def can_run(self) -> bool:
        return self.captured

    # --- replay -------------------------------------------------------------------------
    def expand(self, state: torch.Tensor, depth: int) -> tuple[list, list, list, torch.Tensor]:
        """Children at ``depth`` >= 2 of a node with GRU state ``state`` [G]:
        (tokens, log-probs, base log-probs) as Python lists and the [K, G] child states (owned)."""
        if self.captured:
            self.S_row.fill_(depth - 1)
            self.S_state.copy_(state.view(1, -1))
            self.g_node.replay()
            self.H_pack.copy_(self.O_node["pack"], non_blocking=True)
            states = self.O_node["states"].clone()        # the next replay overwrites O_node
            torch.cuda.current_stream(self.device).synchronize()   # the one host sync per pop
            toks, vals, base = self.H_pack.tolist()
        else:
            self.S_row = self._row_tensor(depth - 1)
            self.S_state = state.view(1, -1)
            out = self._node_body()
            states = out["states"]
            toks, vals, base = out["pack"].tolist()
        return [int(t) for t in toks], vals, base, states

    def expand_root(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        """[K1, G] states of the root's children ``toks`` from the root state."""
        if self.captured:
            self.S_state.copy_(state.view(1, -1))
            self.S_root_toks.copy_(toks)
            self.g_base.replay()
            return self.O_base["states"].clone()
        self.S_state, self.S_root_toks = state.view(1, -1), toks
        return self._base_body()["states"]

    def _row_tensor(self, row: int) -> torch.Tensor:
        rows = getattr(self, "_rows", None)
        if rows is None:
            rows = self._rows = [torch.tensor([r], dtype=torch.long, device=self.device) for r in range(self.D)]
        return rows[row]

    # --- self-check -----------------------------------------------------------------------
    def _pick_gru_mode(self) -> str:
        """Use the written-out GRU only where it equals ``drafter.gru_step`` bit for bit here."""
        if os.environ.get("DOMINOTREE_GRAPH_GRU", "") == "module":
            return "module"
        self.gru_mode = "ops"
        gen = torch.Generator().manual_seed(0)
        h, g = self.W1.shape[1] - self.G, self.G
        with torch.inference_mode():
            for k in sorted({self.k1, self.k2}):
                for _ in range(2):
                    emb = torch.randn(k, h, generator=gen).to(self.dtype)
                    st = torch.randn(1, g, generator=gen).to(self.dtype)
                    ref = self.drafter.gru_step(emb, st.expand(k, -1))
                    if not torch.equal(self._gru(emb, st), ref):
                        return "module"
        return "ops"


_EXPANDERS: OrderedDict = OrderedDict()


def _key(scorer: ConditionalScorer) -> tuple:
    d = scorer.drafter
    b = scorer.block
    ptrs = tuple(t.data_ptr() for t in (d.embed_proj[0].weight, d.embed_proj[2].weight,
                                        d.prefix_gru.weight_ih_l0, d.prefix_gru.weight_hh_l0,
                                        scorer.embed.weight if hasattr(scorer.embed, "weight") else b.z))
    m = scorer.w2c.shape if scorer.topm else None
    return (str(b.base_logits.device), scorer.dtype, tuple(b.base_logits.shape), tuple(b.z.shape),
            m, scorer.topm, scorer.k, int(scorer.root_children[1].shape[0]), ptrs,
            graphs_enabled(b.base_logits.device))


def expander_for(scorer: ConditionalScorer) -> NodeExpander:
    """The cached expander for this scorer's key (allocated and captured on first use)."""
    key = _key(scorer)
    exp = _EXPANDERS.get(key)
    if exp is None:
        exp = NodeExpander(scorer)
        _EXPANDERS[key] = exp
        while len(_EXPANDERS) > _CACHE_SIZE:
            _EXPANDERS.popitem(last=False)
    else:
        _EXPANDERS.move_to_end(key)
    return exp


def build_graph(scorer, root_token: int, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """``build_reference`` with the per-node work replayed from static buffers."""
    if not supports(scorer):
        return build_reference(scorer, root_token, root_state, cfg, max_depth)
    with torch.inference_mode():
        exp = expander_for(scorer)
        exp.begin_round(scorer)
        if exp.use_graphs and not exp.captured:
            exp.capture()
            exp.begin_round(scorer)
        return _best_first(scorer, exp, root_token, root_state, cfg, max_depth)


def _best_first(scorer, exp: NodeExpander, root_token, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """The reference's heap, line for line; children come from the expander."""
    tokens, parents, depths, scores, margs = [int(root_token)], [-1], [0], [0.0], [0.0]
    menus: list[Menu] = []
    heap: list = []
    tie = 0

    def push(row, depth, cum, marg, toks, lps, bases, states):
        nonlocal tie
        menus.append(Menu(row, depth, toks, lps, bases, scorer.ranks(depth, toks)))
        for k, (tok, lp, blp) in enumerate(zip(toks, lps, bases)):
            heapq.heappush(heap, (-(cum + lp), tie, tok, depth, row, states, k, marg + blp))
            tie += 1

    vals, rtoks = scorer.root_children
    root_states = exp.expand_root(root_state, rtoks)
    push(0, 1, 0.0, 0.0, rtoks.tolist(), vals.tolist(), scorer.base_of(1, rtoks), root_states)
    while heap and len(tokens) - 1 < cfg.budget:
        neg, _, tok, depth, parent, states, k, marg = heapq.heappop(heap)
        row = len(tokens)
        tokens.append(tok); parents.append(parent); depths.append(depth)
        scores.append(-neg); margs.append(marg)
        # the last node's children could never be used: skip the wasted expansion
        if depth < max_depth and len(tokens) - 1 < cfg.budget:
            toks, lps, bases, st = exp.expand(states[k], depth + 1)
            push(row, depth + 1, -neg, marg, toks, lps, bases, st)
    return Built(Tree(tokens, parents, depths, scores, margs), menus)
