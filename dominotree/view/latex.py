"""LaTeX text for the TikZ exports (a round's tree, ``export.round_tikz``; the cost panel,
``costexport.py``): untrusted token text escaped for a label, the preamble that lets a Unicode
engine find a font for any character (and pdfLaTeX write ``[U+XXXX]``), colours as xcolor rgb."""
from __future__ import annotations

from ..colors import hex_rgb

_LATEX = {"\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&",
          "#": r"\#", "^": r"\textasciicircum{}", "_": r"\_", "%": r"\%",
          "~": r"\textasciitilde{}", "<": r"\textless{}", ">": r"\textgreater{}",
          "|": r"\textbar{}", '"': r"\textquotedbl{}", "-": "-{}", "[": "{[}", "]": "{]}",
          "␣": r"\textvisiblespace{}", "⏎": r"\ensuremath{\hookleftarrow}",
          "⇥": r"\ensuremath{\rightarrow}", "…": r"\ldots{}", "∅": r"\ensuremath{\emptyset}",
          "·": r"\textperiodcentered{}", "τ": r"\ensuremath{\tau}", "≤": r"\ensuremath{\leq}"}


# fonts a Unicode engine tries, in order, for a character the document's font lacks (the first
# installed ones that have it); more can be added in the file's preamble with \dtusefont{Name}
UNICODE_FONTS = ("DejaVu Sans Mono", "Noto Sans Mono CJK SC", "Noto Sans CJK SC", "Source Han Sans SC",
                 "Droid Sans Fallback", "WenQuanYi Micro Hei Mono", "WenQuanYi Zen Hei Mono", "DejaVu Sans",
                 "Noto Emoji", "Symbola", "FreeSerif")
_NEVER_RAW = ("Cc", "Cs", "Cf", "Zl", "Zp")   # controls, surrogates, format marks: only ever as [U+XXXX]


def latex_escape(s: str) -> str:
    """Escape text for a LaTeX label in a ``round_tikz`` document. ASCII specials are escaped;
    Latin-1 letters pass through (utf8 input is LaTeX's default); any other printable character
    becomes ``\\dtuchar{XXXX}{c}``: the character itself under XeLaTeX or LuaLaTeX when a font
    has it, else ``[U+XXXX]`` (always under pdfLaTeX, which needs no Unicode font set up).
    Controls, surrogates and format characters are only ever written as ``[U+XXXX]``."""
    import unicodedata
    out = []
    for ch in s:
        o = ord(ch)
        if ch in _LATEX:
            out.append(_LATEX[ch])
        elif 0x20 <= o < 0x7F:
            out.append(ch)
        elif 0xC0 <= o <= 0xFF and o not in (0xD7, 0xF7):
            out.append(ch)
        elif unicodedata.category(ch) in _NEVER_RAW:
            out.append(f"{{\\scriptsize[U+{o:04X}]}}")
        else:
            out.append(f"\\dtuchar{{{o:04X}}}{{{ch}}}")
    return "".join(out)


def tikz_preamble() -> list[str]:
    """The lines after ``\\documentclass``: T1 fonts under pdfLaTeX, fontspec under XeLaTeX and
    LuaLaTeX, and ``\\dtuchar{hex}{char}`` for the characters ``latex_escape`` cannot write in
    T1: ``[U+hex]`` under pdfLaTeX; under a Unicode engine the character in the current font or
    the first of ``UNICODE_FONTS`` that has it, else ``[U+hex]``."""
    return [r"\ifdefined\XeTeXversion\let\dtunicode\relax\fi",
            r"\ifdefined\directlua\let\dtunicode\relax\fi",
            r"\ifdefined\dtunicode",
            r"  \usepackage{fontspec}",
            r"  \newcount\dtnfonts \newcount\dtk \newcount\dthit",
            r"  \newcommand{\dtusefont}[1]{\IfFontExistsTF{#1}{\global\advance\dtnfonts 1 %",
            r"    \expandafter\newfontfamily\csname dtf\number\dtnfonts\endcsname{#1}}{}}",
            *(f"  \\dtusefont{{{f}}}" for f in UNICODE_FONTS),
            r"  \newcommand{\dtfind}[1]{\global\dthit=0 \dtk=0 %",
            r"    \loop\ifnum\dtk<\dtnfonts \advance\dtk 1 %",
            r'      {\csname dtf\number\dtk\endcsname\iffontchar\font"#1\relax\global\dthit=\dtk\fi}%',
            r"      \ifnum\dthit>0 \dtk=\dtnfonts\fi",
            r"    \repeat}",
            r'  \newcommand{\dtuchar}[2]{\iffontchar\font"#1\relax #2\else\dtfind{#1}\dtput{#1}{#2}\fi}',
            r"  \newcommand{\dtput}[2]{\ifnum\dthit>0 {\csname dtf\number\dthit\endcsname #2}"
            r"\else{\scriptsize[U+#1]}\fi}",
            r"\else",
            r"  \usepackage[T1]{fontenc}",
            r"  \newcommand{\dtuchar}[2]{{\scriptsize[U+#1]}}",
            r"\fi"]


def tikz_rgb(c: str) -> str:
    """``#rrggbb`` as an xcolor colour expression."""
    r, g, b = hex_rgb(c)
    return f"{{rgb,255:red,{r};green,{g};blue,{b}}}"
