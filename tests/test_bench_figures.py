"""The bench's budget curve draws a run without ``ar`` (no speedups: the right panel stays
empty) instead of failing after the whole run."""
import pandas as pd

from dominotree.bench.figures import budget_curve


def test_budget_curve_without_ar_leaves_speedup_empty():
    rows = [dict(method="dominotree", temperature=0.0, scope="overall", corr_topm=64, budget=b, tau=t, speedup=None)
            for b, t in ((2, 1.6), (3, 1.7), (16, 2.2))]
    fig = budget_curve({"summary": pd.DataFrame(rows), "temps": [0.0]})
    tau, speedup = fig.data
    assert list(tau.x) == [2, 3, 16] and list(tau.y) == [1.6, 1.7, 2.2]
    assert list(speedup.y) == [None, None, None]
