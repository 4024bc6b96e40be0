"""Up to four side-by-side panes, one per method run on the same prompt: a header with the
run's numbers and the generated text coloured by token provenance (with its legend)."""
from __future__ import annotations

import html

import gradio as gr

from dominotree.view import charts
from dominotree.trace import DecodeTrace

from .backend import MAX_METHODS


def tie_html(trace) -> str:
    """The pane note for an output that differs from ``ar``'s (see ``diagnose_ties``)."""
    t = trace.config.get("vs_ar") if isinstance(trace.config, dict) else None
    if not isinstance(t, dict):
        return ""
    try:
        where, gap, rank, tie = int(t["token"]), float(t["gap"]), int(t["rank"]), bool(t["near_tie"])
    except (KeyError, TypeError, ValueError):
        return ""
    verdict = ("a near-tie that bf16 rounds differently in a tree verify and in ar's one-row forward; both are "
               "greedy continuations" if tie else "larger than a rounding tie: investigate")
    return (f'<span class="dt-tie">differs from ar from token {where + 1}: the target\'s top tokens there are '
            f'{abs(gap):.3f} logits apart (this token ranks {rank + 1}): {verdict}</span>')


def auto_html(trace: DecodeTrace) -> str:
    """The pane note for a run whose budget ``auto`` chose (``budget_auto`` in its config)."""
    note = trace.config.get("budget_auto") if isinstance(trace.config, dict) else None
    return f'<br><span class="dt-auto">{html.escape(str(note)[:200])}</span>' if note else ""


def vocab_html(trace: DecodeTrace) -> str:
    """The pane note for a run whose drafters scored a draft vocabulary (``draft_vocab`` > 0)."""
    n = trace.config.get("draft_vocab") if isinstance(trace.config, dict) else None
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        return ""
    return f'<br><span class="dt-vocab">draft vocabulary: the {n} most frequent tokens</span>'


def cost_line(trace: DecodeTrace, ar: DecodeTrace | None) -> str:
    """What one round cost, in ``ar`` steps (``ar``'s time per token), and what it committed:
    their ratio is the speedup over ``ar``."""
    if ar is None or trace is ar or not trace.rounds or not ar.token_ids or ar.wall_s <= 0 or trace.wall_s <= 0:
        return ""
    step = ar.wall_s / len(ar.token_ids)
    cost = trace.wall_s / len(trace.rounds) / step
    committed = len(trace.token_ids) / len(trace.rounds)
    return (f'<br><span class="dt-cost">a round cost {cost:.2f} ar steps and committed {committed:.2f} tokens '
            f'→ <b>{committed / cost:.2f}× ar</b></span>')


def header_html(name: str, trace: DecodeTrace | None, ar: DecodeTrace | None, running: bool,
                fastest: bool = False, note: str = "") -> str:
    if trace is None:
        return f'<div class="dt-pane-head"><b>{html.escape(name)}</b> · waiting…</div>'
    bits = [f"{len(trace.rounds)} rounds", f"{len(trace.token_ids)} tokens", f"τ = {trace.tau:.2f}",
            f"{trace.tokens_per_s:.1f} tok/s"]
    quiet = ("", "max_new_tokens")          # the usual end needs no word
    state = "decoding…" if running else ("" if trace.stopped in quiet else f"stopped: {html.escape(trace.stopped)}")
    badge = ' <span class="dt-fastest" title="highest tokens/s of this comparison">fastest</span>' if fastest else ""
    return (f'<div class="dt-pane-head"><b>{html.escape(name)}</b>{badge}'
            + (f' <span class="dt-state">{state}</span>' if state else "")
            + f'<br><span class="dt-stats">{" · ".join(bits)}</span>'
            + ("" if running else cost_line(trace, ar)) + note + "</div>")


def fastest_of(traces: dict, running: str | None) -> str | None:
    done = {k: t for k, t in traces.items() if k != running and t.stopped and t.wall_s > 0}
    return max(done, key=lambda k: done[k].tokens_per_s) if len(done) > 1 else None


def render_panes(traces: dict, running: str | None = None, pending: list[str] = (), notes: dict | None = None) -> list:
    """Outputs for every pane: [column, header, text] x MAX_METHODS. ``notes``: extra header
    HTML per pane (the bf16 near-tie diagnosis)."""
    names = list(traces) + [m for m in pending if m not in traces]
    ar = traces.get("ar")
    ar = ar if ar is not None and ar.stopped and running != "ar" else None
    best = fastest_of(traces, running)
    out = []
    for k in range(MAX_METHODS):
        if k < len(names):
            name = names[k]
            t = traces.get(name)
            text = charts.provenance_html(t) if t is not None and t.token_ids else ""
            head = header_html(name, t, ar, name == running, name == best, (notes or {}).get(name, ""))
            out += [gr.Column(visible=True), head, text]
        else:
            out += [gr.Column(visible=False), "", ""]
    return out


def build_panes() -> dict:
    cols, heads, texts = [], [], []
    with gr.Row(equal_height=False, elem_classes=["dt-panes"]):
        for k in range(MAX_METHODS):
            with gr.Column(visible=False, min_width=160, elem_classes=["dt-pane"]) as col:
                heads.append(gr.HTML(label=f"Pane {k + 1} header", show_label=False, elem_id=f"pane-{k}-head"))
                texts.append(gr.HTML(label=f"Pane {k + 1} text", show_label=False, elem_id=f"pane-{k}-text"))
            cols.append(col)
    return dict(pane_cols=cols, pane_heads=heads, pane_texts=texts)
