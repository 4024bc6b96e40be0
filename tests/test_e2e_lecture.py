"""End-to-end: the lecture view in headless Debian Chromium at 1280 x 720, on a classroom server
(``locked``: viewers cannot switch models). Runs the default comparison on the random-tiny pair,
switches the lecture view on (it opens on the tree, fully on screen, no scrolling in any view),
steps rounds and stages with the keys (and not while typing), plays and pauses with Space, opens
the share link in a fresh page at the same round and view, and opens a bad link (a message, and
the page still runs prompts). Round steps draw from the run's rounds held in the page: the tree and
stage cards show the new round in the same task as the key, before any server could answer, and the
other views follow once the steps pause; the run inspected and the colouring keep that right; keys
before any run and after a stopped run do no harm. Run:
``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q -m slow tests/test_e2e_lecture.py``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_e2e import FLAGS, set_number, tree_data, wait_round  # noqa: E402

pytestmark = pytest.mark.slow
W, H = 1280, 720


@pytest.fixture(scope="module")
def app(tiny_decoder):
    import ui
    from ui.backend import Backend, ModelChoice
    backend = Backend(ModelChoice(preset="random-tiny", device="cpu"), decoder=tiny_decoder, locked=True)
    demo, url = ui.serve_locally(backend)
    yield url
    demo.close()


def new_page(browser):
    pg = browser.new_context(viewport={"width": W, "height": H}).new_page()
    pg.errors = []
    pg.on("pageerror", lambda e: pg.errors.append(f"page error: {e}"))
    pg.set_default_timeout(90_000)
    return pg


def body(page, key: str) -> str:
    return page.evaluate(f"() => document.body.dataset.{key}")


def settled(page, act) -> None:
    """``act()``, then wait until the view's figures are fitted (the script stamps the body when a
    fit ends)."""
    stamp = body(page, "fitted")
    act()
    page.wait_for_function("s => document.body.dataset.fitted !== s", arg=stamp)
    page.wait_for_timeout(300)


def fits(page) -> None:
    size = page.evaluate("() => [document.documentElement.scrollHeight, document.documentElement.scrollWidth]")
    assert size[0] <= H + 1 and size[1] <= W + 1, f"view {body(page, 'view')} scrolls: {size}"


def stage_shown(page) -> str:
    """The stage card drawn in full (the others are dimmed to their title)."""
    return page.evaluate("""() => [...document.querySelectorAll('#captions .dt-stage')]
        .filter(e => getComputedStyle(e).opacity === '1').map(e => e.className.match(/dt-stage-(\\w+)/)[1]).join()""")


def accepted_path_visible(page) -> bool:
    return page.evaluate("""() => { const g = document.querySelector('#tree .js-plotly-plot');
        const t = g.data.find(t => t.name === 'accepted path'); return t.visible !== false; }""")


def test_lecture_keys_link_and_bad_link(app, browser):
    page = new_page(browser)
    page.goto(app)
    page.wait_for_selector("#prompt textarea")
    set_number(page, "max-new", 24)
    page.click("#run")
    page.wait_for_selector("#status .dt-status-done", timeout=120_000)
    page.wait_for_selector("#share-link a.dt-share-url")
    n = int(page.get_attribute("#round input[type=number]", "max"))
    assert n >= 4
    page.wait_for_timeout(2000)                     # the downloads, rebuild and cost panel after the run

    # on after a run: the tree view, the whole tree on screen, nothing to scroll
    settled(page, lambda: page.click("#lecture-toggle"))
    assert page.evaluate("() => document.body.classList.contains('dt-lecture')")
    assert body(page, "view") == "2" and page.get_attribute("#lecture-toggle", "aria-pressed") == "true"
    box = page.locator("#tree").bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= H and box["x"] + box["width"] <= W, box
    fits(page)
    assert page.is_visible("#lecture-keys") and "stage" in page.inner_text("#lecture-keys")
    assert not page.is_visible("#temperature")       # the settings stay on the full page

    # every view is one screen
    for v in list(range(1, 11)):
        settled(page, lambda: page.keyboard.press(str(v % 10)))
        assert body(page, "view") == str(v)
        fits(page)
    settled(page, lambda: page.keyboard.press("2"))

    # rounds: ArrowLeft / ArrowRight step the inspected run; the stage cards and the bar follow
    assert tree_data(page)["title"].startswith(f"Round {n} ")
    page.keyboard.press("ArrowLeft")
    wait_round(page, n - 1)
    page.keyboard.press("ArrowLeft")
    wait_round(page, n - 2)
    page.wait_for_function("r => document.querySelector('#captions').innerText.includes('Round ' + r + ' of')",
                           arg=n - 2)
    assert page.inner_text("#lecture-where").startswith(f"Round {n - 2} of {n}")
    page.keyboard.press("ArrowRight")
    wait_round(page, n - 1)

    # stages: ArrowUp / ArrowDown; before the commit the accepted path is not drawn yet
    assert body(page, "stage") == "commit" and stage_shown(page) == "commit" and accepted_path_visible(page)
    settled(page, lambda: page.keyboard.press("ArrowUp"))
    assert body(page, "stage") == "verify" and stage_shown(page) == "verify" and not accepted_path_visible(page)
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    page.wait_for_function("() => document.body.dataset.stage === 'draft'")
    assert stage_shown(page) == "draft"
    page.keyboard.press("ArrowUp")                   # before the draft: the previous round's commit
    wait_round(page, n - 2)
    assert body(page, "stage") == "commit"
    page.keyboard.press("ArrowDown")                 # past the commit: the next round's draft
    wait_round(page, n - 1)
    assert body(page, "stage") == "draft"
    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => document.body.dataset.stage === 'build'")

    # no keys while typing in a text field
    page.keyboard.press("1")
    page.wait_for_function("() => document.body.dataset.view === '1'")
    page.wait_for_timeout(1500)                      # the other views have caught up with the round
    before = page.input_value("#round input[type=number]")
    typed = page.input_value("#prompt textarea")
    page.click("#prompt textarea")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("3")
    page.wait_for_timeout(800)
    assert body(page, "view") == "1" and page.input_value("#round input[type=number]") == before
    now = page.input_value("#prompt textarea")     # the keys went to the text, the "3" with them
    assert len(now) == len(typed) + 1 and now.count("3") == typed.count("3") + 1

    # the link: this round and view, in a fresh page (another browser context), without the target
    page.click("#lecture-bar .dt-tab[data-view='2']")
    page.wait_for_function("() => document.body.dataset.view === '2'")
    assert body(page, "stage") == "build"            # the stage stays as the rounds step
    page.keyboard.press("ArrowDown")
    page.wait_for_function("() => document.body.dataset.stage === 'verify'")
    page.wait_for_timeout(1500)                      # the round steps have settled
    r = int(page.input_value("#round input[type=number]"))
    href = page.get_attribute("#share-link a.dt-share-url", "href")
    assert f"round={r}" in href and "view=2" in href and "stage=verify" in href and "focus=dominotree" in href
    assert page.inner_text("#share-link a.dt-share-url") == href
    texts = [page.inner_text(f"#pane-{i}-text") for i in range(3)]
    other = new_page(browser)
    other.goto(href)
    other.wait_for_function("() => document.querySelector('#status')?.innerText?.includes('Shared link')")
    assert wait_round(other, r)["title"].startswith(f"Round {r} ")
    assert other.evaluate("() => document.body.classList.contains('dt-lecture')")
    assert body(other, "view") == "2" and body(other, "stage") == "verify"
    assert [other.inner_text(f"#pane-{i}-text") for i in range(3)] == texts
    assert "Shared link" in other.inner_text("#status") and "no model used" in other.inner_text("#status")
    assert other.errors == [], other.errors

    # Space plays and pauses
    page.keyboard.press("Home")
    wait_round(page, 1)
    page.wait_for_timeout(1000)                      # the other views catch up with the round
    page.keyboard.press(" ")
    page.wait_for_function("() => document.querySelector('#play').innerText.includes('Pause')")
    page.keyboard.press(" ")
    page.wait_for_function("() => document.querySelector('#play').innerText.includes('Play')")

    # Escape (or the switch) goes back to the full page
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.body.classList.contains('dt-lecture')")
    assert page.is_visible("#temperature")
    assert page.errors == [], page.errors

    # a bad id: one message, and the page runs prompts as usual
    bad = new_page(browser)
    bad.goto(app + "?share=NoSuchLink12345678&round=3&view=2")
    bad.wait_for_function("() => document.querySelector('#status')?.innerText?.includes('Share link not opened')")
    assert "unknown or has expired" in bad.inner_text("#status")
    bad.locator("#lecture-toggle").click()           # it opened in the lecture view: back to the full page
    bad.wait_for_function("() => !document.body.classList.contains('dt-lecture')")
    set_number(bad, "max-new", 8)
    bad.click("#run")
    bad.wait_for_selector("#status .dt-status-done", timeout=120_000)
    assert bad.locator("#pane-0-text .dt-text .dt-tok").count() == 8
    assert bad.errors == [], bad.errors


# --- round steps from the page's cache of the run's rounds -------------------------------------------

def key_now(page, key: str) -> dict:
    """Press ``key`` and read, in the same task (so before any server could answer), the round the
    tree, its stage cards and the bar show."""
    return page.evaluate("""(key) => {
        document.body.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
        const g = document.querySelector('#tree .js-plotly-plot'), num = (s) => parseInt((s || '').replace(/^\\D+/, ''), 10);
        return {tree: num(g.layout.title.text), cards: num(document.querySelector('#captions b').textContent),
                where: document.querySelector('#lecture-where').textContent, title: g.layout.title.text,
                stage: document.body.dataset.stage};
    }""", key)


def cache_ready(page, focus: str, show: str = "conditional") -> None:
    page.wait_for_function("""([f, s]) => { const t = document.querySelector('#lecture-cache textarea')?.textContent;
        const c = t && JSON.parse(t); return c && c.focus === f && c.show === s && window.dtLecture.cached(); }""",
                           arg=[focus, show])


def views_agree(page, r: int) -> None:
    """Once the steps pause, every view shows round ``r``: the slider, the cards and tree, the
    link, and (drawn as their views open) the conditional-vs-marginal and Top-M views."""
    page.wait_for_function("""r => document.querySelector('#round input[type=number]').value === String(r)
        && document.querySelector('#captions b').textContent === 'Round ' + r
        && document.querySelector('#tree .js-plotly-plot').layout.title.text.startsWith('Round ' + r + ' ')
        && document.querySelector('#share-link a.dt-share-url').href.includes('round=' + r + '&')
        && ['#mvc', '#topm'].every(id => document.querySelector(id + ' .js-plotly-plot')._dtSrc?.layout?.title?.text
                                          ?.startsWith('Round ' + r + ':'))""", arg=r)
    for view, fig in (("3", "#mvc"), ("4", "#topm")):
        settled(page, lambda: page.keyboard.press(view))
        title = page.evaluate(f"() => document.querySelector('{fig} .js-plotly-plot').layout.title.text")
        assert title.startswith(f"Round {r}:"), (fig, title)
    settled(page, lambda: page.keyboard.press("2"))


def test_round_steps_draw_at_once_from_the_page(app, browser, tiny_decoder, monkeypatch):
    page = new_page(browser)
    page.goto(app)
    page.wait_for_selector("#prompt textarea")

    # keys before any run: nothing to step, nothing breaks
    page.click("#lecture-toggle")
    page.wait_for_function("() => document.body.dataset.view === '1'")
    for key in ("ArrowRight", "ArrowLeft", "End", "ArrowDown", "ArrowUp", "2", "1"):
        page.keyboard.press(key)
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.body.classList.contains('dt-lecture')")

    set_number(page, "max-new", 24)
    page.click("#run")
    page.wait_for_selector("#status .dt-status-done", timeout=120_000)
    n = int(page.get_attribute("#round input[type=number]", "max"))
    assert n >= 6
    cache_ready(page, "dominotree")
    settled(page, lambda: page.click("#lecture-toggle"))
    assert body(page, "view") == "2" and tree_data(page)["title"].startswith(f"Round {n} ")

    # quick steps: the tree and the cards show each round in the key's own task
    for r in range(n - 1, n - 5, -1):
        got = key_now(page, "ArrowLeft")
        assert (got["tree"], got["cards"]) == (r, r) and got["where"].startswith(f"Round {r} of {n}"), got
    for r in (n - 3, n - 2):
        got = key_now(page, "ArrowRight")
        assert (got["tree"], got["cards"]) == (r, r), got
    assert stage_shown(page) == "commit" and accepted_path_visible(page)
    views_agree(page, n - 2)

    # stages across round boundaries, quickly: the round and stage never go back
    seq = [("ArrowUp", n - 2, "verify"), ("ArrowUp", n - 2, "build"), ("ArrowUp", n - 2, "draft"),
           ("ArrowUp", n - 3, "commit"), ("ArrowUp", n - 3, "verify"), ("ArrowDown", n - 3, "commit"),
           ("ArrowDown", n - 2, "draft"), ("ArrowDown", n - 2, "build")]
    for key, r, stage in seq:
        got = key_now(page, key)
        assert (got["tree"], got["cards"], got["stage"]) == (r, r, stage), (key, got)
    page.wait_for_function("() => document.body.dataset.fitted")
    assert stage_shown(page) == "build" and not accepted_path_visible(page)
    views_agree(page, n - 2)
    assert key_now(page, "End")["tree"] == n and key_now(page, "Home")["tree"] == 1
    views_agree(page, 1)

    # another run inspected: its tree at once, its own rounds from its own cache
    page.locator("#focus label", has_text="ddtree").click()
    page.wait_for_function("() => document.querySelector('#tree .js-plotly-plot').layout.title.text.includes('ddtree')")
    cache_ready(page, "ddtree")
    m = int(page.get_attribute("#round input[type=number]", "max"))
    got = key_now(page, "ArrowLeft")
    assert got["tree"] == m - 1 and "ddtree" in got["title"] and got["cards"] == m - 1, got
    views_agree(page, m - 1)

    # another colouring (a full-page setting): the cache follows it
    page.keyboard.press("Escape")
    page.wait_for_function("() => !document.body.classList.contains('dt-lecture')")
    page.locator("#colour-by label", has_text="marginal").click()
    cache_ready(page, "ddtree", "marginal")
    page.wait_for_function("() => document.querySelector('#tree .js-plotly-plot').layout.title.text.includes('colour: marginal')")
    settled(page, lambda: page.click("#lecture-toggle"))
    got = key_now(page, "ArrowLeft")
    assert got["tree"] == m - 2 and "colour: marginal" in got["title"], got
    views_agree(page, m - 2)
    assert page.errors == [], page.errors

    # a run stopped half-way: its rounds step like any other. The tiny pair decodes 400 tokens in
    # about a second on a fast CPU, no longer than the first streamed update takes to come, so each
    # Domino round is made to last 20 ms (~8 s in all): the Stop then lands half-way on any machine.
    real_draft = tiny_decoder.draft

    def slow_domino_draft(drafter, *args, **kwargs):
        if drafter is tiny_decoder.pair.drafters.get("domino"):
            time.sleep(0.02)
        return real_draft(drafter, *args, **kwargs)
    monkeypatch.setattr(tiny_decoder, "draft", slow_domino_draft)
    page.keyboard.press("Escape")
    set_number(page, "max-new", 400)
    page.click("#run")
    # after its first round, so that the run inspected is the stopped one: the prefill's update
    # ("round 0") comes first, and a Stop there leaves dominotree no round (the page then inspects ddtree)
    page.wait_for_function("() => /^Decoding dominotree \\(\\d+\\/\\d+\\) · round [1-9]/"
                           ".test(document.querySelector('#status').innerText)")
    page.click("#stop")
    page.wait_for_selector("#status .dt-status-done", timeout=120_000)
    cache_ready(page, page.evaluate("() => document.querySelector('#focus input:checked').value"), "marginal")
    k = int(page.get_attribute("#round input[type=number]", "max"))
    settled(page, lambda: page.click("#lecture-toggle"))
    got = key_now(page, "ArrowLeft")
    assert got["tree"] == k - 1 and got["cards"] == k - 1, got
    views_agree(page, k - 1)
    assert page.errors == [], page.errors
