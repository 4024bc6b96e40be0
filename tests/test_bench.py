"""The benchmark harness: statistics, the cost-model fit, the adaptive budgets, prompt files and
datasets, and tiny end-to-end ``bench`` runs on ``random-tiny``."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from dominotree.bench import stats
from dominotree.auto.costmodel import CostModel, fit_monotone_convex, load_cost_model, nnls
from dominotree.builders.adaptive import build_adaptive, make_stop
from dominotree.builders.reference import build_reference
from dominotree.cli import UserError
from dominotree.config import TreeConfig

# --- statistics --------------------------------------------------------------------------------


def test_paired_bootstrap_known_inputs():
    # two prompts: the resampled mean(a)/mean(b) is 1, 2 or 3 with probabilities 1/4, 1/2, 1/4
    ci = stats.paired_bootstrap_ratio([1.0, 3.0], [1.0, 1.0], n_boot=20000, seed=1)
    assert ci.ratio == pytest.approx(2.0)
    assert ci.pct == pytest.approx(100.0)
    assert (ci.lo, ci.hi) == (pytest.approx(0.0), pytest.approx(200.0))
    assert not ci.excludes_zero
    # an exact 2x on every prompt: a degenerate interval at +100 %
    ci = stats.paired_bootstrap_ratio([2, 4, 6, 8], [1, 2, 3, 4])
    assert (ci.pct, ci.lo, ci.hi) == (pytest.approx(100), pytest.approx(100), pytest.approx(100))
    assert ci.excludes_zero and ci.fmt() == "+100.00 % [100.00, 100.00]"
    # deterministic for a seed, interval contains the point estimate
    rng = np.random.default_rng(0)
    b = rng.uniform(5, 10, 40)
    a = b * rng.normal(1.1, 0.05, 40)
    c1, c2 = stats.paired_bootstrap_ratio(a, b, seed=3), stats.paired_bootstrap_ratio(a, b, seed=3)
    assert c1 == c2 and c1.lo < c1.pct < c1.hi and c1.excludes_zero
    with pytest.raises(ValueError):
        stats.paired_bootstrap_ratio([1, 2], [1])
    assert math.isnan(stats.paired_bootstrap_ratio([], []).ratio)


def test_tau_speedup_histogram_pairing():
    assert stats.tau([[1, 3], [2, 2, 2], []]) == pytest.approx((2 + 2) / 2)
    assert stats.speedup([20, 40], [10, 10]) == pytest.approx(3.0)
    assert stats.accept_histogram([1, 1, 3]) == pytest.approx([0, 2 / 3, 0, 1 / 3])
    keys, a, b = stats.paired({"x": 1, "y": 2, "z": 3}, {"y": 20, "x": 10})
    assert keys == ["x", "y"] and a == [1, 2] and b == [10, 20]
    assert stats.median([3, 1, 2, 10]) == 2.5


# --- cost model ----------------------------------------------------------------------------------


def _is_monotone_convex(x, f, tol=1e-8):
    s = np.diff(f) / np.diff(x)
    return bool(np.all(s >= -tol) and np.all(np.diff(s) >= -tol))


def test_nnls_matches_bruteforce():
    rng = np.random.default_rng(0)
    A, y = rng.normal(size=(8, 3)), rng.normal(size=8)
    w = nnls(A, y)
    assert np.all(w >= 0)
    best = min((np.linalg.norm(A[:, list(S)] @ np.clip(np.linalg.lstsq(A[:, list(S)], y, rcond=None)[0], 0, None) - y)
                for S in [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]
                if np.all(np.linalg.lstsq(A[:, list(S)], y, rcond=None)[0] >= 0)), default=np.linalg.norm(y))
    assert np.linalg.norm(A @ w - y) <= best + 1e-9


def test_cost_fit_monotone_convex_on_synthetic_data():
    x = np.array([0, 1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64], dtype=float)
    truth = 5 + 0.1 * x + 0.002 * x ** 2
    rng = np.random.default_rng(0)
    for _ in range(5):
        y = truth + rng.normal(0, 0.4, x.size)
        f = fit_monotone_convex(x, y)
        assert _is_monotone_convex(x, f)
        assert np.sum((f - y) ** 2) <= np.sum((truth - y) ** 2) + 1e-9   # a projection beats any feasible point
    # already monotone and convex: returned unchanged
    assert fit_monotone_convex(x, truth) == pytest.approx(truth, abs=1e-8)
    # a dip and a bump get flattened
    f = fit_monotone_convex(np.arange(5.0), np.array([3, 1, 2, 0, 5.0]))
    assert f == pytest.approx([1.5, 1.5, 1.5, 1.5, 5.0])


def test_cost_model_interpolation_extrapolation_roundtrip(tmp_path):
    cm = CostModel.fit([100, 300], [0, 8, 16], [[10, 12, 16], [20, 22, 26]], draft_ms=3.0, meta={"preset": "x"})
    assert cm.verify_ms_at(8, 100) == pytest.approx(12)
    assert cm.verify_ms_at(4, 100) == pytest.approx(11)                  # linear in n
    assert cm.verify_ms_at(32, 100) == pytest.approx(16 + 16 * 0.5)     # last slope beyond the grid
    assert cm.verify_ms_at(8, 200) == pytest.approx(17)                  # linear across contexts
    assert cm.verify_ms_at(8, 5000) == pytest.approx(22)                 # clamped beyond profiled contexts
    assert cm.verify_s(0, 100) == pytest.approx(0.010) and cm.draft_s == pytest.approx(0.003)
    path = cm.save(tmp_path / "cm.json")
    back = load_cost_model(path)
    assert np.allclose(back.verify_ms, cm.verify_ms) and back.raw_ms == cm.raw_ms and back.meta["preset"] == "x"
    (tmp_path / "bad.json").write_text('{"schema": "something else"}')
    with pytest.raises(UserError, match="cannot be read"):
        load_cost_model(tmp_path / "bad.json")
    with pytest.raises(UserError, match="not found"):
        load_cost_model(tmp_path / "missing.json")


# --- adaptive budgets ------------------------------------------------------------------------------


def test_stop_rule_finds_the_throughput_optimum():
    cm = CostModel.synthetic(draft_ms=2.0, base_ms=5.0, per_node_ms=0.3, quad_ms=0.01)
    rng = random.Random(0)
    for _ in range(20):
        logws = sorted((math.log(rng.uniform(0.001, 1.0)) for _ in range(40)), reverse=True)
        stop = make_stop(cm, 500)
        n = 0
        while n < len(logws) and not stop(n, logws[n]):
            n += 1

        def theta(k):
            return (1 + sum(math.exp(w) for w in logws[:k])) / (cm.draft_s + cm.verify_s(k, 500))
        best = max(range(len(logws) + 1), key=theta)
        assert n == best   # convex cost + decreasing gains: the first non-increase is the optimum


class _FakeScorer:
    """Deterministic children: K tokens per node with fixed log-probs shifted by depth."""

    def __init__(self, k=3):
        self.k = k

    def children(self, state, depth):
        from dominotree.scoring import Children
        toks = [(state or 0) * 7 + depth * 13 + j for j in range(self.k)]
        lps = [math.log(p) for p in (0.6, 0.25, 0.1)[: self.k]]
        lps = [lp - 0.05 * depth for lp in lps]
        return Children(toks, lps, lps, list(range(self.k)), [t % 5 for t in toks])


def test_build_adaptive_is_the_reference_heap_with_a_stop():
    tc = TreeConfig(budget=16, corr_topm=8, node_topk=3)
    ref = build_reference(_FakeScorer(), 1, 0, tc, 8)
    free = CostModel.synthetic(draft_ms=1.0, base_ms=5.0, per_node_ms=0.0)   # nodes cost nothing: never stops
    b = build_adaptive(_FakeScorer(), 1, 0, tc, 8, make_stop(free, 10))
    assert b.tree.same_shape(ref.tree) and b.tree.scores == ref.tree.scores
    assert b.extra["hit_max_budget"] and b.extra["adaptive_budget"] == 16 and not b.extra["stopped_early"]
    steep = CostModel.synthetic(draft_ms=1.0, base_ms=5.0, per_node_ms=1.0)
    s = build_adaptive(_FakeScorer(), 1, 0, tc, 8, make_stop(steep, 10))
    n = s.extra["adaptive_budget"]
    assert 0 < n < 16 and s.extra["stopped_early"] and not s.extra["hit_max_budget"]
    small = build_reference(_FakeScorer(), 1, 0, TreeConfig(budget=n, corr_topm=8, node_topk=3), 8)
    assert s.tree.same_shape(small.tree)   # the adaptive tree is the reference tree at its budget


# --- prompt files and datasets -----------------------------------------------------------------------


def test_jsonl_schema(tmp_path):
    from dominotree.bench.datasets import load_jsonl, load_prompts
    f = tmp_path / "p.jsonl"
    f.write_text('{"id": "a", "category": "math", "prompt": "1+1?"}\n\n# comment\n'
                 '{"question_id": 7, "turns": ["hi", "and again"]}\n{"prompt": "no id"}\n')
    ps = load_jsonl(f)
    assert [p.id for p in ps] == ["a", "7", "2"]
    assert ps[0].category == "math" and ps[1].category == "p" and ps[1].turns == ["hi", "and again"]
    assert [p.id for p in load_prompts(prompts=str(f), limit=2)] == ["a", "7"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "x",,}\n')
    with pytest.raises(UserError, match=r"bad\.jsonl:2: malformed JSON"):
        load_jsonl(bad)
    bad.write_text('{"prompt": "ok"}\n{"text": "x"}\n')
    with pytest.raises(UserError, match=r":2: needs a 'prompt' string or a 'turns' list"):
        load_jsonl(bad)
    bad.write_text('{"id": 1, "prompt": "a"}\n{"id": 1, "prompt": "b"}\n')
    with pytest.raises(UserError, match="duplicate id"):
        load_jsonl(bad)
    assert {p.category for p in load_prompts(dataset="eval")} == {"chat", "math", "code"}
    assert len(load_prompts(dataset="math,code", limit=2)) == 4


def test_datasets_offline(tmp_path, monkeypatch):
    from dominotree.bench import datasets as D
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(UserError, match="unknown dataset 'nope'.*gsm8k"):
        D.load_prompts(dataset="nope")
    with pytest.raises(UserError, match=r"dataset 'gsm8k' \(openai/gsm8k\).*(offline|not installed)"):
        D.load_prompts(dataset="gsm8k")
    # a cached copy works offline without `datasets`; rows keep the harness prompt format
    row = {"question": "Tom has 3 apples.", "answer": "3"}
    D.write_jsonl([D.Prompt("gsm8k-0", "gsm8k", D.format_row("gsm8k", row))], tmp_path / "datasets" / "gsm8k.jsonl")
    ps = D.load_prompts(dataset="gsm8k")
    assert ps[0].category == "gsm8k" and ps[0].group == "math"
    assert ps[0].turns[0].endswith("put your final answer within \\boxed{}.")
    assert D.format_row("mt-bench", {"prompt": ["a", "b"]}) == ["a", "b"]
    assert D.format_row("alpaca", {"instruction": "Do", "input": "x"}) == ["Do\n\nInput:\nx"]


def test_variant_specs():
    from dominotree.bench.ablation import ablation_variants
    from dominotree.bench.variants import parse_variants
    base = TreeConfig()
    vs = parse_variants("ar, dominotree@32, condadaptive@64, dominotree/m16, dominotree/mfull", base)
    assert [v.label for v in vs] == ["ar", "dominotree@32", "condadaptive@64", "dominotree/m16", "dominotree/mfull"]
    assert vs[1].tree.budget == 32 and vs[3].tree.corr_topm == 16 and vs[4].tree.corr_topm == 0
    for bad in ("nope", "dominotree@-1", "ar,ar", ""):
        with pytest.raises(UserError):
            parse_variants(bad, base)
    assert [v.label for v in ablation_variants("ladder", base, None, [], [])] == ["ar", "marg", "condstatic",
                                                                                  "dominotree"]
    assert len(ablation_variants("budget", base, "ddtree,dominotree", [8, 16], [])) == 5
    assert [v.tree.corr_topm for v in ablation_variants("topm", base, None, [], [16, 0])] == [64, 16, 0]


# --- end to end on random-tiny ------------------------------------------------------------------------


# ``tiny_pair`` (session scope, random-tiny, float32, CPU) comes from conftest.py


@pytest.fixture
def bench_cli(tiny_pair, monkeypatch, capsys):
    """``python -m dominotree bench ...`` in-process on the shared random-tiny pair."""
    import dominotree.cli as cli
    import dominotree.pairargs
    monkeypatch.setattr(dominotree.pairargs, "load_pair_from_args", lambda a: tiny_pair)

    def run(*argv):
        code = cli.main(["bench", "--preset", "random-tiny", "--no-progress", *argv])
        cap = capsys.readouterr()
        return code, cap.out, cap.err
    return run


def _prompts(tmp_path, n=2):
    f = tmp_path / "two.jsonl"
    rows = [{"id": "p1", "category": "chat", "prompt": "Hello there"},
            {"id": "p2", "category": "math", "turns": ["What is 2+2?", "And 3+3?"]},
            {"id": "p3", "category": "code", "prompt": "def f():"}][:n]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


def test_bench_end_to_end_writes_every_output(tmp_path, bench_cli):
    out = tmp_path / "run"
    code, stdout, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "ar,dominotree",
                                  "--max-new-tokens", "6", "--out", str(out))
    assert code == 0, err
    last = json.loads(stdout.strip().splitlines()[-1])
    assert last["preset"] == "random-tiny" and last["device"] == "cpu"
    assert set(last["methods"]) == {"ar", "dominotree"}
    for m in last["methods"].values():
        assert {"tau", "tokens_per_s", "speedup", "lossless"} <= set(m) and m["lossless"] is True
    assert last["methods"]["ar"]["speedup"] == pytest.approx(1.0)
    assert "dominotree vs ar" in last["ci"]
    assert set(last["claims"]) == {"faster_than_ar"}      # the only claim ar + dominotree can decide
    assert "paper claims reproduced: " in stdout and "of 1" in stdout
    for name in ("summary.csv", "summary.md", "ci.csv", "ci.md", "claims.md", "headline.md", "lossless.csv", "results.json", "run.json",
                 "prompts.jsonl", "answers/T0.0/ar.jsonl", "answers/T0.0/dominotree.jsonl"):
        assert (out / name).is_file(), name
    for fig in ("speedup", "tau_hist", "stages"):
        for ext in ("png", "pdf", "html"):
            if (out / "figures" / f"{fig}.{ext}").is_file():
                break
        else:
            raise AssertionError(f"figure {fig} missing")
    # Spec-Bench layout plus our fields
    recs = [json.loads(l) for l in (out / "answers/T0.0/dominotree.jsonl").read_text().splitlines()]
    assert [r["question_id"] for r in recs] == ["p1", "p2"]
    r = recs[1]
    assert {"question_id", "category", "model_id", "choices", "tau", "stage_ms", "builder", "hardware",
            "versions"} <= set(r)
    c = r["choices"][0]
    assert {"index", "turns", "new_tokens", "wall_time", "accept_lengths"} <= set(c)
    assert len(c["turns"]) == len(c["new_tokens"]) == len(c["wall_time"]) == 2   # two turns
    assert c["seeds"] == [1100, 1101] and r["category"] == "math"
    assert sum(c["accept_lengths"]) + len(c["turns"]) >= sum(c["new_tokens"])   # + the prefill's token
    run = json.loads((out / "run.json").read_text())
    assert run["versions"]["torch"] and run["hardware"]["cpu_count"]
    assert "| dominotree | overall |" in (out / "summary.md").read_text()


def test_bench_several_temperatures_draws_per_temperature_figures(tmp_path, bench_cli):
    out = tmp_path / "temps"
    code, stdout, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "ar,dominotree",
                                  "--temperatures", "0,1", "--max-new-tokens", "4", "--out", str(out), "--no-warmup")
    assert code == 0, err
    last = json.loads(stdout.strip().splitlines()[-1])
    assert set(last["by_temperature"]) == {"0.0", "1.0"}
    names = {p.stem for p in (out / "figures").iterdir()}
    assert {"speedup", "tau_hist", "stages", "tau_hist_t1_0", "stages_t1_0"} <= names, names
    assert "tau_hist_t0_0" not in names          # the first temperature keeps the plain names


def test_bench_partial_results_survive_a_crash_and_resume(tmp_path, bench_cli, monkeypatch):
    from dominotree.bench import run as R
    out = tmp_path / "crash"
    real = R.run_choice

    def flaky(dec, prompt, *a, **k):
        if prompt.id == "p2":
            raise RuntimeError("simulated crash")
        return real(dec, prompt, *a, **k)
    monkeypatch.setattr(R, "run_choice", flaky)
    args = ("--prompts", str(_prompts(tmp_path)), "--methods", "ar", "--max-new-tokens", "3", "--out", str(out),
            "--no-warmup", "--no-figures")
    with pytest.raises(RuntimeError, match="simulated crash"):
        bench_cli(*args)
    recs = R.read_answers(out)
    assert [r["question_id"] for r in recs] == ["p1"]
    monkeypatch.setattr(R, "run_choice", real)
    code, _, err = bench_cli(*args)
    assert code == 2 and "--resume" in err          # refuses to mix runs silently
    code, stdout, err = bench_cli(*args, "--resume")
    assert code == 0, err
    assert sorted(r["question_id"] for r in R.read_answers(out)) == ["p1", "p2"]
    assert json.loads(stdout.strip().splitlines()[-1])["methods"]["ar"]["n_prompts"] == 2


def test_bench_bad_input_is_one_clear_line(tmp_path, bench_cli):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": oops}\n')
    code, _, err = bench_cli("--prompts", str(bad), "--out", str(tmp_path / "o"))
    assert code == 2 and err.strip().startswith("error:") and "bad.jsonl:2: malformed JSON" in err
    code, _, err = bench_cli("--dataset", "no-such-set", "--out", str(tmp_path / "o"))
    assert code == 2 and "unknown dataset 'no-such-set'" in err
    code, _, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "dominotree@9999")
    assert code == 2 and "budget" in err
    code, _, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "caddtree",
                             "--cost-model", str(tmp_path / "none.json"), "--out", str(tmp_path / "o2"))
    assert code == 2 and "cost model file not found" in err


@pytest.mark.parametrize("method", ["caddtree", "condadaptive"])
def test_adaptive_methods_are_lossless(tiny_pair, method):
    from oracle import ar_continuation, make_oracle, sibling_accepted
    from dominotree.bench.run import _bench_decoder
    from dominotree.config import DecodeConfig
    cm = CostModel.synthetic(draft_ms=2.0, base_ms=5.0, per_node_ms=0.3, quad_ms=0.005)
    dec = _bench_decoder(tiny_pair, cm)
    ids = dec.encode_prompt("Tell me a story about a fox.")
    seq = ar_continuation(dec, ids, 80)
    ref = seq[len(ids):]
    cfg = DecodeConfig(method=method, max_new_tokens=48, stop_at_eos=False, tree=TreeConfig(budget=24))
    plain = dec.generate(ids, cfg)          # the random drafter: nothing accepted, still lossless
    assert plain.token_ids == ref[:48]
    rounds = []
    for seed in (0, 1):
        tr = dec.generate(ids, cfg, draft_fn=make_oracle(dec, seq, clean=0.7, sibling=0.25, rank3=0.04, seed=seed))
        assert tr.token_ids == ref[:48]
        rounds += tr.rounds
    assert max(r.accept_len for r in rounds) >= 6                # deep acceptance
    assert any(sibling_accepted(r) for r in rounds)              # through a non-first child
    sizes = [r.tree.num_nodes for r in rounds]
    assert min(sizes) < 24                                       # the rule stopped below the maximum
    if method == "condadaptive":
        assert all(r.extra["adaptive_budget"] == r.tree.num_nodes for r in rounds)


def test_claims_are_decided_from_the_numbers():
    import pandas as pd
    from dominotree.bench import claims
    rows = [("ar", 1.0, 10.0, None, None), ("dflash", 1.3, 9.0, None, None), ("ddtree", 1.7, 12.0, None, None),
            ("domino", 1.6, 8.0, None, None), ("marg", 1.65, 11.0, None, None), ("condstatic", 1.8, 11.5, None, None),
            ("dominotree", 1.9, 12.5, None, None), ("condadaptive", 1.9, 12.0, 16, 0.9)]
    df = pd.DataFrame([{"temperature": 0.0, "scope": "overall", "label": l, "method": l, "tau": tau,
                        "tokens_per_s": tps, "budget": b, "hit_max_frac": h, "mean_nodes": 15.5} for l, tau, tps, b, h in rows])
    ci = pd.DataFrame([{"temperature": 0.0, "scope": "overall", "a": "dominotree", "b": b, "pct": p, "lo": lo, "hi": hi,
                        "n": 36} for b, p, lo, hi in [("ar", 25.0, 10.0, 40.0), ("domino", 56.0, 40.0, 70.0),
                                                      ("ddtree", 4.0, -2.0, 10.0), ("condadaptive", 4.0, -1.0, 9.0)]])
    found = {c.key: c for c in claims.evaluate({"temps": ["0.0"], "summary": df, "ci": ci})}
    assert {k: c.reproduced for k, c in found.items()} == {
        "highest_tau": True, "highest_throughput": True, "faster_than_ar": True, "faster_than_domino": True,
        "faster_than_ddtree": False, "ladder": True, "tree_beats_chain": True, "ddtree_beats_dflash": True,
        "condadaptive_no_gain": True}
    assert "-2.0" in found["faster_than_ddtree"].evidence and "90%" in found["condadaptive_no_gain"].evidence
    ci.loc[ci["b"] == "condadaptive", ["pct", "lo", "hi"]] = [-6.0, -9.0, -2.0]     # condadaptive faster
    found = {c.key: c for c in claims.evaluate({"temps": ["0.0"], "summary": df, "ci": ci})}
    assert not found["condadaptive_no_gain"].reproduced
    # a tie for the top tau counts for dominotree; a higher one elsewhere does not
    df.loc[df["label"] == "condstatic", "tau"] = 1.95
    found = {c.key: c for c in claims.evaluate({"temps": ["0.0"], "summary": df, "ci": ci})}
    assert not found["highest_tau"].reproduced and not found["ladder"].reproduced
    assert "condstatic 1.950" in found["highest_tau"].evidence
    md = claims.to_markdown(list(found.values()))
    assert "| DominoTree has the highest tau of all methods | **no** |" in md
    # without dominotree nothing is claimed
    assert claims.evaluate({"temps": ["0.0"], "summary": df[df["label"] != "dominotree"], "ci": ci}) == []


def test_ties_locate_the_first_difference_and_measure_the_target_gap(tiny_decoder):
    import torch
    from dominotree.bench import tiecheck as ties
    from dominotree.bench.datasets import Prompt
    from dominotree.bench.run import encode_messages
    from dominotree.bench.stats import first_difference
    assert first_difference([[1, 2, 3]], [[1, 2, 3]]) is None
    assert first_difference([[1, 2], [5, 6, 7]], [[1, 2], [5, 9]]) == (1, 1)
    assert first_difference([[1, 2]], [[1, 2, 3]]) == (0, 2)          # one stopped earlier
    assert first_difference([[1, 2]], [[1, 2], [4]]) == (1, None)      # one has fewer turns
    p = Prompt("q1", "chat", ["Count to five."])
    ids = encode_messages(tiny_decoder, [{"role": "user", "content": p.turns[0]}])
    tgt = tiny_decoder.target
    with torch.inference_mode():
        logits = tgt.forward(torch.tensor([ids]), torch.arange(len(ids))[None], tgt.new_cache()).logits[-1].float()
    order = torch.argsort(logits, descending=True).tolist()
    ar_tok, third = order[0], order[2]

    def rec(toks):
        return {"choices": [{"token_ids": [toks], "turns": ["x"]}]}
    by = {("0.0", "ar"): {"q1": rec([ar_tok, 7])}, ("0.0", "m"): {"q1": rec([third, 7])},
          ("0.0", "same"): {"q1": rec([ar_tok, 7])}, ("1.0", "m"): {"q1": rec([third])}}
    rows = ties.diagnose(tiny_decoder, {"q1": p}, by, encode_messages)
    assert len(rows) == 1 and rows[0]["label"] == "m" and (rows[0]["turn"], rows[0]["token"]) == (0, 0)
    assert rows[0]["rank"] == 2
    assert rows[0]["gap"] == pytest.approx(float(logits[ar_tok] - logits[third]), abs=1e-4)
    text = ties.summary_line(rows, 2)
    assert "1 of 2" in text and "investigate" in text          # rank 2 is no rounding tie
    tie = [dict(rows[0], gap=0.0625, rank=1)]
    assert "near-tie" in ties.summary_line(tie, 2) and "investigate" not in ties.summary_line(tie, 2)
    assert ties.summary_line([], 3).startswith("All 3")


def test_topm_curve_needs_a_sweep():
    import pandas as pd
    from dominotree.bench.plots import topm_curve
    rows = [{"temperature": 0.0, "scope": "overall", "label": f"dominotree/m{m}", "method": "dominotree",
             "corr_topm": m, "tau": 1.5 + m / 1000, "build_ms": 5.0 + m / 10, "speedup": 1.0} for m in (16, 64, 0)]
    fig = topm_curve({"temps": ["0.0"], "summary": pd.DataFrame(rows)})
    assert list(fig.data[0].x) == ["16", "64", "full vocab"]          # full vocabulary last
    assert topm_curve({"temps": ["0.0"], "summary": pd.DataFrame(rows[:1])}) is None


def test_profile_rounds_splits_every_stage(tiny_pair, monkeypatch, capsys):
    import dominotree.cli as cli
    import dominotree.pairargs
    monkeypatch.setattr(dominotree.pairargs, "load_pair_from_args", lambda a: tiny_pair)
    code = cli.main(["profile-rounds", "--preset", "random-tiny", "--dtypes", "float32", "--prompts", "1",
                     "--max-new-tokens", "6"])
    out = capsys.readouterr().out
    assert code == 0
    res = json.loads(out.strip().splitlines()[-1])
    r = res["dtypes"]["float32"]
    assert r["x_ar"]["ar"]["round"] == pytest.approx(1.0)
    dom = r["ms"]["dominotree"]
    assert {"backbone", "draft_lm_head", "build", "layers", "attention", "head", "sampling", "commit"} <= set(dom)
    assert dom["backbone"] > 0 and dom["attention"] > 0 and dom["head"] > 0
    parts = sum(v for k, v in dom.items() if k != "round")
    assert parts == pytest.approx(dom["round"], abs=1e-3)      # the parts add up to the round (rounded to 1e-4 ms each)


def test_bench_hf_generate_reference_row(tmp_path, bench_cli):
    """``hf-generate`` (plain transformers generate, bf16) is a row with tokens/s and a speedup over
    ``ar``, and no lossless verdict (another precision, not a decoder of this target); greedy only."""
    out = tmp_path / "hf"
    code, stdout, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "ar,hf-generate",
                                  "--max-new-tokens", "5", "--out", str(out))
    assert code == 0, err
    last = json.loads(stdout.strip().splitlines()[-1])
    hf = last["methods"]["hf-generate"]
    assert hf["tokens_per_s"] > 0 and hf["speedup"] is not None and hf["lossless"] is None
    assert hf["tau"] == pytest.approx(1.0)
    recs = [json.loads(l) for l in (out / "answers/T0.0/hf-generate.jsonl").read_text().splitlines()]
    c = recs[1]["choices"][0]
    assert len(c["turns"]) == 2 and all(0 < n <= 5 for n in c["new_tokens"])
    code, _, err = bench_cli("--prompts", str(_prompts(tmp_path)), "--methods", "ar,hf-generate",
                             "--temperatures", "0,1", "--out", str(tmp_path / "hf1"))
    assert code != 0 and "--temperatures 0" in err and "Traceback" not in err
