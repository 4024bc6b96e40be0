"""Plotly figures of one round's draft tree, the explorer's tree views: pure functions of traces
(no gradio, no model). The per-run charts and tables (stage times, builders, acceptance,
provenance, summary) are in charts.py, which shares this module's font, escaping and empty
figure.

The tree views draw the same scene as the exports (export.round_scene): depth runs left to
right, siblings run down best first, node colours are export.score_color of the cumulative
log-prob, so a PNG/SVG export matches what is on screen. Figure data are plain Python lists
(plotly 6+ sends NumPy arrays as typed arrays that older plotly.js renders as nothing).

Every model token shown here goes through layout.token_label and html.escape: plotly renders
a subset of HTML in hover and text labels.
"""
from __future__ import annotations

import html
import math

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .export import ACCEPT_COLOR, EDGE_COLOR, SCORE_RANGE, SceneNode, round_scene
from .layout import token_label
from ..trace import RoundTrace, counterfactual_accept
from ..tree import Tree, child_maps, children_of

ONLY_COLOR = "#c51b7d"     # ring around nodes present in only one of two compared trees
FONT = dict(family="DejaVu Sans, Helvetica, Arial, sans-serif", size=12)


def esc(s: str) -> str:
    """Text for plotly's labels, titles and hovers (which render a subset of HTML), escaped."""
    return html.escape(s, quote=False)


def _lbl(tok: int, token_text: dict | None, max_len: int = 16) -> str:
    return esc(token_label(tok, token_text, max_len))


def empty_figure(title: str) -> go.Figure:
    """A blank figure that says why there is nothing to draw."""
    fig = go.Figure()
    fig.update_layout(title=title, template="plotly_white", font=FONT,
                      xaxis=dict(visible=False), yaxis=dict(visible=False), height=260)
    return fig


def _menu_rank(menu, token: int) -> tuple[int, int, float, float] | None:
    """(base rank in Top-M, corrected rank, corrected log-prob, base log-prob) of ``token`` in
    ``menu``. The menu holds the K best children by corrected score, so a child's position in
    it, by corrected log-prob, is its corrected rank among all M candidates."""
    if menu is None or token not in menu.tokens:
        return None
    j = menu.tokens.index(token)
    order = sorted(range(len(menu.tokens)), key=lambda k: (-menu.logprobs[k], k))
    return menu.ranks[j], order.index(j), menu.logprobs[j], menu.base_logprobs[j]


def _hover(rt: RoundTrace, tree: Tree, nd: SceneNode, token_text: dict | None,
           menus: dict, kids: list[list[int]]) -> str:
    if nd.bonus:
        return (f"<b>{_lbl(nd.token, token_text)}</b> · token {nd.token}<br>"
                f"bonus token: the target's own token after the last accepted node<br>"
                f"depth {nd.depth} (committed without drafting)")
    i, p = nd.row, nd.parent
    lines = [f"<b>{_lbl(nd.token, token_text)}</b> · token {nd.token} · row {i} · depth {nd.depth}"
             + (" · <b>accepted</b>" if nd.accepted else "")]
    if p >= 0:
        c_inc = tree.scores[i] - tree.scores[p]
        m_inc = tree.marg_scores[i] - tree.marg_scores[p]
        lines.append(f"conditional: log p {c_inc:.3f} (p {math.exp(c_inc):.3f}) · cumulative {tree.scores[i]:.3f}")
        lines.append(f"marginal: log p {m_inc:.3f} (p {math.exp(m_inc):.3f}) · cumulative {tree.marg_scores[i]:.3f}")
        r = _menu_rank(menus.get(p), nd.token)
        if r is not None:
            base = "outside Top-M" if r[0] < 0 else f"{r[0]}"
            lines.append(f"Top-M base rank {base} · corrected rank {r[1]}")
    else:
        lines.append("root: the last committed token")
    if i < len(rt.target_tokens) and tree is rt.tree:
        lines.append(f"target's next token: {_lbl(rt.target_tokens[i], token_text)}")
    m = menus.get(i)
    if m is not None and m.tokens:
        made = {tree.tokens[c] for c in kids[i]}
        items = []
        order = sorted(range(len(m.tokens)), key=lambda k: (-m.logprobs[k], k))
        for k in order[:8]:
            items.append(f"{'●' if m.tokens[k] in made else '○'} {_lbl(m.tokens[k], token_text)} "
                         f"{m.logprobs[k]:.2f} (base {m.base_logprobs[k]:.2f}, rank {m.ranks[k]})")
        more = f"<br>  … {len(order) - 8} more" if len(order) > 8 else ""
        lines.append("children menu (● = node):<br>  " + "<br>  ".join(items) + more)
    elif kids[i]:
        lines.append(f"{len(kids[i])} children")
    return "<br>".join(lines)


def _tree_traces(rt: RoundTrace, scene: list[SceneNode], token_text: dict | None, tree: Tree,
                 name: str = "", showlegend: bool = True, label_len: int = 8) -> list[go.Scatter]:
    """Edges, accepted edges, nodes and bonus of one scene; x = depth, y = -slot."""
    menus = {m.node: m for m in rt.menus} if tree is rt.tree else {}
    kids = children_of(tree)
    xs = lambda nd: nd.depth      # noqa: E731
    ys = lambda nd: -nd.x         # noqa: E731
    cold_x, cold_y, hot_x, hot_y, bon_x, bon_y = [], [], [], [], [], []
    for nd in scene:
        if nd.parent < 0:
            continue
        p = scene[nd.parent]
        seg_x, seg_y = [xs(p), xs(nd), None], [ys(p), ys(nd), None]
        if nd.bonus:
            bon_x += seg_x; bon_y += seg_y
        elif nd.accepted:
            hot_x += seg_x; hot_y += seg_y
        else:
            cold_x += seg_x; cold_y += seg_y
    rows = [nd for nd in scene if not nd.bonus]
    suffix = f" ({name})" if name else ""
    traces = [
        go.Scatter(x=cold_x, y=cold_y, mode="lines", line=dict(color=EDGE_COLOR, width=1),
                   hoverinfo="skip", name="edges" + suffix, showlegend=False),
        go.Scatter(x=hot_x, y=hot_y, mode="lines", line=dict(color=ACCEPT_COLOR, width=4),
                   hoverinfo="skip", name="accepted path" + suffix, showlegend=showlegend),
        go.Scatter(x=[xs(nd) for nd in rows], y=[ys(nd) for nd in rows], mode="markers+text",
                   name="nodes" + suffix, showlegend=False,
                   marker=dict(size=14, color=[nd.fill for nd in rows], symbol="circle",
                               line=dict(color=[ACCEPT_COLOR if nd.accepted else "#444444" for nd in rows],
                                         width=[3 if nd.accepted else 0.6 for nd in rows])),
                   text=[esc(token_label(nd.token, token_text, label_len)) for nd in rows],
                   textposition="top center", textfont=dict(size=11, family="DejaVu Sans Mono, monospace"),
                   hovertext=[_hover(rt, tree, nd, token_text, menus, kids) for nd in rows],
                   hoverinfo="text", customdata=[nd.row for nd in rows]),
    ]
    bonus = [nd for nd in scene if nd.bonus]
    if bonus:
        b = bonus[0]
        traces += [
            go.Scatter(x=bon_x, y=bon_y, mode="lines", line=dict(color=ACCEPT_COLOR, width=2, dash="dash"),
                       hoverinfo="skip", showlegend=False, name="bonus edge" + suffix),
            go.Scatter(x=[xs(b)], y=[ys(b)], mode="markers+text", name="bonus token" + suffix,
                       showlegend=showlegend,
                       marker=dict(size=15, color="#ffffff", symbol="diamond",
                                   line=dict(color=ACCEPT_COLOR, width=2.5)),
                       text=[esc(token_label(b.token, token_text, label_len))], textposition="top center",
                       textfont=dict(size=11, family="DejaVu Sans Mono, monospace", color=ACCEPT_COLOR),
                       hovertext=[_hover(rt, tree, b, token_text, menus, kids)], hoverinfo="text"),
        ]
    return traces


def _colorbar_trace(title: str, vmin: float, vmax: float) -> go.Scatter:
    """An invisible point that only carries the colour bar (node colours are explicit hex so
    they match the SVG export exactly)."""
    return go.Scatter(x=[None], y=[None], mode="markers", showlegend=False, hoverinfo="skip",
                      name="colour scale",
                      marker=dict(color=[vmin], colorscale="Viridis", cmin=vmin, cmax=vmax,
                                  showscale=True, colorbar=dict(title=dict(text=title), thickness=12)))


def _tree_height(scene: list[SceneNode]) -> int:
    slots = max(nd.x for nd in scene) + 1
    return int(min(max(360, 150 + 26 * slots), 6000))


def tree_figure(rt: RoundTrace, token_text: dict | None, show: str = "conditional",
                vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1]) -> go.Figure:
    """The round's draft tree: nodes coloured by the ``show`` score (cumulative log-prob), the
    accepted path in red, the bonus token as a diamond; hover shows each node's conditional and
    marginal log-probs, Top-M rank, the target's next token and its children menu."""
    scene = round_scene(rt, token_text, show, vmin=vmin, vmax=vmax)
    fig = go.Figure(_tree_traces(rt, scene, token_text, rt.tree))
    fig.add_trace(_colorbar_trace(f"{show}<br>log-prob", vmin, vmax))
    max_depth = max(nd.depth for nd in scene)
    fig.update_layout(
        title=dict(text=esc(f"Round {rt.round + 1} · {rt.method} · τ = {rt.accept_len} "
                             f"({len(rt.accepted) - 1} accepted + bonus) · {rt.tree.num_nodes} nodes")
                   + f"<br><sup>colour: {show} score (cumulative log-prob, clipped to [{vmin:g}, {vmax:g}])</sup>"),
        template="plotly_white", font=FONT, height=_tree_height(scene), hovermode="closest",
        xaxis=dict(title="depth (draft position)", dtick=1, range=[-0.5, max_depth + 0.9], zeroline=False),
        yaxis=dict(visible=False, zeroline=False),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
        margin=dict(l=20, r=20, t=90, b=40), uirevision=f"tree-{rt.method}")
    return fig


def _path_keys(tree: Tree) -> list[tuple[int, ...]]:
    keys: list[tuple[int, ...]] = [()]
    for i in range(1, len(tree.tokens)):
        keys.append(keys[tree.parents[i]] + (tree.tokens[i],))
    return keys


def _walk_rows(tree: Tree, committed: list[int]) -> list[int]:
    maps, rows = child_maps(tree), [0]
    for tok in committed:
        if tok not in maps[rows[-1]]:
            break
        rows.append(maps[rows[-1]][tok])
    return rows


def marginal_vs_conditional_figure(rt: RoundTrace, token_text: dict | None,
                                   vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1]) -> go.Figure:
    """The round's tree (as its method scored it) beside the marginal, DDTree-style tree built
    on the same block, each coloured by the score it was built with. Nodes whose root path is
    in only one of the two trees get a magenta ring; the marginal tree's red path is where it
    would have accepted the tokens this round committed (a counterfactual)."""
    if rt.marginal_tree is None:
        fig = tree_figure(rt, token_text, vmin=vmin, vmax=vmax)
        fig.update_layout(title=dict(text=f"Round {rt.round + 1}: no marginal tree was recorded for this round"))
        return fig
    cond, marg = rt.tree, rt.marginal_tree
    n_c, exact_c = counterfactual_accept(cond, rt.committed)
    n_m, exact_m = counterfactual_accept(marg, rt.committed)
    fmt = lambda n, exact: (f"{n}" if exact else f"≥{n}") + (" draft" if n == 1 and exact else " drafts")  # noqa: E731
    scene_c = round_scene(rt, token_text, "conditional", vmin=vmin, vmax=vmax)
    scene_m = round_scene(rt, token_text, "conditional", tree=marg,
                          accepted=_walk_rows(marg, rt.committed), bonus=-1, vmin=vmin, vmax=vmax)
    fig = _two_trees(token_text, (rt, scene_c, cond, "conditional", "only in the conditional tree"),
                     (rt, scene_m, marg, "marginal", "only in the marginal tree"),
                     (f"{esc(rt.method)} tree ({cond.num_nodes} nodes): accepts {fmt(n_c, exact_c)}",
                      f"marginal tree ({marg.num_nodes} nodes): would accept {fmt(n_m, exact_m)}"), vmin, vmax)
    height = max(_tree_height(scene_c), _tree_height(scene_m))
    committed = len(rt.committed)
    fig.update_layout(
        title=dict(text=f"Round {rt.round + 1}: conditional vs marginal tree on the same block"
                        f"<br><sup>of the {committed} tokens committed this round, the {esc(rt.method)} tree "
                        f"accepts {fmt(n_c, exact_c)} and the marginal tree would accept {fmt(n_m, exact_m)}"
                        + ("" if exact_c and exact_m else
                           " (≥: it matched every token the target produced, so it may accept more)")
                        + "</sup>"),
        template="plotly_white", font=FONT, height=height, hovermode="closest",
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, xanchor="left", x=0.0),
        margin=dict(l=20, r=20, t=110, b=90), uirevision=f"mvc-{rt.method}")
    return fig


_TOPM_STYLE = {   # category -> (legend name, colour, filled symbol)
    "promoted": ("promoted by the correction", "#1a9850", "triangle-up"),
    "demoted": ("demoted by the correction", "#d73027", "triangle-down"),
    "same": ("same rank after correction", "#4575b4", "circle"),
    "unoffered": ("in Top-M, in no menu", "#aaaaaa", "circle"),
}


def topm_figure(rt: RoundTrace, token_text: dict | None) -> go.Figure:
    """Per depth (y), the drafter's Top-M candidates by base rank (x). Filled markers became
    tree nodes, open ones did not; triangles show where the correction moved a candidate up or
    down (its corrected rank in a children menu vs its base rank; a candidate in several menus
    counts as promoted if any menu promoted it). Nodes and menu children that are not among the
    Top-M are drawn in an extra column right of rank M-1."""
    if not rt.candidates:
        return empty_figure(f"Round {rt.round + 1}: no Top-M candidates were recorded for this round ({rt.method})")
    tree = rt.tree
    node_tokens: dict[int, set[int]] = {}
    for i in range(1, len(tree.tokens)):
        node_tokens.setdefault(tree.depths[i], set()).add(tree.tokens[i])
    menus_at: dict[int, list] = {}
    for m in rt.menus:
        menus_at.setdefault(m.depth, []).append(m)
    m_max = max(len(c) for c in rt.candidates)
    pts = {k: ([], [], [], []) for k in _TOPM_STYLE}    # x, y, symbol, hover
    out_x, out_y, out_h = [], [], []
    for d, (cands, lps) in enumerate(zip(rt.candidates, rt.candidate_logprobs), 1):
        nodes = node_tokens.get(d, set())
        seen = set()
        for r, (tok, lp) in enumerate(zip(cands, lps)):
            seen.add(tok)
            moves = []
            for m in menus_at.get(d, []):
                mr = _menu_rank(m, tok)
                if mr is not None:
                    moves.append((m.node, mr))
            if not moves:
                cat = "unoffered"
            elif any(mr[1] < r for _, mr in moves):
                cat = "promoted"
            elif any(mr[1] > r for _, mr in moves):
                cat = "demoted"
            else:
                cat = "same"
            is_node = tok in nodes
            hover = [f"<b>{_lbl(tok, token_text)}</b> · token {tok} · depth {d}",
                     f"base rank {r} · base log p {lp:.3f}",
                     "became a node" if is_node else "not a node"]
            hover += [f"under row {node}: corrected rank {mr[1]} (log p {mr[2]:.3f})" for node, mr in moves[:6]]
            x, y, sym, hv = pts[cat]
            x.append(r); y.append(d); hv.append("<br>".join(hover))
            sym.append(_TOPM_STYLE[cat][2] + ("" if is_node else "-open"))
        outside = sorted(nodes - seen) + sorted({t for m in menus_at.get(d, []) for t in m.tokens} - seen - nodes)
        for k, tok in enumerate(outside):
            out_x.append(m_max + 1 + 0.25 * k); out_y.append(d)
            out_h.append(f"<b>{_lbl(tok, token_text)}</b> · token {tok} · depth {d}<br>outside the Top-M list"
                         + ("<br>became a node" if tok in nodes else ""))
    fig = go.Figure()
    for cat, (x, y, sym, hv) in pts.items():
        name, color, _ = _TOPM_STYLE[cat]
        fig.add_trace(go.Scatter(x=x, y=y, mode="markers", name=name, hovertext=hv, hoverinfo="text",
                                 marker=dict(size=10, color=color, symbol=sym, line=dict(width=1.5, color=color))))
    fig.add_trace(go.Scatter(x=out_x, y=out_y, mode="markers", name="outside Top-M", hovertext=out_h,
                             hoverinfo="text", marker=dict(size=11, color="#000000", symbol="x")))
    depth = len(rt.candidates)
    fig.update_layout(
        title=dict(text=f"Round {rt.round + 1}: Top-M candidates per depth (M = {m_max})"
                        "<br><sup>filled = became a node · open = not a node · x = base rank; "
                        "triangles: rank moved by the correction</sup>"),
        template="plotly_white", font=FONT, height=int(min(max(320, 140 + 28 * depth), 1400)),
        xaxis=dict(title="base rank in the drafter's Top-M", range=[-1, m_max + 3]),
        yaxis=dict(title="depth", autorange="reversed", dtick=1),
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0),
        margin=dict(l=50, r=20, t=80, b=100))
    fig.add_vline(x=m_max - 0.5, line=dict(color="#999999", width=1, dash="dot"))
    fig.add_annotation(x=m_max + 1.5, y=1.0, yref="paper", yanchor="bottom", showarrow=False,
                       text="outside M", font=dict(size=11, color="#555555"))
    return fig


def _two_trees(token_text, left, right, titles, vmin, vmax) -> go.Figure:
    """Two tree panels side by side, one colour bar; a node whose root path is in only its own
    panel's tree gets a magenta ring. ``left``, ``right``: (round, scene, tree, name, ring's name)."""
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.06, subplot_titles=titles)
    keys = [_path_keys(left[2]), _path_keys(right[2])]
    for col, ((r, scene, tree, label, ring), mine, other) in enumerate(
            zip((left, right), keys, (set(keys[1]), set(keys[0]))), 1):
        for tr in _tree_traces(r, scene, token_text, tree, name=label, showlegend=col == 1, label_len=5):
            fig.add_trace(tr, row=1, col=col)
        only = [nd for nd in scene if not nd.bonus and mine[nd.row] not in other]
        fig.add_trace(go.Scatter(
            x=[nd.depth for nd in only], y=[-nd.x for nd in only], mode="markers", name=ring, hoverinfo="skip",
            marker=dict(size=22, symbol="circle-open", color=ONLY_COLOR, line=dict(width=2))), row=1, col=col)
        fig.update_xaxes(title_text="depth", dtick=1, zeroline=False, row=1, col=col)
        fig.update_yaxes(visible=False, zeroline=False, row=1, col=col)
    fig.add_trace(_colorbar_trace("cumulative<br>log-prob", vmin, vmax))
    return fig


def rebuilt_figure(rt: RoundTrace, rebuilt: RoundTrace, token_text: dict | None, caption: str = "",
                   vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1]) -> go.Figure:
    """The tree that ran beside the same round rebuilt under other settings (rebuild.py), each
    coloured by its own scores; nodes whose root path is in only one of the two trees get a
    magenta ring. The rebuilt tree's red path is its exact T = 0 accepted path (none at T > 0)."""
    scene_a = round_scene(rt, token_text, "conditional", vmin=vmin, vmax=vmax)
    scene_r = round_scene(rebuilt, token_text, "conditional", vmin=vmin, vmax=vmax)
    fig = _two_trees(token_text, (rt, scene_a, rt.tree, "ran", "only in the tree that ran"),
                     (rebuilt, scene_r, rebuilt.tree, "rebuilt", "only in the tree that was rebuilt"),
                     (f"ran: {esc(rt.method)}, {rt.tree.num_nodes} nodes, accepted {len(rt.accepted) - 1}",
                      f"rebuilt: {esc(rebuilt.method)}, {rebuilt.tree.num_nodes} nodes"), vmin, vmax)
    fig.update_layout(
        title=dict(text=f"Round {rt.round + 1}: the tree that ran vs rebuilt from the same drafts"
                        + (f"<br><sup>{esc(caption)}</sup>" if caption else "")),
        template="plotly_white", font=FONT, height=max(_tree_height(scene_a), _tree_height(scene_r)),
        hovermode="closest", legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, x=0.0),
        margin=dict(l=20, r=20, t=110, b=90), uirevision=f"rebuild-{rt.method}")
    return fig
