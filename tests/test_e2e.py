"""End-to-end: the explorer in headless Debian Chromium, driven by Playwright (no browser
download: ``executable_path=/usr/bin/chromium``). Run:
``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_e2e.py``.

Opens the page, runs a prompt on the random-tiny pair, finds the tree with its accepted path,
scrubs rounds, plays a few rounds, exports SVG and JSON, re-imports the JSON, and checks that the
browser fetched nothing from outside this machine. Set ``DOMINOTREE_SCREENSHOT=path.png`` to
keep a screenshot of the finished run (the README pictures come from scripts/screenshot.py).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow   # drives a real browser (make test; make test-fast leaves it out)

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]

if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium); the e2e test needs a real browser",
                allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_app import PROMPT, close_served, served  # noqa: E402  (one server for the session)


@pytest.fixture(scope="module")
def page(app):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True)
        pg = ctx.new_page()
        pg.requests, pg.errors = [], []
        pg.on("request", lambda r: pg.requests.append(r.url))
        pg.on("pageerror", lambda e: pg.errors.append(f"page error: {e}"))
        pg.on("console", lambda m: m.type == "error" and pg.errors.append(f"console: {m.text}"))
        pg.set_default_timeout(60_000)
        yield pg
        browser.close()


def tree_data(page) -> dict:
    """The draft tree as plotly holds it in the page: title and the accepted-path x values."""
    return page.evaluate("""() => {
        const g = document.querySelector('#tree .js-plotly-plot');
        if (!g || !g.data) return null;
        const acc = g.data.find(t => t.name === 'accepted path');
        return {title: g.layout.title.text, accepted: acc ? acc.x.filter(v => v !== null) : [],
                nodes: g.data.filter(t => t.name === 'nodes').map(t => t.x.length).reduce((a, b) => a + b, 0)};
    }""")


def wait_tree(page, timeout_ms: int = 30_000) -> dict:
    """The draft tree once plotly has drawn it: the figures follow the run's final status (they are
    not drawn while decoding), and plotly renders asynchronously after the update arrives."""
    page.wait_for_function("""() => {
        const g = document.querySelector('#tree .js-plotly-plot');
        return g && g.data && g.data.some(t => t.name === 'nodes' && t.x.length > 0);
    }""", timeout=timeout_ms)
    return tree_data(page)


def set_number(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")


def download(page, elem_id: str, folder: Path) -> Path:
    page.wait_for_selector(f"#{elem_id}:not([disabled]), #{elem_id} button:not([disabled])")
    with page.expect_download() as dl:
        page.click(f"#{elem_id}")
    path = folder / dl.value.suggested_filename
    dl.value.save_as(path)
    return path


def wait_round(page, n: int) -> dict:
    page.wait_for_function(
        "n => { const g = document.querySelector('#tree .js-plotly-plot');"
        " return g && g.layout && g.layout.title.text.startsWith('Round ' + n + ' '); }", arg=n)
    return tree_data(page)


def take_screenshot(page, r: int, path: str) -> None:
    """The README picture: unticks ar and ddtree (on by default) so dominotree runs alone, reruns,
    shows dominotree's round ``r`` (which has an accepted path), its conditional-vs-marginal view
    and the timing chart, cropped to the part of the page that holds them."""
    for m in ("ar", "ddtree"):
        page.locator("#methods label", has_text=re.compile(rf"^\s*{m}\s*$")).click()
    page.click("#run")
    page.wait_for_function("() => document.querySelector('#status').innerText.startsWith('Done')",
                           timeout=120_000)
    set_number(page, "round", r)
    wait_round(page, r)
    page.wait_for_function("() => { const g = document.querySelector('#timing .js-plotly-plot');"
                           " return g && g.layout && g.layout.title.text.includes('dominotree'); }")
    page.wait_for_timeout(2000)               # let the secondary views finish drawing
    bottom = page.evaluate("() => document.querySelector('#timing').getBoundingClientRect().bottom + window.scrollY")
    page.screenshot(path=path, full_page=True, clip={"x": 0, "y": 0, "width": 1500, "height": bottom + 16})


def test_run_scrub_export_import(app, page, tmp_path, monkeypatch):
    page.goto(app["url"])
    page.wait_for_selector("#prompt textarea")
    # random-tiny has no budget calibration here: auto is offered, off, with the command that makes one
    assert page.locator("#budget-auto input[type=checkbox]").is_disabled()
    assert "python -m dominotree calibrate-budget --preset random-tiny" in page.inner_text("#budget-auto")
    page.fill("#prompt textarea", PROMPT)
    for m in ("ar", "ddtree"):                        # the defaults; keep dominotree alone
        page.locator("#methods label", has_text=re.compile(rf"^\s*{m}\s*$")).click()
    set_number(page, "budget", 32)
    set_number(page, "max-new", 24)
    drew, real_drew = [], app["backend"].page_drew
    monkeypatch.setattr(app["backend"], "page_drew", lambda s: (drew.append(s), real_drew(s)))
    page.click("#run")
    page.wait_for_selector("#status .dt-status-done", timeout=120_000)
    # the page said when it had drawn the streamed update (the decoder waits for it, off its clock)
    assert drew and len(set(drew)) == 1
    assert "dominotree" in page.inner_text("#pane-0-head")
    assert page.locator("#pane-0-text .dt-text .dt-tok").count() == 24

    # the tree of the last round is drawn; the whole run exports as JSON
    first = wait_tree(page)
    assert first and first["nodes"] > 1
    saved = download(page, "export-json", tmp_path)
    doc = json.loads(saved.read_text())
    assert doc["schema"] == "dominotree.comparison" and doc["prompt"] == PROMPT and list(doc["traces"]) == ["dominotree"]
    trace = doc["traces"]["dominotree"]
    assert trace["schema"] == "dominotree.trace" and len(trace["token_ids"]) == 24
    accepting = [r["round"] for r in trace["rounds"] if len(r["accepted"]) > 1]
    assert accepting, "random-tiny with this prompt accepts drafts in some rounds (rounds 7 and 17)"

    # scrub to a round whose accepted path has a draft token: the red path is drawn
    r = accepting[0] + 1                              # the page counts rounds from 1
    set_number(page, "round", r)
    shown = wait_round(page, r)
    assert len(shown["accepted"]) >= 2                # one edge: root -> accepted draft token
    assert "matched the target" in page.inner_text("#captions")
    page.wait_for_function("() => document.querySelector('#mvc .js-plotly-plot') !== null")
    svg = download(page, "export-svg", tmp_path)
    text = svg.read_text()
    assert text.startswith("<svg") and f"Round {r} " in text and 'class="node accepted"' in text

    # what a smaller budget would have accepted: the first b nodes of this round's tree
    page.get_by_text("What would a smaller budget have accepted?").click()
    set_number(page, "whatif-budget", 1)
    page.wait_for_function("() => document.querySelector('#whatif-caption').innerText.includes('With budget 1 ')")
    text = page.inner_text("#whatif-caption")
    assert re.search(r"accepted [01] draft token", text) and "with the full tree" in text
    nodes = page.evaluate("() => document.querySelector('#whatif-tree .js-plotly-plot').data"
                          ".filter(t => t.name === 'nodes').map(t => t.x.length).reduce((a, b) => a + b, 0)")
    assert nodes == 2                                  # the root and the first popped node

    # autoplay: Play switches to Pause (the timer then steps rounds; see test_app for the stepping)
    page.click("#play")
    page.wait_for_function("() => document.querySelector('#play').innerText.includes('Pause')")
    page.click("#play")
    page.wait_for_function("() => document.querySelector('#play').innerText.includes('Play')")

    # re-import the exported JSON: the replay needs no model and shows the same run, its prompt and settings
    page.set_input_files("#import-trace input[type=file]", str(saved))
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Replaying')")
    assert PROMPT in page.inner_text("#status") and "budget 32" in page.inner_text("#status")
    assert page.locator("#pane-0-text .dt-text .dt-tok").count() == 24
    assert tree_data(page)["title"].startswith(f"Round {len(trace['rounds'])} ")

    if os.environ.get("DOMINOTREE_SCREENSHOT"):
        take_screenshot(page, r, os.environ["DOMINOTREE_SCREENSHOT"])
    outside = [u for u in page.requests if not re.match(r"(https?|ws)://127\.0\.0\.1[:/]|blob:|data:", u)]
    assert outside == [], f"the page fetched from outside this machine: {outside[:5]}"
    assert page.errors == [], page.errors


def test_comparison_exports_and_replays_whole(app, page, tmp_path):
    """A four-method comparison sits in one row at 1280 px, says per pane what a round cost and
    marks the fastest method; it is one JSON file, and importing it on a fresh page (no run there)
    brings back every pane with its text, the prompt and the settings, which a mistake after the
    replay leaves on screen."""
    names = ["ar", "dflash", "ddtree", "dominotree"]
    page.set_viewport_size({"width": 1280, "height": 1000})
    page.goto(app["url"])
    page.wait_for_selector("#prompt textarea")
    page.errors.clear()                                  # leaving a page aborts its connections
    page.fill("#prompt textarea", PROMPT)
    set_number(page, "max-new", 12)
    page.locator("#methods label", has_text=re.compile(r"^\s*dflash\s*$")).click()   # + the defaults
    page.click("#run")
    page.wait_for_selector("#status .dt-status-done", timeout=120_000)
    heads = [page.inner_text(f"#pane-{i}-head") for i in range(4)]
    texts = [page.inner_text(f"#pane-{i}-text") for i in range(4)]
    assert [h.split()[0] for h in heads] == names, heads
    assert sum("fastest" in h for h in heads) == 1
    assert all(re.search(r"a round cost [\d.]+ ar steps and committed [\d.]+ tokens", h) for h in heads[1:]), heads
    boxes = [page.locator(f"#pane-{i}-text").bounding_box() for i in range(4)]
    assert len({round(b["y"]) for b in boxes}) == 1, boxes          # one row, texts start level
    assert all(b["x"] + b["width"] <= 1280 for b in boxes), boxes
    saved = download(page, "export-json", tmp_path)
    doc = json.loads(saved.read_text())
    assert doc["schema"] == "dominotree.comparison" and list(doc["traces"]) == names
    assert all(len(t["token_ids"]) == 12 for t in doc["traces"].values())

    page.goto(app["url"])                                # a fresh page: nothing on screen
    page.wait_for_selector("#prompt textarea")
    page.errors.clear()
    page.set_input_files("#import-trace input[type=file]", str(saved))
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Replaying')")
    assert PROMPT in page.inner_text("#status")
    assert [page.inner_text(f"#pane-{i}-text") for i in range(4)] == texts
    assert [page.inner_text(f"#pane-{i}-head").split()[0] for i in range(4)] == names
    # mistakes after a replay: a bad file and an empty prompt leave the replay on screen
    bad = tmp_path / "picture.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    page.set_input_files("#import-trace input[type=file]", str(bad))
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('Trace not imported')")
    page.fill("#prompt textarea", "")
    page.click("#run")
    page.wait_for_function("() => document.querySelector('#status').innerText.includes('The prompt is empty')")
    page.wait_for_selector("#run:not([disabled])")
    assert [page.inner_text(f"#pane-{i}-text") for i in range(4)] == texts
    assert page.get_by_text("Error", exact=True).count() == 0
    assert page.errors == [], page.errors
    page.set_viewport_size({"width": 1500, "height": 1000})
