"""The explorer's live tok/s ratios between methods against the command line's, on one prompt.

    flock /tmp/cpu.lock .venv/bin/python scripts/explorer_vs_cli.py [--reps 3] [--out results/explorer_vs_cli.json]
                                                                    [--server process|here]

Serves the explorer (smollm2, float32) on a free local port (``app.py`` in its own process, as
``make run`` does; ``--server here`` serves it in this process and adds the same decodes run in
that process and each stage's time) and drives it in headless Debian
Chromium as a user would: the default comparison (ar, ddtree, dominotree), page rendering
included; tok/s are read from the pane headers. The command line is ``python -m dominotree
generate --json`` per method, each in its own process. Rounds are interleaved (explorer, then
CLI, per repeat) after one warm-up of each; the result is the median over repeats of each
method's tok/s over ``ar``'s, and how far the explorer's ratio is from the CLI's (goal: 10 %).
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

PROMPT = "A farmer has 17 cows and buys 5 more. How many cows?"
METHODS = ("ar", "ddtree", "dominotree")
DONE = "/^(Done|Stopped)/.test(document.querySelector('#status .dt-status')?.innerText ?? '')"


def cli_run(a, method: str) -> dict:
    cmd = [sys.executable, "-m", "dominotree", "generate", "--preset", a.preset, "--dtype", a.dtype,
           "--device", "cpu", "--method", method, "--prompt", a.prompt, "--max-new-tokens", str(a.max_new),
           "--budget", "16", "--corr-topm", "64", "--node-topk", "8", "--json"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def serve_process(a):
    """``app.py`` in its own process on a free loopback port, once it answers: (process, url)."""
    import socket
    import urllib.request
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "app.py", "--preset", a.preset, "--dtype", a.dtype, "--port", str(port)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            urllib.request.urlopen(url, timeout=2)
            return server, url
        except OSError:
            if server.poll() is not None:
                raise SystemExit(f"app.py exited with {server.returncode}")
            time.sleep(1)
    server.terminate()
    raise SystemExit("app.py did not answer within 5 minutes")


def explorer_run(page, a) -> dict:
    page.fill("#prompt textarea", a.prompt)
    page.wait_for_selector("#run:not([disabled])")
    page.click("#run")
    # The previous run's "Done" stays on screen until this run's first update: wait for the
    # status to leave it, then for this run's end (reading at once timed the old panes).
    # polled every 100 ms, not on every animation frame (Playwright's default): a frame loop would
    # keep the browser drawing, which a person watching the page does not do
    page.wait_for_function(f"() => !{DONE}", timeout=600_000, polling=100)
    page.wait_for_function(f"() => {DONE}", timeout=600_000, polling=100)
    out = {}
    for k in range(len(METHODS)):
        name = page.inner_text(f"#pane-{k}-head .dt-pane-head > b")
        stats = page.inner_text(f"#pane-{k}-head .dt-stats")
        out[name] = float(re.search(r"([\d.]+) tok/s", stats).group(1))
    page.wait_for_selector("#run:not([disabled])")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="smollm2")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "results" / "explorer_vs_cli.json"))
    ap.add_argument("--server", choices=["process", "here"], default="process",
                    help="process: app.py in its own process, as `make run` serves it (default); here: in "
                         "this process, with the in-process bench and each stage's time (Playwright's "
                         "client then shares the server's process and GIL, which slows the page's ar)")
    a = ap.parse_args()
    import ui
    from playwright.sync_api import sync_playwright
    from test_e2e import FLAGS, set_number
    from ui import model_thread         # the bench decodes on the page's thread (one OpenMP pool)
    from ui.backend import Backend, ModelChoice
    from dominotree.machine import describe as machine
    here = a.server == "here"
    if here:
        backend = Backend(ModelChoice(preset=a.preset, dtype=a.dtype, device="cpu"))
        demo, url = ui.serve_locally(backend)
    else:
        server, url = serve_process(a)
    runs = {"explorer": [], "cli": [], **({"bench": []} if here else {})}
    stages = {"explorer": [], "bench": []} if here else {}     # mean ms per round of each stage
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=FLAGS)
        page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
        page.set_default_timeout(600_000)
        page.goto(url)
        page.wait_for_selector("#prompt textarea")
        set_number(page, "max-new", a.max_new)
        t0 = time.time()
        explorer_run(page, a)                                   # warm-up (loads the model)
        cli_run(a, "ar")
        from dominotree.config import DecodeConfig, TreeConfig
        from dominotree.decode import Decoder
        import dominotree.view.live as lv
        seen = []
        if here:
            bench = Decoder(backend.decoder().pair, annotate=False)   # the bench's definition
            explorer_generate = lv.generate

            def recorded(*args, **kw):           # the page's own traces: where their time went
                t = explorer_generate(*args, **kw)
                seen.append(t)
                return t
            lv.generate = recorded
        for r in range(a.reps):
            time.sleep(2)                        # a person looks at the result before the next Run
            runs["explorer"].append(explorer_run(page, a))
            runs["cli"].append({m: cli_run(a, m)["tokens_per_s"] for m in METHODS})
            if here:
                stages["explorer"].append({t.method: t.stage_ms() for t in seen[-len(METHODS):]})
                traces = {m: model_thread.call(bench.generate, a.prompt, DecodeConfig(
                    method=m, max_new_tokens=a.max_new, tree=TreeConfig(budget=16, corr_topm=64, node_topk=8)))
                    for m in METHODS}
                runs["bench"].append({m: t.tokens_per_s for m, t in traces.items()})
                stages["bench"].append({m: t.stage_ms() for m, t in traces.items()})
            print(f"repeat {r + 1}: " + "; ".join(f"{k} {v[-1]}" for k, v in runs.items()), flush=True)
        browser.close()
    if here:
        demo.close()
    else:
        server.terminate()
        server.wait(30)
    ratios = {src: {m: statistics.median(x[m] / x["ar"] for x in runs[src]) for m in METHODS} for src in runs}
    tps = {src: {m: statistics.median(x[m] for x in runs[src]) for m in METHODS} for src in runs}
    gap = {m: ratios["explorer"][m] / ratios["cli"][m] - 1 for m in METHODS if m != "ar"}
    gap_bench = {m: ratios["explorer"][m] / ratios["bench"][m] - 1 for m in METHODS if m != "ar" and here}
    result = {"prompt": a.prompt, "preset": a.preset, "dtype": a.dtype, "max_new_tokens": a.max_new,
              "budget": 16, "corr_topm": 64, "node_topk": 8, "reps": a.reps, "server": a.server, "machine": machine(),
              "host": platform.node(), "seconds": round(time.time() - t0, 1),
              "median_tokens_per_s": tps, "median_ratio_vs_ar": ratios, "explorer_ratio_vs_cli_ratio_minus_1": gap,
              "explorer_ratio_vs_bench_ratio_minus_1": gap_bench,
              "within_10_percent": all(abs(g) <= 0.10 for g in gap.values()),
              "median_stage_ms_per_round": {src: {m: {st: round(statistics.median(x[m][st] for x in v), 2)
                                                      for st in v[0][m]} for m in METHODS}
                                            for src, v in stages.items()},
              "runs": runs}
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    for m in METHODS[1:]:
        print(f"{m}: explorer {ratios['explorer'][m]:.3f}x ar, cli {ratios['cli'][m]:.3f}x ar ({gap[m] * 100:+.1f} %)"
              + (f", bench {ratios['bench'][m]:.3f}x ar ({gap_bench[m] * 100:+.1f} %)" if here else ""))
    print(a.out)


if __name__ == "__main__":
    main()
