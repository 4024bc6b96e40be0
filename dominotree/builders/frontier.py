"""The frontier builder: the whole tree without a host round-trip per node.

Same signature and the identical tree as ``reference.build_reference``. The heap itself moves onto
the device: one round is a fixed program of ``budget`` pop-and-expand steps over fixed-shape
tensors, so on CUDA it is captured once per key and a round's build is ONE graph replay followed
by one host copy; on CPU the same program runs eagerly (skipping the steps that cannot matter).

The program, over a ledger of child slots (the reference's heap entries):

- slots ``[0, K1)`` hold the root's children; the children of the p-th pop go to the fixed slots
  ``[K1 + (p-1) K2, K1 + p K2)``. Slot order is exactly the reference's insertion-counter order
  (pops that are not expanded push nothing and their slots stay empty), so
- a pop is ``argmax`` over the slots' float64 keys: torch returns the first maximal index, which is
  the smallest insertion counter among equal scores: the reference's ``(-score, tie)`` order,
  exact ties included;
- an expansion is the graph builder's per-node bodies (``NodeExpander._corr_body``: batch-1
  correction, log-softmax over the M, top-K; ``_gru_body``: the K-row GRU step), i.e. the
  reference's own ops on the reference's own shapes, so every child log-prob and state is
  bit-identical (eagerly, the GRU step of a family runs lazily, as in the graph builder);
- child keys are ``parent key + log-prob`` in float64, the same IEEE addition as the reference's
  Python floats; a pop at ``max_depth`` or the last pop pushes nothing (masked to -inf).

Why not the serving builder's depth-synchronous W-lane batch? Batched GEMMs over lanes round
differently from the reference's batch-1 calls (measured on MKL: rows of a [16, H+G] ``F.linear``
differ in the last bits from the [1, H+G] call; bf16 ``bmm`` differs too), so its trees could only
be "equal up to ties". This program keeps the zero-sync property with exact identity. Candidate
log-probs must be finite (log-softmax of finite logits): ``-inf`` marks an empty slot.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict

import torch

from ..config import TreeConfig
from ..trace import Menu
from ..tree import Tree
from .capture import CAPTURED, Capture, failed, graphs_enabled, initial, record_bodies
from .graph import NodeExpander, _key, build_by_reference, lru_get, supports
from .reference import Built

_CACHE_SIZE = 4
NEG_INF = float("-inf")


class FrontierProgram:
    """Allocate -> capture -> replay for one key (expander key + budget).

    Static inputs: the expander's ``S_`` round buffers, ``S_root_state`` / ``S_root_toks`` /
    ``S_root_vals``, ``S_maxd``. Static outputs (overwritten by the next run): ``O_nodes``
    [B+1, 5] float64 (token, parent, depth, score, marg), ``O_valid`` [B+1], ``O_menus``
    [B-1, 4, K2] float64 (tokens, log-probs, base log-probs, ranks), ``O_expanded`` [B-1].
    """

    def __init__(self, scorer, budget: int, use_graphs: bool | None = None):
        self.exp = NodeExpander(scorer, use_graphs=False)   # bodies only; this program is the graph
        self.exp.pack_outputs = True
        dev = self.exp.device
        self.use_graphs = graphs_enabled(dev) if use_graphs is None else use_graphs
        self.captured = False
        self.capture_info = initial(dev, self.use_graphs)
        self.B, k1, k2 = budget, self.exp.k, self.exp.k
        self.k1, self.k2 = k1, k2
        n = k1 + max(budget - 1, 0) * k2
        g = self.exp.G
        f64 = dict(dtype=torch.float64, device=dev)
        # ledger of child slots (the heap)
        self.L_key = torch.full((n,), NEG_INF, **f64)                         # cumulative score; -inf = empty
        self.L_info = torch.zeros(n, 4, **f64)                                # marg, token, depth, parent row
        self.L_state = torch.zeros(n, g, dtype=self.exp.dtype, device=dev)   # the slot's GRU state
        # inputs
        self.S_root_state = torch.zeros(1, g, dtype=self.exp.dtype, device=dev)
        self.S_root_toks = torch.zeros(k1, dtype=torch.long, device=dev)
        self.S_root_vals = torch.zeros(k1, device=dev)
        self.S_maxd = torch.zeros(1, dtype=torch.long, device=dev)
        self._static = {n: getattr(self, n) for n in ("S_root_state", "S_root_toks", "S_root_vals", "S_maxd")}
        # outputs
        self.O_nodes = torch.zeros(budget + 1, 5, **f64)
        self.O_valid = torch.zeros(budget + 1, dtype=torch.bool, device=dev)
        self.O_menus = torch.zeros(max(budget - 1, 0), 4, k2, **f64)
        self.O_expanded = torch.zeros(max(budget - 1, 0), dtype=torch.bool, device=dev)

    def begin_round(self, scorer, root_state: torch.Tensor, max_depth: int) -> None:
        """Copy the round's inputs into the static buffers once they are owned (a capture), else
        bind them."""
        self.exp.begin_round(scorer)
        vals, toks = scorer.root_children
        ins = (("S_root_state", root_state.view(1, -1)), ("S_root_toks", toks), ("S_root_vals", vals))
        for name, t in ins:
            if self.exp.owned:
                getattr(self, name).copy_(t)
            else:
                setattr(self, name, t)
        self.S_maxd.fill_(max_depth)

    # --- the program (one body: eager, or captured whole) ----------------------------------
    def _program(self, eager: bool) -> None:
        exp, k1, k2, d = self.exp, self.k1, self.k2, self.exp.D
        key, info, lstate = self.L_key, self.L_info, self.L_state
        key.fill_(NEG_INF)
        self.O_valid.zero_()
        self.O_expanded.zero_()
        # the root's children: slots [0, K1)       == expand(0, root_state, 1, 0.0, 0.0)
        exp.S_state, exp.S_toks = self.S_root_state, self.S_root_toks
        # families (the K children of one expansion): their parent state and tokens, for the
        # GRU step that eager mode runs lazily (first time a child of the family is expanded)
        families = {0: (self.S_root_state, self.S_root_toks)}
        if not eager:
            lstate[:k1].copy_(exp._gru_body()["states"])
        key[:k1].copy_(self.S_root_vals.double() + 0.0)                       # == cum + lp, cum = 0.0
        rbase = exp.root_base_lp().index_select(0, self.S_root_toks).double()   # == base_of(1, toks)
        ones = torch.ones_like(rbase)
        info[:k1].copy_(torch.stack([rbase + 0.0, self.S_root_toks.double(), ones, ones * 0], dim=1))
        for p in range(1, self.B + 1):
            idx = key.argmax().view(1)                       # == heappop: max score, then first slot
            best = key.index_select(0, idx)                  # [1]
            valid = best > NEG_INF
            node = info.index_select(0, idx)[0]              # marg, token, depth, parent
            self.O_nodes[p].copy_(torch.stack([node[1], node[3], node[2], best[0], node[0]]))
            self.O_valid[p:p + 1].copy_(valid)
            key.index_fill_(0, idx, NEG_INF)
            if p == self.B:                                  # the last pop is never expanded
                break
            depth = node[2].long().view(1)
            ok = valid & (depth < self.S_maxd)               # == depth < max_depth (and a real pop)
            if eager:                                        # host-side shortcuts, same results
                if not bool(ok):
                    if not bool(valid):
                        break                                # the heap ran dry: so will every later pop
                    continue
                exp.S_row = int(depth)
                f = 0 if int(idx) < k1 else (int(idx) - k1) // k2 + 1
                if f in families:                            # this family's K-row GRU step, on first need
                    exp.S_state, exp.S_toks = families.pop(f)
                    lo = 0 if f == 0 else k1 + (f - 1) * k2
                    lstate[lo:lo + (k1 if f == 0 else k2)].copy_(exp._gru_body()["states"])
            else:
                exp.S_row = depth.clamp(max=d - 1)           # children at depth+1 use block row `depth`
            exp.S_state = lstate.index_select(0, idx)
            out = exp._corr_body()
            toks, lps, bases, _ = out["pack"]
            lo, hi = k1 + (p - 1) * k2, k1 + p * k2
            if eager:
                families[p] = (exp.S_state, out["toks"])
            else:
                exp.S_toks = out["toks"]
                lstate[lo:hi].copy_(exp._gru_body()["states"])
            key[lo:hi].copy_(torch.where(ok, best + lps, NEG_INF))    # == cum + lp for each child
            info[lo:hi].copy_(torch.stack([node[0] + bases, toks, (node[2] + 1).expand(k2),
                                           torch.full_like(toks, p)], dim=1))
            self.O_menus[p - 1].copy_(out["pack"])
            self.O_expanded[p - 1:p].copy_(ok)

    # --- capture / replay ------------------------------------------------------------------
    def record(self, scorer, root_state: torch.Tensor, max_depth: int) -> tuple[list, list]:
        """The capture region: own the buffers and bind the round (host work, before the region),
        then warm up and record the whole program (``capture.record_bodies``: a graph on CUDA, an
        eager dry run under the same host-sync guard elsewhere)."""
        self.exp.own_buffers()
        for name, t in self._static.items():
            setattr(self, name, t)
        self.begin_round(scorer, root_state, max_depth)
        return record_bodies([lambda: self._program(eager=False)], self.exp.device, "the frontier builder's capture")

    def capture(self, scorer, root_state: torch.Tensor, max_depth: int) -> bool:
        """Record the program as one CUDA graph; False (eager from then on, and why in
        ``capture_info``) on failure."""
        if not self.use_graphs or self.captured:
            return self.captured
        try:
            (self.graph,), _ = self.record(scorer, root_state, max_depth)
            self.captured = True
            self.capture_info = Capture(CAPTURED)
        except Exception as e:
            warnings.warn(f"frontier builder: CUDA graph capture failed, running eagerly ({e})")
            self.use_graphs, self.captured = False, False
            self.capture_info = failed(e)
        return self.captured

    def run(self) -> tuple[list, list, list, list]:
        """Run the program; return (nodes, valid, menus, expanded) as host lists (one sync)."""
        if self.captured:
            self.graph.replay()
        else:
            self._program(eager=self.exp.device.type == "cpu")
        outs = (self.O_nodes, self.O_valid, self.O_menus, self.O_expanded)
        if self.exp.device.type == "cuda":
            host = [t.to("cpu", non_blocking=True) for t in outs]
            torch.cuda.current_stream(self.exp.device).synchronize()
            outs = host
        return [t.tolist() for t in outs]


_PROGRAMS: OrderedDict = OrderedDict()


def program_for(scorer, budget: int) -> FrontierProgram:
    key = (_key(scorer), budget)
    return lru_get(_PROGRAMS, key, lambda: FrontierProgram(scorer, budget), _CACHE_SIZE)


def build_frontier(scorer, root_token: int, root_state, cfg: TreeConfig, max_depth: int) -> Built:
    """``build_reference``'s tree from one device program per round (see the module docstring)."""
    if not supports(scorer):
        return build_by_reference(scorer, root_token, root_state, cfg, max_depth)
    with torch.inference_mode():
        prog = program_for(scorer, cfg.budget)
        if prog.use_graphs and not prog.captured:
            prog.capture(scorer, root_state, max_depth)
        prog.begin_round(scorer, root_state, max_depth)
        nodes, valid, menus_t, expanded = prog.run()
    vals, rtoks = scorer.root_children
    rt = rtoks.tolist()
    menus = [Menu(0, 1, rt, vals.tolist(), scorer.base_of(1, rtoks), scorer.ranks(1, rt))]
    tokens, parents, depths, scores, margs = [int(root_token)], [-1], [0], [0.0], [0.0]
    for p in range(1, cfg.budget + 1):
        if not valid[p]:
            break
        tok, par, dep, score, marg = nodes[p]
        tokens.append(int(tok)); parents.append(int(par)); depths.append(int(dep))
        scores.append(score); margs.append(marg)
        if p < cfg.budget and expanded[p - 1]:
            toks, lps, bases, ranks = menus_t[p - 1]
            menus.append(Menu(p, int(dep) + 1, [int(t) for t in toks], lps, bases, [int(r) for r in ranks]))
    return Built(Tree(tokens, parents, depths, scores, margs), menus, {"capture": prog.capture_info.to_dict()})
