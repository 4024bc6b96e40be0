"""Device discipline in the scorers and builders (issue 34): every tensor they create takes its
device from their inputs, so a CUDA block never meets a CPU tensor.

    .venv/bin/python -m pytest -q tests/test_device_discipline.py

A lint, because the CPU cannot run these modules on another device: their heaps read scores on
the host, which the ``meta`` device and fake tensors cannot give. It would have caught
``StaticScorer.children``'s ``torch.tensor(toks)`` (a CPU index into a CUDA tensor: ``condstatic``
crashed on CUDA).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "dominotree"
MODULES = sorted([ROOT / "scoring.py", *(ROOT / "builders").glob("*.py")])
# torch factories that make a tensor on the default device unless given ``device=``
FACTORIES = {"tensor", "as_tensor", "arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint",
             "randperm", "linspace", "eye", "empty_strided"}


def undeviced_factories(source: str) -> list[str]:
    """``torch.<factory>(...)`` calls without a ``device=`` keyword, as 'line: call'."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                and node.func.attr in FACTORIES
                and not any(k.arg in ("device", None) for k in node.keywords)):   # None: **kwargs
            bad.append(f"{node.lineno}: torch.{node.func.attr}(...)")
    return bad


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_tensors_take_the_inputs_device(path):
    assert undeviced_factories(path.read_text()) == [], f"{path.name}: give these device= (from the inputs)"


def test_lint_catches_the_condstatic_bug():
    old = "def children(self, depth):\n    return self.base_of(depth, torch.tensor(toks))\n"
    assert undeviced_factories(old) == ["2: torch.tensor(...)"]
    assert undeviced_factories("torch.zeros(3, device=x.device); torch.full((2,), 0.0, **f64)") == []
