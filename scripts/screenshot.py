"""Take the README screenshot of the explorer on a real pair (default: the embedded smollm2).

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/screenshot.py [--preset smollm2] [--out assets/screenshot.png]

Serves the app on a free local port and drives it in headless Debian Chromium: runs the default
methods (ar, ddtree, dominotree) once to find dominotree's longest-accepting round, then reruns
dominotree alone (same seed, same output) and screenshots that round's views.
"""
import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_e2e import FLAGS, download, set_number, take_screenshot  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="smollm2")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--prompt", default="A shop sells pens at 3 dollars each. How much do 7 pens cost?")
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--out", default=str(ROOT / "assets" / "screenshot.png"))
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from ui.backend import Backend, ModelChoice
    demo, url = ui.serve_locally(Backend(ModelChoice(preset=a.preset, dtype=a.dtype, device="cpu")))
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_context(viewport={"width": 1500, "height": 1100}, accept_downloads=True).new_page()
        page.set_default_timeout(120_000)
        page.goto(url)
        page.wait_for_selector("#prompt textarea")
        page.fill("#prompt textarea", a.prompt)
        set_number(page, "max-new", a.max_new)
        page.click("#run")
        page.wait_for_selector("#status .dt-status-done", timeout=600_000)
        trace = json.loads(download(page, "export-json", Path(tmp)).read_text())
        best = max(trace["rounds"], key=lambda r: len(r["accepted"]))["round"]
        page.fill("#prompt textarea", a.prompt)
        take_screenshot(page, best, a.out)        # adds ar and ddtree, reruns, scrubs to `best`
        browser.close()
    demo.close()
    print(a.out, "round", best)


if __name__ == "__main__":
    main()
