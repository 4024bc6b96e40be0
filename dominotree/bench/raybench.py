"""``bench --ray [ADDRESS]``: the bench's work spread over Ray workers, merged into the files a
local run writes.

The unit of work is a *group*: one (temperature, prompt) with every method still to run on it,
in the rotated order of a local run, seeds as in a local run. A worker is a Ray actor that loads
the pair once, warms every method up once, and then decodes whole groups; its records come back
only when the group is complete, and the driver appends them to ``OUT/answers`` at once. So:

- Timing stays honest: all rows of one prompt (the pairs every speedup and CI is made of) are
  measured on one worker, interleaved as locally; each record names its worker and that
  worker's CPU, and the summary's device line names every worker's CPU.
- A worker that dies mid-group loses only that group's unreported decodes: the group goes back to
  the front of the queue for another worker (a replacement actor is started), the run prints it
  and ``run.json`` lists it under ``ray.retries``. A group is written once, never twice.
- ``--resume`` works as locally: finished records are skipped.

The speedup pairs of a prompt whose rows come from different workers (a run resumed on other
machines) are named in ``ray.mixed_prompts`` of ``run.json``.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from .run import _append, _rotate, answers_path, make_record, read_answers, run_choice, tkey, warm_up

# Test hook: question ids whose first dispatch kills its worker mid-group (comma-separated).
CRASH_ENV = "DOMINOTREE_RAY_CRASH_ONCE"


def add_ray_args(p) -> None:
    g = p.add_argument_group("cluster (Ray)")
    g.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="spread the prompts over Ray workers: 'auto' (default) starts a local cluster, or the "
                        "address of a running one (HOST:6379, ray://HOST:10001)")
    g.add_argument("--ray-workers", type=int, default=None,
                   help="workers (default: one per node of the cluster)")
    g.add_argument("--ray-cpus-per-worker", type=int, default=None,
                   help="CPUs (torch threads) per worker (default: the smallest node's CPUs / workers per node)")


@dataclass
class Group:
    """One (temperature, prompt) with its methods still to run, in the local run's order."""
    temperature: float
    prompt_idx: int
    prompt: object
    variants: list

    @property
    def name(self) -> str:
        return f"T={tkey(self.temperature)} prompt {self.prompt.id!r}"


def plan_groups(prompts, variants, temperatures, done: set) -> list[Group]:
    """The groups of a run in the local run's order, without the (T, label, prompt) in ``done``."""
    out = []
    for t in temperatures:
        for pi, p in enumerate(prompts):
            vs = [v for v in _rotate(variants, pi) if (tkey(t), v.label, p.id) not in done]
            if vs:
                out.append(Group(float(t), pi, p, vs))
    return out


class BenchWorker:
    """One Ray actor: the pair loaded once, every method warmed up once, then whole groups."""

    def __init__(self, args, cost_model, threads: int, variants, temperature: float, builder: str, warmup: bool):
        import torch
        torch.set_num_threads(threads)
        from ..pairargs import load_pair_from_args
        from ..cluster import worker_identity
        from ..machine import hardware_info
        from .run import _bench_decoder
        self.dec = _bench_decoder(load_pair_from_args(args), cost_model)
        if warmup:
            warm_up(self.dec, variants, temperature, builder)
        hw = hardware_info(self.dec.target.device)
        self.info = worker_identity() | {"torch_threads": torch.get_num_threads(), "device": hw["device"]}
        if "gpu" in hw:
            self.info["gpu"] = hw["gpu"]

    def identity(self) -> dict:
        return self.info

    def run_group(self, g: Group, opts: dict, ctx: dict, worker: int, crash: bool = False) -> list[tuple]:
        """Every method of the group, interleaved as locally: [(temperature, label, record)]."""
        hw = {k: self.info[k] for k in ("device", "cpu", "torch_threads", "gpu") if k in self.info}
        wctx = dict(ctx, hardware=hw)
        out = []
        for v in g.variants:
            choices = [run_choice(self.dec, g.prompt, v, g.temperature, g.prompt_idx, opts["max_new_tokens"],
                                  opts["builder"], opts["ab_builder"], opts["chat"], r) for r in range(opts["repeats"])]
            rec = make_record(g.prompt, v, g.temperature, choices, wctx)
            rec["worker"] = worker
            out.append((g.temperature, v.label, rec))
            if crash:          # the fault-injection hook of the tests: die with the group half done
                os._exit(1)
        return out


def run_bench_ray(address: str, args, prompts, variants, temperatures, out: Path, *, cost_model, max_new_tokens: int,
                  repeats: int = 1, builder: str = "python", ab_builder: str | None = None, chat: bool = True,
                  warmup: bool = True, resume: bool = False, progress: bool = True, ctx: dict,
                  workers: int | None = None, cpus_per_worker: int | None = None) -> dict:
    """Run the bench on Ray workers; records appended to ``out/answers`` as groups finish.

    Returns the ``ray`` section of ``run.json``: workers (host, CPU, threads), groups per worker,
    retries, mixed prompts."""
    from tqdm import tqdm

    from .. import cluster
    try:
        info = cluster.connect(address)
        n, cpus = cluster.plan_workers(info, workers, cpus_per_worker)
    except cluster.ClusterError as e:
        from .variants import user_error
        raise user_error(str(e)) from None
    import ray
    from ray.exceptions import RayActorError

    done = set()
    if resume:
        done = {(tkey(r["temperature"]), r["label"], r["question_id"]) for r in read_answers(out)}
    groups = plan_groups(prompts, variants, temperatures, done)
    opts = {"max_new_tokens": max_new_tokens, "builder": builder, "ab_builder": ab_builder, "chat": chat,
            "repeats": repeats}
    crash = {q for q in os.environ.get(CRASH_ENV, "").split(",") if q}
    Actor = ray.remote(num_cpus=cpus, max_restarts=0)(BenchWorker)
    threads = getattr(args, "threads", None) or cpus     # --threads, else every CPU the worker holds

    def start():
        a = Actor.remote(args, cost_model, threads, variants, temperatures[0], builder, warmup)
        return a, a.identity.remote()

    meta = {"address": address, "cluster_cpus": info["cpus"], "nodes": info["nodes"], "cpus_per_worker": cpus,
            "workers": [], "retries": [], "groups": len(groups)}
    if not groups:
        return meta
    print(f"ray: {n} workers x {cpus} CPUs on {info['nodes']} node(s) for {len(groups)} (temperature, prompt) "
          f"groups", file=sys.stderr)
    wid = {}                         # actor -> worker number
    inflight: dict = {}              # ref -> ("ready", actor) | ("group", actor, group)
    for _ in range(min(n, len(groups))):
        a, ref = start()
        wid[a] = len(wid)
        inflight[ref] = ("ready", a)
    idle: list = []
    queue = list(groups)
    loading = len(wid)               # the first workers all load before any is given a group: no worker
    #                                  idles through the run because another one was quicker to load
    replacements = n
    attempts: dict[int, int] = {}
    bar = tqdm(total=sum(len(g.variants) for g in groups) * repeats, desc="bench (ray)",
               unit="decode", file=sys.stderr, disable=not progress, mininterval=1.0, dynamic_ncols=True)
    try:
        while queue or any(v[0] == "group" for v in inflight.values()):
            while idle and queue and not loading:
                a = idle.pop(0)
                g = queue.pop(0)
                kill = g.prompt.id in crash
                crash.discard(g.prompt.id)
                ref = a.run_group.remote(g, opts, ctx, wid[a], kill)
                inflight[ref] = ("group", a, g)
            if not inflight:
                raise RuntimeError("no Ray worker is left to run the remaining groups")
            [ref], _ = ray.wait(list(inflight), num_returns=1)
            kind, a, *rest = inflight.pop(ref)
            if kind == "ready" and loading:
                loading -= 1
            try:
                got = ray.get(ref)
            except RayActorError as e:
                why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
                if kind == "ready" and not meta["workers"] and not replacements:
                    raise RuntimeError(f"no Ray worker could load the pair: {why}") from None
                entry = {"worker": wid[a], "while": "loading" if kind == "ready" else rest[0].name, "error": why}
                if kind == "group":
                    g = rest[0]
                    attempts[id(g)] = attempts.get(id(g), 0) + 1
                    if attempts[id(g)] > 3:
                        raise RuntimeError(f"{g.name} killed its worker {attempts[id(g)]} times; stopping") from None
                    queue.insert(0, g)
                meta["retries"].append(entry)
                print(f"ray: worker {wid[a]} died during {entry['while']}; "
                      + ("the group goes to another worker" if kind == "group" else "starting another"),
                      file=sys.stderr)
                if replacements > 0:
                    replacements -= 1
                    b, r2 = start()
                    wid[b] = len(wid)
                    inflight[r2] = ("ready", b)
                continue
            if kind == "ready":
                got["worker_id"] = wid[a]
                meta["workers"].append(got)
                idle.append(a)
                continue
            g = rest[0]
            for t, label, rec in got:
                _append(answers_path(out, t, label), rec)
            bar.update(len(got) * repeats)
            idle.append(a)
    except BaseException:
        bar.close()
        print(f"bench stopped: {len(read_answers(out))} finished records are kept in {out / 'answers'} "
              f"(continue with --resume --out {out})", file=sys.stderr)
        raise
    finally:
        for a in wid:
            ray.kill(a)
    bar.close()
    recs = read_answers(out)
    meta["mixed_prompts"] = mixed_prompts(recs)
    meta["groups_per_worker"] = _groups_per_worker(recs)
    (out / "workers.md").write_text(workers_markdown(meta["workers"], recs), encoding="utf-8")
    return meta


def _groups_per_worker(recs: list[dict]) -> dict:
    seen: dict = {}
    for r in recs:
        if "worker" in r:
            seen.setdefault(str(r["worker"]), set()).add((tkey(r["temperature"]), r["question_id"]))
    return {w: len(s) for w, s in sorted(seen.items())}


def per_worker_speedups(recs: list[dict]) -> dict:
    """{worker: {T: {label: speedup over ar}}} from each worker's own prompts only."""
    from . import stats
    by: dict = {}
    for r in recs:
        by.setdefault(r.get("worker"), {}).setdefault(tkey(r["temperature"]), {}).setdefault(
            r["label"], {})[r["question_id"]] = r["tokens_per_s"]
    out: dict = {}
    for w, temps in by.items():
        for t, labels in temps.items():
            ar = labels.get("ar")
            for label, tps in labels.items():
                if ar and label != "ar":
                    keys, a, b = stats.paired(tps, ar)
                    if keys:
                        out.setdefault(w, {}).setdefault(t, {})[label] = (round(stats.speedup(a, b), 4), len(keys))
    return out


def workers_markdown(workers: list[dict], recs: list[dict]) -> str:
    """``workers.md``: each worker's machine, its groups, and every method's speedup over ``ar`` on
    that worker's prompts alone (rows timed on one machine, never mixed with another's)."""
    sp = per_worker_speedups(recs)
    groups = _groups_per_worker(recs)
    lines = ["# Ray workers\n", "| worker | host | CPU | ISA | torch threads | groups |", "|---|---|---|---|---|---|"]
    for w in sorted(workers, key=lambda w: w["worker_id"]):
        lines.append(f"| {w['worker_id']} | {w['host']} | {w.get('gpu') or w['cpu']} | {w.get('cpu_isa', '')} | "
                     f"{w.get('torch_threads')} | {groups.get(str(w['worker_id']), 0)} |")
    lines += ["", "Speedup over `ar` on each worker's own prompts (n = prompts):", "",
              "| worker | T | method | speedup | n |", "|---|---|---|---|---|"]
    for w in sorted(sp, key=str):
        for t in sorted(sp[w], key=float):
            for label, (x, n) in sp[w][t].items():
                lines.append(f"| {w} | {t} | {label} | {x:.3f}x | {n} |")
    return "\n".join(lines) + "\n"


def mixed_prompts(recs: list[dict]) -> list[str]:
    """``T=..:question_id`` whose rows were measured by more than one worker (their speedup pairs
    rows from different machines: only a resumed run can make them)."""
    by: dict = {}
    for r in recs:
        by.setdefault((tkey(r["temperature"]), r["question_id"]), set()).add(r.get("worker"))
    return [f"T={t}:{q}" for (t, q), ws in sorted(by.items()) if len(ws) > 1]


def cluster_hardware(base: dict, meta: dict) -> dict:
    """``run.json``'s hardware with the workers' CPUs named (the summary's device line reads it)."""
    from ..cluster import describe_workers
    ws = meta.get("workers") or []
    if not ws:
        return base
    hw = dict(base, cpu=describe_workers(ws), torch_threads=ws[0].get("torch_threads"), driver_cpu=base.get("cpu"))
    gpus = sorted({w["gpu"] for w in ws if w.get("gpu")})
    if gpus:
        hw["gpu"] = f"{len(ws)} Ray workers: " + "; ".join(gpus)
    return hw
