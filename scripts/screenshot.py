"""Take the README screenshots of the explorer on a real pair (default: the embedded smollm2),
at 1280 and 1920 px wide.

    flock /tmp/cpu.lock .venv/bin/python scripts/screenshot.py [--preset smollm2] [--widths 1280 1920]

Serves the app on a free local port and drives it in headless Debian Chromium: runs a four-method
comparison (ar, dflash, ddtree, dominotree) once, inspects dominotree at its longest-accepting
round, and screenshots the page from the top to the round view at each width
(``assets/screenshot-<width>.png``).
"""
import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from test_e2e import FLAGS, download, set_number, wait_round  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="smollm2")
    ap.add_argument("--dtype", default=None, help="default: the explorer's default for this CPU")
    ap.add_argument("--prompt", default="A shop sells pens at 3 dollars each. How much do 7 pens cost?")
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--widths", type=int, nargs="+", default=[1280, 1920])
    ap.add_argument("--out-dir", default=str(ROOT / "assets"))
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from dominotree.view.live import default_dtype
    from ui.backend import Backend, ModelChoice
    demo, url = ui.serve_locally(Backend(ModelChoice(preset=a.preset, dtype=a.dtype or default_dtype("cpu", a.preset),
                                                     device="cpu")))
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_context(viewport={"width": max(a.widths), "height": 1100},
                                   accept_downloads=True).new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        page.wait_for_selector("#prompt textarea")
        page.fill("#prompt textarea", a.prompt)
        page.locator("#methods label", has_text=re.compile(r"^\s*dflash\s*$")).click()
        set_number(page, "max-new", a.max_new)
        page.click("#run")
        page.wait_for_selector("#status .dt-status-done", timeout=600_000)
        doc = json.loads(download(page, "export-json", Path(tmp)).read_text())
        rounds = doc["traces"]["dominotree"]["rounds"]
        best = max(rounds, key=lambda r: len(r["accepted"]))["round"] + 1     # the page counts from 1
        page.locator("#focus label", has_text=re.compile(r"^\s*dominotree\s*$")).click()
        page.wait_for_timeout(1500)
        set_number(page, "round", best)
        wait_round(page, best)
        page.wait_for_timeout(2000)
        for w in a.widths:
            page.set_viewport_size({"width": w, "height": 1100})
            page.wait_for_timeout(1500)
            bottom = page.evaluate("() => document.querySelector('#whatif').getBoundingClientRect().top"
                                   " + window.scrollY")
            out = Path(a.out_dir) / f"screenshot-{w}.png"
            page.screenshot(path=str(out), full_page=True, clip={"x": 0, "y": 0, "width": w, "height": bottom})
            print(out, "round", best)
        browser.close()
    demo.close()


if __name__ == "__main__":
    main()
