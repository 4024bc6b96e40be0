"""``train --ray``: a 2-worker Ray Train step (gloo on CPU) gives the 1-worker step's gradients, and
its ``--state`` is the local trainer's (``trainer --resume`` continues it).

Tolerance: the two runs add the same per-row float32 cross-entropy gradients in a different order
(each rank sums its own sequences, then the ranks' sums are added in float64), so they agree to
float32 rounding: rtol 1e-4, atol 1e-6 x the largest gradient entry. Every row is kept (``--gamma
1e12`` makes every row weight exactly 1.0 in float32) and every anchor taken (``--anchors 200``), so
the random draws that differ between one process and two do not enter the step."""
from __future__ import annotations

import pytest
import torch

from dominotree.train import trainer as T
from dominotree.train.distributed import DataParallel, check_train_argv, rank_argv, split_ray_args, train_main
from test_trainer import tiny  # noqa: F401  (the tiny Llama target and its data folder)

STEP = ["--layers", "1", "--intermediate", "96", "--taps", "0,1,3", "--gru-hidden", "32", "--emb-dim", "16",
        "--mask-token-id", "3", "--batch", "4", "--anchors", "200", "--gamma", "1e12", "--no-amp", "--n-eval", "2",
        "--threads", "1"]


def _argv(tiny, out, *extra):
    return ["--target", str(tiny / "target"), "--data", str(tiny / "data"), "--out-dflash", str(out / "dflash"),
            "--out-domino", str(out / "domino"), *STEP, *extra]


def test_ray_flags_and_the_step_schedule():
    ra, rest = split_ray_args(["--ray", "--ray-workers", "2", "--max-steps", "3", "--lr", "1e-3"])
    assert (ra.ray, ra.ray_workers, rest) == ("auto", 2, ["--max-steps", "3", "--lr", "1e-3"])
    assert split_ray_args(["--ray", "head:6379"])[0].ray == "head:6379"
    assert check_train_argv(["--max-steps", "3"])[-2:] == ["--time-budget-min", "0"]
    for bad, why in ((["--lr", "1"], "--max-steps"), (["--max-steps", "2", "--run-minutes", "5"], "--run-steps"),
                     (["--max-steps", "2", "--time-budget-min", "60"], "step schedule")):
        with pytest.raises(SystemExit, match=why):
            check_train_argv(bad)
    assert DataParallel(1, 2).share([0, 1, 2, 3, 4]) == [1, 3]
    with pytest.raises(SystemExit, match="smaller than"):
        DataParallel(0, 3).share([0, 1])


def test_other_ranks_write_to_scratch(tmp_path):
    (tmp_path / "s.pt").write_bytes(b"x")
    argv = ["--out-dflash", "D", "--out-domino", "M", "--log", "L", "--state", str(tmp_path / "s.pt"), "--batch", "4"]
    assert rank_argv(argv, 0, tmp_path / "r", False) == argv
    got = rank_argv(argv, 1, tmp_path, True)
    assert "D" not in got and "L" not in got and "--log" not in got and got.count("--state") == 1
    assert got[got.index("--state") + 1] == str(tmp_path / "state.pt") and (tmp_path / "state.pt").read_bytes() == b"x"
    assert "--resume" in got and got[got.index("--batch") + 1] == "4"


# ``ray_cluster`` (session scope, a local cluster of 2 CPUs) comes from conftest.py


@pytest.mark.slow
def test_two_worker_step_equals_one_worker_gradients_and_resumes_locally(ray_cluster, tiny, tmp_path):  # noqa: F811
    one, two = tmp_path / "one", tmp_path / "two"
    sched = ["--max-steps", "2", "--time-budget-min", "0"]
    assert T.main(_argv(tiny, one, *sched, "--run-steps", "1"), dist=DataParallel(0, 1, str(tmp_path / "g1.pt"))) == 0
    ray_argv = _argv(tiny, two, "--max-steps", "2", "--run-steps", "1", "--state", str(two / "state.pt"),
                     "--log", str(two / "log.txt"), "--ray", "auto", "--ray-workers", "2")
    assert train_main(ray_argv, dump=str(tmp_path / "g2.pt")) == 0
    g1, g2 = torch.load(tmp_path / "g1.pt"), torch.load(tmp_path / "g2.pt")
    assert g1.keys() == g2.keys() and len(g1) > 10
    scale = max(float(g.abs().max()) for g in g1.values())
    assert scale > 0
    for k in g1:
        torch.testing.assert_close(g2[k], g1[k], rtol=1e-4, atol=1e-6 * scale, msg=k)
    # rank 0 wrote the checkpoints, the log and the local trainer's state; the local trainer resumes it
    log = (two / "log.txt").read_text()
    assert "step 1 |" in log and "this run's share done at step 1" in log
    assert (two / "dflash" / "config.json").is_file() and (two / "state.pt").is_file()
    assert T.main(_argv(tiny, two, *sched, "--state", str(two / "state.pt"), "--resume", "--log",
                        str(two / "log.txt"))) == 0
    assert "resumed from" in (two / "log.txt").read_text() and "step 2 |" in (two / "log.txt").read_text()
