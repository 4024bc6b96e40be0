"""Tidy layout of a draft tree, and printable labels for model tokens.

Invariants (checked by tests/test_layout_export.py):
- ``y`` of a row is its depth, so every child sits one level below its parent;
- no two rows share an ``(x, y)``: siblings' subtrees are at least ``separation`` apart at every
  depth they share (Reingold-Tilford contours);
- a parent is centred over its children: ``x[p] == (x[first child] + x[last child]) / 2``;
- deterministic: siblings keep row order (the builder's pop order, best score first), and the
  leftmost row is at ``x == 0``.

Renderers are free to turn the picture: the explorer and the exports draw depth left to right
("position columns"), with ``x`` running down the page.

Example, a root with two children, the first of which has one child::

    >>> tidy_layout([-1, 0, 0, 1])
    [(0.5, 0), (0.0, 1), (1.0, 1), (0.0, 2)]

Token labels: model tokens are untrusted text. ``token_label`` makes a short, single-line,
printable label; it does NOT escape for HTML/XML/LaTeX (the renderers do that for their format).
"""
from __future__ import annotations

import unicodedata

from ..tree import Tree

# Characters that would break a one-line label or reorder the text around them.
_BIDI = set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A)) | {0x200E, 0x200F, 0x061C}
_VISIBLE = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": "␍"}


def tidy_layout(parents: list[int], separation: float = 1.0) -> list[tuple[float, int]]:
    """Per row ``(x, y)`` with ``y`` = depth, for a flat tree given by ``parents`` (root first).

    Each subtree is laid out alone, then siblings are pushed apart left to right until their
    contours (leftmost/rightmost x per depth) are ``separation`` apart, and the parent is centred
    over its first and last child. O(n * height); iterative, so a 1000-node chain is fine.
    """
    n = len(parents)
    if n == 0:
        return []
    kids: list[list[int]] = [[] for _ in range(n)]
    for i in range(1, n):
        kids[parents[i]].append(i)
    offset = [0.0] * n                      # x of a row relative to its parent
    left: list[list[float] | None] = [None] * n   # subtree contours relative to the row's x
    right: list[list[float] | None] = [None] * n
    for v in range(n - 1, -1, -1):          # parents[i] < i: children are done before parents
        cs = kids[v]
        if not cs:
            left[v], right[v] = [0.0], [0.0]
            continue
        pos = [0.0]
        acc_l, acc_r = list(left[cs[0]]), list(right[cs[0]])
        for c in cs[1:]:
            cl, cr = left[c], right[c]
            common = min(len(acc_r), len(cl))
            s = max(acc_r[k] - cl[k] for k in range(common)) + separation
            pos.append(s)
            for k in range(common):           # c lies right of everything before it here
                acc_r[k] = cr[k] + s
            acc_r.extend(x + s for x in cr[common:])
            acc_l.extend(x + s for x in cl[len(acc_l):])
            left[c] = right[c] = None         # free child contours as we go
        mid = (pos[0] + pos[-1]) / 2
        for c, p in zip(cs, pos):
            offset[c] = p - mid
        left[v] = [0.0] + [x - mid for x in acc_l]
        right[v] = [0.0] + [x - mid for x in acc_r]
        left[cs[0]] = right[cs[0]] = None
    xs = [0.0] * n
    depth = [0] * n
    for i in range(1, n):
        xs[i] = xs[parents[i]] + offset[i]
        depth[i] = depth[parents[i]] + 1
    lo = min(xs)
    return [(x - lo, d) for x, d in zip(xs, depth)]


def tree_layout(tree: Tree, extra_parents: list[int] = ()) -> list[tuple[float, int]]:
    """``tidy_layout`` of ``tree``; ``extra_parents`` appends virtual leaves (e.g. the bonus
    token under the last accepted row) that get their own slots, listed after the tree rows."""
    return tidy_layout(list(tree.parents) + list(extra_parents))


def _piece(token_id: int, token_text: dict | None) -> str | None:
    if not token_text:
        return None
    s = token_text.get(str(int(token_id)))
    if s is None:
        s = token_text.get(int(token_id))
    return s if isinstance(s, str) else None


def clean_text(s: str, visible_whitespace: bool = False) -> str:
    """Make untrusted model text safe to lay out: control characters become ``\\xNN``, bidi
    overrides ``\\uNNNN`` and unpaired surrogates U+FFFD (XML 1.0 cannot carry most of them). With
    ``visible_whitespace`` spaces, newlines and tabs become ␣ ⏎ ⇥ as well."""
    out = []
    for ch in s:
        o = ord(ch)
        if visible_whitespace and ch in _VISIBLE:
            out.append(_VISIBLE[ch])
        elif ch in "\n\t ":
            out.append(ch)
        elif o < 0x20 or 0x7F <= o <= 0x9F:
            out.append(f"\\x{o:02x}")          # ASCII escapes render in every font
        elif 0xD800 <= o <= 0xDFFF or o in (0xFFFE, 0xFFFF):
            out.append("\ufffd")
        elif o in _BIDI or o in (0x2028, 0x2029):
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    return "".join(out)


def char_cells(s: str) -> int:
    """Monospace cells a label takes: wide (CJK, most emoji) characters count two, combining
    marks and joiners zero. Used to size boxes without measuring fonts."""
    n = 0
    for ch in s:
        if unicodedata.combining(ch) or ch in "\u200d\ufe0f\ufe0e":
            continue
        n += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return n


def token_label(token_id: int, token_text: dict | None = None, max_len: int = 12) -> str:
    """A short printable label for one token piece.

    ``token_text`` maps id -> decoded piece (keys as str, as in DecodeTrace.token_text, or int).
    Whitespace is shown (``" the"`` -> ``"␣the"``, ``"\\n"`` -> ``"⏎"``), control characters
    become ``\\xNN``, emoji are kept, and pieces longer than ``max_len`` characters end
    in ``…``. Unknown ids show as ``#id``; the empty piece as ``∅``.

        >>> token_label(5, {"5": " the"}), token_label(6, {"6": "\\n\\n"}), token_label(7, {})
        ('␣the', '⏎⏎', '#7')
    """
    s = _piece(token_id, token_text)
    if s is None:
        return f"#{int(token_id)}"
    if s == "":
        return "∅"
    s = clean_text(s, visible_whitespace=True)
    if len(s) > max_len:
        s = s[: max(max_len - 1, 1)] + "…"
    return s


def token_piece(token_id: int, token_text: dict | None = None) -> str:
    """The full decoded piece with whitespace kept (for running text), made printable."""
    s = _piece(token_id, token_text)
    return f"#{int(token_id)}" if s is None else clean_text(s)
