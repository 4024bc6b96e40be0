"""Training prompts for self-distillation: templates x fill-ins, seeded and reproducible.

Three categories, in the style of the held-out set ``assets/prompts/eval.jsonl``:
``chat`` (questions, instructions, explanations), ``math`` (word problems with random numbers)
and ``code`` (short programming requests). Prompts are short: SmolLM2-135M-Instruct answers
short, plain requests sensibly and drifts on long or tricky ones.

The training set is kept disjoint from the eval set: any prompt whose normalized text equals an
eval prompt, or that shares almost all its words with one, is dropped (``training_prompts``
asserts it).

One module per category (``chat``, ``word_problems``, ``code_requests``); ``long`` holds the
longer requests, follow-up turns and self-prompt openers of the self-distillation plan
(``train/jobs.py``).

    python -m dominotree.train.prompts --n 5 --seed 0     # print a sample
"""
from __future__ import annotations

import argparse
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from dominotree.train.prompts.chat import chat_request
from dominotree.train.prompts.code_requests import code_request
from dominotree.train.prompts.word_problems import word_problem

CATEGORIES = ("chat", "math", "code")
EVAL_PATH = Path(__file__).resolve().parents[3] / "assets" / "prompts" / "eval.jsonl"
CALIBRATE_PATH = EVAL_PATH.with_name("calibrate.jsonl")      # what --budget auto calibrates on
DEFAULT_MIX = {"chat": 0.40, "math": 0.30, "code": 0.30}


@dataclass(frozen=True)
class Prompt:
    id: str
    category: str
    prompt: str


GENERATORS = {"chat": chat_request, "math": word_problem, "code": code_request}


def normalize(text: str) -> str:
    """Lowercase, drop punctuation, collapse whitespace: the key for exact-overlap checks."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _words(text: str) -> set[str]:
    return set(normalize(text).split())


def load_eval(path: Path | str = EVAL_PATH) -> list[Prompt]:
    out = []
    with open(path) as f:
        for line in f:
            if line.strip():
                d = json.loads(line)
                out.append(Prompt(d["id"], d["category"], d["prompt"]))
    return out


def held_out() -> list[Prompt]:
    """Every prompt a measurement decodes: the evaluation set and the budget calibration set.
    Training requests stay clear of both (``jobs.Plan``; ``tests/test_datagen.py`` checks the
    committed data against both)."""
    return load_eval(EVAL_PATH) + load_eval(CALIBRATE_PATH)


def overlaps(prompt: str, eval_norms: set[str], eval_words: list[set[str]],
             jaccard: float = 0.8) -> bool:
    """True when ``prompt`` equals an eval prompt after normalization, or shares at least
    ``jaccard`` of its word set with one (near-exact: same template, one number changed)."""
    if normalize(prompt) in eval_norms:
        return True
    w = _words(prompt)
    for ew in eval_words:
        if w and ew and len(w & ew) / len(w | ew) >= jaccard:
            return True
    return False


def training_prompts(n: int = 6000, seed: int = 0, mix: dict[str, float] | None = None,
                     eval_path: Path | str = EVAL_PATH) -> list[Prompt]:
    """``n`` distinct training prompts (fewer only if the templates run dry), shuffled so any
    prefix keeps the category mix. Same ``seed`` -> same list."""
    mix = mix or DEFAULT_MIX
    rng = random.Random(seed)
    ev = load_eval(eval_path)
    eval_norms = {normalize(p.prompt) for p in ev}
    eval_words = [_words(p.prompt) for p in ev]
    seen: set[str] = set()
    out: list[Prompt] = []
    for cat in CATEGORIES:
        want = round(n * mix[cat])
        gen = GENERATORS[cat]
        got, tries = 0, 0
        while got < want and tries < want * 50:
            tries += 1
            p = gen(rng)
            key = normalize(p)
            if key in seen or overlaps(p, eval_norms, eval_words):
                continue
            seen.add(key)
            out.append(Prompt(f"train-{cat}-{got:05d}", cat, p))
            got += 1
    rng.shuffle(out)
    for p in out:  # the guarantee, checked
        assert normalize(p.prompt) not in eval_norms, p
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--total", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    ps = training_prompts(a.total, a.seed)
    counts = {c: sum(p.category == c for p in ps) for c in CATEGORIES}
    print(f"{len(ps)} prompts {counts}")
    for p in ps[: a.n]:
        print(json.dumps(p.__dict__))


if __name__ == "__main__":
    main()
