"""Share links and the lecture view's server side (fast tier): the store keeps comparisons under
random ids, caps their size, says when an id is unknown or malformed; a stored comparison opens at
the round, run and colouring of its address; the lecture bar and script are complete."""
from __future__ import annotations

import pytest

from ui.sharestore import ID_RE, ShareError, ShareStore


def test_ids_are_random_url_safe_and_stable_for_the_same_comparison():
    store = ShareStore()
    ids = {store.put(f'{{"n": {i}}}'.encode()) for i in range(50)}
    assert len(ids) == 50 and all(ID_RE.match(i) and len(i) >= 16 for i in ids)
    again = store.put(b'{"n": 3}')
    assert again in ids and len(store) == 50           # the same comparison shared again: the same link
    assert store.get(again) == b'{"n": 3}'


def test_size_caps_refuse_and_evict_the_oldest():
    store = ShareStore(max_item=1000, max_total=3000)
    with pytest.raises(ShareError, match="holds at most"):
        store.put(b"x" * 1001)
    assert len(store) == 0                               # a refused comparison changes nothing
    import os
    first = store.put(os.urandom(900))                   # random bytes do not compress
    later = [store.put(os.urandom(900)) for _ in range(3)]
    assert store.size <= 3000
    with pytest.raises(ShareError, match="unknown or has expired"):
        store.get(first)
    assert store.get(later[-1])


@pytest.mark.parametrize("sid", ["", "short", "../../etc/passwd", "x" * 65, None, "<script>alert(1)</script>"])
def test_malformed_ids_are_refused(sid):
    with pytest.raises(ShareError, match="malformed"):
        ShareStore().get(sid)


def test_unknown_id_says_so():
    with pytest.raises(ShareError, match="unknown or has expired"):
        ShareStore().get("A" * 16)


def test_a_shared_comparison_opens_at_its_round_run_and_colouring(tiny_decoder):
    from dominotree.config import DecodeConfig
    from dominotree.view.live import generate
    from ui.files import comparison_bytes
    from ui.share import shared
    traces = {m: generate(tiny_decoder, "Explain speculative decoding.", DecodeConfig(method=m, max_new_tokens=12))
              for m in ("ar", "dominotree")}
    store = ShareStore()
    sid = store.put(comparison_bytes(traces))
    got, meta, focus, idx, show, sid2 = shared(store, {"share": sid, "round": "3", "focus": "ar", "show": "marginal"})
    assert sid2 == sid and focus == "ar" and idx == 3 and show == "marginal"
    assert list(got) == ["ar", "dominotree"] and meta["prompt"] == "Explain speculative decoding."
    assert [got[m].token_ids for m in got] == [traces[m].token_ids for m in traces]
    assert [len(got[m].rounds) for m in got] == [len(traces[m].rounds) for m in traces]
    # anything else in the address falls back: the last run, round 1, conditional colouring
    _, _, focus, idx, show, _ = shared(store, {"share": sid, "round": "x", "focus": "<b>", "show": "nope"})
    assert (focus, idx, show) == ("dominotree", 1, "conditional")


def test_a_stored_file_that_is_not_a_comparison_is_refused():
    from dominotree.config import ConfigError
    from ui.share import shared
    store = ShareStore()
    sid = store.put(b'{"schema": "dominotree.view.comparison", "version": 1, "traces": {}}')
    with pytest.raises(ConfigError, match="cannot be read"):
        shared(store, {"share": sid})


def test_lecture_bar_and_script_are_complete():
    from ui.lecture import VIEWS, bar_html, lecture_js, lv, page_js
    bar = bar_html()
    assert 'id="lecture-toggle"' in bar and all(f'data-view="{n}"' in bar for n, _, _ in VIEWS)
    assert "__" not in lecture_js() and "ArrowRight" in lecture_js()
    assert lv(2, 3) == ["dt-lv", "dt-lv-2", "dt-lv-3"]
    assert page_js("() => {a()}", "() => {b()}").count("})();") == 2


def test_the_lecture_round_cache_is_the_server_s_tree_and_cards_and_escapes_tokens(tiny_decoder):
    """Every round of the run inspected, as ``#tree`` and ``#captions`` would draw it, for the page's
    round steps; hostile token text stays text (no element ends early, no markup gets through)."""
    import html
    import json
    import re
    from dominotree.config import DecodeConfig
    from dominotree.view import figures
    from dominotree.view.live import generate
    from ui.lecture import NO_CACHE, round_cache
    from ui.round_view import captions_html
    traces = {m: generate(tiny_decoder, "Explain speculative decoding.", DecodeConfig(method=m, max_new_tokens=12))
              for m in ("ar", "dominotree")}
    trace = traces["dominotree"]
    evil = '</textarea><script>alert("x")</script>&amp;'
    trace.token_text = {k: evil for k in trace.token_text} or {str(t): evil for t in trace.token_ids}
    out = round_cache(traces, "dominotree", "marginal")
    m = re.fullmatch(r'<textarea class="dt-round-cache" hidden readonly>(.*)</textarea>', out, re.S)
    assert m and not re.search(r"[<>&]", m.group(1))         # nothing in it is markup or a character reference
    got = json.loads(html.unescape(m.group(1)))               # what the browser's textarea holds
    assert (got["focus"], got["show"], got["n"]) == ("dominotree", "marginal", len(trace.rounds))
    for rt, item in zip(trace.rounds, got["rounds"]):
        fig = json.loads(figures.tree_figure(rt, trace.token_text, show="marginal").to_json())
        assert fig["layout"].pop("template") == got["template"] and item["fig"] == fig
        assert item["cap"] == captions_html(trace, rt) and "<script>" not in item["cap"]
        assert "<script>" not in json.dumps(item["fig"])
    other = round_cache(traces, "nope", "x")                   # unknown: the last run, conditional colouring
    assert '"focus":"dominotree","show":"conditional"' in other
    assert round_cache({}, None, "conditional") == NO_CACHE
