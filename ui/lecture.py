"""The lecture view: the run's story as numbered views, one 1280 x 720 screen each, in large text,
switched on and off by ``#lecture-toggle`` beside the full page. The page's parts are grouped
into views by class (``lv``: ``dt-lv dt-lv-<n>``); which view shows, the stage of the round, the
keys (rounds, stages, play, views) and fitting each view's figures to the screen all happen in the
browser (``assets/lecture.js``, ``assets/lecture.css``), so a view change or a stage step needs no
server. A round step needs none either once the page holds the run's rounds (``round_cache``: every
round's tree figure and stage cards, sent once after a run, a replay or an opened link, and again
when the run inspected or the colouring changes); the other views follow the round lazily.

    with gr.Column(elem_classes=lv(2)): build_round_view()
"""
from __future__ import annotations

import html
import json

import gradio as gr

from dominotree.view import figures
from dominotree.config import STAGES
from dominotree.presets import ASSETS

from .round_view import SHOWS, captions_html, clamp_round, pick, render_round

# (number, tab label, what the view is for); key 0 is view 10
VIEWS = (
    (1, "Prompt", "the prompt, the methods and what each generated"),
    (2, "Tree", "this round's draft tree and its four stages"),
    (3, "Accepted", "the accepted path: the conditional tree vs the marginal tree on the same block"),
    (4, "Top-M", "the drafter's Top-M candidates per depth and what the correction moved"),
    (5, "What if", "what a smaller budget would have accepted"),
    (6, "Rebuild", "the round rebuilt under other settings, without the target"),
    (7, "Summary", "tau, tokens/s and acceptance of every method"),
    (8, "Timing", "per-round stage times and the tree builder's time"),
    (9, "Cost", "why it wins or loses here: the cost panel"),
    (10, "Share", "a link to this round, and the downloads"),
)
TREE_VIEW = 2
NO_CACHE = '<textarea class="dt-round-cache" hidden readonly>null</textarea>'     # no run: round steps ask the server
KEYS = (("←  →", "round"), ("↑  ↓", "stage"), ("Space", "play / pause"), ("1–9, 0 · PgUp PgDn", "view"))


def lv(*views: int) -> list[str]:
    """The classes that put a part of the page into lecture views ``views`` (none: the full page only)."""
    return ["dt-lv", *(f"dt-lv-{v}" for v in views)]


def bar_html() -> str:
    """The switch, the view tabs, where the class is (filled by the script) and the keys' legend."""
    tabs = "".join(f'<button type="button" class="dt-tab" data-view="{n}" title="{html.escape(why)}">'
                   f'<kbd>{n % 10}</kbd> {html.escape(name)}</button>' for n, name, why in VIEWS)
    keys = " · ".join(f"<kbd>{html.escape(k)}</kbd> {html.escape(what)}" for k, what in KEYS)
    return ('<div class="dt-lecture-bar">'
            '<button type="button" id="lecture-toggle" aria-pressed="false" title="one screen at a time, large text, '
            'keys to step rounds and stages">Lecture view</button>'
            f'<nav class="dt-tabs" aria-label="Lecture views">{tabs}</nav>'
            '<span class="dt-where" id="lecture-where" aria-live="polite"></span>'
            f'<span class="dt-keys" id="lecture-keys">{keys} <span class="dt-keys-note">(focus outside text '
            'fields)</span></span></div>')


def build_lecture_bar() -> dict:
    """The bar, and two hidden parts the script uses: ``lecture_cache`` holds the run's rounds
    (``round_cache``), from which a round step draws the stage cards and tree at once; without it
    (before it arrives) a round step is ``lecture_round``, a server round trip for the same two
    (``step_round``). Once the steps pause, the script moves the round slider itself and every
    other view catches up."""
    return dict(lecture_bar=gr.HTML(bar_html(), elem_id="lecture-bar", show_label=False, padding=False),
                lecture_round=gr.Number(1, precision=0, elem_id="lecture-round", elem_classes=["dt-offscreen"],
                                        show_label=False),
                lecture_cache=gr.HTML(NO_CACHE, elem_id="lecture-cache", elem_classes=["dt-offscreen"],
                                      show_label=False, padding=False))


def round_cache(traces, focus, show) -> str:
    """Every round of the run inspected as the server draws it for ``#tree`` (the Plotly figure,
    under colouring ``show``) and ``#captions`` (the stage cards), for the page to step rounds
    without a server round trip. JSON as the text of a hidden textarea (``<``, ``>`` and ``&``
    written as JSON escapes, so no text in it ends the element or reads as a character
    reference); the figures' shared template is sent once. Model tokens are escaped in the cards
    and figures as everywhere."""
    trace = pick(traces, focus)
    if trace is None or not trace.rounds:
        return NO_CACHE
    show = show if show in SHOWS else "conditional"
    template, rounds = None, []
    for rt in trace.rounds:
        fig = json.loads(figures.tree_figure(rt, trace.token_text, show=show).to_json())
        template = fig.get("layout", {}).pop("template", template)
        rounds.append({"fig": fig, "cap": captions_html(trace, rt)})
    payload = {"focus": focus if focus in traces else list(traces)[-1], "show": show, "n": len(rounds),
               "template": template, "rounds": rounds}
    text = json.dumps(payload, separators=(",", ":"))
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return f'<textarea class="dt-round-cache" hidden readonly>{text}</textarea>'


def step_round(traces, focus, k, show) -> list:
    """Outputs for [round slider, captions, tree]: round ``k`` of the run inspected, the figures of
    the other views left for ``lecture_settle`` (a step answers in about a tree's drawing)."""
    if not traces:
        return [gr.skip()] * 3
    slider, captions, *_ = render_round(traces, focus, k, show, light=True)
    trace = pick(traces, focus)
    rt = trace.rounds[clamp_round(trace, k)] if trace.rounds else None
    tree = figures.tree_figure(rt, trace.token_text, show=show if show in SHOWS else "conditional") if rt else None
    return [slider, captions, tree]


def lecture_js() -> str:
    """The lecture view's script (a JS function, as Blocks' ``js`` takes it)."""
    src = (ASSETS / "lecture.js").read_text(encoding="utf-8")
    return src.replace("__VIEWS__", json.dumps([[n, name] for n, name, _ in VIEWS])) \
              .replace("__STAGES__", json.dumps(list(STAGES))).replace("__TREE_VIEW__", str(TREE_VIEW))


def page_js(*functions: str) -> str:
    """One JS function that runs each of ``functions`` (JS functions of no argument) in turn."""
    return "() => {\n" + "\n".join(f"  ({f.strip()})();" for f in functions) + "\n}"
