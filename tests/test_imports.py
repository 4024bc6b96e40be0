"""The import graph of ``dominotree/``: no circles, and every import points down the layers below.

The graph is read from the source with ``ast`` (no module is imported), and it includes imports
inside functions: a function-level import that runs back up is still a reach up, only a later one.

Floors, bottom to top; a module may import modules of its own floor or of a lower one:

    foundation    errors, config, tree, trace, and any  plain data, settings, the errors every floor raises
                  other dominotree/*.py that imports
                  nothing of the project (syncguard, colors, ...)
    models        models/*                              target adapter, drafters, checkpoints, kernels
    scoring       scoring                               children functions over the drafters' rows
    builders      builders/*                            trees from scorers (never a model class)
    core          every other dominotree/*.py           decode, verify, methods, presets, pairargs, ...
    auto          auto/*                                --budget auto: cost profile, calibration, the choice
    train         train/*                               data generation and drafter training
    bench         bench/*                               the benchmark harness and the acceptance yardstick
    view          view/*                                drawing for every screen and export; the viewer's decode
    command line  cli, __main__                         parses and dispatches, nothing imports it

and the explorer (``app.py``, ``ui/``) sits on top: it uses the library and ``view/`` and never the
bench, the trainer or the command line. A function-level import is an import like any other: one
that runs up a floor is refused too.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "dominotree"

LAYERS = ("foundation", "models", "scoring", "builders", "core", "auto", "train", "bench", "view", "command line")
FOUNDATION = {"dominotree.errors", "dominotree.config", "dominotree.tree", "dominotree.trace"}
PACKAGES = (("dominotree.models", "models"), ("dominotree.scoring", "scoring"), ("dominotree.builders", "builders"),
            ("dominotree.auto", "auto"), ("dominotree.train", "train"), ("dominotree.bench", "bench"),
            ("dominotree.view", "view"))
# Rules the floor order alone does not give: (importer prefix, imported prefix, why not).
FORBIDDEN = [("dominotree.builders", "dominotree.models", "a builder sees scorers and tensors, not model classes")]
# Edges allowed for now, each with the reason why (none today).
KNOWN: set[tuple[str, str]] = set()


def layer(module: str, graph: dict[str, set[str]] | None = None) -> str:
    """``module``'s floor; with the ``graph``, a core module that imports nothing of ours is foundation."""
    if module in FOUNDATION:
        return "foundation"
    if module in ("dominotree.cli", "dominotree.__main__"):
        return "command line"
    for prefix, name in PACKAGES:
        if module == prefix or module.startswith(prefix + "."):
            return name
    return "foundation" if graph is not None and module in graph and not graph[module] else "core"


def modules(root: Path = ROOT / PACKAGE) -> dict[str, Path]:
    """{dotted name: file} for every .py under ``root`` (a package's ``__init__`` is the package)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules ``module`` imports anywhere in its file (top level and inside functions)."""
    is_pkg = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                pkg = ".".join(base + ([node.module] if node.module else []))
            else:
                pkg = node.module or ""
            # ``from pkg import mod`` imports the module pkg.mod; ``from mod import name`` imports mod
            names = [f"{pkg}.{a.name}" if f"{pkg}.{a.name}" in known else pkg for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph(root: Path = ROOT / PACKAGE) -> dict[str, set[str]]:
    known = modules(root)
    return {m: imported(m, p, known) for m, p in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Every import that points up the layers or breaks a FORBIDDEN rule, as readable lines."""
    bad = []
    for a, targets in sorted(graph.items()):
        for b in sorted(targets):
            if (a, b) in KNOWN:
                continue
            la, lb = layer(a, graph), layer(b, graph)
            if LAYERS.index(lb) > LAYERS.index(la):
                bad.append(f"{a} ({la}) imports {b} ({lb}), a higher floor")
            for src, dst, why in FORBIDDEN:
                if _under(a, src) and _under(b, dst):
                    bad.append(f"{a} imports {b}: {why}")
    return bad


# --- the tests ----------------------------------------------------------------------------------------

def test_the_walk_sees_top_level_relative_and_function_level_imports():
    g = import_graph()
    assert "dominotree.tree" in g["dominotree.decode"]                 # from .tree import Tree (top level)
    assert "dominotree.pairargs" in g["dominotree.bench.cost"]         # from .. import pairargs (a module)
    assert "dominotree.ties" in g["dominotree.view.live"]                   # inside tie_note
    assert "dominotree.models.quant" in g["dominotree.models.quantcpu"]
    assert len(g) > 60 and sum(map(len, g.values())) > 150


def test_cycles_and_wrong_way_imports_are_found_on_a_made_up_graph():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    assert wrong_way({"dominotree.decode": {"dominotree.bench.tiecheck"}}) == [
        "dominotree.decode (core) imports dominotree.bench.tiecheck (bench), a higher floor"]
    # the circle this test once missed: the trainer reaching up into the bench
    assert wrong_way({"dominotree.train.losses": {"dominotree.bench.acceptance"}}) == [
        "dominotree.train.losses (train) imports dominotree.bench.acceptance (bench), a higher floor"]
    assert wrong_way({"dominotree.auto.curve": {"dominotree.view.comparison"}}) != []
    assert wrong_way({"dominotree.decode": {"dominotree.view.rebuild"}}) != []
    assert wrong_way({"dominotree.view.figures": {"dominotree.auto.curve", "dominotree.bench.stats"}}) == []
    assert wrong_way({"dominotree.builders.reference": {"dominotree.models.drafter"}}) == [
        "dominotree.builders.reference imports dominotree.models.drafter: " + FORBIDDEN[0][2]]
    assert wrong_way({"dominotree.bench.cli": {"dominotree.pairargs", "dominotree.errors"}}) == []
    leaf = {"dominotree.builders.capture": {"dominotree.guard"}, "dominotree.guard": set()}
    assert wrong_way(leaf) == [] and layer("dominotree.guard", leaf) == "foundation"
    assert layer("dominotree.guard") == "core" and layer("dominotree.bench.stats", {"dominotree.bench.stats": set()}) == "bench"


def test_dominotree_has_no_import_cycles():
    found = cycles(import_graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_every_import_points_down_the_layers():
    bad = wrong_way(import_graph())
    assert bad == [], "\n".join(["imports that run up (see the floors in tests/test_imports.py):", *bad])


def test_known_exceptions_are_still_needed():
    g = import_graph()
    stale = [edge for edge in KNOWN if edge[1] not in g.get(edge[0], ())]
    assert stale == [], f"remove from KNOWN, the import is gone: {stale}"


def test_the_explorer_uses_the_library_not_the_bench_or_the_cli():
    known = modules()
    bad = []
    for path in [ROOT / "app.py", *sorted((ROOT / "ui").rglob("*.py"))]:
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for m in imported(name, path, known):
            if layer(m) in ("train", "bench", "command line"):
                bad.append(f"{path.relative_to(ROOT)} imports {m}")
    assert bad == [], "\n".join(bad)
