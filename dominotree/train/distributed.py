"""Drafter data and training on a Ray cluster.

Training (``python -m dominotree train --ray [ADDRESS] --max-steps N ...``, every trainer flag
accepted): Ray Train starts ``--ray-workers`` ranks (torch.distributed over gloo on CPUs, NCCL
where each worker has a GPU), each running the local trainer (``trainer.main``) on its share of
every global batch (``--batch`` sequences: rank r takes sequences r, r + W, ...). After each
backward the ranks add their gradients, each weighted by its row-weight total (the denominator of
its loss), and divide by the sum: the step is the one a single process takes on the whole batch,
up to float rounding (the tests hold a 2-worker step to the 1-worker step's gradients). The
schedule is by steps (``--time-budget-min 0``: a clock would differ between ranks), so every rank
takes the same lr and stops at the same step. Rank 0 writes the checkpoints, ``--state`` (the local
trainer's format, so ``trainer --resume`` continues a Ray run and ``train --ray --resume`` a local
one made with ``--time-budget-min 0``), the log and the summary; other ranks write theirs to a
scratch folder. With ``--ray-max-failures K`` a failed worker group is restarted and resumes from
the ``--state`` this run wrote.

Data (``python -m dominotree.train.distributed distill --ray [ADDRESS] --jobs N ...``, the
``selfdistill`` flags): the plan's jobs ``0 .. N-1`` cut into chunks of ``--chunk-jobs``; each chunk
is a deterministic function of (seed, chunk) (greedy answers; sampled ones seeded per job), run
by a Ray actor that loads the target once; the driver writes the finished chunks in chunk order,
one ``shard-NNNNN.jsonl.gz`` each in ``--out`` (selfdistill's format and names), and lists them in
``ray_chunks.json``. A rerun skips listed chunks and the job ids already in the folder, so it
resumes without duplicates.

Both need every node to see this checkout (``cluster.py``) and, for training, ``--data`` and the
output folders on a shared filesystem (rank 0 writes them; every rank reads the data).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

RAY_FLAGS = ("--ray", "--ray-workers", "--ray-cpus-per-worker", "--ray-max-failures", "--ray-gpus")


# --- data-parallel hook of trainer.main ---------------------------------------------------------

class DataParallel:
    """One rank of a data-parallel run, as ``trainer.main(argv, dist=...)`` uses it."""

    def __init__(self, rank: int, world: int, dump: str | None = None):
        self.rank, self.world, self.dump = rank, world, dump

    def share(self, batch: list) -> list:
        """This rank's sequences of the global batch."""
        if len(batch) < self.world:
            raise SystemExit(f"error: --batch {len(batch)} is smaller than the {self.world} workers")
        return batch[self.rank::self.world]

    def reduce(self, out: dict, models) -> None:
        """Gradients of every model added over ranks, each rank's weighted by its loss denominator
        (``den_d`` for the DFlash drafter, ``den_m`` for Domino; equal weights when the step does not
        report them), divided by the total; the logged losses are the same weighted means."""
        dens = torch.tensor([float(out.get("den_d", 1.0)), float(out.get("den_m", 1.0))], dtype=torch.float64)
        mine = dens.clone()
        if self.world > 1:
            import torch.distributed as td
            td.all_reduce(dens)
        for model, own, total in zip(models, mine.tolist(), dens.tolist()):
            params = [p for p in model.parameters() if p.requires_grad]
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch.cat([g.reshape(-1).double() for g in grads]) * own
            if self.world > 1:
                td.all_reduce(flat)
            flat /= total
            i = 0
            for p, g in zip(params, grads):
                p.grad = flat[i:i + g.numel()].view_as(p).to(p.dtype)
                i += g.numel()
        for k, w in (("dflash", 0), ("domino", 1), ("domino_final", 1), ("domino_base", 1)):
            if k in out:
                v = torch.tensor([out[k] * mine[w].item()], dtype=torch.float64)
                if self.world > 1:
                    td.all_reduce(v)
                out[k] = float(v) / dens[w].item()
        if self.dump and self.rank == 0:
            torch.save({f"{i}.{n}": p.grad.detach().clone() for i, m in enumerate(models)
                        for n, p in m.named_parameters() if p.grad is not None}, self.dump)
            self.dump = None       # the first step's gradients only


# --- train --ray ------------------------------------------------------------------------------

def split_ray_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the --ray* flags, the trainer's flags)."""
    p = argparse.ArgumentParser(prog="python -m dominotree train --ray", add_help=False)
    p.add_argument("--ray", nargs="?", const="auto", default=None)
    p.add_argument("--ray-workers", type=int, default=None)
    p.add_argument("--ray-cpus-per-worker", type=int, default=None)
    p.add_argument("--ray-gpus", action="store_true", help="one GPU per worker (NCCL)")
    p.add_argument("--ray-max-failures", type=int, default=0)
    return p.parse_known_args(argv)


def _flag(argv: list[str], name: str) -> str | None:
    for i, x in enumerate(argv):
        if x == name and i + 1 < len(argv):
            return argv[i + 1]
        if x.startswith(name + "="):
            return x.split("=", 1)[1]
    return None


def _without(argv: list[str], names: tuple[str, ...]) -> list[str]:
    out, skip = [], False
    for x in argv:
        if skip:
            skip = False
            continue
        if x in names:
            skip = x not in ("--resume",)
            continue
        if any(x.startswith(n + "=") for n in names):
            continue
        out.append(x)
    return out


def rank_argv(argv: list[str], rank: int, scratch: Path, resume: bool) -> list[str]:
    """The trainer flags of one rank: rank 0 as given; other ranks write to ``scratch``."""
    argv = list(argv) + (["--resume"] if resume and "--resume" not in argv else [])
    if rank == 0:
        return argv
    state = _flag(argv, "--state")
    out = _without(argv, ("--out-dflash", "--out-domino", "--log", "--summary-md", "--state"))
    out += ["--out-dflash", str(scratch / "dflash"), "--out-domino", str(scratch / "domino")]
    if state:
        local = scratch / "state.pt"
        # the rank resumes when rank 0 does: --resume, or the trainer's own resume of an existing file
        if Path(state).is_file() and ("--resume" in argv or "--no-auto-resume" not in argv):
            shutil.copyfile(state, local)
        out += ["--state", str(local)]
    return out


def _train_loop(config: dict) -> None:
    """One Ray Train worker: ``trainer.main`` on its share of every batch."""
    import ray.train
    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.set_num_threads(config["threads"])
    state = _flag(config["argv"], "--state")
    # a restarted worker group resumes from the state this run wrote (never from an older file)
    resume = bool(state) and os.path.isfile(state) and os.path.getmtime(state) >= config["launched"]
    scratch = Path(tempfile.mkdtemp(prefix=f"dominotree-rank{rank}-"))
    from dominotree.train import trainer
    try:
        rc = trainer.main(rank_argv(config["argv"], rank, scratch, resume),
                          dist=DataParallel(rank, world, config.get("dump")))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ray.train.report({"rc": rc, "rank": rank})


def check_train_argv(argv: list[str]) -> list[str]:
    """The trainer flags a Ray run needs: a step schedule (``--max-steps``, the clock off)."""
    if not int(_flag(argv, "--max-steps") or 0):
        raise SystemExit("error: train --ray needs --max-steps N (a step schedule: every worker must take the "
                         "same lr and stop at the same step)")
    if float(_flag(argv, "--run-minutes") or 0):
        raise SystemExit("error: train --ray stops by steps: use --run-steps instead of --run-minutes")
    budget = _flag(argv, "--time-budget-min")
    if budget is not None and float(budget) != 0:
        raise SystemExit("error: train --ray runs a step schedule: drop --time-budget-min (it is set to 0)")
    return _without(argv, ("--time-budget-min",)) + ["--time-budget-min", "0"]


def train_main(argv: list[str], dump: str | None = None) -> int:
    ra, targv = split_ray_args(argv)
    targv = check_train_argv(targv)
    from dominotree.train.options import parse_args
    a = parse_args(targv)                 # the trainer's own errors, before any worker starts
    from dominotree import cluster
    try:
        info = cluster.connect(ra.ray or "auto")
        n, cpus = cluster.plan_workers(info, ra.ray_workers, ra.ray_cpus_per_worker)
    except cluster.ClusterError as e:
        raise SystemExit(f"error: {e}") from None
    if a.batch < n:
        raise SystemExit(f"error: --batch {a.batch} is smaller than the {n} workers")
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer
    storage = Path(tempfile.gettempdir()) / "dominotree-ray-train"
    print(f"train --ray: {n} workers x {cpus} CPUs{' + 1 GPU' if ra.ray_gpus else ''} on {info['nodes']} node(s), "
          f"global batch {a.batch} sequences, {a.max_steps} steps", file=sys.stderr)
    trainer = TorchTrainer(
        _train_loop,
        train_loop_config={"argv": [str(x) for x in targv], "threads": cpus, "dump": dump, "launched": time.time()},
        scaling_config=ScalingConfig(num_workers=n, use_gpu=ra.ray_gpus, resources_per_worker={"CPU": cpus}),
        torch_config=TorchConfig(backend="nccl" if ra.ray_gpus else "gloo"),
        run_config=RunConfig(name=f"train-{int(time.time())}", storage_path=str(storage),
                             failure_config=FailureConfig(max_failures=ra.ray_max_failures)),
    )
    try:
        result = trainer.fit()
    except Exception as e:  # noqa: BLE001 - Ray Train wraps the workers' errors; one line for the user
        raise SystemExit(f"error: the Ray training run failed: {str(e).strip().splitlines()[0]}") from e
    if getattr(result, "error", None) is not None:
        raise SystemExit(f"error: the Ray training run failed: {result.error}")
    return 0


# --- distill --ray ------------------------------------------------------------------------------

def distill_args(argv: list[str]):
    from dominotree.train.selfdistill import parse_args
    ra, rest = split_ray_args(argv)
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--jobs", type=int, required=True, help="plan jobs 0 .. N-1 (the plan is endless)")
    p.add_argument("--chunk-jobs", type=int, default=500, help="jobs per chunk (one shard file each)")
    da, rest = p.parse_known_args(rest)
    a = parse_args(rest)
    if da.jobs < 1 or da.chunk_jobs < 1:
        raise SystemExit("error: --jobs and --chunk-jobs must be >= 1")
    return ra, da, a


class DistillWorker:
    """A Ray actor with the target loaded once; answers whole chunks of the plan."""

    def __init__(self, a, threads: int):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from dominotree.models.linear import onednn_products
        from dominotree.models.smollm2 import ensure_smollm2
        from dominotree.train.jobs import Plan
        from dominotree.train.selfdistill import END_TOKENS, Chat
        torch.set_num_threads(threads)
        self.a = a
        path = ensure_smollm2(verbose=False)
        self.tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, a.dtype), attn_implementation="sdpa",
                                                          local_files_only=True).eval()
        onednn_products(self.model)
        self.end_ids = {i for t in END_TOKENS if (i := self.tok.convert_tokens_to_ids(t)) is not None
                        and self.tok.convert_ids_to_tokens(i) == t}
        self.chat = Chat(self.tok)
        self.plan = Plan(a.seed, a.pool, a.sample_frac)

    def run_chunk(self, jobs: list[int], done: set, first_turns: dict) -> tuple[list[dict], dict]:
        """The records of the plan's ``jobs`` not in ``done`` (selfdistill's loop on a fixed job list)."""
        from collections import Counter, deque

        from dominotree.train.batchgen import Request, SlotGenerator
        from dominotree.train.selfdistill import opening_request, record
        from dominotree.train.selfprompt import written_job
        a, chat, tok = self.a, self.chat, self.tok
        todo = deque(self.plan.job(j) for j in jobs)
        recs, stats = [], Counter()

        def answer(job, ids, stage):
            return Request((job, stage, ids), ids, a.max_new_tokens, a.temperature if job.sampled else 0.0, a.top_p,
                           job.seed)

        def refill(queue):
            while todo and len(queue) < a.slots:
                job = todo.popleft()
                if job.id in done:
                    continue
                first = first_turns.get(job.id) if job.kind == "multiturn" else None
                req = opening_request(job, chat, tok, first, answer)
                if req is not None:
                    queue.append(req)

        pending: deque = deque()
        for req, out, trunc in SlotGenerator(self.model, a.slots, self.end_ids).run(pending, refill):
            job, stage, ids = req.key
            if stage == "write":
                job = written_job(job, tok, out, trunc, self.plan.evals, stats)
                if job is not None:
                    pending.append(answer(job, chat.first(job.request), "answer1"))
            elif job.kind == "multiturn" and stage == "answer1":
                if f"{job.id}:1" not in done:
                    recs.append(record(f"{job.id}:1", job, ids, out, trunc, job.request))
                if not trunc:
                    pending.append(answer(job, chat.second(ids, out, job.follow_up), "answer2"))
            else:
                request = job.request if job.kind != "multiturn" else [job.request, job.follow_up]
                recs.append(record(job.id, job, ids, out, trunc, request))
                stats[job.kind] += 1
        return sorted(recs, key=lambda r: r["id"]), dict(stats)


def distill_main(argv: list[str]) -> int:
    ra, da, a = distill_args(argv)
    from dominotree import cluster
    from dominotree.train.selfdistill import Log, interrupted_first_turns, read_examples, write_shard
    a.out.mkdir(parents=True, exist_ok=True)
    log = Log(a.out / "log.txt")
    log("start: python -m dominotree.train.distributed distill " + " ".join(argv))
    manifest = a.out / "ray_chunks.json"
    meta = json.loads(manifest.read_text()) if manifest.is_file() else {"seed": a.seed, "chunk_jobs": da.chunk_jobs,
                                                                          "chunks": {}}
    if (meta["seed"], meta["chunk_jobs"]) != (a.seed, da.chunk_jobs):
        raise SystemExit(f"error: {a.out} holds chunks of --seed {meta['seed']} --chunk-jobs {meta['chunk_jobs']}")
    records = read_examples(a.out)
    done, first_turns = {r["id"] for r in records}, interrupted_first_turns(records)
    chunks = [c for c in range(-(-da.jobs // da.chunk_jobs)) if str(c) not in meta["chunks"]]
    if not chunks:
        log(f"every chunk of jobs 0..{da.jobs - 1} is done")
        return 0
    try:
        info = cluster.connect(ra.ray or "auto")
        n, cpus = cluster.plan_workers(info, ra.ray_workers, ra.ray_cpus_per_worker)
    except cluster.ClusterError as e:
        raise SystemExit(f"error: {e}") from None
    import ray
    from ray.exceptions import RayActorError
    Actor = ray.remote(num_cpus=cpus)(DistillWorker)
    actors = [Actor.remote(a, cpus) for _ in range(min(n, len(chunks)))]
    log(f"{len(chunks)} chunks of {da.chunk_jobs} jobs on {len(actors)} workers x {cpus} CPUs")

    def jobs_of(c):
        return list(range(c * da.chunk_jobs, min(da.jobs, (c + 1) * da.chunk_jobs)))

    def submit(actor, c):
        js = set(jobs_of(c))
        mine = {k: v for k, v in first_turns.items() if int(k.rsplit("-", 1)[1]) in js}
        return actor.run_chunk.remote(jobs_of(c), done, mine)

    inflight, queue = {}, list(chunks)
    finished: dict[int, tuple] = {}      # chunks done but not yet written: shards are written in chunk order,
    order = list(chunks)                 # so a run's files are the same whichever worker finished first

    def write_ready():
        while order and order[0] in finished:
            c = order.pop(0)
            recs, stats = finished.pop(c)
            path = write_shard(a.out, recs) if recs else None
            meta["chunks"][str(c)] = {"shard": path.name if path else None, "records": len(recs), "stats": stats}
            tmp = manifest.with_name(manifest.name + ".tmp")
            tmp.write_text(json.dumps(meta, indent=1))
            os.replace(tmp, manifest)
            log(f"chunk {c} (jobs {jobs_of(c)[0]}..{jobs_of(c)[-1]}): {len(recs)} examples -> "
                f"{path.name if path else 'none'}; {stats}")

    for actor in actors:
        if queue:
            c = queue.pop(0)
            inflight[submit(actor, c)] = (actor, c)
    while inflight:
        [ref], _ = ray.wait(list(inflight), num_returns=1)
        actor, c = inflight.pop(ref)
        try:
            finished[c] = ray.get(ref)
        except RayActorError as e:
            log(f"chunk {c}: its worker died ({str(e).splitlines()[0][:120]}); the chunk goes to another worker")
            queue.insert(0, c)
            actor = Actor.remote(a, cpus)
        write_ready()
        if queue:
            c = queue.pop(0)
            inflight[submit(actor, c)] = (actor, c)
    log(f"done: {len(meta['chunks'])} chunks, {len(read_examples(a.out))} examples in {a.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "distill":
        return distill_main(argv[1:])
    return train_main(argv)


if __name__ == "__main__":
    sys.exit(main())
