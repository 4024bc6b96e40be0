"""The graph builder: the reference's Python heap, the per-node work on static buffers.

Same signature and the identical tree as ``reference.build_reference``. The heap stays in Python
because pops are data-dependent; only the fixed-shape per-node work is written against static
buffers, once, as two bodies that read only static inputs and write only static outputs
(style rules 5 and 7, after Domino-Tree's ``GraphNodeExpander``):

- ``_corr_body``: the children menu of a node at child depth d >= 2: ``SiLU(W1 [z_d ; s])`` on the
  Top-M candidates of depth d, log-softmax over the M, top-K, and the base log-probs.
- ``_gru_body``: the K-way GRU step giving the K children's states from their parent's state.

One body, two execution modes. On CUDA each body is captured once per key (shapes, dtype, device,
weights) with ``torch.cuda.graph`` after warm-up on a side stream and replayed, with one host sync
per pop (a pinned copy of the K tokens, log-probs and base log-probs). On CPU (or with
``DOMINOTREE_GRAPH_EAGER=1``, or for a key whose capture failed) the same bodies run eagerly.

Lifecycle: ``NodeExpander(scorer)`` allocates, ``capture()`` records, ``begin_round(scorer)``
copies the round's Top-M setup in (the scorer computed it; eagerly the tensors are just bound),
``menu(...)`` / ``child_states(...)`` replay.

The GRU step runs lazily: the reference computes the K children's states of every expanded node,
but a child's state is only read when that child is itself expanded, so the builder runs a
node's K-row GRU step the first time one of its children is popped for expansion (the same call
on the same K tokens, so the same bits) and never for nodes none of whose children is expanded.

Identity: every op is the reference's op on the same shapes and dtypes (batch-1 correction,
K-row GRU), so results are bit-identical. The one substitution is on CPU: the GRU step is written
out as torch ops (``mm`` + gates, the sequence ``aten::gru`` runs on CPU) to skip ``nn.GRU``'s
overhead; it is used only after a self-check against ``drafter.gru_step`` passes bit for bit on
this machine and these shapes, otherwise the module itself is called.
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
_ROUND_INPUTS = ("S_z", "S_base_lp", "S_cand", "S_w2c", "S_basec", "S_base_logits")


def graphs_enabled(device: torch.device) -> bool:
    """CUDA graphs are used on CUDA unless ``DOMINOTREE_GRAPH_EAGER=1``."""
    return device.type == "cuda" and os.environ.get(EAGER_ENV, "").lower() not in ("1", "true", "yes")


def supports(scorer) -> bool:
    """Only DominoTree's conditional scorer has per-node work; other scorers use the reference."""
    if type(scorer) is not ConditionalScorer or scorer.block.z is None:
        return False
    v = scorer.base_lp.shape[-1]
    return int(scorer.root_children[1].shape[0]) == min(scorer.k, scorer.topm or v)


class NodeExpander:
    """Static buffers and the per-node bodies for one key; see the module docstring.

    Static inputs carry an ``S_`` prefix and are written before a run; static outputs are the
    ``O_corr`` / ``O_gru`` dicts. Aliasing: in graph mode the next replay overwrites every
    ``O_`` tensor, so ``menu`` / ``child_states`` clone what the caller keeps.
    """

    def __init__(self, scorer: ConditionalScorer, use_graphs: bool | None = None):
        block, drafter = scorer.block, scorer.drafter
        self.drafter, self.embed = drafter, scorer.embed
        self.dtype = scorer.dtype
        self.device = block.base_logits.device
        self.full_vocab = scorer.topm == 0
        self.D, self.V = block.base_logits.shape
        self.k = int(scorer.root_children[1].shape[0])             # K children per expansion
        self.use_graphs = graphs_enabled(self.device) if use_graphs is None else use_graphs
        self.captured = False
        self.owned = False        # True once the S_ buffers are ours (begin_round copies into them)
        self.pack_outputs = self.use_graphs   # one [3, K] float64 output for a single host copy
        # weights, read in place (never copied)
        self.W1 = drafter.embed_proj[0].weight                     # [E, H+G]
        gru = drafter.prefix_gru
        self.WihT, self.WhhT = gru.weight_ih_l0.t(), gru.weight_hh_l0.t()
        self.G = gru.hidden_size
        self._allocate(scorer)
        self.gru_mode = "module" if self.device.type != "cpu" else self._pick_gru_mode()

    # --- allocate -------------------------------------------------------------------------
    def _allocate(self, scorer: ConditionalScorer) -> None:
        dev, m, e = self.device, (scorer.topm or 1), self.W1.shape[0]
        self.S_z = torch.zeros_like(scorer.block.z)                             # [D, H]
        self.S_base_lp = torch.zeros(self.D, self.V, device=dev)                # [D, V] fp32
        self.S_cand = torch.zeros(self.D, m, dtype=torch.long, device=dev)      # [D, M]
        self.S_w2c = torch.zeros(self.D, m, e, device=dev)                      # [D, M, E] fp32
        self.S_basec = torch.zeros(self.D, m, device=dev)                       # [D, M] fp32
        self.S_base_logits = (torch.zeros_like(scorer.block.base_logits)
                              if self.full_vocab else None)                     # [D, V] model dtype
        self.S_row = torch.zeros(1, dtype=torch.long, device=dev)  # block row = child depth - 1 (eager: an int)
        self.S_state = torch.zeros(1, self.G, dtype=self.dtype, device=dev)     # [1, G]
        self.S_toks = torch.zeros(self.k, dtype=torch.long, device=dev)         # [K] children to step
        self.O_corr = self.O_gru = None
        if self.use_graphs:
            self.H_pack = torch.zeros(3, self.k, dtype=torch.float64, pin_memory=True)

    def own_buffers(self) -> None:
        """Make the per-round inputs fixed-address buffers (needed before a capture)."""
        if not self.owned:
            for name in _ROUND_INPUTS:
                t = getattr(self, name)
                if t is not None:
                    setattr(self, name, t.clone(memory_format=torch.contiguous_format))
            self.owned = True

    def begin_round(self, scorer: ConditionalScorer) -> None:
        """Copy in the round's Top-M setup (eagerly: bind the scorer's tensors, no copy)."""
        src = {"S_z": scorer.block.z, "S_base_lp": scorer.base_lp}
        if self.full_vocab:
            src["S_base_logits"] = scorer.block.base_logits
        else:
            src.update(S_cand=scorer.cand, S_w2c=scorer.w2c, S_basec=scorer.basec)
        for name, t in src.items():
            buf = getattr(self, name)
            if t.dtype != buf.dtype or t.shape != buf.shape:   # a silent cast would change numerics
                raise ValueError(f"{name}: got {t.dtype} {tuple(t.shape)}, expected {buf.dtype} {tuple(buf.shape)}")
            if self.owned:
                buf.copy_(t)
            else:
                setattr(self, name, t)

    # --- the bodies (one definition, eager or captured) --------------------------------------
    def _row(self, t: torch.Tensor) -> torch.Tensor:
        """``t[row]``: a view with an int row (eager), ``index_select`` on ``S_row`` (graph)."""
        if isinstance(self.S_row, int):
            return t[self.S_row]
        return t.index_select(0, self.S_row)[0]

    def _corr_body(self) -> dict:
        """``ConditionalScorer.corrected_logprobs`` + top-K for the node in ``S_state``."""
        state = self.S_state
        z = self._row(self.S_z).unsqueeze(0)                               # == block.z[row:row+1]
        if self.full_vocab:
            corr = self.drafter.correction(z, state)
            full = (self._row(self.S_base_logits).unsqueeze(0) + corr).float()[0]   # == reference line
            lp, cand = torch.log_softmax(full, dim=-1), None
        else:
            x = torch.cat([z, state], dim=-1)                              # == torch.cat([z, s], -1)
            h = F.silu(F.linear(x, self.W1)).float()                       # == correction_hidden(z, s).float()
            corrected = self._row(self.S_basec) + (h @ self._row(self.S_w2c).T)[0]   # == reference line
            lp = torch.log_softmax(corrected, dim=-1)
            cand = self._row(self.S_cand)
        vals, local = torch.topk(lp, self.k)
        toks = cand.index_select(0, local) if cand is not None else local   # == cand[local]
        base = self._row(self.S_base_lp).index_select(0, toks)            # == base_lp[row][toks]
        if not self.pack_outputs:
            return {"toks": toks, "vals": vals, "base": base}
        return {"toks": toks, "pack": torch.stack([toks.double(), vals.double(), base.double()])}

    def _gru_body(self) -> dict:
        """``ConditionalScorer.child_states(S_state, S_toks)``: one K-row GRU step."""
        emb = self.embed
        if type(emb) is torch.nn.Embedding and emb.max_norm is None:
            x = F.embedding(self.S_toks, emb.weight).to(self.dtype)       # == self.embed(toks).to(dtype)
        else:
            x = emb(self.S_toks).to(self.dtype)
        h0 = self.S_state.expand(x.shape[0], -1)                          # == state.view(1,-1).expand(K,-1)
        if self.gru_mode == "module":
            return {"states": self.drafter.gru_step(x, h0)}              # == reference line
        # aten::gru's CPU cell, op for op (checked bit-exact in _pick_gru_mode)
        h0 = h0.contiguous()
        ig = torch.mm(x, self.WihT)                                       # linear_ih (folded to mm)
        hg = torch.mm(h0, self.WhhT)                                      # linear_hh
        g = self.G
        if self.gru_mode == "fused":       # reset and update gates in one add_/sigmoid_ (elementwise)
            ru = hg[:, :2 * g].add_(ig[:, :2 * g]).sigmoid_()
            r, u = ru[:, :g], ru[:, g:]
        else:
            r = hg[:, :g].add_(ig[:, :g]).sigmoid_()
            u = hg[:, g:2 * g].add_(ig[:, g:2 * g]).sigmoid_()
        n = ig[:, 2 * g:].add(hg[:, 2 * g:].mul_(r)).tanh_()
        return {"states": (h0 - n).mul_(u).add_(n)}

    # --- capture ----------------------------------------------------------------------------
    def capture(self) -> bool:
        """Warm up on a side stream, then record both bodies. False (eager from then on) on failure."""
        if not self.use_graphs or self.captured:
            return self.captured
        self.own_buffers()
        try:
            side = torch.cuda.Stream(device=self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with sync_check(), torch.cuda.stream(side):
                for _ in range(WARMUP):
                    self._corr_body()
                    self._gru_body()
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.g_corr, self.g_gru = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.g_corr):
                self.O_corr = self._corr_body()
            with torch.cuda.graph(self.g_gru, pool=self.g_corr.pool()):
                self.O_gru = self._gru_body()
            self.captured = True
        except Exception as e:  # eager fallback for a key we cannot capture
            warnings.warn(f"graph builder: CUDA graph capture failed, running eagerly ({e})")
            self.use_graphs, self.captured = False, False
        return self.captured

    def can_run(self) -> bool:
        """Whether ``menu`` / ``child_states`` replay graphs (else they run the bodies eagerly)."""
        return self.captured

    # --- replay -------------------------------------------------------------------------
    def menu(self, state: torch.Tensor, depth: int) -> tuple[list[int], list[float], list[float], torch.Tensor]:
        """Children menu at ``depth`` >= 2 of a node with GRU state ``state`` [G]: tokens,
        log-probs, base log-probs (host lists) and the tokens as a tensor (owned)."""
        if self.captured:
            self.S_row.fill_(depth - 1)
            self.S_state.copy_(state.view(1, -1))
            self.g_corr.replay()
            self.H_pack.copy_(self.O_corr["pack"], non_blocking=True)
            toks_t = self.O_corr["toks"].clone()          # the next replay overwrites O_corr
            torch.cuda.current_stream(self.device).synchronize()   # the one host sync per pop
            toks, vals, base = self.H_pack.tolist()
            return [int(t) for t in toks], vals, base, toks_t
        self.S_row, self.S_state = depth - 1, state.view(1, -1)
        out = self._corr_body()
        return out["toks"].tolist(), out["vals"].tolist(), out["base"].tolist(), out["toks"]

    def child_states(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        """[K, G] states of children ``toks`` of a node with state ``state`` (owned)."""
        if self.captured:
            self.S_state.copy_(state.view(1, -1))
            self.S_toks.copy_(toks)
            self.g_gru.replay()
            return self.O_gru["states"].clone()           # the next replay overwrites O_gru
        self.S_state, self.S_toks = state.view(1, -1), toks
        return self._gru_body()["states"]

    # --- self-check -----------------------------------------------------------------------
    def _pick_gru_mode(self) -> str:
        """The fastest written-out GRU that equals ``drafter.gru_step`` bit for bit here."""
        forced = os.environ.get("DOMINOTREE_GRAPH_GRU", "")
        if forced in ("module", "ops", "fused"):
            return forced
        gen = torch.Generator().manual_seed(0)
        vocab = self.embed.weight.shape[0] if hasattr(self.embed, "weight") else self.V
        keep = self.S_state, self.S_toks
        trials = []
        with torch.inference_mode():
            for _ in range(3):
                st = torch.randn(1, self.G, generator=gen).to(self.dtype)
                toks = torch.randint(0, vocab, (self.k,), generator=gen)
                ref = self.drafter.gru_step(self.embed(toks).to(self.dtype), st.expand(self.k, -1))
                trials.append((st, toks, ref))
            for mode in ("fused", "ops"):
                self.gru_mode = mode
                ok = True
                for st, toks, ref in trials:
                    self.S_state, self.S_toks = st, toks
                    ok = ok and torch.equal(self._gru_body()["states"], ref)
                if ok:
                    break
            else:
                mode = "module"
        self.S_state, self.S_toks = keep
        return mode


class sync_check:
    """During warm-up, make any host sync in a body an error (NVIDIA's capture checklist)."""

    def __enter__(self):
        self.prev = torch.cuda.get_sync_debug_mode()
        torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode(self.prev)
        return False


def _key(scorer: ConditionalScorer) -> tuple:
    d, b = scorer.drafter, scorer.block
    ptrs = tuple(t.data_ptr() for t in (d.embed_proj[0].weight, d.embed_proj[2].weight,
                                        d.prefix_gru.weight_ih_l0, d.prefix_gru.weight_hh_l0))
    emb = scorer.embed.weight.data_ptr() if hasattr(scorer.embed, "weight") else id(scorer.embed)
    m = tuple(scorer.w2c.shape) if scorer.topm else None
    return (str(b.base_logits.device), scorer.dtype, tuple(b.base_logits.shape), tuple(b.z.shape),
            m, scorer.topm, int(scorer.root_children[1].shape[0]), ptrs, emb,
            graphs_enabled(b.base_logits.device))


_EXPANDERS: OrderedDict = OrderedDict()


def expander_for(scorer: ConditionalScorer) -> NodeExpander:
    """The cached expander for this scorer's key (allocated on first use, captured on CUDA)."""
    key = _key(scorer)
    exp = _EXPANDERS.get(key)
    if exp is None:
        exp = _EXPANDERS[key] = NodeExpander(scorer)
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
        if exp.use_graphs and not exp.captured:
            exp.begin_round(scorer)
            exp.capture()
        exp.begin_round(scorer)
        return _best_first(scorer, exp, root_token, root_state, cfg, max_depth)


class _Family:
    """An expanded node's K children: their tokens, and their states once someone needs them."""
    __slots__ = ("state", "toks", "states")

    def __init__(self, state, toks):
        self.state, self.toks, self.states = state, toks, None


def _best_first(scorer, exp: NodeExpander, root_token, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """The reference's heap, line for line; menus come from ``exp``, child states lazily."""
    tokens, parents, depths, scores, margs = [int(root_token)], [-1], [0], [0.0], [0.0]
    menus: list[Menu] = []
    heap: list = []
    tie = 0

    def push(row, depth, cum, marg, toks, lps, bases, family):
        nonlocal tie
        menus.append(Menu(row, depth, toks, lps, bases, scorer.ranks(depth, toks)))
        for k, (tok, lp, blp) in enumerate(zip(toks, lps, bases)):
            heapq.heappush(heap, (-(cum + lp), tie, tok, depth, row, family, k, marg + blp))
            tie += 1

    vals, rtoks = scorer.root_children                 # depth 1: path-independent (scorer.children)
    push(0, 1, 0.0, 0.0, rtoks.tolist(), vals.tolist(), scorer.base_of(1, rtoks), _Family(root_state, rtoks))
    while heap and len(tokens) - 1 < cfg.budget:
        neg, _, tok, depth, parent, family, k, marg = heapq.heappop(heap)
        row = len(tokens)
        tokens.append(tok); parents.append(parent); depths.append(depth)
        scores.append(-neg); margs.append(marg)
        # the last node's children could never be used: skip the wasted expansion
        if depth < max_depth and len(tokens) - 1 < cfg.budget:
            if family.states is None:                 # the parent's K-row GRU step, on first need
                family.states = exp.child_states(family.state, family.toks)
            state = family.states[k]
            toks, lps, bases, toks_t = exp.menu(state, depth + 1)
            push(row, depth + 1, -neg, marg, toks, lps, bases, _Family(state, toks_t))
    return Built(Tree(tokens, parents, depths, scores, margs), menus)
