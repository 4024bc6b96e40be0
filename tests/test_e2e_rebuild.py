"""End-to-end: rebuild a round under other settings and read the cost panel, in headless Debian
Chromium (Playwright, ``executable_path=/usr/bin/chromium``). Run:
``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q -m slow tests/test_e2e_rebuild.py``.

Runs the default comparison on the random-tiny pair, then on dominotree's last round switches
Top-M to 4, the scorer to marginal and the budget to 4, and checks each rebuilt tree and its
accepted count against the library (the same run decoded again in-process, ``rebuild.rebuild``);
an impossible setting (K over Top-M) gets a message and the page keeps working; the cost panel
names this machine's CPU, the break-even tau and the GPU projection.
"""
from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_app import close_served, served  # noqa: E402
from test_e2e import FLAGS  # noqa: E402

pytestmark = pytest.mark.slow
PROMPT = "Explain speculative decoding in one sentence."


@pytest.fixture(scope="module")
def page(app):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        pg = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        pg.errors = []
        pg.on("pageerror", lambda e: pg.errors.append(f"page error: {e}"))
        pg.set_default_timeout(90_000)
        pg.goto(app["url"])
        pg.wait_for_selector("#run")
        yield pg
        browser.close()


def caption(page) -> dict:
    return page.evaluate("""() => {
        const d = document.querySelector('#rebuild-caption .dt-rebuild');
        return d ? {text: d.textContent, accepted: d.dataset.accepted, nodes: d.dataset.nodes,
                    method: d.dataset.method, exact: d.dataset.exact} : null;
    }""")


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input")
    box.fill(str(value))
    box.press("Enter")


def wait_caption(page, before: str) -> dict:
    page.wait_for_function("""(b) => {
        const d = document.querySelector('#rebuild-caption .dt-rebuild');
        return d && d.textContent !== b;
    }""", arg=before)
    return caption(page)


def expected(decoder, settings):
    """The library's answer: the same run decoded again (T = 0, deterministic) and its last round rebuilt."""
    from dominotree.view import live
    from dominotree.view import rebuild as rb
    from dominotree.config import DecodeConfig, TreeConfig, default_builder
    cfg = DecodeConfig(method="dominotree", temperature=0.0, max_new_tokens=48, seed=0, builder=default_builder("cpu"),
                       tree=TreeConfig(budget=16, corr_topm=64, node_topk=8))
    trace = live.generate(decoder, PROMPT, cfg)
    return rb.rebuild(decoder, trace, len(trace.rounds) - 1, settings)


def test_rebuild_and_cost_panel(page, tiny_decoder):
    from dominotree.view import rebuild as rb
    page.locator("#prompt textarea").fill(PROMPT)
    page.click("#run")
    page.wait_for_selector("#status .dt-status-done", timeout=240_000)
    assert page.inner_text("#status").startswith("Done"), page.inner_text("#status")
    page.wait_for_function("() => document.querySelector('#rebuild-caption .dt-rebuild[data-accepted]')")
    own = caption(page)
    assert own["method"] == "dominotree" and "identical tree" in own["text"]
    assert own["nodes"] == "16"
    page.wait_for_selector("#rebuild-tree .js-plotly-plot")        # plotly draws after the caption
    assert page.locator("#rebuild-tree .js-plotly-plot").count() == 1

    # a mistake: budget 0 gets a message, nothing is redrawn, and the page keeps working
    set_number(page, "rebuild-budget", 0)
    got = wait_caption(page, own["text"])
    assert "Budget 0 is plain decoding" in got["text"] and got["accepted"] is None
    set_number(page, "rebuild-budget", 16)
    got = wait_caption(page, got["text"])
    assert "identical tree" in got["text"]

    # Top-M 64 -> 4 (K follows it down to 4: a node's children come from the Top-M)
    set_number(page, "rebuild-topm", 4)
    got = wait_caption(page, got["text"])
    want = expected(tiny_decoder, rb.Settings("conditional", 4, 4, 16))
    assert "Top-M 64 → 4" in got["text"] and "K is at most Top-M" in got["text"]
    assert got["method"] == "dominotree" and int(got["accepted"]) == want.accepted
    assert int(got["nodes"]) == want.round.tree.num_nodes
    set_number(page, "rebuild-k", 2)
    got = wait_caption(page, got["text"])
    want = expected(tiny_decoder, rb.Settings("conditional", 4, 2, 16))
    assert int(got["accepted"]) == want.accepted and "K 8 → 2" in got["text"]

    page.locator("#rebuild-scorer label", has_text="marginal").click()
    got = wait_caption(page, got["text"])
    want = expected(tiny_decoder, rb.Settings("marginal", 4, 2, 16))
    assert got["method"] == "marg" and int(got["accepted"]) == want.accepted

    set_number(page, "rebuild-budget", 4)
    got = wait_caption(page, got["text"])
    want = expected(tiny_decoder, rb.Settings("marginal", 4, 2, 4))
    assert got["nodes"] == "4" and int(got["accepted"]) == want.accepted
    assert "budget 16 → 4" in got["text"] and "scorer conditional → marginal" in got["text"]

    page.wait_for_selector("#rebuild-export-svg:not([disabled]), #rebuild-export-svg button:not([disabled])")
    page.wait_for_function("() => (document.querySelector('#cost-panel')?.textContent || '').includes('break-even')")
    text = page.inner_text("#cost-panel")
    from dominotree.auto.curve import cpu_name
    assert "break-even tau" in text and "Projection, not a measurement" in text and "GPU" in text
    assert cpu_name() in text
    names = page.evaluate("() => document.querySelector('#cost-plot .js-plotly-plot').data.map(t => t.name)")
    assert any(n and n.startswith("this machine") for n in names) and "a GPU (projection)" in names
    assert not page.errors
