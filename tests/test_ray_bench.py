"""``bench --ray``: on a local Ray cluster of 2 workers (random-tiny, float32, CPU) the sharded bench
writes the local bench's tokens and taus exactly at T = 0, a killed worker's group is retried on
another worker and written once; and the library and CLI never import ray.

The Ray tests are ``slow`` (the full suite runs them, ``-m 'not slow'`` does not): each starts
worker processes that load torch and the pair."""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from dominotree.bench.raybench import mixed_prompts, per_worker_speedups, plan_groups
from dominotree.bench.variants import Variant
from dominotree.cluster import ClusterError, describe_workers, plan_workers
from dominotree.config import TreeConfig

PROMPTS = [{"id": "p1", "category": "chat", "prompt": "Hello there"},
           {"id": "p2", "category": "math", "turns": ["What is 2+2?", "And 3+3?"]},
           {"id": "p3", "category": "code", "prompt": "def f():"}]
ARGS = ["--methods", "ar,dominotree,ddtree", "--max-new-tokens", "8", "--no-figures"]


def test_importing_the_library_and_cli_does_not_import_ray():
    code = ("import sys, dominotree, dominotree.cli, dominotree.bench.cli, dominotree.bench.raybench, "
            "dominotree.cluster, dominotree.serving, dominotree.train.trainer, dominotree.train.distributed\n"
            "dominotree.cli.build_parser(); dominotree.bench.cli.build_parser()\n"
            "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_groups_follow_the_local_order_and_skip_finished_rows():
    t = TreeConfig()
    vs = [Variant("ar", "ar", t), Variant("dominotree", "dominotree", t), Variant("ddtree", "ddtree", t)]
    ps = [SimpleNamespace(id=f"q{i}") for i in range(3)]
    gs = plan_groups(ps, vs, [0.0, 1.0], done={("0.0", "ddtree", "q1"), ("1.0", "ar", "q0"),
                                               ("1.0", "dominotree", "q0"), ("1.0", "ddtree", "q0")})
    assert [(g.temperature, g.prompt.id) for g in gs] == [(0.0, "q0"), (0.0, "q1"), (0.0, "q2"), (1.0, "q1"),
                                                          (1.0, "q2")]
    # the local run's rotation: prompt 1 starts with the second method, prompt 2 with the third
    assert [v.label for v in gs[1].variants] == ["dominotree", "ar"]          # ddtree done
    assert [v.label for v in gs[2].variants] == ["ddtree", "ar", "dominotree"]
    assert [g.prompt_idx for g in gs] == [0, 1, 2, 1, 2]


def test_worker_plan_and_names():
    one = {"nodes": 1, "node_cpus": [2]}
    assert plan_workers(one, None, None) == (1, 2)      # one worker per node, all its CPUs
    assert plan_workers(one, 2, None) == (2, 1)
    assert plan_workers({"nodes": 3, "node_cpus": [8, 16, 8]}, None, None) == (3, 8)
    with pytest.raises(ClusterError, match="do not fit"):
        plan_workers(one, 2, 2)
    with pytest.raises(ClusterError, match=">= 1"):
        plan_workers(one, 0, None)
    from dominotree.cluster import _check_reachable
    with pytest.raises(ClusterError, match="no Ray cluster answers at 127.0.0.1:1"):   # seconds, not Ray's minutes
        _check_reachable("127.0.0.1:1")
    with pytest.raises(ClusterError, match="HOST:PORT"):
        _check_reachable("head-without-port")
    ws = [{"cpu": "EPYC", "torch_threads": 1}, {"cpu": "EPYC", "torch_threads": 1}, {"cpu": "Xeon", "torch_threads": 1}]
    assert describe_workers(ws) == "3 Ray workers: EPYC (2 x 1 threads); Xeon (1 x 1 threads)"
    recs = [{"temperature": 0.0, "question_id": "a", "worker": 0}, {"temperature": 0.0, "question_id": "a", "worker": 0},
            {"temperature": 0.0, "question_id": "b", "worker": 0}, {"temperature": 0.0, "question_id": "b", "worker": 1}]
    assert mixed_prompts(recs) == ["T=0.0:b"]
    # per-worker speedups pair each worker's own rows only
    rows = [(0, "a", "ar", 10.0), (0, "a", "dominotree", 20.0), (0, "c", "ar", 10.0), (0, "c", "dominotree", 10.0),
            (1, "b", "ar", 2.0), (1, "b", "dominotree", 1.0)]
    recs = [{"worker": w, "temperature": 0.0, "label": lab, "question_id": q, "tokens_per_s": v} for w, q, lab, v in rows]
    assert per_worker_speedups(recs) == {0: {"0.0": {"dominotree": (1.5, 2)}}, 1: {"0.0": {"dominotree": (0.5, 1)}}}


# --- on a local cluster ----------------------------------------------------------------------------


# ``ray_cluster`` (session scope, a local cluster of 2 CPUs) comes from conftest.py


@pytest.fixture(scope="module")
def prompts_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("ray") / "three.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in PROMPTS))
    return f


def _bench(out, prompts_file, *extra):
    import dominotree.cli as cli
    code = cli.main(["bench", "--preset", "random-tiny", "--no-progress", "--prompts", str(prompts_file),
                     "--out", str(out), *ARGS, *extra])
    assert code == 0
    return json.loads((out / "run.json").read_text())


def _rows(out) -> dict:
    from dominotree.bench.run import read_answers
    recs = read_answers(out)
    rows = {(r["label"], r["question_id"]): r for r in recs}
    assert len(rows) == len(recs), "a (method, prompt) was written twice"
    return rows


@pytest.fixture(scope="module")
def local_rows(tmp_path_factory, prompts_file):
    out = tmp_path_factory.mktemp("ray") / "local"
    _bench(out, prompts_file)
    return _rows(out)


def _same_tokens_and_taus(rows, local_rows):
    assert rows.keys() == local_rows.keys() and len(rows) == 9
    for k, r in rows.items():
        want = local_rows[k]
        assert [c["token_ids"] for c in r["choices"]] == [c["token_ids"] for c in want["choices"]], k
        assert [c["accept_lengths"] for c in r["choices"]] == [c["accept_lengths"] for c in want["choices"]], k
        assert r["tau"] == want["tau"] and r["choices"][0]["seeds"] == want["choices"][0]["seeds"], k


@pytest.mark.slow
def test_sharded_bench_equals_the_local_bench_at_t0(ray_cluster, local_rows, prompts_file, tmp_path, capsys):
    out = tmp_path / "ray"
    run = _bench(out, prompts_file, "--ray", "auto", "--ray-workers", "2")
    rows = _rows(out)
    _same_tokens_and_taus(rows, local_rows)
    ray = run["ray"]
    assert len(ray["workers"]) == 2 and ray["retries"] == [] and ray["mixed_prompts"] == []
    assert sum(ray["groups_per_worker"].values()) == 3
    # every row of a prompt was measured by one worker, and the records name it and its CPU
    for q in ("p1", "p2", "p3"):
        assert len({rows[(m, q)]["worker"] for m in ("ar", "dominotree", "ddtree")}) == 1
    assert all(r["hardware"]["torch_threads"] == 1 for r in rows.values())
    assert run["hardware"]["cpu"].startswith("2 Ray workers: ")
    summary = (out / "summary.md").read_text()
    assert "2 Ray workers: " in summary and "| dominotree | overall |" in summary
    res = json.loads((out / "results.json").read_text())
    assert res["hardware"].startswith("2 Ray workers") and res["methods"]["dominotree"]["lossless"] is True
    assert res["methods"]["ar"]["speedup"] == pytest.approx(1.0)
    workers_md = (out / "workers.md").read_text()
    assert workers_md.count("| dominotree |") == 2 and "| 0 | " in workers_md and "| 1 | " in workers_md
    for name in ("ci.csv", "lossless.csv", "claims.md", "headline.md"):
        assert (out / name).is_file(), name


@pytest.mark.slow
def test_a_killed_workers_group_is_retried_and_written_once(ray_cluster, local_rows, prompts_file, tmp_path,
                                                            monkeypatch, capsys):
    from dominotree.bench.raybench import CRASH_ENV
    monkeypatch.setenv(CRASH_ENV, "p2")     # the worker that first takes p2 exits after its first method
    out = tmp_path / "ray-crash"
    run = _bench(out, prompts_file, "--ray", "auto", "--ray-workers", "2")
    err = capsys.readouterr().err
    assert "died during T=0.0 prompt 'p2'" in err and "goes to another worker" in err
    ray = run["ray"]
    assert [r["while"] for r in ray["retries"]] == ["T=0.0 prompt 'p2'"]
    assert len(ray["workers"]) >= 2          # the two first ones (and the replacement, once it has loaded)
    rows = _rows(out)                        # nothing lost, nothing twice
    _same_tokens_and_taus(rows, local_rows)
    dead = ray["retries"][0]["worker"]
    assert all(rows[(m, "p2")]["worker"] != dead for m in ("ar", "dominotree", "ddtree"))
    assert len({rows[(m, "p2")]["worker"] for m in ("ar", "dominotree", "ddtree")}) == 1
