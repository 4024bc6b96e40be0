"""Every user mistake recovers in the browser (headless Debian Chromium via Playwright): after
the message, Run works, the earlier run is still on screen and no output carries an error badge.
Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_e2e_recover.py``.
"""
from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow   # drives a real browser (make test; make test-fast leaves it out)

from test_e2e import CHROMIUM, FLAGS, set_number, sync_api  # noqa: F401  (skips without a browser)
from test_app import PROMPT, close_served, served  # noqa: E402


def new_page(browser, app):
    pg = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
    pg.set_default_timeout(60_000)
    pg.goto(app["url"])
    pg.wait_for_selector("#prompt textarea")
    return pg


def tick(page, method: str) -> None:
    page.locator("#methods label", has_text=re.compile(rf"^\s*{method}\s*$")).click()


def status(page) -> str:
    return page.inner_text("#status .dt-status")


def run_to_end(page) -> str:
    """Press Run and wait for this run's final status (not the one left by the last run)."""
    page.wait_for_selector("#run:not([disabled])")
    old = status(page)
    page.click("#run")
    page.wait_for_function("old => { const e = document.querySelector('#status .dt-status');"
                           " return e && e.innerText !== old && /^(Done|Stopped)/.test(e.innerText); }",
                           arg=old, timeout=120_000)
    return status(page)


def assert_recovered(page, message: str, shown: str) -> None:
    """The mistake's message is on screen, Run is enabled, the earlier output is intact."""
    # this mistake's error (the one before may have had the same words; Run first says "Waiting…")
    page.wait_for_function("m => { const e = document.querySelector('#status .dt-status-error');"
                           " return e && e.innerText.includes(m); }", arg=message)
    assert page.locator("#status .dt-status-error").count() == 1
    page.wait_for_selector("#run:not([disabled])", timeout=10_000)
    assert page.inner_text("#pane-0-text") == shown
    assert page.locator("#tree .js-plotly-plot").count() == 1
    assert page.get_by_text("Error", exact=True).count() == 0, "an output carries Gradio's Error badge"


def open_model(page) -> None:
    if not page.locator("#preset").is_visible():
        page.get_by_text("Model", exact=True).click()


def pick_preset(page, name: str) -> None:
    page.click("#preset input")
    page.get_by_role("option", name=name, exact=True).click()


MISTAKES = {
    "empty prompt": (lambda pg: pg.fill("#prompt textarea", ""), lambda pg: pg.fill("#prompt textarea", PROMPT),
                     "The prompt is empty"),
    "five methods": (lambda pg: [tick(pg, m) for m in ("dflash", "domino")],
                     lambda pg: [tick(pg, m) for m in ("dflash", "domino")], "Pick at most 4"),
    "max new 2.5": (lambda pg: set_number(pg, "max-new", "2.5"), lambda pg: set_number(pg, "max-new", 8),
                    "Max new tokens must be an integer"),
    "seed -5": (lambda pg: set_number(pg, "seed", -5), lambda pg: set_number(pg, "seed", 0), "Seed out of range"),
    "seed 1e30": (lambda pg: set_number(pg, "seed", "1e30"), lambda pg: set_number(pg, "seed", 0),
                  "Seed out of range: Seed must be an integer in [0, 9.22337e+18], got 1e+30"),
}


WATCH_PANE_TIMERS = """() => {
    window.paneTimers = [];
    const sel = '[id^="pane-"] .progress-text, [id^="pane-"] .meta-text, [id^="pane-"] .meta-text-center';
    new MutationObserver(() => {
        for (const e of document.querySelectorAll(sel)) if (e.innerText.trim()) window.paneTimers.push(e.innerText);
    }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""


def test_every_mistake_recovers(app, browser, tmp_path):
    page = new_page(browser, app)
    page.evaluate(WATCH_PANE_TIMERS)      # no event may put Gradio's timer on a pane, even for a moment
    page.fill("#prompt textarea", PROMPT)
    set_number(page, "max-new", 8)
    assert run_to_end(page).startswith("Done")
    shown = page.inner_text("#pane-0-text")
    assert shown
    for name, (make, undo, message) in MISTAKES.items():
        make(page)
        page.click("#run")
        assert_recovered(page, message, shown)
        page.click("#stop")                       # nothing runs: Stop must not leave "Stopping…"
        page.wait_for_timeout(300)
        assert "Stopping" not in page.inner_text("#status"), name
        undo(page)
    # a model that fails to load
    open_model(page)
    pick_preset(page, "custom folders")
    page.fill("#target textarea, #target input", str(tmp_path / "no-such-model"))
    page.click("#run")
    assert_recovered(page, "Could not load the model", shown)
    pick_preset(page, "random-tiny")
    page.fill("#target textarea, #target input", "")
    # a bad import file: a PNG renamed .json
    bad = tmp_path / "picture.json"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    page.set_input_files("#import-trace input[type=file]", str(bad))
    assert_recovered(page, "Trace not imported", shown)
    # after all that, Run works
    assert run_to_end(page).startswith("Done")
    assert page.inner_text("#pane-0-text")
    assert page.evaluate("window.paneTimers") == [], "Gradio's progress timer showed on a pane"
    page.context.close()


def test_stop_while_queued(app, browser):
    """One session decodes a long run; another presses Run (queued behind it) and Stop: its run
    ends as soon as it is dequeued, and Run works again."""
    busy, queued = new_page(browser, app), new_page(browser, app)
    for pg in (busy, queued):
        pg.fill("#prompt textarea", PROMPT)
    set_number(busy, "max-new", 1024)
    busy.click("#run")
    busy.wait_for_function("() => document.querySelector('#status').innerText.startsWith('Decoding')")
    set_number(queued, "max-new", 8)
    queued.click("#run")
    queued.wait_for_selector("#run[disabled]")          # Run's click has registered the queued run
    queued.click("#stop")
    queued.wait_for_function("() => /^Stopp/.test(document.querySelector('#status').innerText)")
    busy.click("#stop")
    queued.wait_for_function("() => document.querySelector('#status').innerText.startsWith('Stopped')",
                             timeout=120_000)
    assert "before it started" in queued.inner_text("#status")
    assert not queued.locator("#pane-0-text .dt-tok").count()          # nothing decoded for it
    assert run_to_end(queued).startswith("Done")
    for pg in (busy, queued):
        pg.context.close()


def test_draft_vocabulary_follows_the_preset(app, browser):
    """The "Draft vocabulary" dropdown shows the named pair's default (the library's: 8192 tokens for
    the embedded pair, the full vocabulary for others) as the preset changes; nothing loads."""
    from dominotree.presets import available_presets
    if "smollm2" not in available_presets():
        pytest.skip("the embedded pair is not installed here")
    page = new_page(browser, app)
    value = lambda: page.input_value("#draft-vocab input")   # noqa: E731
    assert value() == "full vocabulary (paper)"            # the app's pair: random-tiny
    open_model(page)
    pick_preset(page, "smollm2")
    page.wait_for_function("() => document.querySelector('#draft-vocab input').value === '8192 most frequent tokens'")
    pick_preset(page, "random-tiny")
    page.wait_for_function("() => document.querySelector('#draft-vocab input').value === 'full vocabulary (paper)'")
    assert value() == "full vocabulary (paper)"
    page.context.close()
