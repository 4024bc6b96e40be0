"""Issue 11's stalled run, hunted: the issue's scenario repeated back to back in one page.

    flock /tmp/cpu.lock .venv/bin/python scripts/experiments/stall_hunt.py [--runs 30] [--out results/stall_hunt.json]

A fresh explorer (smollm2, the default dtype and comparison: ar, ddtree, dominotree, budget 16)
in headless Debian Chromium; the prompt "A farmer has 17 cows and buys 5 more. How many cows?",
48 new tokens; Run pressed again as soon as the last run ends, ``--runs`` times. Each run's wall
time (click to "Done") and each pane's tok/s are recorded; a run that takes longer than
``--limit`` seconds, ends otherwise than "Done", or shows the stall warning is a problem. Also
gives the page's tok/s ratios over back-to-back runs (medians). One JSON line last.
"""
import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PROMPT = "A farmer has 17 cows and buys 5 more. How many cows?"
END = "/^(Done|Stopped|Ready)/.test(document.querySelector('#status .dt-status')?.innerText ?? '')"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="smollm2")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--limit", type=float, default=60.0, help="seconds after which a run counts as stalled")
    ap.add_argument("--out", default=str(ROOT / "results" / "stall_hunt.json"))
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from test_e2e import FLAGS, set_number
    from ui.backend import Backend, ModelChoice
    from dominotree.machine import describe as machine
    from dominotree.view.live import default_dtype
    dtype = default_dtype("cpu", a.preset)
    demo, url = ui.serve_locally(Backend(ModelChoice(preset=a.preset, dtype=dtype, device="cpu")))
    runs, problems = [], []
    t0 = time.time()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
        page.set_default_timeout(int(a.limit * 1000))
        page.goto(url)
        page.wait_for_selector("#prompt textarea")
        page.fill("#prompt textarea", PROMPT)
        set_number(page, "max-new", a.max_new)
        for r in range(a.runs + 1):                     # run 0 loads the model and is not counted
            page.wait_for_selector("#run:not([disabled])")
            t = time.perf_counter()
            page.click("#run")
            try:       # leave the previous "Done" first (two runs can end on the same status text)
                page.wait_for_function(f"() => !{END}", timeout=(a.limit * 1000 if r else 600_000))
                page.wait_for_function(f"() => {END}", timeout=(a.limit * 1000 if r else 600_000))
            except Exception:
                problems.append(f"run {r}: no end within {a.limit:.0f} s; status: "
                                f"{page.inner_text('#status')[:160]!r}")
                page.wait_for_function(f"() => {END}", timeout=300_000)
            wall = time.perf_counter() - t
            status = page.inner_text("#status")
            tps = {}
            for k in range(3):
                head = page.inner_text(f"#pane-{k}-head")
                m = re.search(r"([\d.]+) tok/s", head)
                tps[head.split()[0]] = float(m.group(1)) if m else None
            if r == 0:
                continue
            if not status.startswith("Done") or "no progress" in status:
                problems.append(f"run {r}: {status[:160]!r}")
            runs.append({"run": r, "wall_s": round(wall, 2), "tokens_per_s": tps})
            print(f"run {r}: {wall:.1f} s {tps}", flush=True)
        browser.close()
    demo.close()
    names = list(runs[0]["tokens_per_s"])
    ratios = {m: statistics.median(x["tokens_per_s"][m] / x["tokens_per_s"]["ar"] for x in runs) for m in names}
    walls = [x["wall_s"] for x in runs]
    result = {"prompt": PROMPT, "preset": a.preset, "dtype": dtype, "max_new_tokens": a.max_new, "runs": a.runs,
              "machine": machine(), "seconds": round(time.time() - t0, 1),
              "wall_s": {"median": statistics.median(walls), "max": max(walls)},
              "median_tokens_per_s": {m: statistics.median(x["tokens_per_s"][m] for x in runs) for m in names},
              "median_ratio_vs_ar": ratios, "problems": problems, "per_run": runs}
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("wall_s", "median_tokens_per_s", "median_ratio_vs_ar", "problems")}))


if __name__ == "__main__":
    main()
