"""Rebuild the round on screen under other settings (Top-M, K, budget, scorer, draft vocabulary),
next to the tree that ran. The library does the work (``dominotree.view.rebuild``); this module maps
controls onto ``rebuild.Settings``, runs it on the model thread when no run holds the model, and
writes the caption. A rebuild of a budget-32 tree takes milliseconds; changing the draft
vocabulary reruns the LM head on the drafter's rows (tens of ms), and its first use builds the
GRU's token table for that vocabulary (about a second, once)."""
from __future__ import annotations

import html

import gradio as gr

from dominotree.view import figures
from dominotree.view import rebuild as rb
from dominotree.config import ConfigError

from . import backend as be
from .controls import DRAFT_VOCABS, draft_vocab_size, lenient, number
from .round_view import clamp_round, pick, tok_html

SAME_VOCAB = "as the run"


def settings_from(topm, k, budget, scorer, vocab, own: rb.Settings) -> rb.Settings:
    """Control values -> Settings (ConfigError with a message on a mistake)."""
    topm = number("corr_topm", "Top-M", topm)
    k = number("node_topk", "K (children per node)", k)
    budget = number("budget", "Budget", budget)
    n = own.draft_vocab if vocab in (None, "", SAME_VOCAB) else draft_vocab_size(vocab)
    if scorer not in rb.SCORERS:
        raise ConfigError(f"choose a scorer: {', '.join(rb.SCORERS)}")
    if topm and k > topm:         # a node's children come from the Top-M: the teacher's "Top-M 4" means K <= 4
        k = topm
    return rb.Settings(scorer, topm, k, budget, n)


def caption_html(trace, rt, got: rb.Rebuilt, token_text) -> str:
    s, own = got.settings, rb.own_settings(trace, rt)
    changed = [f"{name} {a} → <b>{b}</b>" for name, a, b in
               (("scorer", own.scorer or "chain", s.scorer), ("Top-M", own.topm, s.topm), ("K", own.k, s.k),
                ("budget", own.budget, s.budget), ("draft vocabulary", own.draft_vocab or "full", s.draft_vocab or "full"))
               if str(a) != str(b)]
    head = (f"Rebuilt round {rt.round + 1} of {html.escape(trace.method)} as <b>{html.escape(got.method)}</b>"
            + (f" ({', '.join(changed)})" if changed else " with the round's own settings (the identical tree)")
            + f" in {got.ms:.0f} ms, from the round's drafts: the target did not run.")
    diff = (f"{len(got.only_rebuilt)} node(s) only in the rebuilt tree, {len(got.only_actual)} only in the tree "
            f"that ran (magenta rings).")
    k = len(rt.accepted) - 1
    if got.exact is None:
        acc = ("At T > 0 what a tree accepts depends on the target's samples, which a different tree would have "
               "drawn differently: only the tree is shown, no accepted count.")
    else:
        path = " ".join(tok_html(t, token_text) for t in got.accepted_tokens) or "nothing"
        bound = "" if got.exact else "at least "
        acc = (f"At T = 0 it would have accepted <b>{bound}{got.accepted}</b> draft token"
               f"{'s' if got.accepted != 1 else ''} ({path}) against <b>{k}</b> in the tree that ran"
               + (" — <b>a different accepted path</b>" if got.path_changed else "")
               + ". Exact: the target's greedy continuation of the root is what the run committed."
               + ("" if got.exact else " (It followed every token decoded, so it may accept more.)"))
    notes = got.notes + ([f"K is at most Top-M (a node's children are drawn from the Top-M candidates): K {s.k} "
                          f"here"] if s.topm and s.k == s.topm and s.k < own.k else [])
    notes = "".join(f"<br><i>{html.escape(n)}</i>" for n in notes)
    return (f'<div class="dt-rebuild" data-accepted="{got.accepted}" data-exact="{got.exact}" '
            f'data-nodes="{got.round.tree.num_nodes}" data-method="{html.escape(got.method)}">'
            f"{head}<br>{diff}<br>{acc}{notes}</div>")


def message_html(text: str, kind: str = "info") -> str:
    return f'<div class="dt-rebuild dt-rebuild-{kind}">{html.escape(text)}</div>'


def write_files(folder, stem: str, svg: str, tikz: str) -> list:
    """SVG, PDF, PNG and TikZ files of a view (PDF/PNG None without cairosvg)."""
    from dominotree.view import export
    out = {"svg": svg.encode("utf-8"), "tex": tikz.encode("utf-8")}
    try:
        out["pdf"], out["png"] = export.round_pdf(svg), export.round_png(svg)
    except RuntimeError:
        pass
    paths = []
    for ext in ("svg", "pdf", "png", "tex"):
        f = folder / f"{stem}.{ext}"
        try:
            f.write_bytes(out[ext])
            paths.append(gr.update(value=str(f), interactive=True))
        except (KeyError, FileNotFoundError):     # no cairosvg; or the page closed and its folder went
            paths.append(gr.update(value=None, interactive=False))
    return paths


def rebuild_files(folder, trace, rt, got: rb.Rebuilt, short: str) -> list:
    from dominotree.view import export
    tt = trace.token_text
    title = f"Round {rt.round + 1}: the tree that ran ({rt.method}) vs rebuilt ({short})"
    svg = export.side_by_side_svg(export.round_svg(rt, tt), export.round_svg(got.round, tt, title=f"rebuilt: {short}"),
                                  title)
    tikz = export.round_tikz(got.round, tt, title=f"Round {rt.round + 1} of {rt.method}, {short}")
    return write_files(folder, f"dominotree-rebuild-{rt.method}-round{rt.round + 1}", svg, tikz)


NO_FILES = [gr.update(value=None, interactive=False)] * 4


def render_rebuild(backend: be.Backend, traces, focus, idx, topm, k, budget, scorer, vocab, folder=None) -> list:
    """Outputs for [rebuild caption, rebuild tree, SVG, PDF, PNG, TikZ downloads]."""
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return [message_html("Run a prompt to rebuild its rounds under other settings."), None, *NO_FILES]
    i = clamp_round(trace, idx)
    rt = trace.rounds[i]
    decoder = backend._decoder
    why = rb.unavailable(trace, rt, decoder) if decoder is not None or rt.method == "ar" else \
        "rebuilding a saved round needs its model loaded (Load model, or run a prompt)"
    if why:
        return [message_html(f"Rebuild unavailable for this round: {why}."), None, *NO_FILES]
    try:
        settings = settings_from(topm, k, budget, scorer, vocab, rb.own_settings(trace, rt))
    except ConfigError as e:
        gr.Warning(html.escape(str(e), quote=False))
        return [message_html(f"Not rebuilt: {e}", "error"), *[gr.skip()] * 5]
    if backend.model_lock.locked():
        return [message_html("A run (or a calibration) holds the model: the rebuild runs when it ends; change a "
                             "setting again then."), *[gr.skip()] * 5]

    def work():
        if not backend.model_lock.acquire(blocking=False):
            raise ConfigError("a run holds the model; try again when it ends")
        try:
            return rb.rebuild(decoder, trace, i, settings)
        finally:
            backend.model_lock.release()
    try:
        got = be.model_thread.call(work)
    except ConfigError as e:
        gr.Warning(html.escape(str(e), quote=False))
        return [message_html(f"Not rebuilt: {e}", "error"), *[gr.skip()] * 5]
    cap = caption_html(trace, rt, got, trace.token_text)
    short = (f"rebuilt as {got.method}: Top-M {settings.topm}, K {settings.k}, budget {settings.budget}; "
             + ("T > 0: no accepted count" if got.exact is None else
                f"accepts {'' if got.exact else '≥'}{got.accepted} (ran: {len(rt.accepted) - 1})"))
    files = rebuild_files(folder, trace, rt, got, short) if folder is not None else [gr.skip()] * 4
    return [cap, figures.rebuilt_figure(rt, got.round, trace.token_text, short), *files]


def export_buttons(prefix: str, label: str) -> dict:
    """SVG / PDF / PNG / TikZ download buttons ``<prefix>-export-<fmt>``, filled by the renderer."""
    from .files import _local_examples
    with gr.Row(elem_classes=["dt-exports"]):
        gr.HTML(f"<b>{html.escape(label)}</b>:", elem_classes=["dt-export-label"], padding=False)
        return {f"{prefix}_export_{fmt}": _local_examples(gr.DownloadButton(
            name, elem_id=f"{prefix}-export-{fmt}", size="sm", interactive=False, scale=0, min_width=80))
            for fmt, name in [("svg", "SVG"), ("pdf", "PDF"), ("png", "PNG"), ("tikz", "TikZ")]}


def build_rebuild() -> dict:
    with gr.Accordion("Rebuild this round under other settings (no target run)", open=True, elem_id="rebuild"):
        gr.Markdown("Change a setting and the round's tree is rebuilt from the same drafts, beside the tree that "
                    "ran. At T = 0 the count it would have accepted is exact.", elem_classes=["dt-hint"])
        with gr.Row():
            topm = lenient(gr.Number(64, precision=0, label="Top-M (0 = full vocabulary)", elem_id="rebuild-topm",
                                     min_width=120))
            k = lenient(gr.Number(8, precision=0, label="K (children per node)", elem_id="rebuild-k", min_width=120))
            budget = lenient(gr.Number(16, precision=0, label="Budget (tree nodes)", elem_id="rebuild-budget",
                                       min_width=120))
            vocab = gr.Dropdown([SAME_VOCAB, *DRAFT_VOCABS], value=SAME_VOCAB, label="Draft vocabulary",
                                elem_id="rebuild-vocab", min_width=160)
        scorer = gr.Radio(list(rb.SCORERS), value="conditional", label="Scorer", elem_id="rebuild-scorer",
                          info="conditional: DominoTree (children re-scored along each path) · marginal: DDTree's "
                               "per-depth scores · condstatic: corrected once along the greedy chain")
        caption = gr.HTML(message_html("Run a prompt to rebuild its rounds under other settings."),
                          elem_id="rebuild-caption", show_label=False)
        tree = gr.Plot(label="The tree that ran vs the rebuilt tree", elem_id="rebuild-tree")
        files = export_buttons("rebuild", "Download this comparison")
    return dict(**files, rebuild_topm=topm, rebuild_k=k, rebuild_budget=budget, rebuild_vocab=vocab, rebuild_scorer=scorer,
                rebuild_caption=caption, rebuild_tree=tree)


def own_controls(traces, focus, idx) -> list:
    """The rebuild controls set to the round's own settings: [Top-M, K, budget, scorer, vocabulary]."""
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return [gr.skip()] * 5
    rt = trace.rounds[clamp_round(trace, idx)]
    s = rb.own_settings(trace, rt)
    scorer = s.scorer or ("marginal" if rt.method == "dflash" else "conditional")
    return [s.topm, s.k, s.budget, scorer, SAME_VOCAB]
