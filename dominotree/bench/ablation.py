"""The sweeps of ``bench --ablation``: which variants each runs, and its table
(``ablation_<name>.csv/.md``)."""
from __future__ import annotations

from dataclasses import replace

from pathlib import Path

from ..config import METHODS, TreeConfig
from ..errors import UserError
from .report import FMT, md_table
from .variants import Variant

ABLATIONS = ("ladder", "topm", "budget")
LADDER = ("marg", "condstatic", "dominotree")


def ablation_variants(name: str, base: TreeConfig, methods: str | None, budgets: list[int],
                      topms: list[int]) -> list[Variant]:
    """The variants of one ablation (``ar`` first so speedups are in the same run)."""
    ar = [Variant("ar", "ar", base)]      # the others draft over the pair's default vocabulary (None)
    if name == "ladder":
        return ar + [Variant(m, m, base, draft_vocab=None) for m in LADDER]
    if name == "topm":
        out = []
        for tm in topms:
            tree = replace(base, corr_topm=tm, node_topk=min(base.node_topk, tm) if tm else base.node_topk)
            out.append(Variant("dominotree/mfull" if tm == 0 else f"dominotree/m{tm}", "dominotree", tree,
                               draft_vocab=None))
        return ar + out
    if name == "budget":
        ms = [m.strip() for m in (methods or "ddtree,dominotree").split(",") if m.strip() and m.strip() != "ar"]
        for m in ms:
            if m not in METHODS:
                raise UserError(f"unknown method {m!r} in --methods")
        return ar + [Variant(f"{m}@{b}", m, replace(base, budget=b), draft_vocab=None) for m in ms for b in budgets]
    raise UserError(f"unknown ablation {name!r}; choose {', '.join(ABLATIONS)}")


def write_ablation(res: dict, name: str, out: Path) -> None:
    df = res["summary"]
    sub = df[df["scope"] == "overall"].copy()
    cols = ["temperature", "label", "method", "budget", "corr_topm", "tau", "tokens_per_s", "speedup", "build_ms",
            "mean_nodes"]
    sub = sub[cols]
    sub.to_csv(out / f"ablation_{name}.csv", index=False)
    title = {"ladder": "Conditioning ladder (marg < condstatic < dominotree in tau?)",
             "topm": "Top-M sweep: tau and build time (0 = full vocabulary)",
             "budget": "Budget sweep: tau and throughput vs budget"}[name]
    (out / f"ablation_{name}.md").write_text(f"# {title}\n\n" + md_table(sub, cols, FMT), encoding="utf-8")
