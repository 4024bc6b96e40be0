"""``--budget auto``: a deterministic choice, and one clear line when the verify-cost profile is
missing; the command line's and the explorer's auto control (the budget-prefix property it rests on:
``test_budget_prefix.py``).

    .venv/bin/python -m pytest -q tests/test_autobudget.py
"""
from __future__ import annotations

import json
from pathlib import Path
import math

import pytest
import torch

from dominotree.auto.budget import Calibration, choose, curve
from dominotree.auto.costmodel import CostModel


def _calibration():
    accept = [[min(1 + b // k, 6) for b in range(1, 33)] for k in (2, 3, 5, 8)]
    return Calibration("dominotree", 32, [100, 140, 180, 220], accept, draft_ms=9.0, commit_ms=0.7,
                       build_grid=[1, 4, 16, 32], build_ms=[0.6, 1.0, 2.5, 4.5], meta={"preset": "test"})


def test_auto_choice_is_deterministic(tmp_path):
    cal = _calibration()
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    b = choose(cal, cm)
    assert all(choose(cal, cm) == b for _ in range(5))
    cm.save(tmp_path / "cm.json")
    cal.save(tmp_path / "cal.json")
    from dominotree.auto.budget import load_calibration
    from dominotree.auto.costmodel import load_cost_model
    assert choose(load_calibration(tmp_path / "cal.json"), load_cost_model(tmp_path / "cm.json")) == b
    rows = curve(cal, cm)                    # rows[0] is budget 0: plain decoding
    best = max(r["predicted_tokens_per_s"] for r in rows)
    assert b > 0 and rows[b]["budget"] == b and rows[b]["predicted_tokens_per_s"] == best
    assert all(r["predicted_tokens_per_s"] < best for r in rows[:b])        # the smallest on a tie
    # verify rows that cost nothing favour the largest budget; expensive rows a small one
    assert choose(cal, CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.0)) >= b
    assert choose(cal, CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=20.0)) <= b


def test_draft_time_follows_the_usable_depths():
    """A budget-b tree reaches depth b at most and the draft's head runs on those rows only, so a
    calibration with a draft grid predicts cheaper drafts at small budgets (old files: one time)."""
    cal = _calibration()
    assert cal.draft_at(1) == cal.draft_at(32) == 9.0
    cal.draft_grid_ms = [3.0, 4.5, 9.0, 9.0]
    assert (cal.draft_at(1), cal.draft_at(4), cal.draft_at(10), cal.draft_at(32), cal.draft_at(64)) == (3.0, 4.5, 6.75, 9.0, 9.0)
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert back.draft_grid_ms == cal.draft_grid_ms
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    assert curve(cal, cm)[1]["round_ms"] < curve(_calibration(), cm)[1]["round_ms"]
    with pytest.raises(ValueError):
        Calibration("dominotree", 4, [1], [[1, 2, 3, 4]], 1.0, 1.0, [1, 4], [1.0, 2.0], {}, [1.0])


def test_usable_depths():
    from dominotree.config import DecodeConfig, TreeConfig
    from dominotree.decode import usable_depths
    assert usable_depths(DecodeConfig(method="dominotree", tree=TreeConfig(budget=5))) == 5
    assert usable_depths(DecodeConfig(method="ddtree", tree=TreeConfig(budget=40))) == 40
    assert usable_depths(DecodeConfig(method="domino", tree=TreeConfig(budget=5))) is None
    assert usable_depths(DecodeConfig(method="dflash", tree=TreeConfig(budget=5, max_depth=3))) == 3
    assert usable_depths(DecodeConfig(method="dominotree", tree=TreeConfig(budget=9, max_depth=3))) == 3


def test_calibration_refuses_bad_shapes():
    with pytest.raises(ValueError):
        Calibration("dominotree", 4, [1], [[1, 2]], 1.0, 1.0, [1, 4], [1.0, 2.0])
    with pytest.raises(ValueError):
        Calibration.from_dict({"schema": "something else"})


def _made_here(obj, weights="float32", dtype="float32", **meta):
    from dominotree.machine import hardware_info
    obj.meta.update({"hardware": hardware_info("cpu"), "weights": weights, "dtype": dtype, **meta})
    return obj


def _calibrated_here(choice, draft_vocab: int = 0):
    """A random-tiny dominotree calibration and verify-cost profile made on this machine, at the
    committed default paths (relative to the working directory): (calibration, cost model)."""
    from dominotree.auto.costmodel import default_path as cost_path
    from dominotree.auto.files import default_path
    accept = [[min(1 + b // k, 6) for b in range(1, 33)] for k in (2, 3, 5, 8)]
    cal = Calibration("dominotree", 32, [100, 140, 180, 220], accept, draft_ms=9.0, commit_ms=0.7,
                      build_grid=[1, 4, 16, 32], build_ms=[0.6, 1.0, 2.5, 4.5],
                      meta={"preset": "random-tiny", "dtype": "float32", "created": "2025-05-01T10:00:00Z"})
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    _made_here(cal, weights=choice.weights); _made_here(cm, weights=choice.weights)
    cm.save(cost_path("random-tiny", "cpu"))
    cal.save(default_path("random-tiny", "cpu", "dominotree", draft_vocab))
    return cal, cm


def test_auto_chooses_plain_decoding_when_no_tree_pays_and_says_why():
    """Budget 0 is a candidate: with verify rows that cost as much as a step, no tree is predicted
    AR_MARGIN faster than ar, so auto decodes plainly; the reason names the best tree's cost in ar
    steps and what it commits. The ar rounds' measured remainder counts on ar's side."""
    from dominotree.auto.budget import AR_MARGIN, ar_round_ms, explain
    cal = _calibration()
    cheap = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    dear = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=35.0)
    assert choose(cal, cheap) > 0 and choose(cal, dear) == 0
    rows = curve(cal, dear)
    assert rows[0] == {"budget": 0, "tau": 1.0, "round_ms": rows[0]["round_ms"], "round_ar_steps": 1.0,
                       "predicted_tokens_per_s": 1e3 / rows[0]["round_ms"], "speedup": 1.0}
    assert all(r["speedup"] < 1 + AR_MARGIN for r in rows[1:])
    best = max(rows[1:], key=lambda r: r["predicted_tokens_per_s"])
    why = explain(rows, 0)
    assert why.startswith(f"auto: no tree pays here: the best, budget {best['budget']}, costs "
                          f"{best['round_ar_steps']:.2f} ar steps a round and commits {best['tau']:.2f} tokens")
    b = choose(cal, cheap)
    assert explain(curve(cal, cheap), b).startswith(f"auto: budget {b}: a round costs ")
    # a tree predicted only just faster than ar (within the margin) is not worth its risk
    edge = [dict(r) for r in curve(cal, cheap)]
    for r in edge[1:]:
        r["speedup"] = min(r["speedup"], 1 + AR_MARGIN / 2)
    from dominotree.auto.budget import _choose
    assert _choose(edge) == 0
    # version 2: ar rounds measured on the same prompts give ar's remainder beyond the forward
    cal.ar_starts, cal.ar_ms = [100, 101, 102], [40.0, 41.0, 42.0]
    assert ar_round_ms(cal, cheap) == pytest.approx(35.0 + 6.0)
    back = Calibration.from_dict(json.loads(json.dumps(cal.to_dict())))
    assert (back.ar_starts, back.ar_ms) == (cal.ar_starts, cal.ar_ms)
    v1 = {**_calibration().to_dict(), "version": 1}
    assert Calibration.from_dict(v1).ar_ms is None              # older files still read


def test_a_profile_slower_than_the_calibrations_ar_rounds_is_scaled_to_them(tmp_path):
    """A measured ar round cannot be faster than its own forward: when the calibration timed ar
    at 2.5x less than the profile's forward (a profile measured under load), every profile cost
    is scaled down by that ratio, so a tree's round in ar steps is what it would be with a
    profile measured now; ar rounds slower than the profile stay a remainder (scale 1)."""
    from dominotree.auto.budget import ar_round_ms, profile_scale
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    now = CostModel.synthetic(draft_ms=9.0, base_ms=14.0, per_node_ms=0.36, quad_ms=0.0008)   # the same, 2.5x faster
    cal = _calibration()
    cal.ar_starts = [100, 140, 180]
    cal.ar_ms = [now.verify_ms_at(0, s) for s in cal.ar_starts]
    assert profile_scale(cal, cm) == pytest.approx(0.4)
    assert ar_round_ms(cal, cm) == pytest.approx(ar_round_ms(cal, now))
    scaled, fresh = curve(cal, cm), curve(cal, now)
    assert [r["round_ar_steps"] for r in scaled] == pytest.approx([r["round_ar_steps"] for r in fresh])
    assert choose(cal, cm) == choose(cal, now)
    from dominotree.auto.budget import auto_choice     # and the choice says so
    cm.save(tmp_path / "cm.json"), cal.save(tmp_path / "cal.json")
    ch = auto_choice("random-tiny", "cpu", "dominotree", "float32", tmp_path / "cm.json", tmp_path / "cal.json")
    assert ch.budget == choose(cal, now)
    assert any("2.5x slower than the ar rounds this calibration timed" in w for w in ch.warnings)
    cal.ar_ms = [40.0, 41.0, 42.0]                   # slower than the profile: a remainder, no scale
    assert profile_scale(cal, cm) == 1.0


def test_the_verify_remainder_grows_from_ars_to_the_largest_trees():
    """What the profile leaves out of a verify stage is timed twice: for one row (ar's rounds) and
    for budget_max + 1 rows (the calibration's tree); a budget in between gets the straight line
    between them, not budget_max's remainder at every budget."""
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    cal = _calibration()
    cal.verify_ms = [cm.verify_ms_at(cal.budget_max, s) + 3.0 for s in cal.starts]
    cal.ar_starts = [100, 140, 180]
    cal.ar_ms = [cm.verify_ms_at(0, s) + 0.5 for s in cal.ar_starts]
    for row in curve(cal, cm)[1:]:
        b = row["budget"]
        bare = sum(cal.draft_at(b) + cal.build_at(b) + cm.verify_ms_at(b, s) + cal.commit_ms for s in cal.starts)
        assert row["round_ms"] == pytest.approx(bare / len(cal.starts) + 0.5 + 2.5 * b / cal.budget_max)


def test_auto_reads_only_files_made_on_this_machine_and_never_calibrates(tmp_path, monkeypatch):
    """What the explorer and bench use: this machine's files (its cache, or a committed results/ file
    made here with these weights and dtype); another machine's, weights' or dtype's file is never
    borrowed. Missing: one line naming the command that measures them; nothing is written."""
    from dominotree.auto.budget import apply_auto, auto_available, auto_choice
    from dominotree.auto.files import auto_paths, calibration_name, default_path, drafters_id, machine_dir
    from dominotree.config import DecodeConfig
    from dominotree.auto.costmodel import default_path as cost_path
    from dominotree.errors import UserError
    from dominotree.machine import cpu_signature
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(UserError) as e:
        auto_choice("smollm2", "cpu", "dominotree", "bfloat16", weights="bf16")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--budget auto needs a verify-cost profile and a dominotree budget "
                                              "calibration made on this machine (cpu, bf16 weights, bfloat16)")
    assert "`python -m dominotree calibrate-budget --preset smollm2 --dtype bfloat16 --weights bf16 --method " \
           "dominotree`" in msg
    with pytest.raises(UserError, match="fixed-budget tree methods"):
        auto_choice("smollm2", "cpu", "ddtree")
    assert auto_available("smollm2", "cpu")[0] == {} and "calibrate-budget" in auto_available("smollm2", "cpu")[1]
    assert not (tmp_path / "results").exists() and not (tmp_path / "cache").exists()

    # committed files made on another CPU with other weights: not used
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    cal = _calibration()
    _made_here(cm, weights="int4-q8"); _made_here(cal, weights="int4-q8", preset="smollm2")
    other_cpu = "OtherVendor-0-0"         # no real CPU's signature: a fixed real one is this machine's on some hosts
    assert other_cpu != cpu_signature()
    cm.meta["hardware"]["cpu_signature"] = cal.meta["hardware"]["cpu_signature"] = other_cpu
    cm.save(cost_path("smollm2", "cpu")); cal.save(default_path("smollm2", "cpu", "dominotree"))
    here = machine_dir("smollm2", "cpu", "int4-q8", "float32")
    did = drafters_id("smollm2")          # the shipped drafters' id: part of the calibration's name
    assert len(did) == 12 and calibration_name("dominotree", 8192, "smollm2") == f"budget_dominotree_v8192_d{did}.json"
    assert auto_paths("smollm2", "cpu", "dominotree", weights="int4-q8", dtype="float32") == \
        (here / "cost_model.json", here / f"budget_dominotree_d{did}.json")
    with pytest.raises(UserError, match="made on this machine"):
        auto_choice("smollm2", "cpu", "dominotree", "float32", weights="int4-q8")
    # made here, but the calibration with other drafters (or none recorded): not used
    _made_here(cm, weights="int4-q8")
    for other in ({}, {"drafters": "0123456789ab"}):
        cal.meta.pop("drafters", None)
        _made_here(cal, weights="int4-q8", preset="smollm2", **other)
        cm.save(cost_path("smollm2", "cpu")); cal.save(default_path("smollm2", "cpu", "dominotree"))
        with pytest.raises(UserError, match="made on this machine"):
            auto_choice("smollm2", "cpu", "dominotree", "float32", weights="int4-q8")
    given = auto_choice("smollm2", "cpu", "dominotree", "float32", calibration_path=default_path("smollm2", "cpu", "dominotree"),
                        weights="int4-q8")                         # given by hand: used, with a warning
    assert any("made with other drafters (0123456789ab" in w for w in given.warnings)
    # made here with these drafters: the committed ones are used, without a warning
    _made_here(cm, weights="int4-q8"); _made_here(cal, weights="int4-q8", preset="smollm2", drafters=did)
    cm.save(cost_path("smollm2", "cpu")); cal.save(default_path("smollm2", "cpu", "dominotree"))
    ch = auto_choice("smollm2", "cpu", "dominotree", "float32", weights="int4-q8")
    assert ch.budget == choose(cal, cm) and ch.calibration == default_path("smollm2", "cpu", "dominotree")
    assert ch.warnings == () and ch.reason.startswith(f"auto: budget {ch.budget}: ")
    assert ch.to_dict()["reason"] == ch.reason and ch.to_dict()["curve"][0]["budget"] == 0
    with pytest.raises(UserError, match="made on this machine"):        # other weights: not these files
        auto_choice("smollm2", "cpu", "dominotree", "float32", weights="int4")
    # this machine's cache comes first
    dear = _made_here(CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=35.0), weights="int4-q8")
    dear.save(here / "cost_model.json")
    ch = auto_choice("smollm2", "cpu", "dominotree", "float32", weights="int4-q8")
    assert ch.cost_model == here / "cost_model.json" and ch.budget == 0
    assert ch.describe().startswith("budget auto = plain decoding (") and "no tree pays here" in ch.describe()
    cfgs = [DecodeConfig(method=m) for m in ("ar", "dflash", "ddtree", "dominotree")]
    out, chosen, notes = apply_auto(cfgs, "smollm2", "cpu", "float32", "int4-q8")
    assert [c.tree.budget for c in out] == [16, 16, 16, 0] and list(chosen) == ["dominotree"]
    assert len(notes) == 1 and notes[0].startswith("ddtree keeps budget 16: auto is calibrated for")


def test_budget_zero_decodes_plainly(tiny_decoder):
    """What auto runs when no tree pays: the method with budget 0 drafts nothing, its rounds are
    ar's, and it says so in its config (the reason travels with the run: cli, explorer, bench)."""
    from dominotree.config import DecodeConfig, TreeConfig
    ar = tiny_decoder.generate("Hello", DecodeConfig(method="ar", max_new_tokens=12))
    tr = tiny_decoder.generate("Hello", DecodeConfig(method="dominotree", max_new_tokens=12, tree=TreeConfig(budget=0)))
    assert tr.token_ids == ar.token_ids and all(r.tree.num_nodes == 0 for r in tr.rounds)
    assert tr.config["tree"]["budget"] == 0
    with pytest.raises(Exception, match=r"budget must be an integer in \[0, "):
        TreeConfig(budget=-1)


# --- from the command line -------------------------------------------------------------------------

@pytest.fixture
def cli(tiny_pair, cli_for):
    return cli_for(tiny_pair)


def test_auto_measures_on_first_use_and_says_what_it_chose(cli, tmp_path, monkeypatch):
    """No file of this machine: ``--budget auto`` measures the profile and the calibration once
    (progress on stderr), caches them per machine and weights, and the JSON says what it chose and
    why; the second run reuses them. A bad --budget is one clear line."""
    import dominotree.auto.calibrate as K
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(K, "calibration_prompts", lambda per_category: ["Hello there", "Count to ten"])
    code, out, err = cli("generate", "--preset", "random-tiny", "--budget", "auto", "--prompt", "Hi",
                         "--max-new-tokens", "8", "--json", "--no-warm-up")
    assert code == 0, err
    assert "no verify-cost profile of this machine" in err and "calibrating now" in err
    last = json.loads(out.strip().splitlines()[-1])
    assert last["auto"]["budget"] == last["budget"] and last["auto"]["reason"].startswith("auto: ")
    assert str(tmp_path / "cache" / "auto") in last["auto"]["calibration"]
    cal = json.loads(Path(last["auto"]["calibration"]).read_text())     # the verify timed at grid budgets
    assert cal["version"] == 5 and cal["verify_grid"][-1] == cal["budget_max"] and cal["verify_grid"][:3] == [1, 2, 3]
    assert len(cal["verify_grid_ms"]) == len(cal["verify_grid"]) and all(ms > 0 for ms in cal["verify_grid_ms"])
    assert len(cal["commit_grid_ms"]) == len(cal["verify_grid"]) and all(ms > 0 for ms in cal["commit_grid_ms"])
    assert cal["ar_timed_ms"] > 0                                      # ar timed beside the trees (version 5)
    code, out, err = cli("generate", "--preset", "random-tiny", "--budget", "auto", "--prompt", "Hi",
                         "--max-new-tokens", "8", "--json", "--no-warm-up")
    assert code == 0 and "calibrating now" not in err and "using budget calibration" in err
    code, out, err = cli("generate", "--preset", "random-tiny", "--budget", "many", "--prompt", "Hi")
    assert code == 2 and "integer or auto" in err


def test_bench_auto_variant_reports_the_choice_and_curve(cli, tiny_pair, tmp_path):
    from dominotree.bench.calibrate_budget import calibrate
    from dominotree.bench.plots import auto_budget_figure
    from dominotree.bench.summary import summarize
    from dominotree.decode import Decoder
    CostModel.synthetic(draft_ms=2.0, base_ms=5.0, per_node_ms=0.3).save(tmp_path / "cm.json")
    cal = calibrate(Decoder(tiny_pair, annotate=False), ["Hello there", "Count to ten"], "dominotree", 8,
                    max_new_tokens=8, progress=False)
    assert len(cal.accept) == len(cal.starts) > 0 and cal.build_grid[-1] == 8
    assert len(cal.draft_grid_ms) == len(cal.build_grid) and all(d >= 0 for d in cal.draft_grid_ms)
    cal.save(tmp_path / "cal.json")
    (tmp_path / "p.jsonl").write_text('{"prompt": "Hi"}\n{"prompt": "Tell me a story"}\n')
    code, out, err = cli("bench", "--preset", "random-tiny", "--prompts", str(tmp_path / "p.jsonl"), "--methods",
                         "ar,dominotree,dominotree@auto", "--max-new-tokens", "6", "--no-progress", "--no-warmup",
                         "--no-figures", "--cost-model", str(tmp_path / "cm.json"), "--calibration",
                         str(tmp_path / "cal.json"), "--out", str(tmp_path / "o"))
    assert code == 0, err
    last = json.loads(out.strip().splitlines()[-1])
    b = choose(cal, CostModel.synthetic(draft_ms=2.0, base_ms=5.0, per_node_ms=0.3))
    assert last["auto_budget"]["0.0"]["dominotree@auto"]["budget"] == b
    assert "dominotree@auto" in last["methods"]
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert [m["budget"] for m in run["methods"] if m["label"] == "dominotree@auto"] == [b]
    res = summarize(tmp_path / "o")
    res["auto_budget"] = run["auto_budget"]
    fig = auto_budget_figure(res)
    # legends name the variant (two auto variants of one method stay apart), and the "auto = b" note
    # sits at b on the log axis (log10 b: an annotation at b itself was drawn at 10**b)
    assert {t.name for t in fig.data if t.showlegend is not False} >= {"dominotree@auto: calibration",
                                                                       "dominotree@auto: measured here"}
    if b > 0:
        notes = [a for a in fig.layout.annotations if a.text == f"auto = {b}"]
        assert len(notes) == 1 and notes[0].x == pytest.approx(math.log10(b))
    # auto = 0 (no tree pays): nothing at budget 0 on the log axis, the choice said in words
    res["auto_budget"] = {k: {**v, "budget": 0} for k, v in run["auto_budget"].items()}
    fig = auto_budget_figure(res)
    assert all(x > 0 for t in fig.data for x in (t.x or ())) and len(fig.layout.shapes) == 1    # the ar line only
    assert any("auto = 0 (plain decoding" in a.text for a in fig.layout.annotations)


# --- in the explorer ------------------------------------------------------------------------------

def test_budget_auto_uses_the_calibration_or_says_why_not(tmp_path, monkeypatch):
    """The explorer's auto budget: off, with the one line that names the commands, while this pair
    and device have no calibration (a run keeps the slider's budget and says so); with one, the
    calibrated tree methods get its budget, the others keep the slider's, and the note says which."""
    import types
    pytest.importorskip("gradio")

    from dominotree.config import DecodeConfig, TreeConfig
    from ui.backend import ModelChoice
    from ui.controls import auto_budget_control, auto_budgets
    from ui.panes import auto_html
    monkeypatch.chdir(tmp_path)                 # the default paths are results/... of the working directory
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    choice = ModelChoice(preset="random-tiny", device="cpu")
    cfgs = [DecodeConfig(method=m, tree=TreeConfig(budget=24)) for m in ("ar", "ddtree", "dominotree")]
    ctl = auto_budget_control(choice)
    assert ctl["interactive"] is False and ctl["value"] is False and "\n" not in ctl["info"]
    assert "`python -m dominotree calibrate-budget --preset random-tiny --dtype float32 --method dominotree`" in ctl["info"]
    assert auto_budgets(cfgs, choice, False) == (cfgs, {}, "")
    out, chosen, note = auto_budgets(cfgs, choice, True)
    assert out == cfgs and chosen == {}
    assert "ddtree keeps budget 24: auto is calibrated for marg, condstatic, dominotree only" in note
    assert "dominotree keeps budget 24: --budget auto needs" in note and "calibrate-budget" in note

    cal, cm = _calibrated_here(choice)
    b = choose(cal, cm)
    assert b != 24
    ctl = auto_budget_control(choice)
    assert ctl["interactive"] is True and f"dominotree {b} (calibrated 2025-05-01)" in ctl["info"]
    out, chosen, note = auto_budgets(cfgs, choice, True)
    assert [c.tree.budget for c in out] == [24, 24, b] and list(chosen) == ["dominotree"]
    assert f"dominotree: budget auto = {b} (calibrated 2025-05-01, budget_random-tiny_cpu_dominotree.json)" in note
    assert note.count("keeps") == 1 and "ddtree keeps budget 24" in note          # ar has no tree: no word
    head = auto_html(types.SimpleNamespace(config={"budget_auto": chosen["dominotree"].describe() + " <b>"}))
    assert f"budget auto = {b}" in head and "&lt;b&gt;" in head


def test_a_calibration_from_another_machine_is_flagged(tmp_path):
    """Costs do not carry across CPUs: a calibration or profile made on another kind of CPU (model,
    vector ISA, cores) gets a warning saying so; one made here gets none."""
    from dominotree.auto.budget import auto_choice
    from dominotree.machine import hardware_info
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9)
    cm.meta["hardware"] = hardware_info("cpu")
    cm.save(tmp_path / "cm.json")
    cal = _calibration()
    cal.meta["hardware"] = hardware_info("cpu")
    cal.save(tmp_path / "here.json")
    ch = auto_choice("test", "cpu", "dominotree", cost_model_path=tmp_path / "cm.json",
                     calibration_path=tmp_path / "here.json")
    assert not [w for w in ch.warnings if "another machine" in w]
    cal.meta["hardware"] = {**hardware_info("cpu"), "cpu_isa": "AVX512+AMX", "cpu": "Some Other CPU"}
    cal.save(tmp_path / "there.json")
    ch = auto_choice("test", "cpu", "dominotree", cost_model_path=tmp_path / "cm.json",
                     calibration_path=tmp_path / "there.json")
    [w] = [w for w in ch.warnings if "another machine" in w]
    assert "AVX512+AMX" in w and "Some Other CPU" in w and "recalibrate" in w


def test_bench_calibration_folder_gives_each_variant_its_own_file(tmp_path):
    from types import SimpleNamespace
    from dominotree.bench.cli import calibration_file
    pair = SimpleNamespace(name="smollm2", target=SimpleNamespace(device=torch.device("cpu")))
    assert calibration_file(None, pair, "dominotree", 0) is None
    assert calibration_file(str(tmp_path / "x.json"), pair, "dominotree", 8192) == str(tmp_path / "x.json")
    assert calibration_file(str(tmp_path), pair, "dominotree", 0) == str(tmp_path / "budget_smollm2_cpu_dominotree.json")
    assert calibration_file(str(tmp_path), pair, "dominotree", 8192) == str(tmp_path / "budget_smollm2_cpu_dominotree_v8192.json")


def test_files_made_with_other_target_weights_are_flagged(tmp_path):
    """A verify costs what the target's weights make it cost: an int4 run warns about a profile or
    calibration made on float32 weights; matching or unrecorded weights give no warning."""
    from dominotree.auto.budget import auto_choice
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9)
    cm.meta["weights"] = "float32"
    cm.save(tmp_path / "cm.json")
    cal = _calibration()
    cal.meta["weights"] = "int4"
    cal.save(tmp_path / "cal.json")
    kw = dict(cost_model_path=tmp_path / "cm.json", calibration_path=tmp_path / "cal.json")
    ch = auto_choice("test", "cpu", "dominotree", weights="int4", **kw)
    assert [w for w in ch.warnings if "weights" in w] == [
        "the verify-cost profile was made with float32 target weights, this run uses int4"]
    assert not [w for w in auto_choice("test", "cpu", "dominotree", **kw).warnings if "weights" in w]


def test_a_file_measured_with_other_kernels_does_not_fit():
    """Costs measured before the C++ kernels changed (their sources, flags or torch) are not this
    machine's costs: the file says which kernels measured it and does not fit other ones."""
    from dominotree.auto.files import not_made_here
    from dominotree.machine import hardware_info
    from dominotree.models.cpuext import kernels_id
    meta = {"hardware": hardware_info("cpu"), "weights": "int4-q8", "dtype": "float32"}
    assert meta["hardware"]["kernels"] == kernels_id()
    assert not_made_here(meta, "cpu", "int4-q8", "float32") == []
    meta["hardware"]["kernels"] = "k00000000"
    assert [w.split()[0] for w in not_made_here(meta, "cpu", "int4-q8", "float32")] == ["kernels"]
    del meta["hardware"]["kernels"]                     # an older file that does not say
    assert [w.split()[0] for w in not_made_here(meta, "cpu", "int4-q8", "float32")] == ["kernels"]


def test_the_page_opens_with_auto_for_the_pairs_default_draft_vocabulary(tmp_path, monkeypatch):
    """The auto checkbox as the page opens reads the calibration of the pair's default draft
    vocabulary (the embedded pair's 8192 tokens, what ``calibrate-budget`` makes by default), not
    the full vocabulary's."""
    import ui.controls as controls
    from ui.backend import ModelChoice
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(controls, "default_draft_vocab", lambda preset: 8192)
    choice = ModelChoice(preset="random-tiny", device="cpu")
    _calibrated_here(choice, draft_vocab=8192)
    assert controls.auto_budget_control(choice)["interactive"] is True
    assert controls.auto_budget_control(choice, 0)["interactive"] is False      # the full vocabulary: none


@pytest.mark.slow        # two calibrations, ~9 s
def test_this_machines_files_from_other_kernels_are_measured_again(cli, tmp_path, monkeypatch):
    """This machine's cached profile and calibration, measured before the C++ kernels changed,
    sit where the new ones will be saved: `auto_choice` (explorer, bench) treats them as missing
    and says why; `generate --budget auto` measures both again and then uses them."""
    import dominotree.auto.calibrate as K
    from dominotree.auto.budget import auto_choice
    from dominotree.auto.costmodel import load_cost_model
    from dominotree.auto.files import auto_paths
    from dominotree.errors import UserError
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(K, "calibration_prompts", lambda per_category: ["Hello there", "Count to ten"])
    args = ("generate", "--preset", "random-tiny", "--budget", "auto", "--prompt", "Hi", "--max-new-tokens", "8",
            "--json", "--no-warm-up")
    code, out, err = cli(*args)
    assert code == 0 and "calibrating now" in err, err
    used = json.loads(out.strip().splitlines()[-1])["auto"]
    cpath, kpath = Path(used["cost_model"]), Path(used["calibration"])
    for path in (cpath, kpath):                      # as if another kernel build had measured them
        d = json.loads(path.read_text())
        d["meta"]["hardware"]["kernels"] = "k00000000"
        path.write_text(json.dumps(d))
    weights = load_cost_model(cpath).meta.get("weights")
    assert auto_paths("random-tiny", "cpu", "dominotree", weights=weights, dtype="float32") == (cpath, kpath)
    with pytest.raises(UserError, match=r"made on this machine .*made with kernels 'k00000000'"):
        auto_choice("random-tiny", "cpu", "dominotree", "float32", weights=weights)
    code, out, err = cli(*args)
    assert code == 0, err
    assert "made with kernels 'k00000000'" in err and "measuring one now" in err and "calibrating now" in err
    assert "k00000000" not in cpath.read_text() + kpath.read_text()
    # the files fit this machine, kernels, weights and drafters now: no warning. The load check (profile
    # vs calibration, two timings of this run that a busy machine sets apart) is switched off here;
    # its own behaviour is tested with fixed numbers above
    import dominotree.auto.budget as B
    monkeypatch.setattr(B, "PROFILE_SLOW", 0.0)
    assert auto_choice("random-tiny", "cpu", "dominotree", "float32", weights=weights).warnings == ()


def test_calibrate_on_your_own_prompts(cli, tmp_path, monkeypatch):
    """`calibrate-budget --prompts FILE` calibrates on the user's kind of text (the file's prompts,
    recorded in the calibration); a bad file is one clear line before anything is measured or
    written."""
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    mine = tmp_path / "mine.jsonl"
    mine.write_text('{"prompt": "What is 12 times 7?"}\n{"prompt": "Add 3 and 4."}\n{"prompt": "Halve 18."}\n')
    out = tmp_path / "cal.json"
    code, stdout, err = cli("calibrate-budget", "--preset", "random-tiny", "--prompts", str(mine), "--budget-max", "4",
                            "--max-new-tokens", "6", "--out", str(out))
    assert code == 0, err
    last = json.loads(stdout.strip().splitlines()[-1])
    assert last["calibration"] == str(out) and [r["budget"] for r in last["curve"]] == [0, 1, 2, 3, 4]
    meta = json.loads(out.read_text())["meta"]
    assert meta["prompts"] == 3 and meta["prompt_source"] == str(mine)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "no prompt key"}\n')
    code, stdout, err = cli("calibrate-budget", "--preset", "random-tiny", "--prompts", str(bad), "--out",
                            str(tmp_path / "never.json"))
    assert code != 0 and "needs a 'prompt' string or a 'turns' list" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "never.json").exists()


def test_calibration_prompts_are_their_own_set_not_the_benches(cli, tmp_path):
    """``--budget auto`` calibrates on ``assets/prompts/calibrate.jsonl``: the first N of each
    category, categories interleaved, none of them a prompt the benches decode (``eval``); asking
    for more than a category holds is one clear line before any model loads."""
    from dominotree.auto.calibrate import PER_CATEGORY, calibration_prompts, calibration_source
    from dominotree.errors import UserError
    from dominotree.promptfiles import load_assets
    cal, ev = load_assets("calibrate"), load_assets("eval")
    assert sorted({q.category for q in cal}) == ["chat", "code", "math"]
    assert all(sum(q.category == c for q in cal) == 16 for c in ("chat", "code", "math"))
    assert not {q.turns[0] for q in cal} & {q.turns[0] for q in ev}
    first = {c: [q.turns[0] for q in cal if q.category == c] for c in ("chat", "code", "math")}
    three = calibration_prompts(3)
    assert three == [first[c][i] for i in range(3) for c in ("chat", "code", "math")]
    assert len(calibration_prompts()) == 3 * PER_CATEGORY and calibration_prompts(16)[-1] == first["math"][15]
    assert calibration_source(3) == "calibration set, first 3 per category"
    for n in (0, 17):
        with pytest.raises(UserError, match="16 prompts per category"):
            calibration_prompts(n)
    code, _, err = cli("calibrate-budget", "--preset", "random-tiny", "--per-category", "17", "--out",
                       str(tmp_path / "never.json"))
    assert code != 0 and "16 prompts per category" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "never.json").exists()


def test_costs_measured_with_the_amx_path_on_are_other_costs(monkeypatch):
    """Turning the AMX path on (the default on AMX CPUs) changes what a wide verify costs: the kernels'
    id says so, and files measured with it off do not fit (and the other way round)."""
    from dominotree.auto.files import not_made_here
    from dominotree.machine import hardware_info
    from dominotree.models import cpuext
    if cpuext.available(verbose=False) is not None:
        pytest.skip("the C++ kernels are not built here")
    monkeypatch.setattr(cpuext, "amx_min_rows", lambda: 0)        # off (it is on by default on AMX CPUs)
    off = {"hardware": hardware_info("cpu"), "weights": "int4-q8", "dtype": "float32"}
    assert "-amx" not in off["hardware"]["kernels"]
    monkeypatch.setattr(cpuext, "amx_min_rows", lambda: 5)
    assert cpuext.kernels_id() == off["hardware"]["kernels"] + "-amx5"
    assert [w.split()[0] for w in not_made_here(off, "cpu", "int4-q8", "float32")] == ["kernels"]
    on = {"hardware": hardware_info("cpu"), "weights": "int4-q8", "dtype": "float32"}
    assert not_made_here(on, "cpu", "int4-q8", "float32") == []


def test_a_calibration_that_timed_the_verify_predicts_with_it(tmp_path):
    """Version 3: the verify stage timed at grid budgets replaces the profile's model of it (an
    absurd profile changes ar's side only), linear between grid budgets; it survives a save and
    a load; a grid that does not match its times is refused."""
    from dominotree.auto.budget import load_calibration
    accept = [[min(1 + b // 2, 5) for b in range(1, 9)] for _ in range(3)]
    kw = dict(method="dominotree", budget_max=8, starts=[50, 60, 70], accept=accept, draft_ms=2.0, commit_ms=0.1,
              build_grid=[1, 8], build_ms=[0.5, 1.2], meta={}, ar_starts=[50, 51], ar_ms=[5.0, 5.0])
    cal = Calibration(**kw, verify_grid=[1, 2, 4, 8], verify_grid_ms=[5.5, 6.0, 7.0, 11.0])
    assert cal.verify_at(3) == 6.5 and cal.verify_at(1) == 5.5 and cal.verify_at(6) == 9.0
    for cm in (CostModel.synthetic(base_ms=5.0, per_node_ms=0.1), CostModel.synthetic(base_ms=5.0, per_node_ms=9.0)):
        rows = curve(cal, cm)
        for b in range(1, 9):
            assert rows[b]["round_ms"] == pytest.approx(cal.draft_at(b) + cal.build_at(b) + cal.verify_at(b) + 0.1)
    old = Calibration(**kw)                                           # version 2: the profile's model
    assert old.verify_at(2) is None      # the profile's model: base 5 + 9 per node at budget 2 (scale 1: ar's 5 ms)
    assert curve(old, CostModel.synthetic(per_node_ms=9.0))[2]["round_ms"] == pytest.approx(
        old.draft_at(2) + old.build_at(2) + 5.0 + 9.0 * 2 + 0.1)
    path = cal.save(tmp_path / "cal.json")
    back = load_calibration(path)
    assert back.verify_grid == [1, 2, 4, 8] and back.verify_grid_ms == cal.verify_grid_ms
    assert json.loads(path.read_text())["version"] == 5
    with pytest.raises(ValueError, match="verify_grid"):
        Calibration(**kw, verify_grid=[2, 1], verify_grid_ms=[6.0, 5.5])
    with pytest.raises(ValueError, match="verify_grid"):
        Calibration(**kw, verify_grid=[1, 2], verify_grid_ms=[6.0])


def test_version_4_prices_the_commit_per_budget(tmp_path):
    """Version 4: the commit stage timed at each verify-grid budget (a small tree's commit is cheaper
    than the calibration tree's) replaces the one commit time in the round, linear between grid
    budgets; it survives a save and a load; a commit grid without a verify grid, or of another
    length, is refused."""
    from dominotree.auto.budget import load_calibration
    accept = [[min(1 + b // 2, 5) for b in range(1, 9)] for _ in range(3)]
    kw = dict(method="dominotree", budget_max=8, starts=[50, 60, 70], accept=accept, draft_ms=2.0, commit_ms=0.5,
              build_grid=[1, 8], build_ms=[0.5, 1.2], meta={}, ar_starts=[50, 51], ar_ms=[5.0, 5.0])
    cal = Calibration(**kw, verify_grid=[1, 2, 4, 8], verify_grid_ms=[5.5, 6.0, 7.0, 11.0],
                      commit_grid_ms=[0.04, 0.05, 0.07, 0.11])
    assert cal.commit_at(1) == 0.04 and cal.commit_at(3) == pytest.approx(0.06) and cal.commit_at(8) == 0.11
    rows = curve(cal, CostModel.synthetic(base_ms=5.0, per_node_ms=0.1))
    for b in range(1, 9):
        assert rows[b]["round_ms"] == pytest.approx(cal.draft_at(b) + cal.build_at(b) + cal.verify_at(b) + cal.commit_at(b))
    assert Calibration(**kw).commit_at(3) == 0.5                     # before version 4: the one commit time
    back = load_calibration(cal.save(tmp_path / "cal.json"))
    assert back.commit_grid_ms == cal.commit_grid_ms and back.commit_at(3) == cal.commit_at(3)
    with pytest.raises(ValueError, match="commit_grid_ms"):
        Calibration(**kw, commit_grid_ms=[0.1])
    with pytest.raises(ValueError, match="commit_grid_ms"):
        Calibration(**kw, verify_grid=[1, 2], verify_grid_ms=[6.0, 6.5], commit_grid_ms=[0.1])


def test_version_5_prices_ar_on_the_timing_passs_clock(tmp_path):
    """Version 5: ``ar``'s round as timed beside the trees (``ar_timed_ms``) is budget 0's price and
    the unit of every ``round_ar_steps``, whatever the main pass's ar rounds and the profile say;
    it survives a save and a load; a calibration without it keeps the profile's ar; a time that is
    not positive, or one without a verify grid, is refused."""
    from dominotree.auto.budget import load_calibration
    accept = [[min(1 + b // 2, 5) for b in range(1, 9)] for _ in range(3)]
    kw = dict(method="dominotree", budget_max=8, starts=[50, 60, 70], accept=accept, draft_ms=2.0, commit_ms=0.5,
              build_grid=[1, 8], build_ms=[0.5, 1.2], meta={}, ar_starts=[50, 51], ar_ms=[5.0, 5.0],
              verify_grid=[1, 2, 4, 8], verify_grid_ms=[5.5, 6.0, 7.0, 11.0], commit_grid_ms=[0.04, 0.05, 0.07, 0.11])
    cm = CostModel.synthetic(base_ms=5.0, per_node_ms=0.1)
    before = curve(Calibration(**kw), cm)
    assert before[0]["round_ms"] == pytest.approx(5.0)             # the main pass's ar rounds
    cal = Calibration(**kw, ar_timed_ms=4.0)
    rows = curve(cal, cm)
    assert rows[0]["round_ms"] == 4.0
    for b in range(1, 9):
        assert rows[b]["round_ms"] == pytest.approx(before[b]["round_ms"])      # the trees' prices as before
        assert rows[b]["round_ar_steps"] == pytest.approx(rows[b]["round_ms"] / 4.0)
        assert rows[b]["speedup"] == pytest.approx(before[b]["speedup"] * 4.0 / 5.0)
    back = load_calibration(cal.save(tmp_path / "cal.json"))
    assert back.ar_timed_ms == 4.0 and curve(back, cm) == rows
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="ar_timed_ms"):
            Calibration(**kw, ar_timed_ms=bad)
    with pytest.raises(ValueError, match="ar_timed_ms"):
        Calibration(**{k: v for k, v in kw.items() if k not in ("verify_grid", "verify_grid_ms", "commit_grid_ms")},
                    ar_timed_ms=4.0)
