"""The self-distillation plan (``jobs.Plan``) answered by ``gpugen.StaticGenerator`` in big batches.

The same jobs, records and shards as ``selfdistill`` (template, long, self-written and
two-turn requests; ``record``/``write_shard``), arranged for static batches: requests wait in
two queues, the target's own request writing (80 tokens, T = 1.0) and answers; a batch is run
from whichever queue is full, and what a batch produces (a written request, checked against the
evaluation prompts; a second turn after a first answer) joins the answer queue. Sampled answers
draw their temperature from ``temps`` per job (seeded by the job); a greedy request whose prompt
ids were already answered greedily is dropped (the same answer twice). Stops at the token goal,
the time budget, or when the plan gives no more jobs (``max_jobs``).

    stats = generate_data(gen, tok, plan, out, batch=1024, max_new=384, budget_s=200, goal=20e6)
"""
from __future__ import annotations

import random
import time
from collections import Counter, deque
from pathlib import Path

from dominotree.train.loops import loop_flags
from dominotree.train.selfdistill import END_TOKENS, Chat, record, write_shard
from dominotree.train.selfprompt import opener_ids, written_job

WRITE_TOKENS = 80


def end_ids_of(tok) -> set[int]:
    ids = {i for t in END_TOKENS if (i := tok.convert_tokens_to_ids(t)) is not None
           and tok.convert_ids_to_tokens(i) == t}
    if not ids:
        raise SystemExit(f"none of the end tokens {END_TOKENS} is in the tokenizer")
    return ids


def job_temperature(job, temps: tuple[float, float]) -> float:
    return random.Random(job.seed).uniform(*temps) if job.sampled else 0.0


def generate_data(gen, tok, plan, out: Path, batch: int, max_new: int, budget_s: float, goal: float,
                  max_prompt: int, temps: tuple[float, float] = (0.7, 1.0), top_p: float = 0.95,
                  shard_every: int = 5000, max_jobs: int = 0, log=print) -> dict:
    t0 = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    chat, ends = Chat(tok), end_ids_of(tok)
    writes: deque = deque()      # (job, prompt ids)
    answers: deque = deque()     # (job, stage, prompt ids, temperature)
    seen_greedy: set[int] = set()
    prompts_seen: set[int] = set()
    stats: Counter = Counter()
    buf: list[dict] = []
    n_job = n_ans = n_rec = 0
    gen_s = 0.0
    loop_pos = loop_tot = 0

    def add_answer(job, stage, ids):
        t = job_temperature(job, temps)
        if len(ids) > max_prompt:
            stats["dropped: prompt too long"] += 1
            return
        if t == 0.0:
            h = hash(tuple(ids))
            if h in seen_greedy:
                stats["dropped: greedy duplicate"] += 1
                return
            seen_greedy.add(h)
        answers.append((job, stage, ids, t))

    def next_job() -> bool:
        nonlocal n_job
        if max_jobs and n_job >= max_jobs:
            return False
        job = plan.job(n_job)
        n_job += 1
        if job.kind == "self":
            writes.append((job, opener_ids(tok, job.opener)))
        else:
            add_answer(job, "answer1", chat.first(job.request))
        return True

    def run(items, max_tokens, temp_of):
        nonlocal gen_s
        ts = time.perf_counter()
        res = gen.generate([it[-1] if len(it) == 2 else it[2] for it in items], max_tokens,
                           [temp_of(it) for it in items], ends, top_p, deadline=t0 + budget_s)
        gen_s += time.perf_counter() - ts
        return res

    while n_ans < goal and time.perf_counter() - t0 < budget_s:
        while len(writes) < batch and len(answers) < batch and next_job():
            pass
        if len(writes) >= batch or (writes and not answers):
            items = [writes.popleft() for _ in range(min(batch, len(writes)))]
            for (job, ids), (text_ids, trunc) in zip(items, run(items, WRITE_TOKENS, lambda it: 1.0)):
                job = written_job(job, tok, text_ids, trunc, plan.evals, stats)
                if job is not None:
                    add_answer(job, "answer1", chat.first(job.request))
            continue
        if not answers:
            break
        items = [answers.popleft() for _ in range(min(batch, len(answers)))]
        for (job, stage, ids, t), (ans, trunc) in zip(items, run(items, max_new, lambda it: it[3])):
            if job.kind == "multiturn" and stage == "answer1":
                buf.append(record(f"{job.id}:1", job, ids, ans, trunc, job.request))
                if not trunc:
                    add_answer(job, "answer2", chat.second(ids, ans, job.follow_up))
            else:
                request = job.request if job.kind != "multiturn" else [job.request, job.follow_up]
                buf.append(record(job.id, job, ids, ans, trunc, request))
            buf[-1]["sampled"] = t > 0
            buf[-1]["temperature"] = round(t, 3)
            stats[f"{job.kind}:{stage}"] += 1
            stats["truncated"] += trunc
            stats["sampled"] += t > 0
            prompts_seen.add(hash(tuple(ids)))
            n_ans += len(ans)
            n_rec += 1
            if n_rec % 50 == 1:              # loop positions, on a sample of answers
                flags = loop_flags(ans)
                loop_pos, loop_tot = loop_pos + sum(flags), loop_tot + len(flags)
        if len(buf) >= shard_every:
            write_shard(out, buf)
            buf = []
        el = time.perf_counter() - t0
        log(f"data: {n_rec} answers, {n_ans} answer tokens, {len(prompts_seen)} distinct prompts, "
            f"{el:.0f} s ({n_ans / max(gen_s, 1e-9):.0f} answer tok/s while generating)")
    if buf:
        write_shard(out, buf)
    total = time.perf_counter() - t0
    return {"answers": n_rec, "answer_tokens": n_ans, "distinct_prompts": len(prompts_seen),
            "jobs": n_job, "seconds": round(total, 1), "generate_seconds": round(gen_s, 1),
            "answer_tokens_per_s": round(n_ans / max(gen_s, 1e-9), 1),
            "decode_steps": gen.steps, "batch": batch, "max_new_tokens": max_new,
            "loop_position_fraction_sampled": round(loop_pos / max(1, loop_tot), 4),
            "counts": dict(stats), "stop": "goal" if n_ans >= goal else
            ("time budget" if total >= budget_s else "plan exhausted")}
