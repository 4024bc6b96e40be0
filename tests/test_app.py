"""API tests of the explorer: the app launched in-process on a free port with the random-tiny
pair, driven by gradio_client. Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_app.py``.

The launched server is shared with tests/test_e2e.py (``served()`` caches it) so the session
pays for one launch.
"""
from __future__ import annotations

import json
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
    a = dict(prompt=prompt, methods=methods, temperature=0, seed=0, budget=budget, topm=64, topk=8,
             max_new=max_new, builder="python", ab_builder="none", preset="random-tiny", target="",
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
    for eid in ("prompt", "run", "stop", "methods", "round", "tree", "export-svg", "export-json", "import-trace"):
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


@pytest.mark.parametrize("kw, message", [
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="x" * 4001), "limit is 4000"),
    (dict(max_new=5000), "(greater than maximum value|between 1 and) 1024"),
    (dict(methods=["ar", "dflash", "ddtree", "domino", "dominotree"]), "at most 4"),
    (dict(methods=[]), "at least one method"),
    (dict(budget=0), "(less than minimum value|budget must be)"),
    (dict(budget=32, topk=40), "(greater than maximum value 32|node_topk)"),
])
def test_bad_settings_get_clear_messages(client, kw, message):
    args = run_args(kw.pop("methods", ["ar"]), **kw)
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/run")


def _import(client, *paths):
    return client.predict(files=[gradio_client.handle_file(str(p)) for p in paths], show="conditional",
                          api_name="/import_trace")


def test_import_refuses_malformed_traces(client, tmp_path):
    cases = {
        "not-json.json": ("{not json", "not valid JSON"),
        "other.json": (json.dumps({"hello": 1}), "not a DominoTree trace"),
        "future.json": (json.dumps({"schema": "dominotree.trace", "version": 99}), "version 99"),
        "broken.json": (json.dumps({"schema": "dominotree.trace", "version": 1, "method": "x"}), "malformed"),
    }
    for name, (body, message) in cases.items():
        p = tmp_path / name
        p.write_text(body)
        with pytest.raises(Exception, match=message):
            _import(client, p)


def test_export_then_import_replays_without_model(app, client, tiny_decoder, tmp_path):
    from dominotree.config import DecodeConfig, TreeConfig
    from ui.files import write_round, write_trace
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="dominotree", max_new_tokens=12,
                                                       tree=TreeConfig(budget=16)))
    # model tokens are untrusted: make every piece hostile, the app must escape them everywhere
    evil = '<script>alert("x")</script>\'&\n'
    trace.token_text = {k: evil for k in trace.token_text}
    traces = {"dominotree": trace}
    files = write_round(tmp_path, traces, "dominotree", 3, "marginal")
    svg, pdf, png, tikz = (Path(f) for f in files)
    assert svg.read_text().startswith("<svg") and "<script>" not in svg.read_text()
    assert pdf.read_bytes()[:4] == b"%PDF" and png.read_bytes()[:4] == b"\x89PNG"
    assert "\\begin{tikzpicture}" in tikz.read_text()
    path = Path(write_trace(tmp_path, traces, "dominotree"))
    out = _import(client, path)
    labels = [r["label"] for r in client.view_api(return_format="dict", print_info=False)
              ["named_endpoints"]["/import_trace"]["returns"]]
    got = dict(zip(labels, out))
    assert "Replaying 1 imported trace" in got["Status"]
    assert got["Methods"]["data"][0][0] == "dominotree"
    for key in ("Pane 1 text", "Captions"):
        assert "<script>" not in got[key] and "&lt;script&gt;" in got[key], key
    assert "<script>" not in got["Draft tree"]["plot"]
    # the round endpoint draws any round of the imported trace
    shown = client.predict("dominotree", 2, "conditional", api_name="/show_round")
    assert "Round 2" in shown[1]


def test_autoplay_steps_to_the_last_round_and_stops(tiny_decoder):
    from dominotree.config import DecodeConfig, TreeConfig
    from ui.round_view import advance
    trace = tiny_decoder.generate(PROMPT, DecodeConfig(method="ddtree", max_new_tokens=4, tree=TreeConfig(budget=8)))
    n = len(trace.rounds)
    seen, idx, at_end = [], 0, False
    while not at_end:
        idx, at_end = advance(trace, idx)
        seen.append(idx)
    assert seen == list(range(1, n)) and advance(trace, 99) == (n - 1, True) and advance(None, 0) == (0, True)


def test_import_error_messages_escape_file_content(client, tmp_path):
    p = tmp_path / "evil.json"
    p.write_text(json.dumps({"schema": "dominotree.trace", "version": 1, "<img src=x onerror=alert(1)>": 1}))
    with pytest.raises(Exception) as err:
        _import(client, p)
    assert "malformed" in str(err.value) and "<img" not in str(err.value)


def test_model_choice_errors_are_readable(client, tmp_path):
    with pytest.raises(Exception, match="give a target folder"):
        client.predict("custom folders", "", "", "cpu", "float32", api_name="/load_model")
    with pytest.raises(Exception, match="folder does not exist"):
        client.predict("custom folders", str(tmp_path / "nope"), "", "cpu", "float32", api_name="/load_model")


def test_app_flags():
    import app as app_module    # builds a demo; loads no model
    a = app_module.parse_args(["--preset", "random-tiny", "--port", "7999"])
    assert (a.host, a.port, a.preset) == ("127.0.0.1", 7999, "random-tiny")
    with pytest.raises(SystemExit):
        app_module.parse_args(["--drafter", "x"])
    assert app_module.make_backend(a).loaded is None      # lazy: nothing loaded yet


def test_import_refuses_wrong_field_types(client, tiny_decoder, tmp_path):
    from dominotree.config import DecodeConfig
    d = tiny_decoder.generate(PROMPT, DecodeConfig(method="ar", max_new_tokens=2)).to_dict()
    d["rounds"][0]["round"] = "<b>7</b>"
    p = tmp_path / "typed.json"
    p.write_text(json.dumps(d))
    with pytest.raises(Exception, match="wrong type"):
        _import(client, p)
