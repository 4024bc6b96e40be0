"""One colour per method and per stage, in every chart and export (the explorer's figures, the
cost panel, the bench's plots): Okabe-Ito, distinguishable by colour-blind readers."""
from __future__ import annotations

METHOD_COLORS = {"ar": "#999999", "dflash": "#56B4E9", "ddtree": "#E69F00", "caddtree": "#F0E442",
                 "domino": "#009E73", "dominotree": "#D55E00", "marg": "#0072B2", "condstatic": "#CC79A7",
                 "condadaptive": "#000000"}
STAGE_COLORS = {"draft": "#0072B2", "build": "#E69F00", "verify": "#009E73", "commit": "#CC79A7"}
OTHER = "#666666"


def method_color(name: str, trace=None) -> str:
    """The colour of method ``name`` (or of ``trace.method`` when a trace is given)."""
    return METHOD_COLORS.get(trace.method if trace is not None else name, METHOD_COLORS.get(name, OTHER))


def hex_rgb(c: str) -> tuple[int, int, int]:
    """``#rrggbb`` as three 0-255 integers."""
    return int(c[1:3], 16), int(c[3:5], 16), int(c[5:7], 16)
