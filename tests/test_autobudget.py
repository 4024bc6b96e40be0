"""``--budget auto``: the budget-prefix property it rests on, a deterministic choice, and one clear
line when the verify-cost profile is missing; the explorer's auto control.

    .venv/bin/python -m pytest -q tests/test_autobudget.py
"""
from __future__ import annotations

import json

import pytest
import torch

from dominotree.autobudget import Calibration, choose, curve, prefix_accept
from dominotree.bench.build import random_block, random_head
from dominotree.builders import build_lazy, build_reference, get_builder
from dominotree.config import TreeConfig
from dominotree.costmodel import CostModel
from dominotree.scoring import ConditionalScorer, MarginalScorer
from dominotree.tree import accept_walk

B = 24


@pytest.fixture(scope="module")
def heads():
    d, e = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=1)
    t, te = random_head(hidden=64, vocab=600, gru=64, emb=16, seed=2)
    with torch.no_grad():
        t.embed_proj[2].weight.zero_()       # zero correction: equal menus at a depth, many exact ties
    return [(d, e), (t, te)]


def _same_prefix(big, small, b):
    p = big.tree.prefix(b)
    assert (small.tree.tokens, small.tree.parents, small.tree.depths) == (p.tokens, p.parents, p.depths)
    assert small.tree.scores == p.scores and small.tree.marg_scores == p.marg_scores


@pytest.mark.parametrize("name", ["python", "graph", "frontier"])
@pytest.mark.parametrize("scorer", ["conditional", "marginal"])
def test_budget_prefix_property(name, scorer, heads):
    """The first b pops of the budget-B tree are the budget-b tree, for every b <= B, ties included."""
    gen = torch.Generator().manual_seed(30)
    build = get_builder(name)
    for d_e in heads:
        for ties in (False, True):
            block = random_block(*d_e, 12, gen, ties=ties)

            def make():
                if scorer == "marginal":
                    return MarginalScorer(block, 4, 16)
                return ConditionalScorer(block, *d_e, 4, 16)
            state = block.root_state if scorer == "conditional" else None
            big = build(make(), block.root, state, TreeConfig(budget=B, corr_topm=16, node_topk=4), 12)
            assert big.tree.num_nodes == B
            for b in range(1, B):
                small = build(make(), block.root, state, TreeConfig(budget=b, corr_topm=16, node_topk=4), 12)
                _same_prefix(big, small, b)
    assert len(set(big.tree.scores[1:])) < B        # the tie head really tied


def test_budget_prefix_property_ddtree_lazy_heap(heads):
    """DDTree's lazy heap over top-``budget`` marginals: the property holds where the per-depth lists
    have no exact ties (torch.topk orders equal values differently for different k, so at ties the
    top-b list is not a prefix of the top-B list; ``--budget auto`` is therefore not offered for ddtree)."""
    gen = torch.Generator().manual_seed(31)
    for _ in range(3):
        block = random_block(*heads[0], 12, gen)
        lp = torch.log_softmax(block.base_logits.float(), dim=-1)
        vals, ids = torch.topk(lp, B, dim=-1)
        big = build_lazy(ids.tolist(), vals.tolist(), block.root, B)
        for b in range(1, B):
            v, i = torch.topk(lp, b, dim=-1)     # decode.py gives DDTree the top-`budget` per depth
            _same_prefix(big, build_lazy(i.tolist(), v.tolist(), block.root, b), b)


def test_prefix_accept_is_the_walk_on_the_prefix(heads):
    gen = torch.Generator().manual_seed(32)
    block = random_block(*heads[0], 12, gen)
    tree = build_reference(ConditionalScorer(block, *heads[0], 4, 16), block.root, block.root_state,
                           TreeConfig(budget=B, corr_topm=16, node_topk=4), 12).tree
    rng = torch.Generator().manual_seed(33)
    for _ in range(20):   # target tokens that follow the tree for a while, then leave it
        post = [tree.tokens[int(torch.randint(1, B + 1, (1,), generator=rng))] for _ in range(B + 1)]
        acc, _ = accept_walk(tree, post)
        for i, r in enumerate(acc[:-1]):      # make the walk go deep: each accepted row points to its child
            kids = [j for j in range(1, B + 1) if tree.parents[j] == r]
            if kids:
                post[r] = tree.tokens[kids[-1]]
        got = prefix_accept(tree, post, B)
        for b in range(1, B + 1):
            assert got[b - 1] == len(accept_walk(tree.prefix(b), post[:b + 1])[0])
        assert got == sorted(got) and got[-1] == len(accept_walk(tree, post)[0])


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
    from dominotree.autobudget import load_calibration
    from dominotree.costmodel import load_cost_model
    assert choose(load_calibration(tmp_path / "cal.json"), load_cost_model(tmp_path / "cm.json")) == b
    rows = curve(cal, cm)
    best = max(r["predicted_tokens_per_s"] for r in rows)
    assert rows[b - 1]["predicted_tokens_per_s"] == best
    assert all(r["predicted_tokens_per_s"] < best for r in rows[:b - 1])        # the smallest on a tie
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
    assert curve(cal, cm)[0]["round_ms"] < curve(_calibration(), cm)[0]["round_ms"]
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


def test_auto_choice_reads_the_saved_files_and_never_calibrates(tmp_path, monkeypatch):
    """What the explorer uses: the choice from the saved profile and calibration, or one line
    naming the commands that make what is missing; nothing is written."""
    from dominotree.autobudget import apply_auto, auto_available, auto_choice, default_path
    from dominotree.cli import UserError
    from dominotree.config import DecodeConfig
    from dominotree.costmodel import default_path as cost_path
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as e:
        auto_choice("smollm2", "cpu", "dominotree", "bfloat16")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--budget auto needs a verify-cost profile and a dominotree budget "
                                              "calibration for smollm2 on cpu: make them with `python -m dominotree "
                                              "profile-cost --preset smollm2 --dtype bfloat16 --out ")
    assert msg.endswith(", then `python -m dominotree calibrate-budget --preset smollm2 --dtype bfloat16 "
                        "--method dominotree`")
    with pytest.raises(UserError, match="fixed-budget tree methods"):
        auto_choice("smollm2", "cpu", "ddtree")
    assert auto_available("smollm2", "cpu")[0] == {} and "calibrate-budget" in auto_available("smollm2", "cpu")[1]
    assert not (tmp_path / "results").exists()

    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    cm.save(cost_path("smollm2", "cpu"))
    with pytest.raises(UserError, match=r"needs a marg budget calibration for smollm2 on cpu: make it with "
                                        r"`python -m dominotree calibrate-budget --preset smollm2 --dtype float32 "
                                        r"--method marg`$"):
        auto_choice("smollm2", "cpu", "marg")
    cal = _calibration()
    cal.save(default_path("smollm2", "cpu", "dominotree"))
    cal.save(default_path("smollm2", "cpu", "marg"))             # a dominotree calibration under marg's name
    ch = auto_choice("smollm2", "cpu", "dominotree", "float32")
    assert ch.budget == choose(cal, cm) and ch.calibration == default_path("smollm2", "cpu", "dominotree")
    assert ch.warnings == ("the budget calibration was made with preset 'test', this run uses 'smollm2'",)
    with pytest.raises(UserError, match="is for 'dominotree', not 'marg'"):
        auto_choice("smollm2", "cpu", "marg")
    cfgs = [DecodeConfig(method=m) for m in ("ar", "dflash", "ddtree", "marg", "dominotree")]
    out, chosen, notes = apply_auto(cfgs, "smollm2", "cpu")
    assert [c.tree.budget for c in out] == [16, 16, 16, 16, ch.budget] and list(chosen) == ["dominotree"]
    assert len(notes) == 2 and notes[0].startswith("ddtree keeps budget 16: auto is calibrated for")
    assert notes[1].startswith("marg keeps budget 16: budget calibration") and "is for 'dominotree'" in notes[1]


def test_draft_vocabulary_runs_read_their_own_calibration(tmp_path, monkeypatch):
    """``/v8192`` runs read ``..._dominotree_v8192.json`` when it exists, else the full-vocabulary
    calibration with a warning that its draft and build times are not theirs."""
    import dataclasses
    from dominotree.autobudget import apply_auto, auto_choice, default_path
    from dominotree.cli import UserError
    from dominotree.config import DecodeConfig
    from dominotree.costmodel import default_path as cost_path
    monkeypatch.chdir(tmp_path)
    assert default_path("smollm2", "cpu", "dominotree", 8192).name == "budget_smollm2_cpu_dominotree_v8192.json"
    with pytest.raises(UserError, match=r"--method dominotree --draft-vocab 8192`$"):
        auto_choice("smollm2", "cpu", "dominotree", draft_vocab=8192)
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    cm.save(cost_path("smollm2", "cpu"))
    full = _calibration()
    full.meta["preset"] = "smollm2"
    full.save(default_path("smollm2", "cpu", "dominotree"))
    ch = auto_choice("smollm2", "cpu", "dominotree", draft_vocab=8192)
    assert ch.calibration == default_path("smollm2", "cpu", "dominotree")
    assert ch.warnings == ("the budget calibration was made with the full drafter vocabulary, this run uses 8192",)
    # resolve_auto (which calibrates when its file is missing) is pointed at the run's own file
    from dominotree.autobudget import auto_paths
    assert auto_paths("smollm2", "cpu", "dominotree", draft_vocab=8192)[1] == default_path("smollm2", "cpu", "dominotree", 8192)
    assert auto_choice("smollm2", "cpu", "dominotree").warnings == ()
    # its own calibration, with drafts 8 ms cheaper: read for /v8192 only, without a warning
    own = dataclasses.replace(full, draft_ms=full.draft_ms - 8.0, meta={**full.meta, "draft_vocab": 8192})
    own.save(default_path("smollm2", "cpu", "dominotree", 8192))
    ch = auto_choice("smollm2", "cpu", "dominotree", draft_vocab=8192)
    assert ch.calibration == default_path("smollm2", "cpu", "dominotree", 8192) and ch.warnings == ()
    assert ch.budget == choose(own, cm)
    _, chosen, _ = apply_auto([DecodeConfig(method="dominotree", draft_vocab=8192)], "smollm2", "cpu")
    assert chosen["dominotree"].calibration == ch.calibration


# --- from the command line -------------------------------------------------------------------------

@pytest.fixture
def cli(tiny_pair, monkeypatch, capsys, tmp_path):
    import dominotree.cli as C
    monkeypatch.setattr(C, "load_pair_from_args", lambda a: tiny_pair)
    monkeypatch.chdir(tmp_path)

    def run(*argv):
        try:
            code = C.main(list(argv))
        except SystemExit as e:          # argparse's own usage errors
            code = e.code
        cap = capsys.readouterr()
        return code, cap.out, cap.err
    return run


def test_auto_without_a_profile_is_one_clear_line(cli, tmp_path):
    code, out, err = cli("generate", "--preset", "random-tiny", "--budget", "auto", "--prompt", "Hi")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("error: --budget auto needs a verify-cost profile") and "profile-cost" in err
    (tmp_path / "p.jsonl").write_text('{"prompt": "Hi"}\n')
    code, out, err = cli("bench", "--preset", "random-tiny", "--prompts", str(tmp_path / "p.jsonl"), "--methods",
                         "ar,dominotree@auto", "--no-progress", "--out", str(tmp_path / "o"))
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: --budget auto needs a verify-cost profile")
    code, out, err = cli("generate", "--preset", "random-tiny", "--budget", "many", "--prompt", "Hi")
    assert code == 2 and "integer or auto" in err


def test_bench_auto_variant_reports_the_choice_and_curve(cli, tiny_pair, tmp_path):
    from dominotree.bench.calibrate import calibrate
    from dominotree.bench.figures import auto_budget_figure
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
    assert auto_budget_figure(res) is not None


# --- in the explorer ------------------------------------------------------------------------------

def test_budget_auto_uses_the_calibration_or_says_why_not(tmp_path, monkeypatch):
    """The explorer's auto budget: off, with the one line that names the commands, while this pair
    and device have no calibration (a run keeps the slider's budget and says so); with one, the
    calibrated tree methods get its budget, the others keep the slider's, and the note says which."""
    import types
    pytest.importorskip("gradio")

    from dominotree.autobudget import default_path
    from dominotree.config import DecodeConfig, TreeConfig
    from dominotree.costmodel import default_path as cost_path
    from ui.backend import ModelChoice
    from ui.controls import auto_budget_control, auto_budgets
    from ui.panes import auto_html
    monkeypatch.chdir(tmp_path)                 # the default paths are results/... of the working directory
    choice = ModelChoice(preset="random-tiny", device="cpu")
    cfgs = [DecodeConfig(method=m, tree=TreeConfig(budget=24)) for m in ("ar", "ddtree", "dominotree")]
    ctl = auto_budget_control(choice)
    assert ctl["interactive"] is False and ctl["value"] is False and "\n" not in ctl["info"]
    assert "`python -m dominotree profile-cost --preset random-tiny" in ctl["info"]
    assert "`python -m dominotree calibrate-budget --preset random-tiny --dtype float32 --method dominotree`" in ctl["info"]
    assert auto_budgets(cfgs, choice, False) == (cfgs, {}, "")
    out, chosen, note = auto_budgets(cfgs, choice, True)
    assert out == cfgs and chosen == {}
    assert "ddtree keeps budget 24: auto is calibrated for marg, condstatic, dominotree only" in note
    assert "dominotree keeps budget 24: --budget auto needs" in note and "calibrate-budget" in note

    accept = [[min(1 + b // k, 6) for b in range(1, 33)] for k in (2, 3, 5, 8)]
    cal = Calibration("dominotree", 32, [100, 140, 180, 220], accept, draft_ms=9.0, commit_ms=0.7,
                      build_grid=[1, 4, 16, 32], build_ms=[0.6, 1.0, 2.5, 4.5],
                      meta={"preset": "random-tiny", "dtype": "float32", "created": "2025-05-01T10:00:00Z"})
    cm = CostModel.synthetic(draft_ms=9.0, base_ms=35.0, per_node_ms=0.9, quad_ms=0.002)
    cm.save(cost_path("random-tiny", "cpu"))
    cal.save(default_path("random-tiny", "cpu", "dominotree"))
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
    from dominotree.autobudget import auto_choice
    from dominotree.bench.machine import hardware_info
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
    from dominotree.autobudget import auto_choice
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
