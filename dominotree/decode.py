"""The round loop: draft -> build -> verify -> commit, one RoundTrace per round.

Every method of the family runs through this loop; they differ only in the drafter they use and
in how the build stage turns one draft block into a tree (a chain is a tree too, and plain
autoregressive decoding is a tree with only the root).
"""
from __future__ import annotations

import time
from dataclasses import asdict, replace

import torch

from .builders import Built, adaptive, build_reference, get_builder
from .config import ConfigError, DecodeConfig, default_builder
from .draftvocab import DraftVocab, read_ranked
from .methods import (DRAFT_MIN_ROWS, FIXED_BUILDERS, METHOD_TABLE, SCORERS, MethodRow,  # noqa: F401 - importable here
                      _global, block_rows, usable_depths)
from .models.drafter import DraftCache, Drafter
from .models.target import cache_compact
from .presets import Pair
from .models.childgru import child_gru
from .observe import Observer, RoundState, StageClock
from .scoring import DraftBlock, MarginalScorer
from .trace import UNREAD, DecodeTrace, RoundTrace
from .tree import Tree, accept_walk
from .verify import TreeRows, sample, verify_tree

MAX_PROMPT_TOKENS = 4096


class Annotator(Observer):
    """The trace-only extras of a viewer's run (``Decoder.annotate``: Top-M lists, the marginal
    tree), after the round's timed stages; ``Decoder(annotate=True)`` adds it to every run."""
    reads_all_rows = True

    def after_round(self, decoder, state: RoundState, rt: RoundTrace) -> None:
        if state.block is not None:
            decoder.annotate(rt, state.block, state.scorer, state.cfg, state.vocab)


def _tell(observers, hook: str, decoder, *args) -> float:
    """Call ``hook`` on every observer; the milliseconds they took."""
    t = time.perf_counter()
    for o in observers:
        getattr(o, hook)(decoder, *args)
    return (time.perf_counter() - t) * 1e3


class Decoder:
    """Decodes prompts with any method on a loaded ``Pair``. Holds no per-request state."""

    def __init__(self, pair: Pair, cost_model=None, annotate: bool = True):
        self.pair = pair
        self.annotate_rounds = annotate  # trace-only extras (Top-M lists, marginal tree; Annotator); off in benchmarks
        self.target = pair.target
        self.cost_model = cost_model   # verify-cost model for the adaptive budgets (caddtree, condadaptive)
        self._text_cache: dict[int, str] = {}
        self._vocabs: dict[int, DraftVocab] = {}

    def draft_vocab(self, size: int) -> DraftVocab:
        """The pair's draft vocabulary of ``size`` tokens (``draftvocab.py``), made once."""
        v = self._vocabs.get(size)
        if v is None:
            v = self._vocabs[size] = DraftVocab(self.target, read_ranked(self.pair.draft_vocab_file()), size)
        return v

    # --- prompts -------------------------------------------------------------------------
    def encode_prompt(self, prompt: str, chat: bool = True) -> list[int]:
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError("prompt is empty")
        tok = self.target.tokenizer
        if chat and getattr(tok, "chat_template", None):
            kw = {"enable_thinking": False} if "enable_thinking" in (tok.chat_template or "") else {}
            ids = tok.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                          tokenize=True, **kw)
            if hasattr(ids, "keys"):
                ids = ids["input_ids"]
            ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
        else:
            ids = tok(prompt)["input_ids"]
        if len(ids) > MAX_PROMPT_TOKENS:
            raise ConfigError(f"prompt is {len(ids)} tokens; the limit is {MAX_PROMPT_TOKENS}")
        return [int(i) for i in ids]

    def token_text(self, ids) -> dict[str, str]:
        tok = self.target.tokenizer
        out = {}
        for i in ids:
            i = int(i)
            if i not in self._text_cache:
                self._text_cache[i] = tok.decode([i]) if tok is not None else str(i)
            out[str(i)] = self._text_cache[i]
        return out

    # --- one request -------------------------------------------------------------------------
    def check(self, prompt_ids: list[int], cfg: DecodeConfig) -> Drafter | None:
        drafter = self.pair.drafter_for(cfg.method)
        if not prompt_ids:
            raise ConfigError("prompt is empty")
        depth = drafter.cfg.block_size + 1 if drafter is not None else 1
        need = len(prompt_ids) + cfg.max_new_tokens + depth
        if need > self.target.max_positions:
            raise ConfigError(f"prompt ({len(prompt_ids)} tokens) + max_new_tokens ({cfg.max_new_tokens}) "
                              f"+ one block exceeds the target's context of {self.target.max_positions} positions")
        if cfg.draft_vocab and drafter is not None:
            self.draft_vocab(cfg.draft_vocab)     # a missing file or an impossible size fails here
        if METHOD_TABLE[cfg.method].stop == "cost" and self.cost_model is None:
            raise ConfigError(f"method {cfg.method!r} needs a verify-cost model; "
                              f"run `python -m dominotree profile-cost` first")
        return drafter

    @torch.inference_mode()
    def rounds(self, prompt_ids: list[int], cfg: DecodeConfig, should_stop=None, draft_fn=None, observers=()):
        """Yield ``(RoundTrace, committed_tokens)`` per round; the first item is ``(None, [first])``,
        the token sampled from the prefill. ``observers`` (``observe.Observer``) are told each
        stage's result off the round's clock; their milliseconds go to ``rt.extra["viewer_ms"]``.
        ``draft_fn`` replaces the drafter (tests)."""
        observers = ([Annotator()] if self.annotate_rounds else []) + list(observers)
        read_all = any(o.reads_all_rows for o in observers)
        drafter = self.check(prompt_ids, cfg)
        if cfg.tree.budget == 0:      # no tree (what --budget auto runs when no tree pays): plain decoding
            drafter = None
        tgt, dev = self.target, self.target.device
        gen = torch.Generator(device=dev)
        gen.manual_seed(cfg.seed)
        taps = drafter.cfg.target_layer_ids if drafter is not None else None
        cache, dcache = tgt.new_cache(), DraftCache()
        n = len(prompt_ids)
        ids = torch.tensor([prompt_ids], dtype=torch.long, device=dev)
        out = tgt.forward(ids, torch.arange(n, device=dev)[None], cache, taps=taps, last_only=True)
        root = sample(out.logits[-1:], cfg.temperature, gen)[0]
        feats, feat_pos = out.feats, torch.arange(n, device=dev)
        yield None, [root]
        start, rnd = n, 0
        if cfg.builder is None:
            cfg = replace(cfg, builder=default_builder(dev))
        builder = get_builder(cfg.builder)
        ab = get_builder(cfg.ab_builder) if cfg.ab_builder else None
        vocab = self.draft_vocab(cfg.draft_vocab) if cfg.draft_vocab and drafter is not None else None
        depths = usable_depths(cfg)
        if drafter is not None and METHOD_TABLE[cfg.method].scorer in ("conditional", "static"):
            # the children's GRU step (and its per-token table, ~1 s once) is made before any round is timed
            child_gru(drafter if vocab is None else vocab.restrict(drafter),
                      self.target.embed if vocab is None else vocab.embed)
        while True:
            if should_stop is not None and should_stop():
                return
            clock = StageClock(dev)
            state = RoundState(cfg, root, start, drafter, vocab, builder, cache=cache, taps=taps)
            spent = 0.0                 # observers' milliseconds this round
            t = clock.now()
            # 1. draft: one drafter forward over [root, MASK...] gives every depth's base logits
            block = None
            if drafter is not None:
                if draft_fn is None:
                    block = self.draft(drafter, root, start, feats, feat_pos, dcache, vocab, depths)
                else:
                    block = draft_fn(drafter, root, start, feats, feat_pos, dcache)
                    if vocab is not None:
                        block.base_logits = block.base_logits[:, vocab.ids]
            clock.lap("draft", t)
            state.block = block
            if observers and block is not None:
                spent += _tell(observers, "after_draft", self, state)
            # 2. build: turn the block into a tree (chain, marginal or conditional best-first); with
            # a draft vocabulary it runs in its column space, then maps back to target ids
            built, scorer, ab_info = self.build(cfg, drafter, block, root, start, builder, ab, clock, vocab)
            state.built, state.scorer = built, scorer
            if observers:
                spent += _tell(observers, "after_build", self, state)
            t = clock.now()
            tree = built.tree
            # 3. verify: one target forward over the tree with ancestor-only attention; the LM
            # head and the draw run only on the rows the accept walk reads, as it reads them
            vout = verify_tree(tgt, cache, tree, start, taps, lazy_head=True)
            rows = TreeRows(tgt, tree, vout, cfg.temperature, gen)
            accepted, bonus = accept_walk(tree, rows)
            t = clock.lap("verify", t)
            # 4. commit: keep the accepted rows' KV and features; the bonus is the next root
            cache_compact(cache, start, accepted)
            if taps is not None:
                feats = vout.feats[:, accepted]
                feat_pos = torch.arange(start, start + len(accepted), device=dev)
            committed = [tree.tokens[i] for i in accepted[1:]] + [bonus]
            clock.lap("commit", t)
            # untimed: the rows the walk did not read, for traces that show every row (-1 if not)
            post = rows.read_all() if read_all else [UNREAD if x is None else x for x in rows.tokens]
            rt = RoundTrace(round=rnd, start=start, method=cfg.method, builder=cfg.builder,
                            temperature=float(cfg.temperature), tree=tree, target_tokens=post,
                            accepted=accepted, bonus=bonus, stage_ms=dict(clock.ms),
                            menus=built.menus, build_ab=ab_info, extra=dict(built.extra))
            if observers:
                spent += _tell(observers, "after_round", self, state, rt)
                rt.extra["viewer_ms"] = spent
            yield rt, committed
            start += len(accepted)
            root = bonus
            rnd += 1

    def build(self, cfg: DecodeConfig, drafter, block: DraftBlock | None, root: int, start: int, builder, ab, clock,
              vocab: DraftVocab | None = None):
        """Turn the block into a tree as the method's row of ``METHOD_TABLE`` says (in the draft
        vocabulary's column space when ``vocab`` is given; the result is in target ids)."""
        t = clock.now()
        tc, row = cfg.tree, METHOD_TABLE[cfg.method]
        scorer, ab_info = None, None
        embed = self.target.embed
        if vocab is not None:
            drafter, embed = vocab.restrict(drafter), vocab.embed
        if block is None:
            built = Built(Tree.root_only(root))
        else:
            depth = block.depth if tc.max_depth is None else min(tc.max_depth, block.depth)
            make = None
            if row.scorer is not None:
                def make():
                    return SCORERS[row.scorer](block, drafter, embed, tc, depth)
                scorer = make()
            stop = adaptive.make_stop(self.cost_model, start) if row.stop == "cost" else None
            if row.builder == "selected":
                built = builder(scorer, root, block.root_state, tc, depth)
                if ab is not None:
                    t_main = clock.now()
                    alt = ab(make(), root, block.root_state, tc, depth)
                    t_alt = clock.now()
                    ab_info = {"builders": [cfg.builder, cfg.ab_builder],
                               "ms": [(t_main - t) * 1e3, (t_alt - t_main) * 1e3],
                               "identical": built.tree.same_shape(alt.tree) and built.tree.scores == alt.tree.scores}
                    clock.ms["build"] += (t_main - t) * 1e3
                    return _global(built, vocab), scorer, ab_info
            else:
                built = FIXED_BUILDERS[row.builder](block, drafter, embed, scorer, root, tc, depth, stop)
        built = _global(built, vocab)
        clock.lap("build", t)
        return built, scorer, ab_info

    def draft(self, drafter: Drafter, root: int, start: int, feats, feat_pos, dcache: DraftCache,
              vocab: DraftVocab | None = None, depths: int | None = None) -> DraftBlock:
        """One drafter forward over ``[root, MASK ...]`` at positions ``start...``; base logits
        over the draft vocabulary's columns when ``vocab`` is given, for the first ``depths``
        depths only when given (the LM head is most of the draft, and deeper rows go unused), from
        a block cut to ``block_rows`` rows."""
        cfg, tgt = drafter.cfg, self.target
        dev, dtype = tgt.device, drafter.fc.weight.dtype
        n = block_rows(cfg, depths)
        blk = torch.full((1, n), cfg.mask_token_id, dtype=torch.long, device=dev)
        blk[0, 0] = root
        noise = tgt.embed_tokens(blk).to(dtype)
        keep = None if depths is None else (depths if cfg.shift_label else depths + 1)   # the rows read below
        h = drafter(feats.to(dtype), noise, feat_pos, torch.arange(start, start + n, device=dev), cache=dcache,
                    keep=keep)[0]
        rows = h if cfg.shift_label else h[1:]
        if depths is not None:
            rows = rows[:depths]
        base = tgt.logits(rows.to(tgt.dtype)) if vocab is None else vocab.logits(rows.to(tgt.dtype))
        root_state = None
        if cfg.is_domino:
            root_state = drafter.root_state(root, tgt, vocab)
        return DraftBlock(root, base, rows, root_state)

    def annotate(self, rt: RoundTrace, block: DraftBlock, scorer, cfg: DecodeConfig, vocab: DraftVocab | None = None) -> None:
        """Trace-only extras, computed after the timed stages: Top-M lists and the marginal tree."""
        base = scorer if scorer is not None else MarginalScorer(block, cfg.tree.node_topk, cfg.tree.corr_topm or 64)
        rt.candidates, rt.candidate_logprobs = base.candidates()
        depth = block.depth if cfg.tree.max_depth is None else min(cfg.tree.max_depth, block.depth)
        marg = MarginalScorer(block, cfg.tree.node_topk, cfg.tree.corr_topm)
        rt.marginal_tree = _global(build_reference(marg, block.root, None, cfg.tree, depth), vocab).tree
        if vocab is not None:
            rt.candidates = [vocab.to_global(c) for c in rt.candidates]

    def generate(self, prompt: str | list[int], cfg: DecodeConfig, should_stop=None, on_round=None,
                 draft_fn=None, chat: bool = True, observers=()) -> DecodeTrace:
        """Decode to the end and return the whole trace (``on_round(trace)`` after each round).
        ``wall_s`` leaves the observers' time out (``rounds``)."""
        prompt_ids = self.encode_prompt(prompt, chat) if isinstance(prompt, str) else list(prompt)
        if cfg.builder is None:      # record the builder that runs
            cfg = replace(cfg, builder=default_builder(self.target.device))
        trace = DecodeTrace(method=cfg.method, prompt=prompt if isinstance(prompt, str) else "",
                            prompt_ids=prompt_ids, token_ids=[], text="",
                            config=_config_dict(cfg), model={"preset": self.pair.name, "paths": self.pair.paths,
                                                              "dtype": str(self.target.dtype).replace("torch.", ""),
                                                              "weights": self.target.weights,
                                                              "forward": self.target.forward_kind,
                                                              "device": str(self.target.device)})
        eos = self.target.eos_ids if cfg.stop_at_eos else frozenset()
        t0 = time.perf_counter()
        stopped = "user"
        viewer_s = 0.0                  # the observers' time, off the clock
        for rt, committed in self.rounds(prompt_ids, cfg, should_stop, draft_fn, observers):
            if rt is not None:
                trace.rounds.append(rt)
                viewer_s += rt.extra.get("viewer_ms", 0.0) / 1e3
            room = cfg.max_new_tokens - len(trace.token_ids)
            for tok in committed[:room]:
                trace.token_ids.append(tok)
                if tok in eos:
                    stopped = "eos"
                    break
            if stopped != "eos" and len(trace.token_ids) >= cfg.max_new_tokens:
                stopped = "max_new_tokens"
            if rt is not None:
                rt.extra["gen_len"] = len(trace.token_ids)
            trace.wall_s = time.perf_counter() - t0 - viewer_s
            if on_round is not None:
                on_round(trace)
            if stopped in ("eos", "max_new_tokens"):
                break
        trace.wall_s = time.perf_counter() - t0 - viewer_s
        trace.stopped = stopped
        tok = self.target.tokenizer
        trace.text = tok.decode(trace.token_ids, skip_special_tokens=True) if tok is not None else ""
        seen = set(trace.token_ids)
        for r in trace.rounds:
            seen |= r.token_ids()
        trace.token_text = self.token_text(sorted(seen))
        return trace

    def warm_up(self, max_new_tokens: int = 8, methods: list[str] | None = None) -> None:
        """One short decode with each of ``methods`` (default: ``ar`` and a tree method of each
        drafter the pair has): the first calls of a loaded pair pay once for allocation, oneDNN
        packing, the drafters' 8-bit blocks and the GRU table, and a run timed after this is not
        charged for them."""
        if methods is None:
            methods = ["ar"] + [m for kind, m in (("dflash", "ddtree"), ("domino", "dominotree"))
                                if kind in self.pair.drafters]
        for m in methods:
            self.generate("Warm up", DecodeConfig(method=m, max_new_tokens=max_new_tokens, stop_at_eos=False))


def _config_dict(cfg: DecodeConfig) -> dict:
    d = asdict(cfg)
    return d
