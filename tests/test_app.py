"""API tests of the explorer: the app launched in-process on a free port with the random-tiny
pair, driven by gradio_client. Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_app.py``.

The launched server is shared with tests/test_e2e.py (``served()`` caches it) so the session
pays for one launch.
"""
from __future__ import annotations

import json
import logging
import re
import socket
import urllib.request
from pathlib import Path

import pytest

gr = pytest.importorskip("gradio")
gradio_client = pytest.importorskip("gradio_client")

PROMPT = "Explain speculative decoding."
_SERVER: dict = {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served(decoder=None) -> dict:
    """The running app: {"demo", "url", "backend"} (launched once per test session)."""
    if not _SERVER:
        import ui
        from ui.backend import Backend, ModelChoice
        backend = Backend(ModelChoice(preset="random-tiny", device="cpu"), decoder=decoder)
        demo = ui.build_app(backend)
        port = _free_port()
        demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    **ui.launch_kwargs())
        _SERVER.update(demo=demo, url=f"http://127.0.0.1:{port}/", backend=backend)
    return _SERVER


def close_served() -> None:
    if _SERVER:
        _SERVER.pop("demo").close()
        _SERVER.clear()


@pytest.fixture(scope="session")
def app(tiny_decoder, request):
    request.addfinalizer(close_served)
    return served(tiny_decoder)


@pytest.fixture()
def client(app):
    return gradio_client.Client(app["url"], verbose=False)


def out_index(app, api_name: str, label: str) -> int:
    """Position of the output labelled ``label`` in what the client returns for ``api_name``."""
    info = gradio_client.Client(app["url"], verbose=False).view_api(return_format="dict", print_info=False)
    labels = [r["label"] for r in info["named_endpoints"][f"/{api_name}"]["returns"]]
    return labels.index(label)


def run_args(methods, max_new=16, budget=32, prompt=PROMPT, **kw):
    a = dict(prompt=prompt, methods=methods, temperature=0, seed=0, budget=budget, budget_auto=False, topm=64, topk=8,
             max_new=max_new, builder="python", ab_builder="none",
             draft_vocab="full vocabulary (paper)", preset="random-tiny", target="",
             drafters="", device="cpu", dtype="float32", show="conditional")
    a.update(kw)
    return list(a.values())


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode("utf-8", "replace")


# ---------------------------------------------------------------------------------------------

def test_served_page_names_no_outside_address(app):
    """Nothing the browser loads comes from outside this machine: the page, its stylesheets and
    the entry script reference only this server. The one exception is Gradio's own <meta>
    og:/twitter: preview tags (link-preview metadata, never fetched by the browser)."""
    url = app["url"]
    page = fetch(url)
    local = re.compile(r"https?://(127\.0\.0\.1|localhost)(:\d+)?(/|$)")
    meta_free = re.sub(r"<meta\s+(property|name)=\"(og|twitter):[^>]*>", "", page, flags=re.S)
    outside = [u for u in re.findall(r"https?://[^\s\"'<>\\)]+", meta_free) if not local.match(u)]
    assert outside == [], f"external URLs in the served page: {sorted(set(outside))[:10]}"
    for host in ("fonts.googleapis.com", "fonts.gstatic.com", "cdn.jsdelivr.net", "cdnjs", "unpkg.com",
                 "api.gradio.app", "cdn.plot.ly"):
        assert host not in page
    refs = re.findall(r"<(?:script|link)[^>]+(?:src|href)=\"([^\"]+)\"", page)
    assert refs and all(not r.startswith(("http:", "https:", "//")) or local.match(r) for r in refs), refs
    css = [r for r in refs if r.endswith(".css")] + ["theme.css"]
    for r in css:
        text = fetch(url + r.lstrip("./"))
        assert not re.search(r"@import\s+(url\()?[\"']?https?:", text), r
        assert not re.search(r"url\(\s*[\"']?https?://(?!127\.0\.0\.1|localhost)", text), r
    entry = [r for r in refs if r.endswith(".js")]
    for r in entry:
        js = fetch(url + r.lstrip("./"))
        assert not re.search(r"(import\(|from)\s*[\"']https?://", js), r
    config = json.loads(fetch(url + "config"))
    assert "googleapis" not in json.dumps(config.get("css") or "") + json.dumps(config.get("head") or "")


def test_controls_have_stable_ids_and_no_adaptive_methods(app):
    comps = {c["props"].get("elem_id"): c for c in app["demo"].config["components"]}
    for eid in ("prompt", "run", "stop", "methods", "budget-auto", "round", "tree", "export-svg", "export-json",
                "import-trace"):
        assert eid in comps, eid
    choices = [c[0] if isinstance(c, (list, tuple)) else c for c in comps["methods"]["props"]["choices"]]
    assert "dominotree" in choices and "ar" in choices
    assert "caddtree" not in choices and "condadaptive" not in choices    # no cost model here


def test_run_streams_rounds_then_summarizes(app, client):
    status = out_index(app, "run", "Status")
    table = out_index(app, "run", "Methods")
    text0, text1 = out_index(app, "run", "Pane 1 text"), out_index(app, "run", "Pane 2 text")
    tree = out_index(app, "run", "Draft tree")
    job = client.submit(*run_args(["dominotree", "ar"], max_new=16), api_name="/run")
    updates = [out for out in job]
    final = job.result()
    assert len(updates) >= 2, "decoding should stream per-round updates before the final one"
    assert "Decoding" in updates[0][status]
    assert "Done" in final[status]
    rows = {r[0]: r for r in final[table]["data"]}
    headers = final[table]["headers"]
    assert set(rows) == {"ar", "dominotree"}                 # ar runs first: it is the baseline
    assert rows["dominotree"][headers.index("new tokens")] == 16
    assert rows["dominotree"][headers.index("tau")] >= 1.0
    assert float(rows["dominotree"][headers.index("speedup vs ar")]) > 0
    assert "dt-tok" in final[text0] and "dt-tok" in final[text1]
    assert "accepted draft token" in final[text1] and "bonus token" in final[text1]    # the legend
    assert final[tree]["type"] == "plotly" and "accepted path" in final[tree]["plot"]


def test_stop_takes_effect_at_next_round(app, client):
    status = out_index(app, "run", "Status")
    table = out_index(app, "run", "Methods")
    job = client.submit(*run_args(["dominotree"], max_new=400), api_name="/run")
    for out in job:                      # the first streamed update: decoding has started
        client.predict(api_name="/stop")
        break
    final = job.result()
    assert "Stopped" in final[status]
    tokens = final[table]["data"][0][final[table]["headers"].index("new tokens")]
    assert 1 <= tokens < 400


def test_a_run_stopped_before_its_first_round_leaves_the_last_one_with_rounds_inspected(app, client, monkeypatch):
    """Stop pressed right after a method's prefill (the decoder checks it before each round) leaves
    that method one token and no round: the page inspects the last run with rounds instead."""
    from ui import backend as be
    real = be.live.generate

    def stopped_at_once(decoder, prompt, cfg, should_stop=None, **kw):
        return real(decoder, prompt, cfg, should_stop=(lambda: True) if cfg.method == "dominotree" else should_stop,
                    **kw)

    monkeypatch.setattr(be.live, "generate", stopped_at_once)
    final = client.predict(*run_args(["ar", "dominotree"], max_new=8), api_name="/run")
    table = final[out_index(app, "run", "Methods")]
    tokens = {r[0]: r[table["headers"].index("new tokens")] for r in table["data"]}
    assert tokens == {"ar": 8, "dominotree": 1}
    assert final[out_index(app, "run", "Inspect run")]["value"] == "ar"


MISTAKES = [
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="x" * 4001), "limit is 4000"),
    (dict(max_new=5000), r"Max new tokens must be an integer in \[1, 1024\]"),
    (dict(max_new=2.5), "Max new tokens must be an integer"),
    (dict(methods=["ar", "dflash", "ddtree", "domino", "dominotree"]), "at most 4"),
    (dict(methods=[]), "at least one method"),
    (dict(budget=300), "Budget must be"),
    (dict(budget=32, topk=0), "K .children per node. must be"),
    (dict(seed=-5), "Seed out of range"),
    (dict(seed=1e30), "Seed out of range"),
    (dict(preset="custom folders", target="/nonexistent/dir"), "Could not load the model.*folder does not exist"),
    (dict(methods=["dominotree"], draft_vocab="8192 most frequent tokens"), "dominotree: no draft vocabulary at"),
]


@pytest.mark.parametrize("kw, message", MISTAKES)
def test_bad_settings_get_one_message_and_change_nothing(app, client, kw, message, caplog):
    """A mistake answers with one status message; every other output is left as it was (no
    error over the page) and Run is enabled again. The server logs it as one line, no traceback."""
    args = run_args(kw.pop("methods", ["ar"]), **kw)
    with caplog.at_level(logging.INFO):
        out = client.predict(*args, api_name="/run")
    status = out[out_index(app, "run", "Status")]
    assert re.search(message, status) and "dt-status-error" in status, status
    assert skipped(out[out_index(app, "run", "Pane 1 text")])          # left as it was, not cleared
    mistakes = [r for r in caplog.records if r.name == "dominotree.explorer"]
    assert len(mistakes) == 1 and mistakes[0].levelno == logging.WARNING, [r.getMessage() for r in mistakes]
    assert mistakes[0].getMessage().startswith("user mistake: ") and "\n" not in mistakes[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records]


def skipped(value) -> bool:
    """What gradio_client returns for an output the handler left unchanged (``gr.skip()``)."""
    return value in (None, "") or (isinstance(value, dict) and value.get("__type__") == "update"
                                   and not set(value.get("props") or {}) - {"__type__"})


def test_stop_when_idle_changes_nothing(client):
    assert skipped(client.predict(api_name="/stop"))


def _import(client, *paths):
    return client.predict(files=[gradio_client.handle_file(str(p)) for p in paths], show="conditional",
                          api_name="/import_trace")


def _import_status(app, client, *paths) -> str:
    return _import(client, *paths)[out_index(app, "import_trace", "Status")]


def test_import_refuses_malformed_traces(app, client, tmp_path):
    cases = {
        "not-json.json": ("{not json", "not valid JSON"),
        "other.json": (json.dumps({"hello": 1}), "not a DominoTree trace"),
        "future.json": (json.dumps({"schema": "dominotree.trace", "version": 99}), "version 99"),
        "broken.json": (json.dumps({"schema": "dominotree.trace", "version": 1, "method": "x"}), "malformed"),
    }
    for name, (body, message) in cases.items():
        p = tmp_path / name
        p.write_text(body)
        status = _import_status(app, client, p)
        assert "Trace not imported" in status and message in status and "dt-status-error" in status, status


def test_export_then_import_replays_without_model(app, client, tiny_decoder, tmp_path):
    from dominotree.config import DecodeConfig, TreeConfig
    from ui.files import write_comparison, write_round
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=12,
                                                       tree=TreeConfig(budget=16)))
    ar = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=12, tree=TreeConfig(budget=16)))
    # model tokens are untrusted: make every piece hostile, the app must escape them everywhere
    evil = '<script>alert("x")</script>\'&\n'
    trace.token_text = {k: evil for k in trace.token_text}
    traces = {"ar": ar, "dominotree": trace}
    files = write_round(tmp_path, traces, "dominotree", 3, "marginal")
    svg, pdf, png, tikz = (Path(f) for f in files)
    assert svg.read_text().startswith("<svg") and "<script>" not in svg.read_text()
    assert pdf.read_bytes()[:4] == b"%PDF" and png.read_bytes()[:4] == b"\x89PNG"
    assert "\\begin{tikzpicture}" in tikz.read_text()
    path = Path(write_comparison(tmp_path, traces))        # one file: both panes, prompt, settings, machine
    doc = json.loads(path.read_text())
    assert doc["schema"] == "dominotree.comparison" and list(doc["traces"]) == ["ar", "dominotree"]
    assert doc["prompt"] == PROMPT and doc["settings"]["tree"]["budget"] == 16 and doc["machine"]["cores"] >= 1
    out = _import(client, path)
    labels = [r["label"] for r in client.view_api(return_format="dict", print_info=False)
              ["named_endpoints"]["/import_trace"]["returns"]]
    got = dict(zip(labels, out))
    assert "Replaying 2 trace(s): ar, dominotree" in got["Status"]
    assert PROMPT in got["Status"] and "budget 16" in got["Status"] and "timed on" in got["Status"]
    assert [r[0] for r in got["Methods"]["data"]] == ["ar", "dominotree"]
    for key in ("Pane 2 text", "Captions"):
        assert "<script>" not in got[key] and "&lt;script&gt;" in got[key], key
    assert "<script>" not in got["Draft tree"]["plot"]
    # the round endpoint draws any round of the imported trace
    shown = client.predict("dominotree", 2, "conditional", api_name="/show_round")
    assert "Round 2</b> of " in shown[1]


def test_no_downloads_of_a_run_that_is_still_going(app, tiny_decoder):
    """The downloads are made for the traces on screen, but never from the part of a run decoded so
    far: an event that reads the traces mid-run (the page load's chain, late on a slow machine)
    leaves the buttons off until the run's own end makes them (CI downloaded a comparison JSON of
    `ar` alone after a four-method run)."""
    from types import SimpleNamespace
    from dominotree.config import DecodeConfig
    from ui.file_events import FileEvents
    backend = app["backend"]
    ctx = SimpleNamespace(backend=backend, exports_out=[None] * 5, json_cache={})
    request = SimpleNamespace(session_hash="mid-run-exports")
    traces = {"ar": tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=3))}
    try:
        backend.queue_run("mid-run-exports")               # Run pressed on this page
        assert FileEvents(ctx).exports(traces, "ar", 1, "conditional", False, request) == [gr.skip()] * 5
        assert ctx.json_cache == {}
        backend.finish_run("mid-run-exports")              # the run ended: its export makes the files
        done = FileEvents(ctx).exports(traces, "ar", 1, "conditional", False, request)
        doc = json.loads(Path(done[4]["value"]).read_text())
        assert list(doc["traces"]) == ["ar"] and all(u["interactive"] for u in done[::4])
    finally:
        backend.end_session("mid-run-exports")             # its folder and flags, whatever happened


def test_import_of_different_prompts_says_so(app, client, tiny_decoder, tmp_path):
    from dominotree.config import DecodeConfig
    for name, prompt in (("a.json", PROMPT), ("b.json", "Another prompt entirely.")):
        tiny_decoder.generate(prompt, DecodeConfig(method="ar", max_new_tokens=2)).to_json(tmp_path / name)
    status = _import_status(app, client, tmp_path / "a.json", tmp_path / "b.json")
    assert "2 different prompts" in status and "dt-status-error" in status, status


def test_autoplay_steps_to_the_last_round_and_stops(tiny_decoder):
    from dominotree.config import DecodeConfig, TreeConfig
    from ui.round_view import advance
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="ddtree", max_new_tokens=4, tree=TreeConfig(budget=8)))
    n = len(trace.rounds)
    seen, k, at_end = [], 1, False                     # rounds are numbered from 1 on the page
    while not at_end:
        k, at_end = advance(trace, k)
        seen.append(k)
    assert seen == list(range(2, n + 1)) and advance(trace, 99) == (n, True) and advance(None, 0) == (1, True)


def test_autoplay_keeps_its_rate_when_redraws_are_slow(tiny_decoder):
    from dominotree.config import DecodeConfig, TreeConfig
    from ui.round_view import autoplay_step
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="ddtree", max_new_tokens=40, tree=TreeConfig(budget=8)))
    play = {"t0": 100.0, "r0": 1, "speed": 4.0}
    assert autoplay_step(trace, 1, play, 4, 100.1)[0] is None          # not due yet: nothing redrawn
    assert autoplay_step(trace, 1, play, 4, 100.25)[0] == 2
    nxt, at_end, _ = autoplay_step(trace, 2, play, 4, 101.0)           # a slow redraw: skip to the round due
    assert nxt == 5 and not at_end
    nxt, at_end, _ = autoplay_step(trace, 5, play, 4, 1000.0)
    assert nxt == len(trace.rounds) and at_end
    nxt, _, play2 = autoplay_step(trace, 5, play, 2, 200.0)            # a new speed counts from the round shown
    assert nxt == 6 and play2["speed"] == 2 and play2["r0"] == 5


def test_import_error_messages_escape_file_content(app, client, tmp_path):
    p = tmp_path / "evil.json"
    p.write_text(json.dumps({"schema": "dominotree.trace", "version": 1, "<img src=x onerror=alert(1)>": 1}))
    status = _import_status(app, client, p)
    assert "malformed" in status and "<img" not in status and "&lt;img" in status


def test_model_choice_errors_are_readable(client, tmp_path):
    status, _ = client.predict("custom folders", "", "", "cpu", "float32", api_name="/load_model")
    assert "give a target folder" in status
    status, _ = client.predict("custom folders", str(tmp_path / "nope"), "", "cpu", "float32", api_name="/load_model")
    assert "folder does not exist" in status and "dt-status-error" in status


def test_app_flags():
    import app as app_module    # builds a demo; loads no model
    a = app_module.parse_args(["--preset", "random-tiny", "--port", "7999"])
    assert (a.host, a.port, a.preset) == ("127.0.0.1", 7999, "random-tiny")
    with pytest.raises(SystemExit):
        app_module.parse_args(["--drafter", "x"])
    assert app_module.make_backend(a).loaded is None      # lazy: nothing loaded yet


def test_import_refuses_wrong_field_types(app, client, tiny_decoder, tmp_path):
    from dominotree.config import DecodeConfig
    d = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=2)).to_dict()
    d["rounds"][0]["round"] = "<b>7</b>"
    p = tmp_path / "typed.json"
    p.write_text(json.dumps(d))
    assert "wrong type" in _import_status(app, client, p)


def test_server_flags_honour_gradio_env_and_explicit_flags_win(monkeypatch):
    import app as app_module
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7123")
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    a = app_module.parse_args([])
    assert (a.host, a.port) == ("0.0.0.0", 7123)
    a = app_module.parse_args(["--host", "127.0.0.1", "--port", "7999"])
    assert (a.host, a.port) == ("127.0.0.1", 7999)
    monkeypatch.setenv("GRADIO_SERVER_PORT", "seventy")
    with pytest.raises(SystemExit):
        app_module.parse_args([])


def test_classroom_server_locks_model_controls(monkeypatch, tiny_decoder):
    """Bound beyond loopback the model fields are disabled unless --allow-model-switch, the page
    says why, and the server refuses a switch even when asked through the API."""
    import app as app_module
    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    assert app_module.make_backend(app_module.parse_args(["--host", "0.0.0.0", "--preset", "random-tiny"])).locked
    assert not app_module.make_backend(app_module.parse_args(["--host", "0.0.0.0", "--preset", "random-tiny",
                                                              "--allow-model-switch"])).locked
    assert not app_module.make_backend(app_module.parse_args(["--preset", "random-tiny"])).locked
    import ui
    from ui.backend import Backend, ModelChoice
    backend = Backend(ModelChoice(preset="random-tiny", device="cpu"), decoder=tiny_decoder, locked=True)
    demo = ui.build_app(backend)
    comps = {c["props"].get("elem_id"): c["props"] for c in demo.config["components"]}
    for eid in ("preset", "target", "drafters", "device", "dtype", "load", "calibrate"):
        assert comps[eid].get("interactive") is False, eid
    assert "Model switching is off" in comps["model-locked"]["value"]
    port = _free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **ui.launch_kwargs())
    try:
        cl = gradio_client.Client(f"http://127.0.0.1:{port}/", verbose=False)
        status, _ = cl.predict("custom folders", "/etc", "", "cpu", "float32", api_name="/load_model")
        assert "cannot be switched" in status
        out = cl.predict(*run_args(["ar"], preset="custom folders", target="/etc"), api_name="/run")
        assert any(isinstance(o, str) and "cannot be switched" in o for o in out)
        status, _, _ = cl.predict("random-tiny", "", "", "cpu", "float32", "full vocabulary (paper)",
                                  api_name="/calibrate")
        assert "Calibration is off" in status
        out = cl.predict(*run_args(["ar"], max_new=4), api_name="/run")       # its own model still runs
        assert any(isinstance(o, str) and "Done" in o for o in out)
    finally:
        demo.close()


def test_pane_marks_an_output_that_differs_from_ar(tiny_decoder):
    """In bf16 a pane whose text differs from ar's gets the near-tie diagnosis at the first
    differing token (here forced by editing one token of a float32 run)."""
    from dominotree.config import DecodeConfig
    from ui.panes import render_panes, tie_html
    from ui.run_events import diagnose_ties
    ar = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=6))
    other = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=6))
    other.token_ids[3] = (other.token_ids[3] + 1) % 100
    traces = {"ar": ar, "dominotree": other}
    diagnose_ties(tiny_decoder, tiny_decoder.encode_prompt(PROMPT), traces)
    assert "vs_ar" not in ar.config and other.config["vs_ar"]["token"] == 3
    note = tie_html(other)
    assert "differs from ar from token 4" in note and "logits apart" in note
    heads = render_panes(traces, notes={k: tie_html(t) for k, t in traces.items()})
    assert "dt-tie" in heads[4] and "dt-tie" not in heads[1]



def test_pane_says_which_draft_vocabulary_ran(tiny_decoder):
    from dominotree.config import DecodeConfig
    from ui.panes import vocab_html
    tr = tiny_decoder.generate("Hi", DecodeConfig(method="ddtree", max_new_tokens=4))
    assert vocab_html(tr) == ""
    tr.config["draft_vocab"] = 8192
    assert "the 8192 most frequent tokens" in vocab_html(tr)
    tr.config["draft_vocab"] = "<b>"
    assert vocab_html(tr) == ""


@pytest.mark.slow   # a real calibration, ~9 s
def test_calibrate_button_makes_auto_available(app, client, tiny_decoder, tmp_path, monkeypatch):
    """"Calibrate this machine" writes the verify-cost profile and the budget calibration at the
    default paths (relative to the working directory, as the CLI's), turns auto on with its
    choice, and a run with auto then uses the calibrated budget."""
    from dominotree.auto.files import machine_dir
    from ui.backend import ModelChoice
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    try:
        status, auto, methods = client.predict("random-tiny", "", "", "cpu", "float32", "full vocabulary (paper)",
                                               api_name="/calibrate")
        assert "Calibrated in" in status and "auto = dominotree budget" in status, status
        assert auto["value"] is True and auto["interactive"] is True and "auto = dominotree" in auto["info"]
        here = machine_dir("random-tiny", "cpu", ModelChoice(preset="random-tiny").weights, "float32")
        assert (here / "cost_model.json").is_file() and (here / "budget_dominotree.json").is_file()
        assert not (tmp_path / "results").exists()         # this machine's files, never the committed ones
        budget = int(re.search(r"auto = dominotree budget (\d+)", status).group(1))
        assert "(auto: " in status                          # with its reason
        out = client.predict(*run_args(["ar", "dominotree"], max_new=6, budget_auto=True), api_name="/run")
        done = next(o for o in out if isinstance(o, str) and ("Done" in o or "Stopped" in o))
        assert f"budget auto = {budget or 'plain decoding'}" in done, done
    finally:
        tiny_decoder.cost_model = None        # the shared decoder: other tests expect no profile
