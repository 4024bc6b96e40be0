"""The steps of ``scripts/gpu_train.sh``, one subcommand each (the script runs each under its own
time limit and rewrites the summary after each, so a timeout loses only the step it cut):

    stage    the target's GGUF from its staged parts (``staging``): checked and placed; with
             --dry-run the real GGUF here is split into the real parts, checked and joined
    target   the GGUF converted to the float32 folder (``models.smollm2``); --dry-run: random-tiny
    data     the plan answered by the target in big static batches (``gpudata``)
    train    both block-8 drafters on that data (``trainer``, --device), soft labels on the fly
    pack     the trained pair (--store q8: 8-bit blocks + bf16, the default; bf16: compact) as a tar
             cut into parts that come back from $OUT
    unpack   here, after a run: join the fetched parts, check them, unpack the pair
    rehearse the --dry-run: stage (real sizes), target, data, train, pack in one CPU process

Each step writes ``<work>/<step>.json``; ``outlimits.summarize`` gathers them into
``$OUT/gpu_train.json`` and checks what comes back. Bad input is refused with a
message and changes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from dominotree.train import outlimits, staging

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = {k: ROOT / "assets" / "drafters" / f"smollm2-{k}-b8" for k in ("dflash", "domino")}
PAIR = "pair.tar"


_write, _read = outlimits.write_json, outlimits._read


def cmd_stage(a) -> dict:
    t0 = time.perf_counter()
    if a.dry_run:
        from dominotree.models.smollm2 import gguf_path
        src = gguf_path()
        # the sizes of the real sequence, which parks what the run does not read first
        pl = staging.plan(src.stat().st_size, staging.tree_bytes(ROOT, skip=staging.PARK), a.extra_last)
        parts = a.work / "parts"
        staging.split(src, parts, pl["part_bytes"])
        placed = staging.install_site(parts, a.site)
        same = staging.sha256_file(placed) == staging.sha256_file(src)
        if not same:
            raise staging.StagingError("the joined GGUF differs from the source")
        shutil.rmtree(parts)
        placed.unlink()
        return {**pl, "joined_equal": same, "s": round(time.perf_counter() - t0, 1)}
    st = staging.status(a.parts)
    if st["missing"] or st["bad"]:
        raise staging.StagingError(f"parts missing {st['missing']}, bad {st['bad']}: stage them first "
                                   "(docs/gpu-training.md)")
    placed = staging.install_site(a.parts, a.site)
    return {"parts": len(st["ok"]), "gguf": str(placed), "bytes": placed.stat().st_size,
            "s": round(time.perf_counter() - t0, 1)}


def load_target(folder: str, device: str, dtype: str = "bfloat16"):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=getattr(torch, dtype), local_files_only=True)
    return tok, model.to(device).eval()


def cmd_target(a) -> dict:
    t0 = time.perf_counter()
    if a.dry_run:
        from dominotree.models.random_tiny import ensure_random_tiny
        folder = ensure_random_tiny()["target"]
    else:
        from dominotree.models.smollm2 import ensure_smollm2
        folder = str(ensure_smollm2(verbose=True))
    return {"target": folder, "s": round(time.perf_counter() - t0, 1)}


def cmd_data(a) -> dict:
    import torch
    from dominotree.train.gpudata import generate_data
    from dominotree.train.gpugen import StaticGenerator
    from dominotree.train.jobs import Plan
    folder = _read(a.work / "target.json")["target"]
    tok, model = load_target(folder, a.device, a.dtype)
    t0 = time.perf_counter()
    plan = Plan(a.seed, a.pool, a.sample_frac)
    plan_s = time.perf_counter() - t0
    gen = StaticGenerator(model, a.batch, a.max_prompt + a.max_new, graphs=not a.no_graphs, seed=a.seed)
    shutil.rmtree(a.data, ignore_errors=True)
    st = generate_data(gen, tok, plan, a.data, a.batch, a.max_new, a.budget_s, a.goal, a.max_prompt,
                       (a.t_min, a.t_max), shard_every=a.shard_every, max_jobs=a.max_jobs)
    st.update(plan_s=round(plan_s, 1), templates=len(plan.templates), device=str(model.device),
              dtype=a.dtype, graphs=gen.graphs, note=gen.note, torch=torch.__version__)
    if torch.cuda.is_available() and model.device.type == "cuda":
        st["gpu"] = torch.cuda.get_device_name(0)
        st["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
    _write(a.out / "data_stats.json", st)
    return st


def cmd_train(a) -> dict:
    from dominotree.train import trainer
    folder = _read(a.work / "target.json")["target"]
    out = a.work / "pair"
    argv = ["--data", str(a.data), "--target", folder, "--device", a.device, "--block-size", "8",
            "--out-dflash", str(out / "smollm2-dflash-b8"), "--out-domino", str(out / "smollm2-domino-b8"),
            "--soft-k", "32", "--loop-weight", "0.25", "--topm-loss", "64", "--topm-weight", "1.0",
            "--lr", str(a.lr), "--warmup", "0.05", "--decay-ratio", "0", "--lam-floor", "0.5",
            "--batch", str(a.train_batch), "--anchors", str(a.anchors), "--head-vocab", str(a.head_vocab),
            "--time-budget-min", str(a.minutes), "--run-minutes", str(a.minutes),
            "--eval-every-min", str(a.eval_every_min), "--n-eval", str(a.n_eval), "--eval-anchors", "16",
            "--save-every-min", "1000", "--feat-cache-gb", str(a.feat_cache_gb), "--log-every", "20",
            "--threads", str(a.threads), "--seed", str(a.seed), "--mask-token-id", str(a.mask_token_id), "--no-auto-resume",
            "--log", str(a.out / "train_log.txt"), "--curve-json", str(a.out / "curve.jsonl")]
    if a.max_steps:
        argv += ["--max-steps", str(a.max_steps)]
    if a.init == "shipped":
        argv += ["--resume-dflash", str(SHIPPED["dflash"]), "--resume-domino", str(SHIPPED["domino"])]
    t0 = time.perf_counter()
    rc = trainer.main(argv)
    curve = [json.loads(line) for line in open(a.out / "curve.jsonl")] if (a.out / "curve.jsonl").is_file() else []
    return {"rc": rc, "s": round(time.perf_counter() - t0, 1), "init": a.init, "argv": argv,
            "final": curve[-1] if curve else None, "evals": len(curve)}


def cmd_pack(a) -> dict:
    pair = a.work / "pair"
    kinds = sorted(p.name for p in pair.iterdir()) if pair.is_dir() else []
    if len(kinds) != 2:
        raise SystemExit(f"error: {pair} holds {kinds}, not the trained pair: did the train step save?")
    if a.store == "q8":             # the products the CPU runs as 8-bit blocks, as those blocks
        from dominotree.models.checkpoint import q8_folder
        for k in kinds:
            q8_folder(pair / k)
    tar = a.work / PAIR
    with tarfile.open(tar, "w") as tf:
        for k in kinds:
            tf.add(pair / k, arcname=k)
    man = outlimits.split_to_fit(tar, a.out, PAIR)
    tar.unlink()
    return {"manifest": man, "folders": kinds, "store": a.store}


def cmd_unpack(a) -> dict:
    summ = _read(a.fetched / "gpu_train.json")
    if not summ or "pack" not in summ:
        raise SystemExit(f"error: {a.fetched}/gpu_train.json has no pack step's manifest")
    man = summ["pack"]["manifest"]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for part in man["parts"]:
            src = a.fetched / part["file"]
            if not src.is_file():
                raise SystemExit(f"error: {src} is missing")
            os.symlink(src.resolve(), tmp / part["file"])
        _write(tmp / staging.MANIFEST, man)
        try:
            tar = staging.assemble(tmp, tmp / PAIR)
        except staging.StagingError as e:
            raise SystemExit(f"error: {e}") from None
        a.dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tar) as tf:
            tf.extractall(a.dest, filter="data")
    return {"dest": str(a.dest), "folders": summ["pack"]["folders"]}


# the rehearsal's small shapes (random-tiny on the CPU); the staging keeps the real sizes
REHEARSAL = dict(device="cpu", dtype="float32", batch=8, max_new=16, max_prompt=400, max_jobs=24, pool=300,
                 budget_s=30.0, shard_every=10, init="scratch", train_batch=2, anchors=4, max_steps=3,
                 minutes=1.0, n_eval=4, eval_every_min=1000.0, feat_cache_gb=0.1, threads="1", mask_token_id=319)


def cmd_rehearse(a) -> dict:
    """Every step of the run in this one process (one start-up instead of five: the fast tier's
    dry run), each step's result and the summary written as the step ends, as the script does."""
    import traceback
    vars(a).update(REHEARSAL, dry_run=True)
    names = ("stage", "target", "data", "train", "pack")
    if a.smoke_device != "cpu":   # the first GPU run's check of every CUDA path, before the target is there
        a.device, a.dtype, names = a.smoke_device, "bfloat16", names[1:]
    # the C++ CPU kernels (models/cpuext.py) would be built for the float32 evaluation here: the
    # GPU run never uses them, and a build costs ~30 s
    os.environ["DOMINOTREE_KERNELS"] = "0"
    done = list(a.steps_before)
    for name in names:
        t0, rc = time.perf_counter(), 0
        print(f"=== {name} (rehearsal, in process)", flush=True)
        try:
            res = STEPS[name](a)
            _write(a.work / f"{name}.json", res)
            rc = int(res.get("rc", 0)) if isinstance(res, dict) else 0
        except (Exception, SystemExit) as e:
            traceback.print_exc() if isinstance(e, Exception) else print(e)
            rc = 1
        done.append(f"{name}:{rc}:{round(time.perf_counter() - t0)}")
        outlimits.summarize(a.out, a.work, done, True)
        if rc:
            break
    (a.work / "rehearse.steps").write_text(" ".join(done[len(a.steps_before):]) + "\n")
    return {"steps": done}


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m dominotree.train.gpu_run", description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("stage", "target", "data", "train", "pack", "unpack", "rehearse"))
    ap.add_argument("--dry-run", action="store_true", help="the CPU rehearsal: random-tiny, small shapes, real staging sizes")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results/gpu-train")))
    ap.add_argument("--work", type=Path, default=Path(".gpu_work"), help="step results and the pair (not $OUT)")
    ap.add_argument("--parts", type=Path, default=staging.PARTS)
    ap.add_argument("--site", type=Path, default=None, help="where the GGUF is placed, on PYTHONPATH (default: <work>/site)")
    ap.add_argument("--extra-last", type=int, default=0)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", type=Path, default=None, help="the generated shards (default: <work>/data)")
    ap.add_argument("--pool", type=int, default=40000, help="template requests drawn for the plan")
    ap.add_argument("--sample-frac", type=float, default=0.5)
    ap.add_argument("--t-min", type=float, default=0.7)
    ap.add_argument("--t-max", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=1024, help="data: rows decoded together")
    ap.add_argument("--train-batch", type=int, default=32, help="train: sequences a step")
    ap.add_argument("--max-new", type=int, default=384)
    ap.add_argument("--max-prompt", type=int, default=640)
    ap.add_argument("--budget-s", type=float, default=190.0)
    ap.add_argument("--goal", type=float, default=20e6, help="answer tokens")
    ap.add_argument("--max-jobs", type=int, default=0)
    ap.add_argument("--shard-every", type=int, default=5000)
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--init", choices=("shipped", "scratch"), default="shipped")
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--anchors", type=int, default=64)
    ap.add_argument("--head-vocab", type=int, default=0)
    ap.add_argument("--mask-token-id", type=int, default=16, help="SmolLM2 <empty_output> (random-tiny: 319)")
    ap.add_argument("--eval-every-min", type=float, default=0.5)
    ap.add_argument("--n-eval", type=int, default=256)
    ap.add_argument("--feat-cache-gb", type=float, default=40.0)
    ap.add_argument("--threads", default="8")
    ap.add_argument("--store", choices=("q8", "bf16"), default="q8",
                    help="pack: the pair as 8-bit blocks + bf16 (model.safetensors.q8) or compact bf16")
    ap.add_argument("--fetched", type=Path, default=None, help="unpack: the folder the run's files came back to")
    ap.add_argument("--smoke-device", default="cpu",
                    help="rehearse on this device (cuda: random-tiny through the CUDA generator and trainer, no stage)")
    ap.add_argument("--steps-before", nargs="*", default=[], help="rehearse: NAME:RC:SECONDS of steps already run")
    ap.add_argument("--dest", type=Path, default=Path("data/gpu-pair"), help="unpack: where the pair goes")
    a = ap.parse_args(argv)
    if a.step == "unpack" and a.fetched is None:
        ap.error("unpack needs --fetched FOLDER")
    a.data = a.data or a.work / "data"
    a.site = a.site or a.work / "site"
    return a


STEPS = {"stage": cmd_stage, "target": cmd_target, "data": cmd_data, "train": cmd_train, "pack": cmd_pack,
         "unpack": cmd_unpack, "rehearse": cmd_rehearse}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    a.work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        res = STEPS[a.step](a)
    except staging.StagingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if a.step == "rehearse":
        return 0 if all(x.split(":")[1] == "0" for x in res["steps"]) else 1
    if a.step != "unpack":
        _write(a.work / f"{a.step}.json", res)
    print(json.dumps(res)[:2000])
    if a.step == "train":
        return res["rc"]
    return 0


if __name__ == "__main__":
    sys.exit(main())
