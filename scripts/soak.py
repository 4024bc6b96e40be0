"""Soak the explorer: three browser sessions run five comparisons each, with a Stop and an
import in between, and the server's memory is compared after the first run and at the end.

    flock /tmp/cpu.lock .venv/bin/python scripts/soak.py [--preset random-tiny] [--out results/soak.json]

Serves the app in this process (headless Debian Chromium drives it). Each session has its own
prompt; after every comparison its downloaded comparison JSON must hold that prompt and the
methods asked for (no output lost or crossed between sessions). Comparison 3 is stopped at
its first streamed round (it must end "Stopped" with fewer tokens); before comparison 4 each
session imports its comparison 2 file and the replay must show that prompt.
"""
import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

METHODS = ("ar", "ddtree", "dominotree")


def rss_mib() -> float:
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def wait_status(page, pattern: str, old: str = "", timeout=300_000) -> str:
    """The status once it matches ``pattern`` and differs from ``old`` (the one before the click)."""
    page.wait_for_function("([p, old]) => { const e = document.querySelector('#status .dt-status');"
                           " const t = e ? e.innerText : ''; return t !== old && new RegExp(p).test(t); }",
                           arg=[pattern, old], timeout=timeout)
    return status(page)


def status(page) -> str:
    return page.inner_text("#status .dt-status")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="random-tiny")
    ap.add_argument("--max-new", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "results" / "soak.json"))
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from test_e2e import FLAGS, download, set_number
    from ui.backend import Backend, ModelChoice
    demo, url = ui.serve_locally(Backend(ModelChoice(preset=a.preset, dtype="float32", device="cpu")))
    log, problems, mem = [], [], {}
    t0 = time.time()
    with sync_playwright() as p, tempfile.TemporaryDirectory() as tmp:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        pages = []
        for s in range(3):
            pg = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True).new_page()
            pg.set_default_timeout(300_000)
            pg.goto(url)
            pg.wait_for_selector("#prompt textarea")
            pg.fill("#prompt textarea", f"Session {s}: explain speculative decoding in a sentence.")
            set_number(pg, "max-new", a.max_new)
            pg.errors = []
            pg.on("pageerror", lambda e, pg=pg: pg.errors.append(str(e)))
            pages.append(pg)
        saved = {}
        for j in range(5):
            if j == 3:                                 # replay each session's comparison 2, then go on
                for s, pg in enumerate(pages):
                    pg.set_input_files("#import-trace input[type=file]", str(saved[s]))
                    st = wait_status(pg, "^Replaying")
                    if f"Session {s}:" not in st:
                        problems.append(f"session {s} replay shows another prompt: {st[:120]}")
            before = []
            for pg in pages:
                pg.wait_for_selector("#run:not([disabled])")
                before.append(status(pg))
                pg.click("#run")
            if j == 2:                                 # stop each at its first streamed round
                for s, pg in enumerate(pages):
                    wait_status(pg, "^Decoding", before[s])
                    pg.click("#stop")
            for s, pg in enumerate(pages):
                st = wait_status(pg, "^(Done|Stopped)", before[s])
                pg.wait_for_selector("#run:not([disabled])")
                (Path(tmp) / f"s{s}c{j}").mkdir()
                path = download(pg, "export-json", Path(tmp) / f"s{s}c{j}")
                doc = json.loads(path.read_text())
                ok_prompt = doc["prompt"] == f"Session {s}: explain speculative decoding in a sentence."
                tokens = {m: len(t["token_ids"]) for m, t in doc["traces"].items()}
                stopped = {m: t["stopped"] for m, t in doc["traces"].items()}
                entry = {"session": s, "comparison": j + 1, "status": st.split(" · ")[0], "tokens": tokens,
                         "stopped": stopped}
                log.append(entry)
                if not ok_prompt:
                    problems.append(f"session {s} comparison {j + 1}: prompt crossed: {doc['prompt'][:60]!r}")
                if j == 2:
                    if not st.startswith("Stopped"):
                        problems.append(f"session {s}: Stop did not stop comparison 3 ({st[:60]})")
                elif list(doc["traces"]) != list(METHODS) or any(v not in ("eos", "max_new_tokens")
                                                                 for v in stopped.values()):
                    problems.append(f"session {s} comparison {j + 1}: incomplete {stopped}")
                if j == 1:
                    saved[s] = path
            if j == 0:
                time.sleep(3)                          # let the export `.then` finish
                mem["after_first_mib"] = rss_mib()
            print(f"comparison {j + 1}: " + "; ".join(f"s{e['session']} {e['status']} {e['tokens']}"
                                                       for e in log[-3:]), flush=True)
        time.sleep(3)
        mem["after_soak_mib"] = rss_mib()
        for s, pg in enumerate(pages):
            problems += [f"session {s} page error: {e}" for e in pg.errors]
        browser.close()
    demo.close()
    growth = mem["after_soak_mib"] / mem["after_first_mib"] - 1
    result = {"preset": a.preset, "max_new_tokens": a.max_new, "sessions": 3, "comparisons_each": 5,
              "seconds": round(time.time() - t0, 1), "memory": {**mem, "growth": round(growth, 4)},
              "memory_within_10_percent": abs(growth) <= 0.10, "problems": problems, "runs": log}
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"memory after first run {mem['after_first_mib']:.0f} MiB, after soak {mem['after_soak_mib']:.0f} MiB "
          f"({growth * 100:+.1f} %); problems: {len(problems)}")
    for pr in problems:
        print("  " + pr)
    print(a.out)


if __name__ == "__main__":
    main()
