"""Tree builders. All share ``build(scorer, root_token, root_state, tree_cfg, max_depth) -> Built``;
the Python heap in ``reference`` is the definition every faster builder must match."""
from __future__ import annotations

from .reference import Built, build_reference, build_lazy

_REGISTRY = {"python": build_reference}


def get_builder(name: str):
    """The build function of a named builder (``python``, ``graph``, ``frontier``)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    try:
        if name == "graph":
            from .graph import build_graph as fn
        elif name == "frontier":
            from .frontier import build_frontier as fn
        else:
            raise KeyError(name)
    except ImportError as e:
        raise ValueError(f"builder {name!r} is not available: {e}") from None
    except KeyError:
        raise ValueError(f"unknown builder {name!r}; choose python, graph or frontier") from None
    _REGISTRY[name] = fn
    return fn


__all__ = ["Built", "build_reference", "build_lazy", "get_builder"]
