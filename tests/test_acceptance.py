"""The acceptance yardstick (``dominotree/bench/acceptance.py``): its definitions by hand, and the
counts of a real run on the random-tiny pair with the oracle drafter against an independent replay
of the oracle's own random draws."""
import json
import random
from types import SimpleNamespace

import pytest

from dominotree.bench import acceptance as acc
from dominotree.bench import stats
from dominotree.bench.datasets import Prompt
from dominotree.cli import main
from dominotree.config import DecodeConfig

from oracle import ar_continuation, make_oracle


def test_loop_flags_by_hand():
    assert acc.loop_flags([1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6]) == [False] * 9 + [True, False]
    assert acc.loop_flags([7] * 7) == [False] * 5 + [True, True]
    assert acc.loop_flags([1, 2, 3, 4]) == [False] * 4


def test_reach_and_summary_by_hand():
    assert acc.reach([0, 1, 3, 8, 2], max_d=4) == [4 / 5, 3 / 5, 2 / 5, 1 / 5]
    assert acc.reach([], max_d=2) == [0.0, 0.0]
    s = acc.summarize_rows([(0, False), (2, True), (1, False), (4, True)], max_d=3)
    assert s["all"] == {"rounds": 4, "tau": 1 + 7 / 4, "reach": [3 / 4, 2 / 4, 1 / 4]}
    assert s["fresh"] == {"rounds": 2, "tau": 1.5, "reach": [1 / 2, 0.0, 0.0]}
    assert s["loop"] == {"rounds": 2, "tau": 4.0, "reach": [1.0, 1.0, 1 / 2]}


def test_round_rows_judge_the_first_draft_position():
    # prompt of 3 tokens; answer index 5 repeats the 5-gram of indices 0..4
    ans = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6]
    rounds = [SimpleNamespace(start=3, accepted=[0, 1]),       # root = ans[0], first draft = ans[1]
              SimpleNamespace(start=5, accepted=[0]),          # first draft = ans[3]
              SimpleNamespace(start=11, accepted=[0, 4, 7])]   # root = ans[8], first draft = ans[9]: loop
    t = SimpleNamespace(token_ids=ans, rounds=rounds)
    assert acc.round_rows(t, 3) == [(1, False), (0, False), (2, True)]


def test_variants_labels():
    assert acc.variants(["dflash", "ddtree"], [1, 4]) == [("dflash", "dflash", None), ("ddtree@1", "ddtree", 1),
                                                          ("ddtree@4", "ddtree", 4)]


def test_compare_lines_name_both_runs():
    one = {"all": {"tau": 1.5, "reach": [0.25] + [0.0] * 7}, "fresh": {"tau": 1.25, "reach": [0.2] + [0.0] * 7}}
    two = {"all": {"tau": 2.0, "reach": [0.5] + [0.0] * 7}, "fresh": {"tau": 1.75, "reach": [0.4] + [0.0] * 7}}
    out = acc.compare({"variants": {"ddtree@4": two, "domino": two}},
                      {"variants": {"ddtree@4": one}, "paths": {"dflash": "old/d"}}).splitlines()
    assert out == ["A/B against old/d: tau all (fresh), reach@1 all (fresh)",
                   "ddtree@4         tau 1.50 -> 2.00 (1.25 -> 1.75)   reach@1 25.0% -> 50.0% (20.0% -> 40.0%)"]


def test_pooled_delta_and_its_interval_by_hand():
    # run a: 10 rounds, 10 accepted per prompt (tau 2); run b: one more accepted on each prompt
    d = stats.paired_bootstrap_pooled_delta([10, 10, 10], [10, 10, 10], [11, 11, 11], [10, 10, 10], n_boot=200)
    assert abs(d.delta - 0.1) < 1e-12 and d.n == 3 and d.lo == d.hi == d.delta
    assert d.excludes_zero and d.fmt() == "+0.100 [+0.100, +0.100]"
    # pooled, not a mean of ratios: a long prompt weighs by its rounds
    d = stats.paired_bootstrap_pooled_delta([0, 0], [1, 9], [1, 0], [1, 9], n_boot=200)
    assert abs(d.delta - 0.1) < 1e-12 and d.lo == 0.0 and d.hi > 0.1 and not d.excludes_zero
    # the same counts in both runs: zero, and an interval of zero width
    d = stats.paired_bootstrap_pooled_delta([3, 5, 8], [4, 4, 9], [3, 5, 8], [4, 4, 9])
    assert (d.delta, d.lo, d.hi) == (0.0, 0.0, 0.0)
    # columns x prompts: the mean of the columns' differences
    d2 = stats.paired_bootstrap_pooled_delta([[10, 10, 10], [3, 5, 8]], [[10, 10, 10], [4, 4, 9]],
                                             [[11, 11, 11], [3, 5, 8]], [[10, 10, 10], [4, 4, 9]], n_boot=200)
    assert abs(d2.delta - 0.05) < 1e-12 and abs(d2.lo - 0.05) < 1e-12 and abs(d2.hi - 0.05) < 1e-12
    with pytest.raises(ValueError):
        stats.paired_bootstrap_pooled_delta([1], [1, 2], [1], [1])
    with pytest.raises(ValueError):
        stats.paired_bootstrap_pooled_delta([1, 1], [0, 0], [1, 1], [1, 1])


def test_compare_gives_intervals_where_both_runs_kept_per_prompt_counts():
    def variant(method, pp):
        acc_, rounds = sum(a for _, a in pp.values()), sum(r for r, _ in pp.values())
        sub = {"tau": 1 + acc_ / rounds, "reach": [0.5] + [0.0] * 7}
        return {"method": method, "all": sub, "fresh": sub, "per_prompt": {k: list(v) for k, v in pp.items()}}
    base = {"variants": {"ddtree@1": variant("ddtree", {"p1": (10, 5), "p2": (10, 5), "p3": (5, 0)}),
                         "ddtree@4": variant("ddtree", {"p1": (10, 10), "p2": (10, 20), "p3": (5, 5)}),
                         "domino": variant("domino", {"p1": (10, 10)})}}
    res = {"variants": {"ddtree@1": variant("ddtree", {"p1": (10, 5), "p2": (10, 5), "p3": (5, 0)}),
                        "ddtree@4": variant("ddtree", {"p1": (10, 12), "p2": (10, 22), "p3": (5, 7), "p9": (3, 3)}),
                        "domino": variant("domino", {"p1": (10, 20)}), "dflash": variant("dflash", {"p1": (10, 20)})}}
    deltas = acc.delta_tau(res, base, n_boot=500)
    # domino: one common prompt; dflash: not in the baseline; the dflash drafter: ddtree@1 and @4
    assert set(deltas) == {"ddtree@1", "ddtree@4", "drafter:dflash"}
    d = deltas["ddtree@4"]                        # p9 is not in the baseline: left out
    assert d.n == 3 and abs(d.delta - (41 / 25 - 35 / 25)) < 1e-12 and d.excludes_zero
    assert (deltas["ddtree@1"].delta, deltas["ddtree@1"].lo, deltas["ddtree@1"].hi) == (0.0, 0.0, 0.0)
    both = deltas["drafter:dflash"]               # the mean of the two columns, resampled together
    assert abs(both.delta - d.delta / 2) < 1e-12 and both.lo > 0 and both.lo <= both.delta <= both.hi
    lines = acc.compare(res, base, deltas).splitlines()
    assert lines[0].endswith("tau all difference [paired-bootstrap 95 % over prompts]")
    assert lines[2].startswith("ddtree@4") and lines[2].endswith(f"   {d.fmt()} *")
    assert lines[3].startswith("domino") and lines[3].endswith("(50.0% -> 50.0%)")
    assert lines[4] == f"the dflash drafter, mean over ddtree@1, ddtree@4: {both.fmt()} *"
    for v in base["variants"].values():
        del v["per_prompt"]
    assert acc.compare(res, base).splitlines()[-1].startswith("(the baseline kept no per-prompt counts")


def _replay(prompt_len, ar, depth, vocab, seed=0, clean=0.85):
    """The oracle's own draws replayed: a greedy chain of ``depth`` tokens accepts exactly the
    leading depths where the oracle put the true token first."""
    flags = acc.loop_flags(ar)
    rows, generated, start = [], 1, prompt_len
    while generated < len(ar):
        lead = 0
        for d in range(1, depth + 1):
            r = random.Random(seed * 1_000_003 + start * 1009 + d)
            r.sample(range(vocab), 3)   # the oracle's decoys, drawn before its choice
            if r.random() >= clean:
                break
            lead += 1
        i = start - prompt_len + 1
        rows.append((lead, flags[i] if i < len(flags) else False))
        generated += lead + 1
        start += lead + 1
    return rows


def test_run_counts_equal_the_oracle_replay(tiny_decoder):
    dec = tiny_decoder
    prompts = [Prompt("a", "chat", ["Hello"]), Prompt("b", "code", ["def fib(n):"])]
    specs = acc.variants(["dflash", "ddtree", "dominotree"], [1, 4])
    res = acc.run(dec, prompts, specs, 60, draft_for=lambda ids, ar: make_oracle(dec, ar_continuation(dec, ids, len(ar) + 24)))
    depth = dec.pair.drafters["dflash"].cfg.draft_depth
    want = {"dflash": [], "ddtree@1": []}
    for p in prompts:
        ids = dec.encode_prompt(p.turns[0])
        ar = dec.generate(ids, DecodeConfig(method="ar", max_new_tokens=60)).token_ids
        want["dflash"] += _replay(len(ids), ar, depth, dec.target.vocab_rows)
        want["ddtree@1"] += _replay(len(ids), ar, 1, dec.target.vocab_rows)
    for lab, rows in want.items():
        got = res["variants"][lab]
        for sub in acc.SUBSETS:
            sel = [a for a, loop in rows if sub == "all" or loop == (sub == "loop")]
            assert got[sub]["rounds"] == len(sel), (lab, sub)
            assert got[sub]["reach"] == [sum(a >= d for a in sel) / len(sel) if sel else 0.0 for d in range(1, 9)]
        assert got["all"]["tau"] == 1 + sum(a for a, _ in rows) / len(rows)
        pp = got["per_prompt"]
        assert list(pp) == ["a", "b"] and sum(r for r, _ in pp.values()) == len(rows)
        assert sum(a for _, a in pp.values()) == sum(a for a, _ in rows)
    assert max(a for a, _ in want["dflash"]) >= 8                         # deep rounds are exercised
    assert {loop for _, loop in want["ddtree@1"]} == {False, True}        # and both subsets
    assert all(v["equal_ar"] == 2 and v["differ_ar"] == [] for v in res["variants"].values())
    assert res["variants"]["ddtree@1"]["all"]["reach"][1:] == [0.0] * 7    # one node: never 2 deep
    assert res["variants"]["ddtree@4"]["all"]["tau"] >= res["variants"]["ddtree@1"]["all"]["tau"]


def test_cli_writes_summary_csv_and_last_json_line(tmp_path, capsys):
    rc = main(["acceptance", "--preset", "random-tiny", "--limit", "1", "--max-new-tokens", "8", "--methods",
               "dflash,dominotree", "--budgets", "2", "--out", str(tmp_path), "--no-png", "--train-data",
               str(tmp_path / "none")])
    assert rc == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert last["cmd"] == "acceptance" and set(last["tau"]) == {"dflash", "dominotree@2"}
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["prompts"] == 1 and summary["heldout"]["checked"] is False
    rows = (tmp_path / "acceptance.csv").read_text().splitlines()
    assert rows[0].startswith("config,method,budget,subset,rounds,tau,reach1") and len(rows) == 1 + 2 * 3


def test_cli_ab_against_its_own_summary_is_zero(tmp_path, capsys):
    args = ["acceptance", "--preset", "random-tiny", "--limit", "2", "--max-new-tokens", "8", "--methods", "dflash",
            "--no-png", "--train-data", str(tmp_path / "none")]
    assert main(args + ["--out", str(tmp_path / "a")]) == 0
    assert main(args + ["--out", str(tmp_path / "b"), "--baseline", str(tmp_path / "a" / "summary.json")]) == 0
    ab = json.loads((tmp_path / "b" / "summary.json").read_text())["ab"]
    assert ab["tau_delta"]["dflash"] == {"delta": 0.0, "lo": 0.0, "hi": 0.0, "n": 2, "level": 0.95,
                                         "excludes_zero": False}
    assert "+0.000 [+0.000, +0.000]" in capsys.readouterr().out


def test_cli_refuses_a_bad_baseline_before_decoding(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    sub = {"tau": 2.0, "reach": [0.5] * 8}
    torn = json.dumps({"variants": {"dflash": {"all": sub, "fresh": sub, "per_prompt": {"p1": [3]}}}})
    for text, says in (("{not json", "is not JSON"), ('{"variants": [1]}', "not an acceptance summary.json"),
                       (torn, "per_prompt must map prompt ids to [rounds, accepted] counts")):
        bad.write_text(text)
        assert main(["acceptance", "--preset", "random-tiny", "--out", str(tmp_path / "o"), "--baseline", str(bad)]) == 2
        err = capsys.readouterr().err
        assert says in err and "[1/" not in err
    assert main(["acceptance", "--preset", "random-tiny", "--baseline", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_cli_refuses_unknown_method(capsys):
    assert main(["acceptance", "--preset", "random-tiny", "--methods", "dflash,nope"]) == 2
    assert "nope" in capsys.readouterr().err
