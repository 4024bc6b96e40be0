"""The pair's default draft vocabulary (``presets.DEFAULT_DRAFT_VOCAB``): the embedded pair drafts over
its 8192 most frequent tokens unless asked otherwise, every other pair over the full vocabulary;
``--draft-vocab 0`` (bench ``/vfull``) asks for the full one. The default is resolved once the pair
is loaded and recorded everywhere a run is described (``generate --json``, the trace, the bench's
labels, records and tables, the auto budget's calibration file); outputs stay ``==`` ``ar``'s; bad
sizes are one clear error before anything runs.

The command-line tests give the tiny pair a ranked file and a default of 64 tokens (the embedded
pair's 8192 is more than the tiny vocabulary), so the path the embedded pair takes runs in seconds.
"""
import json
import random

import pytest

from dominotree import presets
from dominotree.config import ConfigError, DecodeConfig, TreeConfig
from dominotree.presets import EMBEDDED_DRAFTER_DIRS, EMBEDDED_DRAFTERS, Pair, default_draft_vocab

N = 64          # the tiny pair's default in these tests


def embedded_paths() -> dict:
    return {k: str(p) for k, p in EMBEDDED_DRAFTER_DIRS.items()}


@pytest.fixture
def vocab_pair(tiny_pair, tmp_path, monkeypatch):
    """The tiny pair with a shuffled ranked file and a default of ``N`` tokens."""
    path = tmp_path / "draft-vocab.json"
    ranked = list(range(tiny_pair.target.vocab_rows))
    random.Random(0).shuffle(ranked)
    path.write_text(json.dumps({"ranked_ids": ranked}))
    monkeypatch.setattr(presets, "DEFAULT_DRAFT_VOCAB", {"random-tiny": N})
    pair = Pair(tiny_pair.target, tiny_pair.drafters, tiny_pair.name, tiny_pair.paths)
    pair.draft_vocab_file = lambda: path
    return pair


@pytest.fixture
def cli(vocab_pair, cli_for):
    return cli_for(vocab_pair)


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


# --- the rule --------------------------------------------------------------------------------------

def test_the_embedded_pair_defaults_to_8192_tokens_and_every_other_pair_to_the_full_vocabulary(tiny_pair, tmp_path):
    assert presets.DEFAULT_DRAFT_VOCAB == {"smollm2": 8192}
    assert (EMBEDDED_DRAFTERS / "draft-vocab.json").is_file()
    assert default_draft_vocab("smollm2") == 8192
    for name in ("random-tiny", "qwen3-4b", "qwen3-8b", "custom", None):
        assert default_draft_vocab(name) == 0, name
    assert default_draft_vocab("smollm2", tmp_path / "none.json") == 0     # no ranked file: the full vocabulary
    smol = Pair(tiny_pair.target, tiny_pair.drafters, "smollm2", embedded_paths())
    assert smol.default_draft_vocab == 8192
    assert smol.resolve_draft_vocab(None, "dominotree") == 8192
    assert smol.resolve_draft_vocab(None, "ddtree") == 8192
    assert smol.resolve_draft_vocab(None, "ar") == 0            # ar drafts nothing
    assert smol.resolve_draft_vocab(0, "dominotree") == 0       # --draft-vocab 0: the full vocabulary
    assert smol.resolve_draft_vocab(16384, "dominotree") == 16384
    custom = Pair(tiny_pair.target, tiny_pair.drafters, "custom", embedded_paths())
    assert custom.default_draft_vocab == 0 and custom.resolve_draft_vocab(None, "dominotree") == 0
    assert tiny_pair.default_draft_vocab == 0 and tiny_pair.resolve_draft_vocab(None, "dominotree") == 0
    assert Pair(tiny_pair.target, name="smollm2").default_draft_vocab == 0    # no drafters
    assert DecodeConfig().draft_vocab == 0                                     # the library keeps the paper's


def test_bad_sizes_are_clear_errors(tiny_pair):
    smol = Pair(tiny_pair.target, tiny_pair.drafters, "smollm2", embedded_paths())
    for bad in (-1, True, "8192"):
        with pytest.raises(ConfigError, match="draft_vocab must be an integer >= 0"):
            smol.resolve_draft_vocab(bad, "dominotree")
    with pytest.raises(ConfigError, match="has 32768 .*choose 1 to 32768, or 0 for the full vocabulary"):
        smol.resolve_draft_vocab(49152, "dominotree")
    with pytest.raises(ConfigError, match="no draft vocabulary at"):
        tiny_pair.resolve_draft_vocab(16, "dominotree")


def test_the_explorer_dropdown_defaults_to_the_pairs_vocabulary(tiny_decoder):
    from ui.backend import ModelChoice
    from ui.controls import DRAFT_VOCABS, draft_vocab_default, draft_vocab_size
    assert draft_vocab_size(draft_vocab_default(ModelChoice(preset="smollm2"))) == 8192
    for choice in (ModelChoice(preset="random-tiny"), ModelChoice(preset="qwen3-4b"),
                   ModelChoice(target="/some/target", drafters=("/some/drafter",))):
        assert draft_vocab_default(choice) == "full vocabulary (paper)"
    assert draft_vocab_default(ModelChoice(preset="smollm2"), tiny_decoder) == "full vocabulary (paper)"  # the loaded pair's
    assert "full vocabulary (paper)" in DRAFT_VOCABS and DRAFT_VOCABS["full vocabulary (paper)"] == 0   # still a choice


# --- generate --------------------------------------------------------------------------------------

def test_generate_resolves_and_records_the_default(cli, tmp_path):
    """No --draft-vocab: the pair's default, in the JSON and the trace, and the output == ar's;
    --draft-vocab 0: the full vocabulary; ar drafts nothing and records 0."""
    base = ["generate", "--preset", "random-tiny", "--prompt", "Tell me a story", "--max-new-tokens", "24",
            "--budget", "8", "--json", "--no-warm-up"]
    code, out, err = cli(*base, "--method", "ar")
    assert code == 0, err
    ar = last_json(out)
    assert ar["draft_vocab"] == 0
    code, out, err = cli(*base, "--method", "dominotree", "--trace", str(tmp_path / "t.json"))
    assert code == 0, err
    got = last_json(out)
    assert got["draft_vocab"] == N
    assert got["token_ids"] == ar["token_ids"]
    assert json.loads((tmp_path / "t.json").read_text())["config"]["draft_vocab"] == N
    code, out, err = cli(*base, "--method", "dominotree", "--draft-vocab", "0", "--trace", str(tmp_path / "f.json"))
    assert code == 0, err
    full = last_json(out)
    assert full["draft_vocab"] == 0 and full["token_ids"] == ar["token_ids"]
    assert json.loads((tmp_path / "f.json").read_text())["config"]["draft_vocab"] == 0


def test_generate_refuses_bad_sizes_and_writes_nothing(cli, tmp_path):
    base = ["generate", "--preset", "random-tiny", "--prompt", "Hi", "--max-new-tokens", "4", "--no-warm-up",
            "--trace", str(tmp_path / "t.json")]
    for bad, says in (("-1", "draft_vocab must be an integer >= 0"), ("lots", "draft_vocab must be an integer >= 0"), ("100000", "choose 1 to 320")):
        code, out, err = cli(*base, "--draft-vocab", bad)
        assert code == 2, (bad, err)
        assert says in err and "Traceback" not in err, (bad, err)
        assert not (tmp_path / "t.json").exists()


def test_auto_on_the_default_measures_and_reads_its_own_calibration(cli, tmp_path, monkeypatch):
    """``--budget auto`` without --draft-vocab calibrates (once) the default vocabulary's runs, in
    ``budget_dominotree_v<N>.json``; ``--draft-vocab 0`` has its own file."""
    import dominotree.auto.calibrate as K
    monkeypatch.setenv("DOMINOTREE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(K, "calibration_prompts", lambda per_category: ["Hello there", "Count to ten"])
    base = ["generate", "--preset", "random-tiny", "--budget", "auto", "--prompt", "Hi", "--max-new-tokens", "8",
            "--json", "--no-warm-up"]
    code, out, err = cli(*base)
    assert code == 0, err
    assert "calibrating now" in err
    got = last_json(out)
    cal = got["auto"]["calibration"]
    assert cal.endswith(f"budget_dominotree_v{N}.json") and got["draft_vocab"] == N
    assert json.loads(open(cal).read())["meta"]["draft_vocab"] == N
    code, out, err = cli(*base)
    assert code == 0 and "calibrating now" not in err and f"using budget calibration {cal}" in err
    code, out, err = cli(*base, "--draft-vocab", "0")
    assert code == 0, err
    assert "calibrating now" in err and last_json(out)["auto"]["calibration"].endswith("budget_dominotree.json")


# --- bench -----------------------------------------------------------------------------------------

def test_bench_specs_name_the_vocabulary_they_resolve_to(vocab_pair, tiny_pair):
    from dominotree.bench.variants import parse_variant, parse_variants, resolve_variants
    from dominotree.errors import UserError
    assert parse_variant("dominotree@3", TreeConfig()).draft_vocab is None          # the pair's default
    for spec in ("dominotree@3/vfull", "dominotree@3/v0"):
        v = parse_variant(spec, TreeConfig())
        assert (v.label, v.draft_vocab) == ("dominotree@3/vfull", 0)
    vs = resolve_variants(vocab_pair, parse_variants("ar,dominotree@3,dominotree@3/vfull,ddtree/v32,domino/m16",
                                                     TreeConfig()))
    assert [(v.label, v.draft_vocab) for v in vs] == [("ar", 0), (f"dominotree@3/v{N}", N), ("dominotree@3", 0),
                                                      ("ddtree/v32", 32), (f"domino/m16/v{N}", N)]
    vs = resolve_variants(tiny_pair, parse_variants("dominotree@3,ddtree/vfull", TreeConfig()))
    assert [(v.label, v.draft_vocab) for v in vs] == [("dominotree@3", 0), ("ddtree", 0)]
    with pytest.raises(UserError, match=f"'dominotree' and 'dominotree/v{N}' both run as 'dominotree/v{N}'"):
        resolve_variants(vocab_pair, parse_variants(f"dominotree,dominotree/v{N}", TreeConfig()))
    with pytest.raises(UserError, match="choose 1 to 320"):
        resolve_variants(vocab_pair, parse_variants("dominotree/v1000", TreeConfig()))


def test_bench_labels_records_and_tables_show_the_resolved_vocabulary(cli, tmp_path):
    import pandas as pd
    (tmp_path / "p.jsonl").write_text('{"prompt": "Hi"}\n{"prompt": "Tell me a story"}\n')
    code, out, err = cli("bench", "--preset", "random-tiny", "--prompts", str(tmp_path / "p.jsonl"), "--methods",
                         "ar,dominotree,dominotree@4/vfull", "--max-new-tokens", "12", "--no-progress", "--no-warmup",
                         "--no-figures", "--out", str(tmp_path / "o"))
    assert code == 0, err
    last = last_json(out)
    labels = [f"dominotree/v{N}", "dominotree@4"]
    assert set(last["methods"]) == {"ar", *labels}
    assert [last["methods"][k]["draft_vocab"] for k in labels] == [N, 0]
    assert all(last["methods"][k]["lossless"] is True for k in labels)
    run = json.loads((tmp_path / "o" / "run.json").read_text())
    assert [(m["label"], m["draft_vocab"]) for m in run["methods"]] == [("ar", 0), (labels[0], N), (labels[1], 0)]
    df = pd.read_csv(tmp_path / "o" / "summary.csv")
    ov = df[df["scope"] == "overall"].set_index("label")
    assert ov.loc[labels[0], "draft_vocab"] == N and ov.loc[labels[1], "draft_vocab"] == 0
    from dominotree.bench.run import answers_path
    recs = [json.loads(x) for x in answers_path(tmp_path / "o", 0.0, labels[0]).read_text().splitlines()]
    assert recs and all(r["draft_vocab"] == N for r in recs)
    code, out, err = cli("bench", "--preset", "random-tiny", "--prompts", str(tmp_path / "p.jsonl"), "--methods", "ar",
                         "--draft-vocab", "8", "--out", str(tmp_path / "x"))
    assert code == 2 and "per method" in err


def test_profile_rounds_profiles_the_default_vocabulary(cli):
    for extra, want in (((), N), (("--draft-vocab", "0"), 0)):
        code, out, err = cli("profile-rounds", "--preset", "random-tiny", "--dtypes", "float32", "--prompts", "1",
                             "--max-new-tokens", "6", *extra)
        assert code == 0, err
        assert last_json(out)["dtypes"]["float32"]["draft_vocab"] == {"ar": 0, "ddtree": want, "dominotree": want}
        assert (f"draft vocabulary {N} tokens" in out) == bool(want)


def test_claims_read_one_shared_draft_vocabulary_as_the_methods_names():
    """Every drafting method at the pair's default (``dominotree/v8192``, ``ddtree/v8192``): the
    paper's claims compare them under equal settings; mixed vocabularies are not stripped."""
    import pandas as pd
    from dominotree.bench import claims
    rows = [("ar", 1.0, 10.0), ("ddtree/v8192", 1.7, 12.0), ("dominotree/v8192", 1.9, 12.5)]
    df = pd.DataFrame([{"temperature": 0.0, "scope": "overall", "label": l, "method": l.split("/")[0], "tau": tau,
                        "tokens_per_s": tps} for l, tau, tps in rows])
    ci = pd.DataFrame([{"temperature": 0.0, "scope": "overall", "a": "dominotree/v8192", "b": b, "pct": p, "lo": lo,
                        "hi": hi, "n": 36} for b, p, lo, hi in [("ar", 25.0, 10.0, 40.0), ("ddtree/v8192", 4.0, -2.0, 10.0)]])
    found = {c.key: c.reproduced for c in claims.evaluate({"temps": ["0.0"], "summary": df, "ci": ci})}
    assert found == {"highest_tau": True, "highest_throughput": True, "faster_than_ar": True, "faster_than_ddtree": False}
    mixed = df.assign(label=["ar", "ddtree", "dominotree/v8192"])
    assert claims.evaluate({"temps": ["0.0"], "summary": mixed, "ci": ci}) == []


# --- the embedded pair -----------------------------------------------------------------------------

@pytest.mark.slow   # the embedded SmolLM2
def test_the_embedded_pair_decodes_its_default_vocabulary_exactly_as_ar(smollm2_pair):
    from dominotree.decode import Decoder
    pair = smollm2_pair("float32", "float32")
    n = pair.resolve_draft_vocab(None, "dominotree")
    assert n == 8192
    dec = Decoder(pair, annotate=False)
    for prompt in ("What is 17 times 23?", "Write a Python function that reverses a string."):
        ar = dec.generate(prompt, DecodeConfig(method="ar", max_new_tokens=32)).token_ids
        for m in ("dominotree", "ddtree"):
            tr = dec.generate(prompt, DecodeConfig(method=m, max_new_tokens=32, draft_vocab=n))
            assert tr.token_ids == ar, (m, prompt)
            assert tr.config["draft_vocab"] == 8192
