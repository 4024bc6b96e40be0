"""The cost panel (``costpanel.py``) as a standalone SVG (PNG and PDF through ``export``'s
cairosvg) and as a TikZ document: the rounds here and projected, as (round cost in steps, tokens
committed) points with the speedup = 1, 1.5, 2 lines, each method's mean marked, and the
captions. Written by hand like ``export.round_svg``: deterministic, text stays text."""
from __future__ import annotations

import textwrap
from xml.sax.saxutils import escape

from .costpanel import SPEEDUP_LINES, CostPanel, captions
from .latex import latex_escape, tikz_preamble, tikz_rgb
from ..colors import method_color

W, H, PAD = 420, 300, 48        # one chart's box and its axis margin, px


def _charts(panel: CostPanel):
    """(title, [(method, points, mean cost, tau)], x max, y max) for the two charts."""
    out = []
    for title, pts, cost in (("rounds here (measured)", lambda m: m.points, lambda m: m.cost),
                             (f"projected onto {panel.projection.label}", lambda m: m.projected_points,
                              lambda m: m.projected_cost)):
        series = [(m.method, pts(m), cost(m), m.tau) for m in panel.methods]
        xmax = max([p[0] for _, ps, _, _ in series for p in ps] + [1.0]) * 1.1
        ymax = max([p[1] for _, ps, _, _ in series for p in ps] + [2.0]) * 1.1
        out.append((title, series, xmax, ymax))
    return out


def cost_svg(panel: CostPanel) -> str:
    lines = [w for c in captions(panel) for w in textwrap.wrap(c, 150)]
    width, height = 2 * (W + PAD) + 40, H + PAD + 60 + 16 * len(lines) + 24
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">',
           '<rect width="100%" height="100%" fill="#ffffff"/>',
           '<text x="16" y="22" font-size="15" font-weight="bold">Why it wins or loses: round cost vs tokens committed'
           '</text>']
    for k, (title, series, xmax, ymax) in enumerate(_charts(panel)):
        x0, y0 = 16 + PAD + k * (W + PAD + 20), 50

        def sx(v):
            return x0 + v / xmax * W

        def sy(v):
            return y0 + H - v / ymax * H
        out.append(f'<g class="chart"><text x="{x0}" y="{y0 - 8}" font-weight="bold">{escape(title)}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{W}" height="{H}" fill="none" stroke="#999999"/>')
        for s in SPEEDUP_LINES:      # tokens = s * cost, clipped to the box
            xe = min(xmax, ymax / s)
            out.append(f'<line class="speedup" x1="{sx(0):.1f}" y1="{sy(0):.1f}" x2="{sx(xe):.1f}" y2="{sy(s * xe):.1f}" '
                       f'stroke="#888888" stroke-dasharray="{"none" if s == 1 else "4 3"}"/>'
                       f'<text x="{sx(xe) + 2:.1f}" y="{sy(s * xe) + 10:.1f}" fill="#666666">{s:g}x</text>')
        for method, pts, cost, tau in series:
            c = method_color(method)
            out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}" fill-opacity="0.5"/>' for x, y in pts]
            out.append(f'<text class="mean" x="{sx(cost):.1f}" y="{sy(tau):.1f}" fill="{c}" font-size="14" '
                       f'text-anchor="middle" dominant-baseline="middle">×</text>'
                       f'<text x="{sx(cost) + 8:.1f}" y="{sy(tau) - 6:.1f}" fill="{c}">{escape(method)}</text>')
        out.append(f'<text x="{x0 + W / 2}" y="{y0 + H + 30}" text-anchor="middle">round cost (ar steps, 0 to '
                   f'{xmax:.1f})</text><text x="{x0 - 30}" y="{y0 + H / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {x0 - 30} {y0 + H / 2})">tokens committed (0 to {ymax:.1f})</text></g>')
    y = 50 + H + 60
    for line in lines:
        out.append(f'<text class="caption" x="16" y="{y}">{escape(line)}</text>')
        y += 16
    out.append("</svg>")
    return "\n".join(out) + "\n"


def cost_tikz(panel: CostPanel) -> str:
    """Both charts as one standalone TikZ picture (pdflatex), the captions below."""
    body = []
    for k, (title, series, xmax, ymax) in enumerate(_charts(panel)):
        ox = k * 8.0
        sx, sy = 6.0 / xmax, 4.5 / ymax
        body.append(f"\\draw[black!40] ({ox},0) rectangle ({ox + 6},4.5);")
        body.append(f"\\node[anchor=south west, font=\\bfseries\\small] at ({ox},4.6) {{{latex_escape(title)}}};")
        body.append(f"\\node[font=\\scriptsize] at ({ox + 3},-0.5) {{round cost (ar steps, 0 to {xmax:.1f})}};")
        for s in SPEEDUP_LINES:
            xe = min(xmax, ymax / s)
            body.append(f"\\draw[black!50{', dashed' if s != 1 else ''}] ({ox},0) -- ({ox + xe * sx:.3f},{s * xe * sy:.3f}) "
                        f"node[right, font=\\tiny] {{{s:g}x}};")
        for method, pts, cost, tau in series:
            col = tikz_rgb(method_color(method))
            body += [f"\\fill[color={col}, opacity=0.5] ({ox + x * sx:.3f},{y * sy:.3f}) circle (1.2pt);" for x, y in pts]
            body.append(f"\\node[color={col}, font=\\scriptsize] at ({ox + cost * sx:.3f},{tau * sy:.3f}) "
                        f"{{$\\times$ {latex_escape(method)}}};")
    caps = ["\\node[anchor=north west, text width=14cm, font=\\scriptsize] at (0,-1.0) {"
            + "\\par\\smallskip ".join(latex_escape(c) for c in captions(panel)) + "};"]
    return "\n".join([r"\documentclass[tikz,border=6pt]{standalone}", *tikz_preamble(), r"\usepackage{xcolor}",
                      r"\begin{document}", r"\begin{tikzpicture}", *body, *caps, r"\end{tikzpicture}",
                      r"\end{document}"]) + "\n"
