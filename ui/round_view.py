"""The round view: a scrubber over rounds with autoplay, a caption per stage, the draft tree,
the conditional-vs-marginal view and the Top-M pruning view. Figures come from
``dominotree.view.figures``; this module only picks the round and writes the captions."""
from __future__ import annotations

import html

import gradio as gr

from dominotree.view import figures
from dominotree.view.layout import token_label
from dominotree.trace import DecodeTrace, RoundTrace, counterfactual_accept

from .controls import lenient

SHOWS = ("conditional", "marginal")

METHOD_NOTES = {
    "ar": "plain autoregressive decoding: nothing is drafted, so the tree is only the root",
    "dflash": "DFlash: one chain, the drafter's greedy token at every depth",
    "domino": "Domino: one chain, each token corrected given the tokens before it",
    "ddtree": "DDTree: best-first tree over the drafter's per-depth (marginal) log-probs",
    "caddtree": "CaDDTree: DDTree with a cost-aware adaptive budget",
    "marg": "best-first tree; every node at a depth offers the same top-K (marginal) menu",
    "condstatic": "best-first tree over menus corrected along the greedy path only",
    "dominotree": "DominoTree: best-first tree; each node's children are re-scored given its own path "
                  "(conditional scores)",
    "condadaptive": "DominoTree with a cost-aware adaptive budget",
}


def tok_html(tok: int, token_text: dict | None) -> str:
    """A model token as inline HTML: printable label, escaped, in a code span."""
    return f"<code>{html.escape(token_label(tok, token_text, 16))}</code>"


def captions_html(trace: DecodeTrace, rt: RoundTrace) -> str:
    """Four short captions, one per stage, with this round's numbers (tokens escaped)."""
    tt, ms, tree = trace.token_text, rt.stage_ms, rt.tree
    cfg = trace.config.get("tree") if isinstance(trace.config, dict) else None
    cfg = cfg if isinstance(cfg, dict) else {}
    k = len(rt.accepted) - 1
    drafted = tree.num_nodes > 0
    if rt.method == "ar":
        draft = "No drafter: plain autoregressive decoding proposes nothing."
        build = "The tree is the root alone (the last committed token)."
    else:
        m = len(rt.candidates[0]) if rt.candidates else html.escape(str(cfg.get("corr_topm", "?")))
        draft = (f"The drafter read the target's hidden states and proposed a distribution for each of the "
                 f"next {len(rt.candidates) or '?'} positions in one forward pass; it keeps the Top-M = {m} "
                 f"candidates per depth.")
        build = (f"{html.escape(METHOD_NOTES.get(rt.method, rt.method))}. "
                 f"{tree.num_nodes} nodes, {max(tree.depths)} deep"
                 + (f", K = {html.escape(str(cfg.get('node_topk')))} children per expanded node"
                    if rt.menus else "") + ".")
    if drafted:
        verify = (f"The target scored all {len(tree.tokens)} rows in one forward pass, each row attending only "
                  f"to its ancestors (the tree attention mask).")
    else:
        verify = "The target ran one ordinary forward step on the last committed token."
    path = " ".join(tok_html(tree.tokens[i], tt) for i in rt.accepted[1:])
    if k:
        commit = (f"Walking down from the root, {k} draft token{'s' if k > 1 else ''} matched the target "
                  f"({path}); then the target's own next token {tok_html(rt.bonus, tt)} was added as the "
                  f"bonus: <b>{k + 1} tokens committed</b>.")
    else:
        commit = (f"{'No draft token matched the target' if drafted else 'Nothing to match'}; the target's "
                  f"own token {tok_html(rt.bonus, tt)} is committed as the bonus: <b>1 token</b>.")
    if rt.marginal_tree is not None and rt.method not in ("ddtree", "marg"):
        n_m, exact = counterfactual_accept(rt.marginal_tree, rt.committed)
        commit += (f" The marginal tree on the same block would have accepted {'' if exact else '≥'}{n_m} "
                   f"draft token{'s' if n_m != 1 else ''}.")
    rows = [("1 · Draft", "draft", draft), ("2 · Build", "build", build),
            ("3 · Verify", "verify", verify), ("4 · Commit", "commit", commit)]
    items = "".join(f'<li class="dt-stage dt-stage-{key}"><b>{name}</b> '
                    f'<span class="dt-ms">{float(ms.get(key, 0.0)):.1f} ms</span><br>{text}</li>'
                    for name, key, text in rows)
    head = (f"<b>Round {rt.round + 1}</b> of {len(trace.rounds)} · {html.escape(trace.method)} · "
            f"position {html.escape(str(rt.start))} · τ this round = {rt.accept_len}")
    return f'<div class="dt-captions" aria-live="polite"><div>{head}</div><ol>{items}</ol></div>'


def pick(traces: dict, focus: str | None) -> DecodeTrace | None:
    if not traces:
        return None
    return traces.get(focus) or traces[list(traces)[-1]]


def clamp_round(trace: DecodeTrace | None, k) -> int:
    """The index into ``trace.rounds`` of round number ``k`` (the page counts rounds from 1)."""
    if trace is None or not trace.rounds:
        return 0
    return max(0, min(int(k or 1) - 1, len(trace.rounds) - 1))


def advance(trace: DecodeTrace | None, idx) -> tuple[int, bool]:
    """Autoplay step: the next round to show and whether it is the last one (play stops there)."""
    if trace is None or not trace.rounds:
        return 1, True
    nxt = min(clamp_round(trace, idx) + 2, len(trace.rounds))
    return nxt, nxt >= len(trace.rounds)


def autoplay_step(trace: DecodeTrace | None, idx, play: dict, speed, now: float):
    """Autoplay on the clock: the round due ``now`` at ``speed`` rounds/s since play started
    (``play`` = {"t0", "r0", "speed"}), so a slow redraw skips rounds instead of slowing the
    rate. Returns (round to show or None when none is due yet, at the end, play state)."""
    if trace is None or not trace.rounds:
        return None, True, play
    speed = max(float(speed or 1), 0.05)
    cur, last = clamp_round(trace, idx) + 1, len(trace.rounds)
    if play.get("speed") != speed:               # speed changed: count from here
        play = {"t0": now - 1.0 / speed, "r0": cur, "speed": speed}
    due = min(int(play["r0"] + (now - play["t0"]) * speed + 1e-6), last)
    if due <= cur:
        return None, cur >= last, play
    return due, due >= last, play


EMPTY_CAPTION = ('<div class="dt-captions" aria-live="polite">Run a prompt (or import a trace) to see its '
                 'rounds here. Each round has four stages: <b>draft</b>, <b>build</b>, <b>verify</b>, '
                 '<b>commit</b>.</div>')


def render_round(traces: dict, focus: str | None, idx, show: str, light: bool = False) -> list:
    """Outputs for [round slider, captions, tree, mvc, topm]. ``light`` (while decoding) draws
    no figure: building plotly figures holds the GIL the decoder's Python builders need, and
    drawing them takes the browser a core the decoder's threads need (measured: with the tree
    redrawn every second, dominotree ran at 0.56x ar in the page against 0.90x on the command
    line); the figures follow at the end of the run."""
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return [gr.Slider(minimum=1, maximum=2, value=1, label="Round"), EMPTY_CAPTION, None, None, None]
    i = clamp_round(trace, idx)
    rt = trace.rounds[i]
    show = show if show in SHOWS else "conditional"
    slider = gr.Slider(minimum=1, maximum=max(len(trace.rounds), 2), value=i + 1, step=1,
                       label=f"Round ({len(trace.rounds)} rounds · {trace.method})")
    if light:
        return [slider, captions_html(trace, rt), gr.skip(), gr.skip(), gr.skip()]
    tree = figures.tree_figure(rt, trace.token_text, show=show)
    return [slider, captions_html(trace, rt), tree,
            figures.marginal_vs_conditional_figure(rt, trace.token_text),
            figures.topm_figure(rt, trace.token_text)]


def build_round_view() -> dict:
    with gr.Row(equal_height=True):
        focus = gr.Radio([], label="Inspect run", elem_id="focus", scale=3)
        show = gr.Radio(list(SHOWS), value="conditional", label="Colour tree nodes by", elem_id="colour-by", scale=2)
    with gr.Row(equal_height=False):
        # its range follows the run on screen; every handler clamps, so no bounds check here
        round_ = lenient(gr.Slider(1, 2, value=1, step=1, label="Round", elem_id="round", scale=5))
        with gr.Column(scale=2, min_width=200):
            speed = gr.Slider(0.25, 4, value=1, step=0.25, label="Autoplay speed (rounds/s)", elem_id="speed")
            play = gr.Button("▶ Play", elem_id="play", size="sm")
    timer = gr.Timer(0.5, active=False)
    captions = gr.HTML(EMPTY_CAPTION, label="Captions", show_label=False, elem_id="captions")
    tree = gr.Plot(label="Draft tree", elem_id="tree")
    gr.Markdown("Hover a node for its token, depth, conditional vs marginal log-prob, Top-M rank and children "
                "menu. Red: the accepted path; diamond: the bonus token.", elem_classes=["dt-hint"])
    return dict(focus=focus, show=show, round=round_, play=play, speed=speed, timer=timer,
                captions=captions, tree=tree)


def build_round_details() -> dict:
    mvc = gr.Plot(label="Conditional vs marginal tree on the same block", elem_id="mvc")
    return dict(mvc=mvc)


def build_topm() -> dict:
    return dict(topm=gr.Plot(label="Top-M pruning per depth", elem_id="topm"))


def whatif_html(rt: RoundTrace, small: RoundTrace, token_text) -> str:
    k_full, k = len(rt.accepted) - 1, len(small.accepted) - 1
    path = " ".join(tok_html(small.tree.tokens[i], token_text) for i in small.accepted[1:]) or "none"
    return (f'<div class="dt-whatif">With budget <b>{small.tree.num_nodes}</b> (the first '
            f'{small.tree.num_nodes} of the {rt.tree.num_nodes} nodes the builder popped) the target would have '
            f'accepted <b>{k}</b> draft token{"s" if k != 1 else ""} ({path}) plus the bonus '
            f'{tok_html(small.bonus, token_text)}: {k + 1} committed, against {k_full + 1} with the full tree.</div>')


def render_whatif(traces: dict, focus: str | None, idx, show: str, budget) -> list:
    """Outputs for [what-if caption, what-if tree]: the round's tree cut to its first ``budget``
    nodes (the tree a best-first build of that budget makes) and what it would have accepted."""
    from dominotree.view.whatif import at_budget
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return ["", None]
    rt = trace.rounds[clamp_round(trace, idx)]
    if rt.tree.num_nodes == 0:
        return ['<div class="dt-whatif">This round drafted nothing (ar): there is no tree to cut.</div>', None]
    try:
        b = int(float(budget))
    except (TypeError, ValueError):
        b = rt.tree.num_nodes
    small = at_budget(rt, b)
    show = show if show in SHOWS else "conditional"
    return [whatif_html(rt, small, trace.token_text), figures.tree_figure(small, trace.token_text, show=show)]


def build_whatif() -> dict:
    with gr.Accordion("What would a smaller budget have accepted?", open=False, elem_id="whatif"):
        budget = lenient(gr.Slider(1, 256, value=8, step=1, label="Budget b (a best-first tree of budget b is the first b "
                                                          "nodes of this round's tree in pop order)",
                           info="from the same drafts; a real run below budget 16 drafts with a block cut to "
                                "its depths (at least 8 rows), so its drafts can differ slightly",
                           elem_id="whatif-budget"))
        caption = gr.HTML("", label="What-if", show_label=False, elem_id="whatif-caption")
        tree = gr.Plot(label="The budget-b sub-tree and its accepted path", elem_id="whatif-tree")
    return dict(whatif_budget=budget, whatif_caption=caption, whatif_tree=tree)
