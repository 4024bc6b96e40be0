"""Children functions: given a node's state and the depth of its children, the menu of K
children with their scores. Builders only ever call ``scorer.children(state, depth)``.

- ``MarginalScorer``: per-depth top-K of the full-vocabulary base log-softmax (DDTree, ``marg``).
- ``ConditionalScorer``: Domino's GRU correction re-run along each node's own path, restricted
  to the Top-M base candidates of that depth (``dominotree``).
- ``StaticScorer``: the correction computed once per depth along the greedy chain, shared by
  every node at that depth (``condstatic``).

Depths are 1-indexed: the root's children are at depth 1, drawn from block row 0.
"""
from __future__ import annotations

import os
import weakref
from dataclasses import dataclass

import torch

from .models.childgru import ChildGRU, child_gru
from .models.linear import onednn_product, routed_product

EAGER_ENV = "DOMINOTREE_EAGER_DEPTHS"


@dataclass
class DraftBlock:
    """One drafter forward: per-depth base logits (row d-1 is depth d) and what the head needs."""
    root: int
    base_logits: torch.Tensor            # [D, V] model dtype
    z: torch.Tensor | None = None        # [D, H] backbone hidden states (Domino)
    root_state: torch.Tensor | None = None  # [G] GRU state after consuming the root (Domino)

    @property
    def depth(self) -> int:
        return self.base_logits.shape[0]


@dataclass
class Children:
    tokens: list[int]
    logprobs: list[float]          # heap-score increments as this method scores them
    base_logprobs: list[float]     # uncorrected full-vocabulary log-probs of the same tokens
    ranks: list[int]               # rank in the depth's Top-M base list (-1 outside it)
    states: torch.Tensor | None    # [K, G] child GRU states (conditional scorer only)


def top_candidates(logits: torch.Tensor, m: int) -> torch.Tensor:
    """Ids of the ``m`` largest of a row of logits [V], largest first: ``torch.topk(logits, m)[1]``
    (up to the order of exactly equal values); on CPU in float32 about 1.4x faster for m = 64 of 49k.

    Split the row into chunks of 64; the m chunks with the largest maxima hold the m largest
    logits (a logit in any other chunk is below m chunk maxima, so at best the (m+1)-th; with ties,
    an equal value is there instead), so the top m of those m x 64 values are the row's. Every
    scorer and builder prepares its depths with this one function, so they agree exactly
    (``tests/test_builders.py``; ``tests/test_scoring.py`` checks it against ``torch.topk``).
    """
    v, chunk = logits.shape[0], 64
    if logits.device.type != "cpu" or logits.dtype != torch.float32 or v % chunk or v < 8 * m * chunk:
        return torch.topk(logits, m)[1]
    ids = _CHUNK_IDS.get(v)
    if ids is None:
        ids = _CHUNK_IDS[v] = torch.arange(v, device=logits.device).view(v // chunk, chunk)
    rows = logits.view(v // chunk, chunk)
    best = torch.topk(rows.amax(dim=1), m)[1]                          # [m] chunks
    local = torch.topk(rows.index_select(0, best).view(-1), m)[1]      # [m] in the m x 64 values
    return ids.index_select(0, best).view(-1).index_select(0, local)


_CHUNK_IDS: dict[int, torch.Tensor] = {}


class _Depth:
    """One depth's prepared inputs: fp32 base log-softmax ``lp`` [V], Top-M candidates ``cand`` [M]
    and their ranks; for the conditional scorer also ``basec`` [M] and ``w2c`` [M, E] (fp32).

    Preparing reads nothing on the host (the graph builders prepare depths right before a CUDA
    graph capture, ``tests/test_syncguard.py``); the rank map, a host dict, is made on first use."""
    __slots__ = ("lp", "cand", "_rank", "basec", "w2c")

    def __init__(self, lp, cand):
        self.lp, self.cand = lp, cand
        self._rank = None
        self.basec = self.w2c = None

    @property
    def rank(self) -> dict[int, int]:
        """token id -> rank in ``cand`` (one host read of the candidates, on first use)."""
        if self._rank is None:
            self._rank = dict(zip(self.cand.tolist(), range(self.cand.shape[0])))
        return self._rank


class _BaseScores:
    """Per-round base log-softmax and Top-M candidate lists shared by all scorers.

    Lazy (the default): a depth is prepared (its row's log-softmax, Top-M, ranks and gathers) the
    first time a builder asks for it, i.e. when the heap first reaches that depth; a budget-16
    tree rarely reaches all 16. ``lazy=False`` (or ``DOMINOTREE_EAGER_DEPTHS=1``, to measure the
    difference) prepares every depth at construction in one batched
    call per op; each row of a batched log-softmax / top-k / gather is computed by the same kernel
    as the row alone, so both give the identical tree (``tests/test_builders.py`` checks ``==``).
    """

    def __init__(self, block: DraftBlock, topm: int, lazy: bool | None = None):
        if lazy is None:
            lazy = os.environ.get(EAGER_ENV, "").lower() not in ("1", "true", "yes")
        self.lazy = lazy
        self.block = block
        self.D, self.V = block.base_logits.shape
        self.topm = min(topm, self.V) if topm > 0 else 0
        self.m = self.topm or min(64, self.V)   # candidates shown in traces even for full-vocab scoring
        self._rows: list[_Depth | None] = [None] * self.D
        if not lazy:
            self.prepare_all()

    def prepare_all(self) -> None:
        """Prepare every depth not prepared yet, in one batched call per op (the eager mode, and
        what the graph builders bind before a capture); no host reads."""
        todo = [r for r, d in enumerate(self._rows) if d is None]
        if not todo:
            return
        logits = self.block.base_logits if len(todo) == self.D else self.block.base_logits[todo]
        lp = torch.log_softmax(logits.float(), dim=-1)                          # [n, V] fp32
        cand = torch.stack([top_candidates(r, self.m) for r in logits])        # [n, M]
        for i, r in enumerate(todo):
            self._rows[r] = _Depth(lp[i], cand[i])
        self._prepare_all(todo, logits, cand)

    def _prepare_all(self, todo: list[int], logits: torch.Tensor, cand: torch.Tensor) -> None:
        """Batched extras of ``prepare_all`` for block rows ``todo`` (the conditional scorer's gathers)."""

    def _prepare(self, r: int) -> _Depth:
        logits = self.block.base_logits[r]
        return _Depth(torch.log_softmax(logits.float(), dim=-1), top_candidates(logits, self.m))

    def row(self, depth: int) -> _Depth:
        """The prepared inputs of ``depth`` (1-indexed; block row ``depth - 1``), made on first use."""
        d = self._rows[depth - 1]
        if d is None:
            d = self._rows[depth - 1] = self._prepare(depth - 1)
        return d

    @property
    def prepared(self) -> int:
        """How many depths have been prepared so far."""
        return sum(d is not None for d in self._rows)

    def _stack(self, field: str) -> torch.Tensor:
        self.prepare_all()
        return torch.stack([getattr(self.row(d), field) for d in range(1, self.D + 1)])

    @property
    def base_lp(self) -> torch.Tensor:
        """[D, V] fp32 base log-softmax of every depth (prepares them all)."""
        return self._stack("lp")

    @property
    def cand(self) -> torch.Tensor:
        """[D, M] Top-M base candidates of every depth (prepares them all)."""
        return self._stack("cand")

    def ranks(self, depth: int, tokens: list[int]) -> list[int]:
        r = self.row(depth).rank
        return [r.get(t, -1) for t in tokens]

    def base_of(self, depth: int, tokens: torch.Tensor) -> list[float]:
        return self.row(depth).lp.index_select(0, tokens).tolist()

    def candidates(self) -> tuple[list[list[int]], list[list[float]]]:
        cand = self.cand
        return cand.tolist(), self.base_lp.gather(1, cand).tolist()


def top_logprobs(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log-probs, ids)`` of the ``k`` most likely tokens of each row, as the DDTree authors
    compute them: top-k of the float32 logits, minus their logsumexp. (``topk(log_softmax)`` is an
    ulp away in places, which decides exact ties otherwise.)"""
    x = logits.float()
    vals, ids = torch.topk(x, k, dim=-1)
    return vals - torch.logsumexp(x, dim=-1, keepdim=True), ids


class MarginalScorer(_BaseScores):
    """Every node at depth d gets the same menu: the top-K of the base distribution at d."""

    def __init__(self, block: DraftBlock, k: int, topm: int = 64, lazy: bool | None = None):
        super().__init__(block, topm, lazy)
        self.k = min(k, self.V)
        self._menus: list = [None] * self.D
        if not self.lazy:
            vals, ids = top_logprobs(block.base_logits, self.k)
            self._menus = [(i, v) for i, v in zip(ids.tolist(), vals.tolist())]

    def children(self, state, depth: int) -> Children:
        menu = self._menus[depth - 1]
        if menu is None:
            vals, ids = top_logprobs(self.block.base_logits[depth - 1], self.k)
            menu = self._menus[depth - 1] = (ids.tolist(), vals.tolist())
        toks, lps = menu
        return Children(toks, lps, lps, self.ranks(depth, toks), None)


class ConditionalScorer(_BaseScores):
    """DominoTree's children function: the GRU correction along the node's realized path.

    Depth 1 (``pure_draft_prefix_len`` = 1) is path-independent: top-K of the full-vocabulary
    base log-softmax. Deeper children: ``h = SiLU(W1·[z_d ; s])`` cast to fp32, corrected logits
    ``basec_d + h @ W2c_dᵀ`` over the Top-M base candidates (fp32), log-softmax over those M,
    top-K. Child GRU states come from one K-way step (``models/childgru.py``).
    """

    def __init__(self, block: DraftBlock, drafter, embed: torch.nn.Module, k: int, topm: int, lazy: bool | None = None):
        self.drafter, self.embed, self.k = drafter, embed, k
        self.dtype = drafter.fc.weight.dtype
        self.w2 = drafter.embed_proj[2].weight                                 # [V, E]
        super().__init__(block, topm, lazy)
        self._root_children = None

    @property
    def root_children(self):
        """``(log-probs, ids)`` of the root's K children, made on first use: depth 1 is
        path-independent, top-K of its full-vocabulary log-softmax, as the authors' code takes it
        (not the first K of the Top-M list: torch.topk picks other tokens among exact ties for
        another k). The C++ build (``builders/native.py``) makes its own and never asks."""
        if self._root_children is None:
            self._root_children = torch.topk(self.row(1).lp, min(self.k, self.V))
        return self._root_children

    def _prepare_all(self, todo: list[int], logits: torch.Tensor, cand: torch.Tensor) -> None:
        if self.topm:
            w2c = self.w2[cand.reshape(-1)].float().view(cand.shape[0], cand.shape[1], -1)   # [n, M, E]
            basec = logits.gather(1, cand).float()                                       # [n, M]
            for i, r in enumerate(todo):
                self._rows[r].w2c, self._rows[r].basec = w2c[i], basec[i]

    def _prepare(self, r: int) -> _Depth:
        d = super()._prepare(r)
        if self.topm:
            d.w2c = self.w2.index_select(0, d.cand).float()                    # [M, E]
            d.basec = self.block.base_logits[r].gather(0, d.cand).float()        # [M]
        return d

    @property
    def w2c(self) -> torch.Tensor:
        """[D, M, E] fp32 rows of W2 for every depth's candidates (prepares them all)."""
        return self._stack("w2c")

    @property
    def basec(self) -> torch.Tensor:
        """[D, M] fp32 base logits of every depth's candidates (prepares them all)."""
        return self._stack("basec")

    def corrected_logprobs(self, state: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(log-probs, token ids) over the scored candidates for children at ``depth`` >= 2."""
        row = depth - 1
        z = self.block.z[row:row + 1]
        if self.topm:
            d = self.row(depth)
            h = self.drafter.correction_hidden(z, state.view(1, -1).to(self.dtype)).float()  # [1, E]
            corrected = d.basec + (h @ d.w2c.T)[0]                                           # [M]
            return torch.log_softmax(corrected, dim=-1), d.cand
        full = (self.block.base_logits[row:row + 1] + self.drafter.correction(z, state.view(1, -1).to(self.dtype))).float()[0]
        return torch.log_softmax(full, dim=-1), None

    def children(self, state: torch.Tensor, depth: int) -> Children:
        if depth == 1:
            vals, toks = self.root_children
        else:
            lp, cand = self.corrected_logprobs(state, depth)
            vals, local = torch.topk(lp, min(self.k, lp.shape[0]))
            toks = cand[local] if cand is not None else local
        tl = toks.tolist()
        return Children(tl, vals.tolist(), self.base_of(depth, toks), self.ranks(depth, tl),
                        self.child_states(state, toks))

    def child_states(self, state: torch.Tensor, toks: torch.Tensor) -> torch.Tensor:
        """[K, G] GRU states of the children ``toks`` of the node with state ``state``."""
        return self.child_step()(state.view(1, -1), toks)

    def child_step(self) -> ChildGRU:
        """The K-children GRU step every builder calls (``models/childgru.py``; remade when the
        drafter's weights change)."""
        return child_gru(self.drafter, self.embed)

    def native_weights(self) -> tuple | None:
        """``(W1, W2, T, W_hh)`` for the C++ build (``builders/native.py``: the correction's two
        projections, the children's GRU input table and recurrent weight), or None where it does
        not run: full-vocabulary scoring, not float32 on CPU, no per-token GRU table, or the C++
        kernels not loaded in this process (a build never compiles them; loading a pair whose
        target or drafter runs on them does)."""
        b = self.block
        if (not self.topm or b.base_logits.device.type != "cpu" or b.base_logits.dtype != torch.float32
                or b.z.dtype != torch.float32 or self.dtype != torch.float32):
            return None
        from .models import cpuext
        gru = self.child_step()
        if gru.table is None or gru.table.dtype != torch.float32 or not cpuext.loaded():
            return None
        return self.w1, self.w2, gru.table, gru.w_hhT.t()

    @property
    def gru_size(self) -> int:
        return self.drafter.prefix_gru.hidden_size

    @property
    def w1(self) -> torch.Tensor:
        """[E, H+G] the correction's first projection (``correction_hidden``'s weight)."""
        return self.drafter.embed_proj[0].weight


class StaticScorer(ConditionalScorer):
    """``condstatic``: per-depth menus from the correction along the greedy (chain) path."""

    def __init__(self, block: DraftBlock, drafter, embed, k: int, topm: int, depth: int, lazy: bool | None = None):
        super().__init__(block, drafter, embed, k, topm, lazy)
        vals, toks = self.root_children
        self._menus = {1: (toks.tolist(), vals.tolist(), toks)}
        state = self.child_states(block.root_state, toks[:1])[0]
        for d in range(2, depth + 1):
            lp, cand = self.corrected_logprobs(state, d)
            v, local = torch.topk(lp, min(k, lp.shape[0]))
            t = cand[local] if cand is not None else local
            self._menus[d] = (t.tolist(), v.tolist(), t)
            state = self.child_states(state, t[:1])[0]

    def children(self, state, depth: int) -> Children:
        toks, lps, toks_t = self._menus[depth]     # the tokens as a tensor on the block's device too
        return Children(toks, lps, self.base_of(depth, toks_t), self.ranks(depth, toks), None)


def domino_chain(block: DraftBlock, drafter, embed, depth: int | None = None
                 ) -> tuple[list[int], list[float], list[float]]:
    """Domino's corrected greedy chain over the full vocabulary, as released ``spec_generate``:
    x_1 = argmax(base_0); then x_{i+1} = argmax(base_i + W2·SiLU(W1·[z_i ; s_i])), for ``depth``
    tokens (default: the block's).

    A step costs its GRU step (``childgru``: the one every tree builder takes, a table row and one
    product), the correction's W1, its full-vocabulary W2 in the drafter's precision
    (``_full_correction``) and one argmax; the log-probs of all steps come from one logsumexp at
    the end. Before: ``nn.GRU`` per step and W2 through MKL, 25.7 ms a round on a 2-core Zen 3
    (MKL's product is slow on AMD), ~4 ms on a Xeon (issue 40); docs/amx.md has the after."""
    base = block.base_logits
    depth = base.shape[0] if depth is None else min(depth, base.shape[0])
    toks = [int(torch.argmax(base[0]))]
    rows = [base[:1]]
    if depth > 1:
        step, w2 = child_gru(drafter, embed), _full_correction(drafter)
        state = block.root_state.view(1, -1)
        prev = torch.tensor(toks, device=base.device)
        for i in range(1, depth):
            state = step(state, prev)
            logits = base[i:i + 1] + w2(drafter.correction_hidden(block.z[i:i + 1], state)).to(base.dtype)
            prev = torch.argmax(logits[0]).view(1)
            toks.append(int(prev))
            rows.append(logits)
    idx = torch.tensor(toks, device=base.device)[:, None]
    return toks, _logprobs_of(torch.cat(rows), idx), _logprobs_of(base[:depth], idx)


def _logprobs_of(logits: torch.Tensor, idx: torch.Tensor) -> list[float]:
    """``log_softmax(logits)[row, idx[row]]`` per row, without the [rows, V] log-softmax."""
    x = logits.float()
    return (x.gather(1, idx)[:, 0] - torch.logsumexp(x, dim=-1)).tolist()


_CORRECTIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _full_correction(drafter):
    """``h -> W2 · h`` over the full vocabulary (``drafter.correction``'s last product), made once
    per W2 (again when it changes), in the precision of the drafter's other products: in 8-bit
    blocks where its backbone runs on them (``presets.load_pair`` next to an int4 target:
    ``quantcpu.Q8Q8Linear`` / ``Q8Linear``), else float32 through oneDNN on W2 reordered once
    (``linear.onednn_product``), else ``F.linear``. One row of the embedded head's 49152 x 128 W2
    read 25 MB a step in float32; on a 2-core Zen 3 the chain took 25.7 ms a round with MKL's
    product, 11.9 with oneDNN's, 4.3 with 8-bit blocks (whose chains equalled float32's on 46 of
    48 blocks; docs/amx.md)."""
    mod = drafter.embed_proj[2]                     # keyed by the module: tensors compare by value
    w = mod.weight
    backbone = routed_product(drafter.fc)
    key = (w.data_ptr(), -1 if w.is_inference() else w._version, w.dtype, w.device, type(backbone))
    got = _CORRECTIONS.get(mod)
    if got is None or got[0] != key:
        from .models import quantcpu
        if isinstance(backbone, (quantcpu.Q8Linear, quantcpu.Q8Q8Linear)):   # oneDNN where K % 32 != 0
            product = quantcpu.q8_product(w.detach(), None, type(backbone))
        else:
            product = onednn_product(w.detach(), None)
        got = _CORRECTIONS[mod] = (key, product or (lambda h: torch.nn.functional.linear(h, w)))
    return got[1]


def greedy_chain(block: DraftBlock) -> tuple[list[int], list[float]]:
    """DFlash's chain: the argmax of every depth's base distribution."""
    lp = torch.log_softmax(block.base_logits.float(), dim=-1)
    vals, toks = lp.max(dim=-1)
    return toks.tolist(), vals.tolist()
