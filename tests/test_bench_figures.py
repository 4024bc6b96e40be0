"""The bench's budget curve draws a run without ``ar`` (no speedups: the right panel stays
empty) instead of failing after the whole run."""
import pandas as pd

from dominotree.bench.plots import budget_curve


def test_budget_curve_without_ar_leaves_speedup_empty():
    rows = [dict(method="dominotree", temperature=0.0, scope="overall", corr_topm=64, budget=b, tau=t, speedup=None)
            for b, t in ((2, 1.6), (3, 1.7), (16, 2.2))]
    fig = budget_curve({"summary": pd.DataFrame(rows), "temps": [0.0]})
    tau, speedup = fig.data
    assert list(tau.x) == [2, 3, 16] and list(tau.y) == [1.6, 1.7, 2.2]
    assert list(speedup.y) == [None, None, None]


def test_palette_png_keeps_a_charts_colours_and_shrinks_it(tmp_path):
    """Chart PNGs are rewritten with a palette: a chart's flat colours come back exactly, the file
    is smaller, and files that are not PNG (or already paletted) are left as they are."""
    import numpy as np
    from PIL import Image

    from dominotree.bench.plots import palette_png
    rng = np.random.default_rng(0)
    colours = np.array([[255, 255, 255, 255], [31, 119, 180, 255], [255, 127, 14, 255], [42, 63, 95, 255]], np.uint8)
    img = colours[rng.integers(0, 4, size=(300, 400))]        # noisy: zlib gains from a 1-byte palette
    p = tmp_path / "chart.png"
    Image.fromarray(img, "RGBA").save(p)
    before = p.stat().st_size
    palette_png(p)
    with Image.open(p) as im:
        assert im.mode == "P" and np.array_equal(np.asarray(im.convert("RGBA")), img)
    assert p.stat().st_size < before
    again = p.read_bytes()
    palette_png(p)                                             # already paletted: unchanged
    assert p.read_bytes() == again
    pdf = tmp_path / "chart.pdf"
    pdf.write_bytes(b"%PDF-1.4 not an image")
    palette_png(pdf)
    assert pdf.read_bytes() == b"%PDF-1.4 not an image"
