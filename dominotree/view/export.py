"""Export one round's draft tree exactly as the explorer shows it: SVG, PNG, PDF, TikZ.

One scene (``round_scene``: rows, positions, labels, colours, the accepted path, the bonus
token) feeds every format, so the SVG, the TikZ picture and the plotly view (figures.py) agree.
Depth runs left to right (one column per draft position); siblings run down, best first.

Model tokens are untrusted: every label goes through ``layout.token_label`` (printable, one
line) and then the format's own escaping (XML for SVG, LaTeX for TikZ). The SVG is written by
hand (no plotting library), parses with ``xml.etree`` and is byte-deterministic; PNG and PDF
are rendered from it by cairosvg (pip ``cairosvg``; needs the Debian ``libcairo2`` library).

The JSON export of a whole run is ``DecodeTrace.to_json`` (trace.py).
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from xml.sax.saxutils import escape as _xml_escape

from .latex import latex_escape, tikz_preamble, tikz_rgb
from .layout import char_cells, token_label, tree_layout
from ..colors import hex_rgb
from ..trace import DecodeTrace, RoundTrace
from ..tree import Tree

# plotly's "Viridis" stops: perceptually uniform and colour-blind safe; figures.py uses the
# same name so the SVG and the interactive view colour a node alike.
VIRIDIS = ("#440154", "#482878", "#3e4989", "#31688e", "#26828e",
           "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725")
ACCEPT_COLOR = "#d62728"   # accepted path and bonus outline: red is absent from viridis
EDGE_COLOR = "#9a9a9a"
ROOT_FILL = "#e6e6e6"
BONUS_FILL = "#ffffff"
SCORE_RANGE = (-8.0, 0.0)  # fixed log-prob range so rounds and methods compare; values clip

SHOWS = ("conditional", "marginal")
_MONO = "DejaVu Sans Mono, Menlo, Consolas, Noto Color Emoji, Apple Color Emoji, Segoe UI Emoji, monospace"
_SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"


def score_color(value: float, vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1]) -> str:
    """Viridis colour of a log-prob, clipped to [vmin, vmax] (NaN -> the low end)."""
    t = 0.0 if not math.isfinite(value) or vmax <= vmin else (value - vmin) / (vmax - vmin)
    t = min(max(t, 0.0), 1.0) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    f = t - i
    a, b = hex_rgb(VIRIDIS[i]), hex_rgb(VIRIDIS[i + 1])
    return "#%02x%02x%02x" % tuple(round(x + (y - x) * f) for x, y in zip(a, b))


def text_color(fill: str) -> str:
    """Black or white, whichever reads better on ``fill`` (WCAG relative luminance)."""
    def lin(c):
        c /= 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in hex_rgb(fill))
    return "#000000" if 0.2126 * r + 0.7152 * g + 0.0722 * b > 0.18 else "#ffffff"


@dataclass
class SceneNode:
    row: int            # tree row; the bonus node has row == len(tree)
    token: int
    label: str          # printable, NOT escaped
    parent: int         # -1 for the root
    depth: int
    x: float            # tidy-layout slot (runs down the page); depth runs across
    score: float        # the coloured score (conditional or marginal, cumulative)
    fill: str
    accepted: bool
    bonus: bool = False


def round_scene(rt: RoundTrace, token_text: dict | None, show: str = "conditional",
                tree: Tree | None = None, accepted: list[int] | None = None,
                bonus: int | None = None, vmin: float = SCORE_RANGE[0],
                vmax: float = SCORE_RANGE[1], max_label: int = 12) -> list[SceneNode]:
    """The drawable rows of one round: the tree rows, then the bonus token (if any) as an extra
    leaf under the last accepted row, so the layout gives it a slot of its own.

    ``tree``/``accepted``/``bonus`` default to the round's own; figures.py passes the marginal
    tree with its counterfactual path to draw it the same way (``bonus=-1``: no bonus node).
    """
    if show not in SHOWS:
        raise ValueError(f"show must be one of {SHOWS}, got {show!r}")
    tree = rt.tree if tree is None else tree
    accepted = list(rt.accepted) if accepted is None else list(accepted)
    bonus = rt.bonus if bonus is None else bonus
    n = len(tree.tokens)
    has_bonus = bonus is not None and bonus >= 0 and bool(accepted)
    pos = tree_layout(tree, [accepted[-1]] if has_bonus else [])
    scores = tree.scores if show == "conditional" else tree.marg_scores
    acc = set(accepted)
    out = []
    for i in range(n):
        s = float(scores[i])
        out.append(SceneNode(i, int(tree.tokens[i]), token_label(tree.tokens[i], token_text, max_label),
                             int(tree.parents[i]), int(tree.depths[i]), pos[i][0], s,
                             ROOT_FILL if i == 0 else score_color(s, vmin, vmax), i in acc))
    if has_bonus:
        last = accepted[-1]
        out.append(SceneNode(n, int(bonus), token_label(bonus, token_text, max_label), last,
                             int(tree.depths[last]) + 1, pos[n][0], float("nan"), BONUS_FILL,
                             False, bonus=True))
    return out


def _round_title(rt: RoundTrace) -> str:
    return (f"Round {rt.round + 1} · {rt.method} · τ = {rt.accept_len} "
            f"({len(rt.accepted) - 1} accepted + bonus) · {rt.tree.num_nodes} nodes")


# ---------------------------------------------------------------------------------------- SVG

def _xa(s: str) -> str:
    """Escape for an XML attribute value in double quotes."""
    return _xml_escape(s, {'"': "&quot;", "'": "&apos;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"})


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".") if v == v else "nan"


def round_svg(rt: RoundTrace, token_text: dict | None, show: str = "conditional",
              vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1],
              max_label: int = 12, title: str | None = None) -> str:
    """One round's tree as a standalone SVG string.

    Boxes are coloured by the ``show`` score (cumulative log-prob, viridis, clipped to
    [vmin, vmax]); the accepted path has a thick red outline and thick red edges; the bonus
    token is a dashed box hanging off the last accepted node. Each node is a
    ``<g class="node ..." data-row="i">`` with a ``<title>`` tooltip, so a browser can hover it
    and a script can find it.
    """
    nodes = round_scene(rt, token_text, show, vmin=vmin, vmax=vmax, max_label=max_label)
    fs, cw, box_h, row_h, gap = 12, 7.3, 20, 26, 30    # font px, char px, box, row pitch, edge gap
    widths = [max(char_cells(nd.label), 1) * cw + 12 for nd in nodes]
    col_w = max(widths) + gap
    margin, top = 16, 92
    max_depth = max(nd.depth for nd in nodes)
    max_x = max(nd.x for nd in nodes)
    width = max(margin * 2 + (max_depth + 1) * col_w, 600)
    height = top + (max_x + 1) * row_h + margin

    def cx(nd):
        return margin + nd.depth * col_w + col_w / 2 - gap / 2

    def cy(nd):
        return top + nd.x * row_h + row_h / 2

    title = _round_title(rt) if title is None else title
    score_name = "conditional" if show == "conditional" else "marginal"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{_fmt(height)}" '
           f'viewBox="0 0 {_fmt(width)} {_fmt(height)}" font-family="{_xa(_SANS)}">',
           f'<title>{_xml_escape(title)}</title>',
           '<defs><linearGradient id="dt-viridis" x1="0" x2="1" y1="0" y2="0">'
           + "".join(f'<stop offset="{k / (len(VIRIDIS) - 1):.3f}" stop-color="{c}"/>'
                     for k, c in enumerate(VIRIDIS))
           + '</linearGradient></defs>',
           '<rect width="100%" height="100%" fill="#ffffff"/>',
           f'<text x="{margin}" y="24" font-size="15" font-weight="bold">{_xml_escape(title)}</text>']
    # legend: colour bar, accepted swatch, bonus swatch
    ly = 40
    out += ['<g class="legend" font-size="11">',
            f'<rect x="{margin}" y="{ly}" width="140" height="12" fill="url(#dt-viridis)" stroke="#555"/>',
            f'<text x="{margin}" y="{ly + 26}">≤{_fmt(vmin)}</text>',
            f'<text x="{margin + 140}" y="{ly + 26}" text-anchor="end">{_fmt(vmax)}</text>',
            f'<text x="{margin + 148}" y="{ly + 10}">{score_name} log-prob (cumulative)</text>',
            f'<rect x="{margin + 360}" y="{ly - 2}" width="26" height="16" rx="4" fill="{VIRIDIS[6]}" '
            f'stroke="{ACCEPT_COLOR}" stroke-width="3"/>',
            f'<text x="{margin + 392}" y="{ly + 10}">accepted path</text>',
            f'<rect x="{margin + 490}" y="{ly - 2}" width="26" height="16" rx="4" fill="{BONUS_FILL}" '
            f'stroke="{ACCEPT_COLOR}" stroke-width="2" stroke-dasharray="4 2"/>',
            f'<text x="{margin + 522}" y="{ly + 10}">bonus token</text>',
            '</g>']
    # column headers: the draft position of each column
    out.append('<g class="depths" font-size="10" fill="#777777" text-anchor="middle">')
    out += [f'<text x="{margin + d * col_w + col_w / 2 - gap / 2:.1f}" y="{top - 8}">depth {d}</text>'
            for d in range(max_depth + 1)]
    out.append('</g>')
    # edges first, accepted ones last so they sit on top
    edges = []
    for k, nd in enumerate(nodes):
        if nd.parent < 0:
            continue
        p = nodes[nd.parent]
        x1, y1 = cx(p) + widths[nd.parent] / 2, cy(p)
        x2, y2 = cx(nd) - widths[k] / 2, cy(nd)
        xm = (x1 + x2) / 2
        d = f"M{x1:.1f},{y1:.1f} C{xm:.1f},{y1:.1f} {xm:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        hot = nd.accepted or nd.bonus
        style = (f'stroke="{ACCEPT_COLOR}" stroke-width="3"' if nd.accepted
                 else f'stroke="{ACCEPT_COLOR}" stroke-width="2" stroke-dasharray="5 3"' if nd.bonus
                 else f'stroke="{EDGE_COLOR}" stroke-width="1.2"')
        edges.append((hot, f'<path class="edge{" accepted" if hot else ""}" d="{d}" fill="none" {style}/>'))
    out.append('<g class="edges">')
    out += [e for hot, e in edges if not hot] + [e for hot, e in edges if hot]
    out.append('</g>')
    out.append(f'<g class="nodes" font-family="{_xa(_MONO)}" font-size="{fs}">')
    for k, nd in enumerate(nodes):
        w = widths[k]
        x, y = cx(nd) - w / 2, cy(nd) - box_h / 2
        cls = "node bonus" if nd.bonus else "node accepted" if nd.accepted else "node"
        if nd.bonus:
            stroke = f'stroke="{ACCEPT_COLOR}" stroke-width="2" stroke-dasharray="4 2"'
        elif nd.accepted:
            stroke = f'stroke="{ACCEPT_COLOR}" stroke-width="3"'
        else:
            stroke = 'stroke="#444444" stroke-width="0.8"'
        tip = (f"bonus token {nd.label} (the target's token after the last accepted node)"
               if nd.bonus else
               f"row {nd.row} · depth {nd.depth} · token {nd.token} {nd.label} · "
               f"{score_name} {nd.score:.3f}" + (" · accepted" if nd.accepted else ""))
        row_attr = "bonus" if nd.bonus else str(nd.row)
        out.append(f'<g class="{cls}" data-row="{row_attr}" data-token="{nd.token}">'
                   f'<title>{_xml_escape(tip)}</title>'
                   f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{box_h}" rx="5" '
                   f'fill="{nd.fill}" {stroke}/>'
                   f'<text x="{cx(nd):.1f}" y="{cy(nd) + fs * 0.35:.1f}" text-anchor="middle" '
                   f'fill="{text_color(nd.fill)}" xml:space="preserve">{_xml_escape(nd.label)}</text></g>')
    out.append('</g></svg>')
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------ PNG and PDF

def _cairosvg():
    try:
        import cairosvg
    except (ImportError, OSError) as e:   # OSError: the Python package is there, libcairo is not
        raise RuntimeError("PNG/PDF export needs the pip package 'cairosvg' and the system "
                           f"library libcairo2 (Debian: apt-get install libcairo2): {e}") from None
    return cairosvg


def _svg_size(svg: str) -> tuple[float, float]:
    root = ET.fromstring(svg)
    return float(root.get("width", "800")), float(root.get("height", "600"))


def round_png(svg: str, scale: float = 2.0, max_pixels: int = 40_000_000) -> bytes:
    """Render an SVG string (from ``round_svg``) to PNG bytes, at ``scale`` x its size, reduced
    so the image stays under ``max_pixels`` (a 1000-node tree is tall)."""
    w, h = _svg_size(svg)
    scale = min(scale, math.sqrt(max_pixels / max(w * h, 1.0)))
    return _cairosvg().svg2png(bytestring=svg.encode("utf-8"), scale=scale)


def round_pdf(svg: str) -> bytes:
    """Render an SVG string to a one-page vector PDF (text stays text)."""
    return _cairosvg().svg2pdf(bytestring=svg.encode("utf-8"))


# ------------------------------------------------------------------------------------- TikZ

def round_tikz(rt: RoundTrace, token_text: dict | None, show: str = "conditional",
               vmin: float = SCORE_RANGE[0], vmax: float = SCORE_RANGE[1],
               max_label: int = 12, title: str | None = None) -> str:
    """One round's tree as a standalone LaTeX document with one ``tikzpicture``: compiles with
    ``pdflatex`` (characters beyond Latin-1 as ``[U+XXXX]``) or with ``xelatex``/``lualatex``
    (those characters themselves, from an installed font that has them; ``tikz_preamble``). Same
    scene and colours as ``round_svg``; one ``\\node`` per tree row plus one for the bonus token."""
    import networkx as nx

    nodes = round_scene(rt, token_text, show, vmin=vmin, vmax=vmax, max_label=max_label)
    g = nx.DiGraph()
    accept = tikz_rgb(ACCEPT_COLOR)
    for nd in nodes:
        style = [f"fill={tikz_rgb(nd.fill)}", f"text={tikz_rgb(text_color(nd.fill))}"]
        if nd.bonus:
            style += [f"draw={accept}", "dashed", "line width=0.8pt"]
        elif nd.accepted:
            style += [f"draw={accept}", "line width=1.4pt"]
        name = "bonus" if nd.bonus else f"n{nd.row}"
        g.add_node(name, pos=(nd.depth * 2.3, -nd.x * 0.62), options=", ".join(style),
                   label=latex_escape(nd.label))
        if nd.parent >= 0:
            hot = nd.accepted or nd.bonus
            opts = (f"draw={accept}, line width=1.4pt" if nd.accepted
                    else f"draw={accept}, dashed, line width=0.8pt" if nd.bonus
                    else "draw=black!40, line width=0.4pt")
            g.add_edge(f"n{nd.parent}", name, options=opts, hot=hot)
    title = _round_title(rt) if title is None else title
    score_name = "conditional" if show == "conditional" else "marginal"
    lines = [r"\documentclass[tikz,border=6pt]{standalone}", *tikz_preamble(),
             r"\usepackage{xcolor}",
             r"\begin{document}",
             r"\begin{tikzpicture}[every node/.style={rectangle, rounded corners=2pt, "
             r"draw=black!70, line width=0.3pt, font=\ttfamily\scriptsize, inner sep=2pt, "
             r"minimum height=4mm}]",
             f"% {len(rt.tree.tokens)} tree rows; accepted rows {rt.accepted}; bonus token {rt.bonus}"]
    for name, data in g.nodes(data=True):
        x, y = data["pos"]
        lines.append(f"\\node[{data['options']}] ({name}) at ({x:.2f},{y:.2f}) {{{data['label']}}};")
    # cold edges first so the accepted path is drawn on top
    for u, v, data in sorted(g.edges(data=True), key=lambda e: e[2]["hot"]):
        lines.append(f"\\draw[{data['options']}] ({u}.east) -- ({v}.west);")
    lines += [f"\\node[draw=none, anchor=south west, font=\\sffamily\\small] at (-0.6,1.0) "
              f"{{{latex_escape(title)}}};",
              f"\\node[draw=none, anchor=south west, font=\\sffamily\\scriptsize] at (-0.6,0.5) "
              f"{{fill: {score_name} log-prob (cumulative, viridis, {latex_escape(_fmt(vmin))} to "
              f"{latex_escape(_fmt(vmax))}); red outline: accepted path; dashed: bonus token}};",
              r"\end{tikzpicture}", r"\end{document}"]
    return "\n".join(lines) + "\n"


def trace_json(trace: DecodeTrace, path=None) -> str:
    """The whole run as versioned JSON: exactly ``DecodeTrace.to_json`` (replayable with
    ``trace.load_trace``)."""
    return trace.to_json(path)


def side_by_side_svg(left: str, right: str, title: str, gap: float = 24) -> str:
    """Two standalone SVGs (``round_svg`` outputs) in one, left and right, under ``title``: the
    tree that ran beside a rebuilt one (``rebuild.py``)."""
    wl, hl = _svg_size(left)
    wr, hr = _svg_size(right)
    top = 34
    width, height = wl + gap + wr, top + max(hl, hr)

    def inner(svg: str, x: float) -> str:
        body = svg.split("\n", 1)[1] if svg.startswith("<?xml") else svg
        return body.replace("<svg ", f'<svg x="{_fmt(x)}" y="{top}" ', 1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{_fmt(height)}" '
            f'viewBox="0 0 {_fmt(width)} {_fmt(height)}" font-family="{_xa(_SANS)}">\n'
            f'<rect width="100%" height="100%" fill="#ffffff"/>\n'
            f'<text x="16" y="22" font-size="15" font-weight="bold">{_xml_escape(title)}</text>\n'
            + inner(left, 0) + inner(right, wl + gap) + "</svg>\n")
