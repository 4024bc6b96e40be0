"""The CLI: `generate --json` on random-tiny, and every user mistake ends with one readable
line on stderr, a non-zero exit, no traceback and nothing written.

Run: HF_HUB_OFFLINE=1 .venv/bin/python -m pytest -q tests/test_cli.py
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dominotree.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *args):
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.slow   # a fresh Python process, ~6 s
def test_generate_json_subprocess(tmp_path):
    trace = tmp_path / "t.json"
    p = subprocess.run([sys.executable, "-m", "dominotree", "generate", "--preset", "random-tiny", "--method",
                        "dominotree", "--prompt", "Hello", "--json", "--max-new-tokens", "12", "--trace", str(trace)],
                       cwd=ROOT, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                       timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    for k in ("method", "token_ids", "text", "tau", "rounds", "new_tokens", "tokens_per_s", "stage_ms"):
        assert k in out
    assert out["method"] == "dominotree" and out["new_tokens"] == len(out["token_ids"]) >= 1
    assert set(out["stage_ms"]) == {"draft", "build", "verify", "commit"}
    assert json.loads(trace.read_text())["schema"] == "dominotree.trace"


def test_generate_matches_ar_in_process(capsys):
    outs = {}
    for m in ("ar", "dominotree", "ddtree"):
        rc, out, err = run(capsys, "generate", "--preset", "random-tiny", "--method", m, "--prompt", "Hi there",
                           "--json", "--max-new-tokens", "16")
        assert rc == 0, err
        outs[m] = json.loads(out.strip().splitlines()[-1])["token_ids"]
    assert outs["ar"] == outs["dominotree"] == outs["ddtree"]


def test_warm_up_leaves_sampled_output_unchanged(capsys):
    """generate's untimed warm-up decode does not move the sampler: --no-warm-up gives the same
    tokens at T > 0 with the same seed."""
    outs = []
    for extra in ([], ["--no-warm-up"]):
        rc, out, err = run(capsys, "generate", "--preset", "random-tiny", "--method", "dominotree", "--prompt",
                           "Hi there", "--json", "--max-new-tokens", "16", "--temperature", "0.9", "--seed", "3",
                           *extra)
        assert rc == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1])["token_ids"])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("args,needle", [
    (["--prompt", ""], "prompt is empty"),
    (["--prompt", "   "], "prompt is empty"),
    (["--prompt", "hi", "--temperature", "-1"], "temperature"),
    (["--prompt", "hi", "--budget", "-1"], "budget"),
    (["--prompt", "hi", "--budget", "100000"], "budget"),
    (["--prompt", "hi", "--node-topk", "0"], "node_topk"),
    (["--prompt", "hi", "--max-new-tokens", "0"], "max_new_tokens"),
    (["--prompt", "hi", "--max-new-tokens", "1000000"], "exceeds the target's context"),
    (["--prompt", "hi", "--preset", "nope"], "unknown preset"),
    (["--prompt", "hi", "--preset", None, "--target", "/does/not/exist"], "does not exist"),
    (["--prompt", "hi", "--preset", None, "--target", "TARGET", "--drafter", "/no/drafter"], "does not exist"),
    (["--prompt", "hi", "--method", "caddtree"], "cost model"),
])
def test_bad_input_is_one_clear_line(capsys, tmp_path, tiny_pair, args, needle):
    base = ["generate", "--preset", "random-tiny", "--trace", str(tmp_path / "t.json")]
    if None in args:
        i = args.index(None)
        base = ["generate", "--trace", str(tmp_path / "t.json")]
        args = args[:i - 1] + args[i + 1:]
    args = [tiny_pair.paths["target"] if a == "TARGET" else a for a in args]
    rc, out, err = run(capsys, *base, *args)
    assert rc != 0
    lines = [l for l in err.strip().splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "t.json").exists()


def test_unknown_method_exits_nonzero(capsys):
    with pytest.raises(SystemExit) as e:
        main(["generate", "--preset", "random-tiny", "--prompt", "hi", "--method", "nope"])
    assert e.value.code != 0
    assert "invalid choice" in capsys.readouterr().err


def test_wrong_checkpoint_for_method(capsys, tiny_pair):
    rc, out, err = run(capsys, "generate", "--target", tiny_pair.paths["target"], "--drafter",
                       tiny_pair.paths["domino"], "--method", "ddtree", "--prompt", "hi")
    assert rc == 2 and "needs a dflash drafter" in err.lower() or "DFlash checkpoint" in err, err


def test_library_never_imports_gradio():
    code = ("import sys, dominotree, dominotree.decode, dominotree.cli, dominotree.view.export, dominotree.view.figures, "
            "dominotree.view.charts, dominotree.view.layout, dominotree.presets, dominotree.trace\n"
            "assert 'gradio' not in sys.modules, 'gradio imported'\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def test_drafter_without_target_replaces_the_presets_drafters(tmp_path):
    """--drafter alone keeps the preset's target and weights (the A/B of a trained pair against the
    shipped one); a missing folder is a clear error before anything loads."""
    import argparse
    import shutil

    from dominotree.pairargs import add_model_args, load_pair_from_args
    from dominotree.models.random_tiny import ensure_random_tiny
    from dominotree.errors import UserError

    paths = ensure_random_tiny()
    other = tmp_path / "domino-copy"
    shutil.copytree(paths["domino"], other)
    ap = argparse.ArgumentParser()
    add_model_args(ap)
    pair = load_pair_from_args(ap.parse_args(["--preset", "random-tiny", "--drafter", str(other)]))
    assert pair.paths["domino"] == str(other) and pair.paths["target"] == paths["target"]
    assert pair.paths["dflash"] == paths["dflash"]
    with pytest.raises(UserError, match="folder does not exist"):
        load_pair_from_args(ap.parse_args(["--preset", "random-tiny", "--drafter", str(tmp_path / "nope")]))
