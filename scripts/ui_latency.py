"""How fast the explorer's lecture view answers after a run, in headless Chromium at 1280 x 720:
a view change (a digit key), a round step (ArrowRight / ArrowLeft in the tree view) and a stage
step (ArrowDown / ArrowUp), each timed in the page from the key to the frame after the answer is
drawn (the new view fitted; the new round's tree and stage cards drawn; the stage's cards and tree
restyled). Prints the median and 95th percentile of each, then one JSON line.

    flock /tmp/heavy.lock .venv/bin/python scripts/ui_latency.py [--preset smollm2] [--steps 40]
    flock /tmp/heavy.lock .venv/bin/python scripts/ui_latency.py --shots assets/lecture   # + a PNG per view

Serves the app on a free local port in this process and runs one comparison (ar, ddtree,
dominotree by default) first; the timings are of the page after that run, not of decoding.
"""
import argparse
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_e2e import FLAGS, set_number  # noqa: E402

# one timed key press: dispatched in the page, answered when `done()` holds, then two frames (painted)
TIME_KEY = """async ([key, kind, want]) => {
  const body = document.body, fitted = body.dataset.fitted;
  const title = () => document.querySelector('#tree .js-plotly-plot')?.layout?.title?.text || '';
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const done = {
    view: () => body.dataset.view === String(want) && body.dataset.fitted !== fitted,
    round: () => title().startsWith('Round ' + want + ' ') && document.querySelector('#captions')
                   .textContent.includes('Round ' + want + ' of') && body.dataset.fitted !== fitted,
    stage: () => body.dataset.stage === want && body.dataset.fitted !== fitted,
  }[kind];
  const t0 = performance.now();
  document.body.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true, cancelable: true}));
  while (!done()) {
    await frame();
    if (performance.now() - t0 > 20000) return -1;
  }
  await frame(); await frame();
  return performance.now() - t0;
}"""


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def save_png(page, path: Path) -> None:
    """A screenshot in a 256-colour palette (a few tens of KB)."""
    from PIL import Image
    raw = Path(tempfile.mkstemp(suffix=".png")[1])
    page.screenshot(path=str(raw))
    Image.open(raw).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT).save(path, optimize=True)
    raw.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="smollm2")
    ap.add_argument("--dtype", default=None, help="default: the explorer's default for this CPU")
    ap.add_argument("--prompt", default="A shop sells pens at 3 dollars each. How much do 7 pens cost?")
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--steps", type=int, default=40, help="timed steps of each kind")
    ap.add_argument("--shots", default=None, help="also save a PNG of each lecture view into this folder")
    ap.add_argument("--detail", action="store_true", help="print every timed step")
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from dominotree.machine import describe as machine
    from dominotree.view.live import default_dtype
    from ui.backend import Backend, ModelChoice
    from ui.lecture import VIEWS, TREE_VIEW
    demo, url = ui.serve_locally(Backend(ModelChoice(preset=a.preset, device="cpu",
                                                     dtype=a.dtype or default_dtype("cpu", a.preset))))
    times: dict[str, list[float]] = {"view change": [], "round step": [], "stage step": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_context(viewport={"width": 1280, "height": 720}).new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        page.wait_for_selector("#prompt textarea")
        page.fill("#prompt textarea", a.prompt)
        set_number(page, "max-new", a.max_new)
        page.click("#run")
        page.wait_for_selector("#status .dt-status-done", timeout=900_000)
        page.wait_for_selector("#share-link a.dt-share-url")
        page.wait_for_function("() => document.querySelector('#cost-plot .js-plotly-plot')", timeout=300_000)
        page.wait_for_timeout(3000)                   # the downloads and the rebuild that follow a run
        n_rounds = int(page.get_attribute("#round input[type=number]", "max"))
        page.click("#lecture-toggle")
        page.wait_for_function(f"() => document.body.dataset.view === '{TREE_VIEW}' && document.body.dataset.fitted")

        def press(key, kind, want):
            ms = page.evaluate(TIME_KEY, [key, kind, want])
            if ms < 0:
                raise SystemExit(f"{kind} {key}: no answer within 20 s")
            if a.detail:
                print(f"  {kind:<6} {key:<10} -> {want!s:<8} {ms:7.1f} ms")
            return ms

        for v, _, _ in VIEWS:                        # warm-up: every view drawn once
            press(str(v % 10), "view", v)
        for i in range(a.steps):                     # views in turn
            v = VIEWS[(i + 1) % len(VIEWS)][0]
            times["view change"].append(press(str(v % 10), "view", v))
        press(str(TREE_VIEW), "view", TREE_VIEW)
        # round steps draw from the run's rounds the page holds (ui/lecture.py: round_cache)
        page.wait_for_function("() => window.dtLecture.cached()", timeout=300_000)
        r = int(page.input_value("#round input[type=number]"))
        step = -1 if r > 1 else 1
        for i in range(a.steps + 2):                 # rounds back and forth; the first two are warm-up
            if not 1 <= r + step <= n_rounds:
                step = -step
            r += step
            ms = press("ArrowRight" if step > 0 else "ArrowLeft", "round", r)
            if i >= 2:
                times["round step"].append(ms)
        stages = ["draft", "build", "verify", "commit"]
        s = stages.index(page.evaluate("() => document.body.dataset.stage"))
        d = -1
        for i in range(a.steps + 2):                 # stages up and down within the round
            if not 0 <= s + d < len(stages):
                d = -d
            s += d
            ms = press("ArrowDown" if d > 0 else "ArrowUp", "stage", stages[s])
            if i >= 2:
                times["stage step"].append(ms)
        if a.shots:
            page.evaluate("() => window.dtLecture.setStage(3)")     # the commit: the accepted path drawn
            page.wait_for_timeout(1500)
            out = Path(a.shots)
            out.mkdir(parents=True, exist_ok=True)
            for v, name, _ in VIEWS:
                press(str(v % 10), "view", v)
                page.wait_for_timeout(1500)
                path = out / f"view-{v:02d}-{re.sub(r'[^a-z]+', '-', name.lower()).strip('-')}.png"
                save_png(page, path)
                print(path, f"{path.stat().st_size // 1024} KB")
        browser.close()
    demo.close()
    cpu = machine()
    print(f"lecture view latency in headless Chromium at 1280 x 720, {a.preset}, {n_rounds} rounds "
          f"({cpu.get('cpu')}, {cpu.get('cores')} cores)")
    print(f"{'step':<12} {'n':>4} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    summary = {}
    for kind, xs in times.items():
        summary[kind] = dict(n=len(xs), median_ms=round(statistics.median(xs), 1), p95_ms=round(pct(xs, 0.95), 1),
                             max_ms=round(max(xs), 1))
        print(f"{kind:<12} {len(xs):>4} {summary[kind]['median_ms']:>10} {summary[kind]['p95_ms']:>8} "
              f"{summary[kind]['max_ms']:>8}")
    print(json.dumps({"preset": a.preset, "rounds": n_rounds, "cpu": cpu.get("cpu"), "cores": cpu.get("cores"),
                      **{k.replace(" ", "_"): v for k, v in summary.items()}}))


if __name__ == "__main__":
    main()
