"""Tree layout, exports (SVG/PNG/PDF/TikZ), explorer figures and run charts on hand-made traces.

Run: pytest -q tests/test_layout_export.py   (CPU, a few seconds; the TikZ compile check runs
only where pdflatex is installed)
"""
import os

os.environ["HF_HUB_OFFLINE"] = "1"

import math  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import xml.etree.ElementTree as ET  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from dominotree.view import charts, export, figures, latex, layout  # noqa: E402
from dominotree.trace import DecodeTrace, Menu, RoundTrace, counterfactual_accept  # noqa: E402
from dominotree.tree import Tree, accept_walk, children_of  # noqa: E402

NASTY = {8: "<script>alert(1)</script>", 9: '"quotes"', 10: "a&b", 11: "\n", 12: "{$\\_%}",
         13: "🙂", 14: "\x00\x1b", 15: "]]>", 16: "~^#"}
TOKEN_TEXT = {str(i): s for i, s in NASTY.items()}
TOKEN_TEXT.update({"1": " the", "2": " cat", "3": " sat", "4": " on", "5": " mat", "6": ".",
                   "7": " dog"})
TOKEN_TEXT.update({str(i): f" w{i}" for i in range(20, 200)})


# ------------------------------------------------------------------------- hand-made traces

def make_round(parents, tokens, accepted_rows, bonus, *, rnd=0, method="dominotree", seed=0,
               stage_ms=None, build_ab=None, marginal=None, extra_menu=True):
    """A consistent RoundTrace: scores, menus, Top-M candidates and target tokens derived from
    the shape, so that accept_walk(tree, target_tokens) == (accepted_rows, bonus)."""
    rng = random.Random(seed)
    n = len(tokens)
    depths = [0] * n
    for i in range(1, n):
        depths[i] = depths[parents[i]] + 1
    inc = [0.0] + [-rng.uniform(0.01, 2.0) for _ in range(1, n)]
    minc = [0.0] + [x - rng.uniform(-0.8, 0.8) for x in inc[1:]]
    minc = [min(x, 0.0) for x in minc]
    scores, marg = [0.0] * n, [0.0] * n
    for i in range(1, n):
        scores[i] = scores[parents[i]] + inc[i]
        marg[i] = marg[parents[i]] + minc[i]
    tree = Tree(list(tokens), list(parents), depths, scores, marg)
    tree.validate()
    target = [6] * n
    for a, b in zip(accepted_rows, accepted_rows[1:]):
        target[a] = tokens[b]
    target[accepted_rows[-1]] = bonus
    # Top-M per depth: every node token at that depth ranked by its base log-prob, plus two
    # never-chosen fillers; the first node token at depth 2 is left out ("outside M").
    max_d = max(depths)
    cands, cand_lp = [], []
    for d in range(1, max_d + 1):
        best: dict[int, float] = {}
        for i in range(1, n):
            if depths[i] == d:
                best[tokens[i]] = max(best.get(tokens[i], -1e9), minc[i])
        if d == 2 and len(best) > 1:
            best.pop(next(iter(best)))
        best[150 + d] = -5.0
        best[170 + d] = -6.0
        order = sorted(best, key=lambda t: -best[t])
        cands.append(order)
        cand_lp.append([best[t] for t in order])
    kids = children_of(tree)
    menus = []
    for i in range(n):
        if not kids[i]:
            continue
        d = depths[i] + 1
        toks = [tokens[c] for c in kids[i]]
        lps = [inc[c] for c in kids[i]]
        base = [minc[c] for c in kids[i]]
        if extra_menu:                       # one offered child that was never popped
            toks.append(150 + d); lps.append(-7.0); base.append(-5.0)
        ranks = [cands[d - 1].index(t) if t in cands[d - 1] else -1 for t in toks]
        menus.append(Menu(i, d, toks, lps, base, ranks))
    rt = RoundTrace(rnd, 10 + rnd, method, "python", 0.0, tree, target, list(accepted_rows), bonus,
                    stage_ms=stage_ms or {"draft": 1.0, "build": 2.0, "verify": 3.0, "commit": 0.5},
                    candidates=cands, candidate_logprobs=cand_lp, menus=menus,
                    marginal_tree=marginal, build_ab=build_ab)
    assert accept_walk(tree, target) == (list(accepted_rows), bonus)
    return RoundTrace.from_dict(rt.to_dict())      # the JSON contract holds


def chain_round(**kw):
    return make_round([-1, 0, 1, 2, 3], [1, 2, 3, 4, 5], [0, 1, 2], 6, **kw)


def root_only_round(**kw):
    return make_round([-1], [1], [0], 2, **kw)


def bushy_shape(n, k=4, seed=1):
    """Best-first-like shape: each new row hangs under an earlier row with < k children,
    favouring recent and shallow rows; sibling tokens are distinct."""
    rng = random.Random(seed)
    parents, tokens, nkids = [-1], [1], [0]
    for i in range(1, n):
        while True:
            p = int(i * rng.random() ** 0.5) if rng.random() < 0.7 else rng.randrange(i)
            if nkids[p] < k:
                break
        parents.append(p)
        tokens.append(20 + nkids[p] + 4 * (i % 30))
        nkids[p] += 1
        nkids.append(0)
    return parents, tokens


def bushy_round(n=40, **kw):
    parents, tokens = bushy_shape(n)
    kids = [[] for _ in parents]
    for i in range(1, n):
        kids[parents[i]].append(i)
    acc = [0]
    while kids[acc[-1]] and len(acc) < 5:        # follow first children: deep acceptance
        acc.append(kids[acc[-1]][min(1, len(kids[acc[-1]]) - 1) if len(acc) == 2 else 0])
    used = {tokens[c] for c in kids[acc[-1]]}
    bonus = next(t for t in range(100, 150) if t not in used)
    # a marginal tree on the same block: the same first levels, different deep branches
    mp, mt = bushy_shape(n, seed=7)
    mp, mt = mp[: n // 2], mt[: n // 2]
    mtree = Tree(mt, mp, [0] * len(mp))
    for i in range(1, len(mp)):
        mtree.depths[i] = mtree.depths[mp[i]] + 1
    mtree.scores = [-0.3 * d for d in mtree.depths]
    mtree.marg_scores = list(mtree.scores)
    return make_round(parents, tokens, acc, bonus, marginal=mtree, **kw)


def nasty_round(**kw):
    # root -> <script>, "quotes", a&b ; <script> -> newline -> {$\_%} -> emoji ; a&b -> \x00\x1b, ]]>
    parents = [-1, 0, 0, 0, 1, 4, 5, 3, 3]
    tokens = [16, 8, 9, 10, 11, 12, 13, 14, 15]
    return make_round(parents, tokens, [0, 1, 4, 5], 9, **kw)


def make_trace(rounds, method="dominotree", wall_s=1.0):
    # token_ids[0] is the prefill's token: the root of the first round
    ids = ([rounds[0].tree.tokens[0]] if rounds else []) + [t for rt in rounds for t in rt.committed]
    return DecodeTrace(method, "prompt", [1, 2], ids, "".join(TOKEN_TEXT.get(str(t), "") for t in ids),
                       rounds=rounds, token_text=dict(TOKEN_TEXT), wall_s=wall_s)


# ----------------------------------------------------------------------------------- layout

def check_layout(parents, pos):
    n = len(parents)
    assert len(pos) == n
    assert min(x for x, _ in pos) == 0
    assert len(set(pos)) == n, "two rows share an (x, y)"
    kids = [[] for _ in range(n)]
    for i in range(1, n):
        kids[parents[i]].append(i)
        assert pos[i][1] == pos[parents[i]][1] + 1, "child not one level below its parent"
    for i, cs in enumerate(kids):
        if cs:
            assert pos[i][0] == pytest.approx((pos[cs[0]][0] + pos[cs[-1]][0]) / 2)
            xs = [pos[c][0] for c in cs]
            assert xs == sorted(xs), "siblings out of row order"


@pytest.mark.parametrize("parents", [
    [-1], [-1, 0], [-1, 0, 1, 2, 3, 4], [-1, 0, 0, 0], [-1, 0, 0, 1, 1, 2, 2, 3],
    [-1, 0, 1, 1, 0, 4, 5, 6, 7, 0],          # a deep subtree between shallow ones
])
def test_layout_small(parents):
    check_layout(parents, layout.tidy_layout(parents))


def test_layout_known_answer():
    assert layout.tidy_layout([-1, 0, 0, 1]) == [(0.5, 0), (0.0, 1), (1.0, 1), (0.0, 2)]
    assert layout.tidy_layout([-1, 0, 1]) == [(0.0, 0), (0.0, 1), (0.0, 2)]


@pytest.mark.parametrize("n,k,seed", [(300, 8, 3), (1000, 4, 5), (1000, 16, 6)])
def test_layout_bushy(n, k, seed):
    parents, _ = bushy_shape(n, k, seed)
    pos = layout.tidy_layout(parents)
    check_layout(parents, pos)
    assert pos == layout.tidy_layout(parents), "layout is not deterministic"


def test_layout_long_chain():
    parents = [-1] + list(range(999))
    pos = layout.tidy_layout(parents)
    assert pos[-1] == (0.0, 999)
    check_layout(parents, pos)


def test_token_label():
    tt = TOKEN_TEXT
    assert layout.token_label(1, tt) == "␣the"
    assert layout.token_label(11, tt) == "⏎"
    assert layout.token_label(13, tt) == "🙂"
    assert layout.token_label(14, tt) == "\\x00\\x1b"
    assert layout.token_label(8, tt, max_len=8) == "<script…"
    assert layout.token_label(999, tt) == "#999"
    assert layout.token_label(5, {5: "x"}) == "x"               # int keys work too
    assert layout.token_label(5, {"5": ""}) == "∅"
    assert layout.token_label(5, {"5": "a\u202eb"}) == "a\\u202eb"   # no bidi override
    assert layout.token_label(5, {"5": "\ud83d"}) == "\ufffd"         # lone surrogate


# -------------------------------------------------------------------------------------- SVG

def svg_nodes(svg):
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    return [g for g in root.iter(f"{ns}g") if "node" in g.get("class", "").split()]


@pytest.mark.parametrize("make", [chain_round, root_only_round, bushy_round, nasty_round])
def test_svg_structure(make):
    rt = make()
    svg = export.round_svg(rt, TOKEN_TEXT)
    nodes = svg_nodes(svg)
    assert len(nodes) == len(rt.tree.tokens) + 1                  # + bonus
    accepted = [int(g.get("data-row")) for g in nodes if "accepted" in g.get("class").split()]
    assert sorted(accepted) == sorted(rt.accepted)
    bonus = [g for g in nodes if "bonus" in g.get("class").split()]
    assert len(bonus) == 1 and int(bonus[0].get("data-token")) == rt.bonus
    assert svg == export.round_svg(rt, TOKEN_TEXT)               # byte-deterministic
    # accepted rows are drawn with the thick outline, and only they
    ns = "{http://www.w3.org/2000/svg}"
    thick = {g.get("data-row") for g in nodes if g.find(f"{ns}rect").get("stroke-width") == "3"}
    assert thick == {str(a) for a in rt.accepted}


def test_svg_escapes_tokens():
    rt = nasty_round()
    svg = export.round_svg(rt, TOKEN_TEXT, max_label=40)
    assert "<script" not in svg and "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert "a&amp;b" in svg and "]]&gt;" in svg
    assert "\x00" not in svg and "\x1b" not in svg
    labels = {g.get("data-row"): "".join(g.find("{http://www.w3.org/2000/svg}text").itertext())
              for g in svg_nodes(svg)}
    assert labels["1"] == "<script>alert(1)</script>"
    assert labels["2"] == '"quotes"' and labels["bonus"] == '"quotes"'
    assert labels["3"] == "a&b" and labels["4"] == "⏎" and labels["6"] == "🙂"
    assert labels["5"] == "{$\\_%}" and labels["7"] == "\\x00\\x1b"


def test_svg_large_tree_fast():
    rt = make_round(*bushy_shape(1000, 8, 2), [0], 199, extra_menu=False)
    svg = export.round_svg(rt, TOKEN_TEXT)
    assert len(svg_nodes(svg)) == 1001


# -------------------------------------------------------------------------------- PNG / PDF

def test_png_pdf():
    svg = export.round_svg(bushy_round(), TOKEN_TEXT)
    png = export.round_png(svg)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    pdf = export.round_pdf(svg)
    assert pdf[:5] == b"%PDF-" and b"%%EOF" in pdf[-64:]
    nasty = export.round_png(export.round_svg(nasty_round(), TOKEN_TEXT))
    assert nasty[:4] == b"\x89PNG"


def test_png_is_capped_for_huge_trees():
    rt = make_round(*bushy_shape(200, 2, 4), [0], 199, extra_menu=False)
    png = export.round_png(export.round_svg(rt, TOKEN_TEXT), max_pixels=500_000)
    w, h = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert 250_000 < w * h <= 520_000              # scaled down to the cap, not to nothing


# ------------------------------------------------------------------------------------- TikZ

def unescaped_braces(s):
    s = re.sub(r"\\[{}]", "", s)
    depth = 0
    for ch in s:
        depth += ch == "{"
        depth -= ch == "}"
        assert depth >= 0
    return depth


def test_tikz():
    rt = nasty_round()
    tex = export.round_tikz(rt, TOKEN_TEXT)
    assert unescaped_braces(tex) == 0
    assert tex.count("\\node[") == len(rt.tree.tokens) + 1 + 2       # rows + bonus + title, legend
    for i in range(len(rt.tree.tokens)):
        assert f"] (n{i}) at (" in tex
    assert r"\textless{}script\textgreater{}" in tex
    assert r"\{\$\textbackslash{}\_\%\}" in tex
    assert r"\textquotedbl{}quotes\textquotedbl{}" in tex and r"a\&b" in tex
    assert "\\dtuchar{1F642}{🙂}" in tex and r"\ensuremath{\hookleftarrow}" in tex
    assert r"\textasciitilde{}\textasciicircum{}\#" in tex
    body = tex.split(r"\begin{tikzpicture}")[1]
    # beyond Latin-1 only ever as the second argument of \dtuchar{<its code point>}{<it>}
    outside = re.sub(r"\\dtuchar\{([0-9A-F]{4,6})\}\{(.)\}",
                     lambda m: "" if int(m[1], 16) == ord(m[2]) else "MISMATCH", body)
    assert "MISMATCH" not in outside and not any(ord(c) > 0xFF for c in outside), "stray non-Latin-1 text"
    assert tex.count("\\draw[") == len(rt.tree.tokens)              # n-1 edges + the bonus edge


def test_tikz_unicode_characters_keep_specials_escaped():
    r"""Non-Latin-1 characters come out as \dtuchar{code point}{character} (the character under
    XeLaTeX/LuaLaTeX, [U+XXXX] under pdfLaTeX, both defined in the preamble) with the specials
    around them still escaped; controls, surrogates and format characters never come out raw."""
    s = latex.latex_escape("日{本}\\🙂$#%&_^~×é\u200d\u202e\ud800\x00")
    assert s == ("\\dtuchar{65E5}{日}\\{\\dtuchar{672C}{本}\\}\\textbackslash{}\\dtuchar{1F642}{🙂}\\$\\#\\%\\&\\_"
                 "\\textasciicircum{}\\textasciitilde{}\\dtuchar{00D7}{×}é{\\scriptsize[U+200D]}{\\scriptsize[U+202E]}"
                 "{\\scriptsize[U+D800]}{\\scriptsize[U+0000]}")
    assert unescaped_braces(s) == 0
    rt = nasty_round()
    tex = export.round_tikz(rt, {**TOKEN_TEXT, "8": "日本}語", "9": "Привет#"}, title="τ 日")
    assert "\\dtuchar{65E5}{日}\\dtuchar{672C}{本}\\}\\dtuchar{8A9E}{語}" in tex
    assert "\\dtuchar{041F}{П}" in tex and "\\dtuchar{0442}{т}\\#" in tex and "\\ensuremath{\\tau} \\dtuchar{65E5}{日}" in tex
    assert unescaped_braces(tex) == 0
    pre = tex.split(r"\begin{document}")[0]
    assert r"\newcommand{\dtuchar}[2]{{\scriptsize[U+#1]}}" in pre              # pdfLaTeX's fallback
    assert r"\ifdefined\XeTeXversion" in pre and r"\ifdefined\directlua" in pre and r"\usepackage{fontspec}" in pre
    assert pre.count(r"\newcommand{\dtuchar}") == 2 and r"\usepackage[T1]{fontenc}" in pre
    assert all(f"\\dtusefont{{{f}}}" in pre for f in latex.UNICODE_FONTS)


def _have_latex(engine="pdflatex"):
    if shutil.which(engine) is None or shutil.which("kpsewhich") is None:
        return False
    need = ["standalone.cls", "tikz.sty"] + ([] if engine == "pdflatex" else ["fontspec.sty"])
    r = subprocess.run(["kpsewhich", *need], capture_output=True, text=True)
    return len(r.stdout.split()) == len(need)


@pytest.mark.parametrize("engine", ["pdflatex", "xelatex", "lualatex"])
def test_tikz_compiles(tmp_path, engine):
    """Where the engine is installed (not in CI): the nasty round with CJK and emoji compiles."""
    if not _have_latex(engine):
        pytest.skip(f"{engine} with standalone, tikz (and fontspec) not installed")
    tt = {**TOKEN_TEXT, "8": "日本語", "9": "Привет"}
    (tmp_path / "t.tex").write_text(export.round_tikz(nasty_round(), tt), encoding="utf-8")
    r = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "t.tex"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:]
    assert (tmp_path / "t.pdf").read_bytes()[:5] == b"%PDF-"
    assert "Missing character" not in (tmp_path / "t.log").read_text(errors="replace")


# ------------------------------------------------------------------------------------ figures

def trace_named(fig, name):
    return [t for t in fig.data if t.name == name]


def test_tree_figure():
    rt = bushy_round()
    fig = figures.tree_figure(rt, TOKEN_TEXT)
    (nodes,) = trace_named(fig, "nodes")
    assert len(nodes.x) == len(rt.tree.tokens)
    (bonus,) = trace_named(fig, "bonus token")
    assert len(bonus.x) == 1
    widths = list(nodes.marker.line.width)
    assert {i for i, w in enumerate(widths) if w == 3} == set(rt.accepted)
    # colours are exactly the SVG's
    assert list(nodes.marker.color) == [n.fill for n in export.round_scene(rt, TOKEN_TEXT)[:-1]]
    (acc,) = trace_named(fig, "accepted path")
    assert len([x for x in acc.x if x is None]) == len(rt.accepted) - 1
    assert "children menu" in nodes.hovertext[0] and "Top-M base rank" in nodes.hovertext[1]
    fig.to_json()
    fig_m = figures.tree_figure(rt, TOKEN_TEXT, show="marginal")
    assert trace_named(fig_m, "nodes")[0].marker.color != nodes.marker.color
    with pytest.raises(ValueError):
        figures.tree_figure(rt, TOKEN_TEXT, show="both")


def test_tree_figure_escapes_hover():
    rt = nasty_round()
    fig = figures.tree_figure(rt, TOKEN_TEXT)
    (nodes,) = trace_named(fig, "nodes")
    blob = "".join(nodes.hovertext) + "".join(nodes.text) + "".join(trace_named(fig, "bonus token")[0].hovertext)
    assert "<script" not in blob and "&lt;script&gt;" in blob
    assert "a&amp;b" in blob and "a&b" not in blob
    assert len(nodes.x) == len(rt.tree.tokens)
    for fig in (figures.tree_figure(root_only_round(), TOKEN_TEXT), figures.tree_figure(chain_round(), TOKEN_TEXT)):
        fig.to_json()


def test_marginal_vs_conditional():
    rt = bushy_round()
    fig = figures.marginal_vs_conditional_figure(rt, TOKEN_TEXT)
    n_c, ex_c = counterfactual_accept(rt.tree, rt.committed)
    assert ex_c and n_c == len(rt.accepted) - 1
    n_m, ex_m = counterfactual_accept(rt.marginal_tree, rt.committed)
    want = f"would accept {n_m if ex_m else f'≥{n_m}'}"
    assert want in fig.layout.title.text and f"accepts {n_c} drafts" in fig.layout.title.text
    nodes = trace_named(fig, "nodes (conditional)")[0], trace_named(fig, "nodes (marginal)")[0]
    assert len(nodes[0].x) == len(rt.tree.tokens) and len(nodes[1].x) == len(rt.marginal_tree.tokens)
    only_c = trace_named(fig, "only in the conditional tree")[0]
    only_m = trace_named(fig, "only in the marginal tree")[0]
    assert 0 < len(only_c.x) < len(rt.tree.tokens) and 0 < len(only_m.x) < len(rt.marginal_tree.tokens)
    # a marginal tree holding the whole committed path: the count is a lower bound
    rt2 = chain_round(marginal=Tree.chain(1, [2, 3, 6, 9]))
    fig2 = figures.marginal_vs_conditional_figure(rt2, TOKEN_TEXT)
    assert "would accept ≥3" in fig2.layout.title.text
    fig3 = figures.marginal_vs_conditional_figure(chain_round(), TOKEN_TEXT)
    assert "no marginal tree" in fig3.layout.title.text


def test_topm_figure():
    rt = bushy_round()
    fig = figures.topm_figure(rt, TOKEN_TEXT)
    ranked = sum(len(t.x) for t in fig.data if t.name != "outside Top-M")
    assert ranked == sum(len(c) for c in rt.candidates)
    (outside,) = trace_named(fig, "outside Top-M")
    assert len(outside.x) >= 1                      # one depth-2 node token left out of Top-M
    names = {t.name for t in fig.data if len(t.x)}
    assert "in Top-M, in no menu" in names
    assert names & {"promoted by the correction", "demoted by the correction"}
    blob = "".join(h for t in figures.topm_figure(nasty_round(), TOKEN_TEXT).data for h in (t.hovertext or ()))
    assert "<script" not in blob and "&lt;script&gt;" in blob
    assert "no Top-M" in figures.topm_figure(root_only_round(), TOKEN_TEXT).layout.title.text


# ------------------------------------------------------------------------------------ charts

def test_timing_and_builder_figures():
    rounds = [chain_round(rnd=0, stage_ms={"draft": 1, "build": 2, "verify": 3, "commit": 4}),
              bushy_round(rnd=1, build_ab={"builders": ["python", "graph"], "ms": [5.0, 1.0], "identical": True}),
              nasty_round(rnd=2, build_ab={"builders": ["python", "graph"], "ms": [4.0, 2.0], "identical": False})]
    tr = make_trace(rounds)
    fig = charts.timing_figure(tr)
    bars = {t.name: list(t.y) for t in fig.data}
    assert bars["draft"] == [1, 1.0, 1.0] and bars["commit"] == [4, 0.5, 0.5]
    bf = charts.builder_figure(tr)
    assert list(trace_named(bf, "python")[0].y) == [5.0, 4.0] and list(trace_named(bf, "graph")[0].y) == [1.0, 2.0]
    assert list(trace_named(bf, "trees differ")[0].x) == [3]          # rounds are numbered from 1
    assert "1/2 A/B rounds built identical trees" in bf.layout.title.text
    solo = charts.builder_figure(make_trace([chain_round(), bushy_round(rnd=1)]))
    assert "builder only" in solo.layout.title.text and len(solo.data) == 1
    assert list(solo.data[0].y) == [2.0, 2.0]


def test_accept_and_depth_figures():
    a = make_trace([chain_round(), nasty_round(rnd=1), chain_round(rnd=2)])        # tau = (3+4+3)/3
    ar = make_trace([root_only_round(rnd=i, method="ar") for i in range(4)], method="ar")
    h = charts.accept_hist_figure({"dominotree": a, "ar": ar})
    d = {t.name.split(" (")[0]: t for t in h.data}
    assert list(d["dominotree"].x) == [1, 2, 3, 4]
    assert list(d["dominotree"].y) == pytest.approx([0, 0, 2 / 3, 1 / 3])
    assert list(d["ar"].y) == pytest.approx([1, 0, 0, 0])
    dep = charts.depth_accept_figure({"dominotree": a, "ar": ar})
    assert [t.name for t in dep.data] == ["dominotree"]                        # AR drafts nothing
    assert list(dep.data[0].y) == pytest.approx([1, 1, 1 / 3, 0])            # deepest tree: 4


def test_provenance_html():
    rt = nasty_round()
    tr = make_trace([rt, chain_round(rnd=1)])
    out = charts.provenance_html(tr, TOKEN_TEXT)
    assert "<script" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert "&quot;quotes&quot;" in out and "a&amp;b" not in out             # a&b never committed
    assert out.count('class="dt-tok dt-draft"') == 3 + 2 + 1                # + legend swatch
    assert out.count('class="dt-tok dt-bonus"') == 2 + 1                     # + legend swatch
    assert 'title="round 1 · accepted draft token at depth 1 · token 8"' in out
    assert out.count('class="dt-tok dt-prefill"') == 1 + 1                   # + legend swatch
    assert "\x00" not in out
    # a trace whose rounds do not cover its tokens marks the rest as unknown
    tr.token_ids.append(7)
    assert charts.provenance_html(tr).count('class="dt-tok dt-unknown"') == 2


def test_summary_table():
    a = make_trace([chain_round(), nasty_round(rnd=1), chain_round(rnd=2)], wall_s=2.0)
    ar = make_trace([root_only_round(rnd=i, method="ar") for i in range(5)], method="ar", wall_s=5.0)
    df = charts.summary_table({"ar": ar, "dominotree": a})
    row = df.set_index("method").loc["dominotree"]
    assert row["rounds"] == 3 and row["new tokens"] == 11                # prefill token + 10 committed
    assert row["tau"] == pytest.approx(10 / 3, abs=1e-3)
    assert row["tokens/s"] == pytest.approx(5.5)
    assert row["speedup vs ar"] == pytest.approx(5.5 / 1.2, abs=1e-3)    # ar: 6 tokens in 5 s
    assert row["verify ms"] == pytest.approx(3.0)
    assert df.set_index("method").loc["ar", "speedup vs ar"] == pytest.approx(1.0)
    solo = charts.summary_table({"dominotree": a})
    assert math.isnan(solo.loc[0, "speedup vs ar"])


def test_library_never_imports_gradio():
    for name in ("layout.py", "export.py", "figures.py", "charts.py"):
        src = (Path(layout.__file__).parent / name).read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from)\s+gradio", src, re.M), name


def test_trace_json_is_to_json():
    from dominotree.trace import load_trace
    tr = make_trace([nasty_round(), chain_round(rnd=1)])
    s = export.trace_json(tr)
    assert s == tr.to_json()
    back = load_trace(s)
    assert export.round_svg(back.rounds[0], back.token_text) == export.round_svg(tr.rounds[0], TOKEN_TEXT)
