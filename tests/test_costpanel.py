"""The cost panel's numbers (dominotree/auto/curve.py, dominotree/view/costpanel.py) against hand
computations. Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_costpanel.py``."""
from __future__ import annotations

import json

import pytest

from dominotree.auto import curve as cc
from dominotree.view import costpanel as cp
from dominotree.trace import DecodeTrace, RoundTrace
from dominotree.tree import Tree


def curve(ms=(10.0, 12.0, 20.0), rows=(1, 5, 17)) -> cc.CostCurve:
    return cc.CostCurve(list(rows), list(ms), "this machine: Test CPU")


def test_curve_steps_interpolate_and_extend():
    c = curve()
    assert c.forward_ms(1) == 10.0 and c.forward_ms(3) == 11.0 and c.forward_ms(17) == 20.0
    assert c.steps(17) == 2.0
    assert c.forward_ms(29) == 28.0             # the last slope (8 ms over 12 rows) beyond 17
    with pytest.raises(ValueError):
        cc.CostCurve([1, 1], [1.0, 2.0], "bad")


def test_paper_projection():
    g = cc.paper_gpu()
    assert g.kind == "projection" and "costs one step" in g.assumption
    assert g.steps(1) == g.steps(17) == g.steps(33) == 1.0 and g.steps(66) == 2.0
    over = g.overhead_steps
    assert over["ar"] == 0.0
    assert over["dominotree"] == pytest.approx((3.53 + 2.31 + 0.70) / 18.65)


def test_gpu_curve_file(tmp_path):
    p = tmp_path / "fast_curve_cuda.json"
    p.write_text(json.dumps({"shapes": "qwen3-4b", "device": "cuda", "ms": {"fast": {"1": 10.0, "17": 11.0, "33": 14.0},
                                                                           "hf": {}}}))
    g = cc.gpu_curve_file(p)
    assert g.rows == [1, 17, 33] and g.steps(17) == pytest.approx(1.1) and "gpu_curve.py" in g.assumption
    (tmp_path / "results" / "gpu-curve").mkdir(parents=True)
    (tmp_path / "results" / "gpu-curve" / "fast_curve_cuda.json").write_text(p.read_text())
    assert cc.projection(tmp_path).rows == [1, 17, 33]
    assert cc.projection(tmp_path / "nowhere").assumption == cc.GPU_ASSUMPTION


def make_trace(method, rounds, wall_s, tokens, budget=16):
    """rounds: (stage ms dict, nodes, accepted drafts)."""
    rts = []
    for i, (ms, nodes, acc) in enumerate(rounds):
        tree = Tree.chain(1, list(range(2, 2 + nodes)))
        rts.append(RoundTrace(i, 10, method, "python", 0.0, tree, [0] * (nodes + 1), list(range(acc + 1)), 7,
                              stage_ms=ms))
    return DecodeTrace(method, "p", [1], list(range(tokens)), "", rts, config={"tree": {"budget": budget}},
                       wall_s=wall_s)


def test_panel_numbers_by_hand():
    ar = make_trace("ar", [({"draft": 0, "build": 0, "verify": 9.0, "commit": 1.0}, 0, 0)] * 10, 0.1, 10)
    # two rounds: 30 and 50 ms of stages, the run's wall time 0.1 s (scale 100/80), 2 and 4 tokens
    dt = make_trace("dominotree", [({"draft": 5.0, "build": 5.0, "verify": 18.0, "commit": 2.0}, 16, 1),
                                   ({"draft": 5.0, "build": 5.0, "verify": 38.0, "commit": 2.0}, 16, 3)], 0.1, 6)
    panel = cp.cost_panel({"ar": ar, "dominotree": dt}, curve(), cc.paper_gpu())
    assert panel.step_ms == pytest.approx(10.0) and "ar's time per token" in panel.step_source
    m = panel.by_method("dominotree")
    assert [p[1] for p in m.points] == [2, 4]
    assert m.points[0][0] == pytest.approx(30 * 1.25 / 10) and m.points[1][0] == pytest.approx(50 * 1.25 / 10)
    assert m.cost == pytest.approx(5.0) and m.tau == 3.0 and m.speedup == pytest.approx(0.6)
    # break-even at budget 16: draft + build + commit (12 ms) + the curve's 17-row forward (20 ms), scaled
    assert m.budget == 16 and m.breakeven == pytest.approx((12 + 20) * 1.25 / 10)
    over = cc.paper_gpu().overhead_steps["dominotree"]
    assert m.projected_cost == pytest.approx(1.0 + over) and m.projected_breakeven == pytest.approx(1.0 + over)
    assert m.projected_speedup == pytest.approx(3.0 / (1.0 + over))
    text = " ".join(cp.captions(panel))
    assert "break-even tau" in text and "Projection, not a measurement" in text and "Test CPU" in text
    assert "0.60x ar here (slower than ar)" in text
    alone = cp.cost_panel({"dominotree": dt}, curve(), cc.paper_gpu())
    assert alone.step_ms == 10.0 and "one-row forward" in alone.step_source


def test_cached_curve_measures_once(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path))
    got = cc.cached_curve(tiny_pair)
    assert got.rows == list(range(1, 34)) and all(m > 0 for m in got.ms) and got.meta["cpu"]
    assert cc.cache_path(tiny_pair).is_file()
    monkeypatch.setattr(cc, "measure", lambda *a, **k: pytest.fail("measured twice"))
    assert cc.cached_curve(tiny_pair).ms == got.ms


def test_cost_panel_exports():
    import xml.etree.ElementTree as ET
    from dominotree.view.costexport import cost_svg, cost_tikz
    ar = make_trace("ar", [({"verify": 9.0, "commit": 1.0}, 0, 0)] * 4, 0.04, 4)
    dt = make_trace("dominotree", [({"draft": 5.0, "build": 5.0, "verify": 18.0, "commit": 2.0}, 16, 1)] * 3, 0.09, 6)
    dt.method = "<b>&x"                       # untrusted names are escaped
    panel = cp.cost_panel({"ar": ar, "x": dt}, curve(), cc.paper_gpu())
    svg = cost_svg(panel)
    root = ET.fromstring(svg)
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    assert "break-even tau" in texts and "Projection, not a measurement" in texts and "<b>&x" in texts
    assert len(root.findall(".//{http://www.w3.org/2000/svg}line")) == 6      # 3 speedup lines x 2 charts
    tex = cost_tikz(panel)
    assert tex.startswith("\\documentclass") and "\\&x" in tex and "<b>" not in tex
