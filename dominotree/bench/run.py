"""The run loop of ``python -m dominotree bench``: every (temperature, prompt, variant, repeat), decoded
and appended at once to its answer file.

Methods run interleaved per prompt (the order rotates from prompt to prompt) after one warm-up
decode per method, with the per-prompt seed ``1000 + 100 * prompt_idx + turn_idx``. Each finished
(prompt, method) is appended at once to ``OUT/answers/T<temp>/<method>.jsonl`` in the Spec-Bench
layout (``question_id``, ``category``, ``choices: [{index, turns, new_tokens, wall_time,
accept_lengths}]``) plus our fields (tau, stage_ms, token ids, tree sizes, builder, hardware,
versions), so a crash loses nothing (``--resume`` continues a run).
"""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

from ..config import STAGES, ConfigError, DecodeConfig
from ..errors import UserError
from ..machine import hardware_info, versions_info
from . import stats
from .variants import HF_GENERATE, Variant

SEED_BASE = 1000


def tkey(t: float) -> str:
    return str(float(t))


# --- one prompt --------------------------------------------------------------------------------

def _bench_decoder(pair, cost_model):
    """A decoder without the trace-only extras (Top-M lists, the counterfactual marginal tree)
    that the explorer wants: they run inside the round loop and would count in the wall time."""
    from ..decode import Decoder
    return Decoder(pair, cost_model=cost_model, annotate=False)


def encode_messages(dec, messages: list[dict], chat: bool = True) -> list[int]:
    """Token ids of a (possibly multi-turn) conversation, ending with the assistant's turn open."""
    if len(messages) == 1:
        return dec.encode_prompt(messages[0]["content"], chat)
    from ..decode import MAX_PROMPT_TOKENS
    tok = dec.target.tokenizer
    if chat and getattr(tok, "chat_template", None):
        kw = {"enable_thinking": False} if "enable_thinking" in (tok.chat_template or "") else {}
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kw)
        if hasattr(ids, "keys"):
            ids = ids["input_ids"]
        ids = list(ids[0]) if ids and isinstance(ids[0], list) else list(ids)
    else:
        ids = tok("\n\n".join(m["content"] for m in messages))["input_ids"]
    if len(ids) > MAX_PROMPT_TOKENS:
        raise ConfigError(f"conversation is {len(ids)} tokens; the limit is {MAX_PROMPT_TOKENS}")
    return [int(i) for i in ids]


def _hf_model(dec):
    """The ``hf-generate`` reference model: the target's folder through plain transformers, bf16."""
    if getattr(dec, "_hf_model", None) is None:
        from .hf_generate import load_hf_model
        dec._hf_model = load_hf_model(dec.pair.paths["target"], device=str(dec.target.device))
    return dec._hf_model


def _hf_turn(dec, ids: list[int], max_new_tokens: int):
    """One greedy ``generate`` turn of the reference row, shaped like a DecodeTrace for the record."""
    from types import SimpleNamespace
    from .hf_generate import hf_generate
    rec = hf_generate(_hf_model(dec), ids, max_new_tokens, eos_ids=dec.target.eos_ids)
    toks = rec["token_ids"]
    end = next((i + 1 for i, t in enumerate(toks) if t in dec.target.eos_ids), len(toks))
    toks = toks[:end]
    text = dec.target.tokenizer.decode(toks, skip_special_tokens=True)
    rounds = [SimpleNamespace(accept_len=1, tree=SimpleNamespace(num_nodes=1), stage_ms={}) for _ in toks]
    return SimpleNamespace(text=text, token_ids=toks, wall_s=rec["wall_time"], rounds=rounds, stopped="")


def run_choice(dec, prompt, variant: Variant, temperature: float, prompt_idx: int, max_new_tokens: int,
               builder: str, ab_builder: str | None, chat: bool, index: int = 0) -> dict:
    """All turns of one prompt with one variant: one Spec-Bench ``choice`` plus our fields."""
    messages: list[dict] = []
    ch = {"index": index, "turns": [], "new_tokens": [], "wall_time": [], "accept_lengths": [],
          "token_ids": [], "tree_nodes": [], "rounds": [], "stopped": [], "seeds": [],
          "stage_ms_total": {s: 0.0 for s in STAGES}}
    for ti, turn in enumerate(prompt.turns):
        messages.append({"role": "user", "content": turn})
        ids = encode_messages(dec, messages, chat)
        seed = SEED_BASE + 100 * prompt_idx + ti
        if variant.method == HF_GENERATE:
            tr = _hf_turn(dec, ids, max_new_tokens)
        else:
            tr = dec.generate(ids, DecodeConfig(method=variant.method, temperature=float(temperature),
                                                max_new_tokens=max_new_tokens, seed=seed, builder=builder,
                                                ab_builder=ab_builder, tree=variant.tree,
                                                draft_vocab=variant.draft_vocab))
        messages.append({"role": "assistant", "content": tr.text})
        ch["turns"].append(tr.text)
        ch["new_tokens"].append(len(tr.token_ids))
        ch["wall_time"].append(tr.wall_s)
        ch["accept_lengths"] += [r.accept_len for r in tr.rounds]
        ch["tree_nodes"] += [r.tree.num_nodes for r in tr.rounds]
        ch["token_ids"].append(list(tr.token_ids))
        ch["rounds"].append(len(tr.rounds))
        ch["stopped"].append(tr.stopped)
        ch["seeds"].append(seed)
        for r in tr.rounds:
            for s in STAGES:
                ch["stage_ms_total"][s] += float(r.stage_ms.get(s, 0.0))
    n_rounds = max(len(ch["accept_lengths"]), 1)
    wall = sum(ch["wall_time"])
    ch["tau"] = stats.mean(ch["accept_lengths"]) if ch["accept_lengths"] else 0.0
    ch["tokens_per_s"] = sum(ch["new_tokens"]) / wall if wall > 0 else 0.0
    ch["stage_ms"] = {s: v / n_rounds for s, v in ch["stage_ms_total"].items()}
    ch["hit_max_budget"] = sum(1 for n in ch["tree_nodes"] if n >= variant.budget)
    return ch


def make_record(prompt, variant: Variant, temperature: float, choices: list[dict], ctx: dict) -> dict:
    tps = [c["tokens_per_s"] for c in choices]
    acc = [a for c in choices for a in c["accept_lengths"]]
    n_rounds = max(len(acc), 1)
    stage = {s: sum(c["stage_ms_total"][s] for c in choices) / n_rounds for s in STAGES}
    return {
        "question_id": prompt.id, "category": prompt.category, "group": prompt.group or prompt.category,
        "dataset": prompt.dataset, "model_id": variant.label, "answer_id": f"{variant.label}:{prompt.id}:{tkey(temperature)}",
        "tstamp": time.time(), "choices": choices,
        # ours
        "method": variant.method, "label": variant.label, "temperature": float(temperature),
        "budget": variant.tree.budget, "corr_topm": variant.tree.corr_topm, "node_topk": variant.tree.node_topk,
        "draft_vocab": variant.draft_vocab,
        "builder": ctx["builder"], "tau": stats.mean(acc) if acc else 0.0, "tokens_per_s": stats.median(tps),
        "stage_ms": stage, "preset": ctx["preset"], "dtype": ctx["dtype"], "max_new_tokens": ctx["max_new_tokens"],
        "hardware": ctx["hardware"], "versions": ctx["versions"],
    }


# --- the run -----------------------------------------------------------------------------------

def answers_path(out: Path, temperature: float, label: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9@._-]+", "_", label)
    return out / "answers" / f"T{tkey(temperature)}" / f"{safe}.jsonl"


def read_answers(out: Path) -> list[dict]:
    """Every record under ``OUT/answers`` (a torn last line from a crash is skipped)."""
    recs = []
    for f in sorted((Path(out) / "answers").glob("T*/*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return recs


def _append(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def check_prompts(dec, prompts, max_new_tokens: int, chat: bool) -> None:
    """Fail before the run, naming the prompt, when a first turn cannot fit the context."""
    limit = dec.target.max_positions
    for p in prompts:
        try:
            ids = encode_messages(dec, [{"role": "user", "content": p.turns[0]}], chat)
        except ConfigError as e:
            raise UserError(f"prompt {p.id!r}: {e}") from None
        if len(ids) + max_new_tokens + 17 > limit:
            raise UserError(f"prompt {p.id!r} ({len(ids)} tokens) + --max-new-tokens {max_new_tokens} exceeds "
                              f"the target's context of {limit}")


def run_bench(dec, prompts, variants: list[Variant], temperatures: list[float], out: Path, *, max_new_tokens: int,
              repeats: int = 1, builder: str = "python", ab_builder: str | None = None, chat: bool = True,
              warmup: bool = True, resume: bool = False, progress: bool = True, ctx: dict | None = None) -> int:
    """Decode every (temperature, prompt, variant, repeat), appending records as they finish.

    Returns the number of records written. On any exception the records already written stay.
    """
    from tqdm import tqdm
    ctx = dict(ctx or {})
    ctx.setdefault("builder", builder)
    ctx.setdefault("preset", dec.pair.name)
    ctx.setdefault("dtype", str(dec.target.dtype).replace("torch.", ""))
    ctx.setdefault("max_new_tokens", max_new_tokens)
    ctx.setdefault("hardware", hardware_info(dec.target.device))
    ctx.setdefault("versions", versions_info())
    done = set()
    if resume:
        for r in read_answers(out):
            done.add((tkey(r["temperature"]), r["label"], r["question_id"]))
    todo = [(t, pi, p, v) for t in temperatures for pi, p in enumerate(prompts)
            for v in _rotate(variants, pi) if (tkey(t), v.label, p.id) not in done]
    if warmup and todo:
        warm_up(dec, variants, temperatures[0], builder)
    bar = tqdm(total=len(todo) * repeats, desc="bench", unit="decode", file=sys.stderr, disable=not progress,
               mininterval=1.0, dynamic_ncols=True)
    written = 0
    try:
        for t, pi, p, v in todo:
            bar.set_postfix_str(f"T={tkey(t)} {p.id} {v.label}", refresh=False)
            choices = []
            for r in range(repeats):
                choices.append(run_choice(dec, p, v, t, pi, max_new_tokens, builder, ab_builder, chat, r))
                bar.update(1)
            _append(answers_path(out, t, v.label), make_record(p, v, t, choices, ctx))
            written += 1
    except BaseException:
        bar.close()
        n = len(read_answers(out))
        print(f"bench stopped: {n} finished records are kept in {out / 'answers'} "
              f"(continue with --resume --out {out}; tables with --summarize {out})", file=sys.stderr)
        raise
    bar.close()
    return written


def warm_up(dec, variants: list[Variant], temperature: float, builder: str) -> None:
    """One short decode per method: allocator, kernels, caches."""
    for v in variants:
        if v.method == HF_GENERATE:
            _hf_turn(dec, dec.encode_prompt("Warmup"), 16)
            continue
        dec.generate("Warmup", DecodeConfig(method=v.method, temperature=float(temperature), max_new_tokens=16,
                                            seed=0, builder=builder, tree=v.tree, draft_vocab=v.draft_vocab))


def _rotate(variants, k):
    k %= max(len(variants), 1)
    return variants[k:] + variants[:k]
