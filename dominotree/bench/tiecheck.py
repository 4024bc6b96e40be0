"""Why an output differs from ``ar`` at T = 0, over a whole bench run: for each T = 0 output that
differs from ``ar``'s, the target's logit gap and the method token's rank at the first difference
(``dominotree.ties.gap_at``: a fresh target forward on the shared prefix, the prompt and ``ar``'s
tokens before the difference). A gap of a few hundredths with rank 1 is a rounding tie; a large
gap or a low rank would be a real bug.
"""
from __future__ import annotations

from ..ties import ROUNDING_GAP, gap_at  # noqa: F401 - both importable here, as before
from .stats import first_difference
from .variants import REFERENCE_ROWS

COLUMNS = ["temperature", "label", "question_id", "turn", "token", "ar_token", "method_token", "gap", "rank"]


def diagnose(dec, prompts: dict, by: dict, encode, chat: bool = True) -> list[dict]:
    """Rows of ``COLUMNS`` for every T = 0 output in ``by`` ({(tkey, label): {qid: record}}) that
    differs from ``ar``'s. ``encode(dec, messages, chat)`` builds the prompt ids of a turn."""
    rows = []
    for (t, label), recs in sorted(by.items()):
        if float(t) >= 1e-5 or label == "ar" or label in REFERENCE_ROWS or (t, "ar") not in by:
            continue
        ar = by[(t, "ar")]
        for qid, rec in sorted(recs.items()):
            if qid not in ar or qid not in prompts:
                continue
            a_ids, m_ids = ar[qid]["choices"][0]["token_ids"], rec["choices"][0]["token_ids"]
            where = first_difference(m_ids, a_ids)
            if where is None or where[1] is None:
                continue
            ti, k = where
            if k >= min(len(m_ids[ti]), len(a_ids[ti])):
                continue           # one stopped earlier (EOS vs max tokens): no differing token
            messages = []
            for j in range(ti + 1):
                messages.append({"role": "user", "content": prompts[qid].turns[j]})
                if j < ti:
                    messages.append({"role": "assistant", "content": ar[qid]["choices"][0]["turns"][j]})
            prefix = encode(dec, messages, chat) + list(a_ids[ti][:k])
            gap, rank = gap_at(dec, prefix, a_ids[ti][k], m_ids[ti][k])
            rows.append({"temperature": float(t), "label": label, "question_id": qid, "turn": ti, "token": k,
                         "ar_token": int(a_ids[ti][k]), "method_token": int(m_ids[ti][k]), "gap": gap, "rank": rank})
    return rows


def summary_line(rows: list[dict], n_outputs: int) -> str:
    """One paragraph for summary.md."""
    if not n_outputs:
        return ""
    if not rows:
        return f"All {n_outputs} T = 0 outputs equal `ar`'s token for token."
    gaps = sorted(abs(r["gap"]) for r in rows)
    top2 = sum(1 for r in rows if r["rank"] <= 1)
    text = (f"{len(rows)} of {n_outputs} T = 0 outputs differ from `ar`'s. At each first difference a fresh "
            f"target forward puts `ar`'s token and the method's {gaps[len(gaps) // 2]:.3f} logits apart (median; "
            f"max {gaps[-1]:.3f}); the method's token is the target's first or second choice in {top2} of "
            f"{len(rows)} (`ties.csv`). ")
    if gaps[-1] <= ROUNDING_GAP and top2 == len(rows):
        text += ("Every difference is a near-tie that the verify forward and `ar`'s one-row forward round "
                 "differently; after it both outputs are greedy continuations of the target.")
    else:
        n = sum(1 for r in rows if abs(r["gap"]) > ROUNDING_GAP or r["rank"] > 1)
        text += f"**{n} differences are larger than a rounding tie ({ROUNDING_GAP} logits): investigate them.**"
    return text
