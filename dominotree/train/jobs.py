"""The self-distillation plan: a seeded, endless sequence of jobs, each one or two generations.

Job kinds (``KIND_MIX``):
- ``template``: a short request of ``prompts.training_prompts`` (chat, math, code);
- ``long``: a multi-step math or code request of ``prompts.long``;
- ``self``: the target writes a request from the opening of a user turn (``selfprompt``), which
  is cleaned, checked against the evaluation and calibration prompts, and then answered;
- ``multiturn``: a template request answered, then a follow-up turn answered; the record's
  prompt holds the whole conversation before the last answer (the first answer is the target's
  own output too).

About ``sample_frac`` of the answers are sampled (temperature 0.7, top-p 0.95), the rest greedy.
Job ``j``'s content and seeds depend only on (seed, j), so a resumed run continues the same plan.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from dominotree.train.prompts import long as prompts_long
from dominotree.train.overlap import EvalIndex
from dominotree.train.prompts import CATEGORIES, held_out, training_prompts

KIND_MIX = {"template": 0.45, "long": 0.15, "self": 0.25, "multiturn": 0.15}
SELF_CATEGORY_MIX = {"chat": 0.5, "math": 0.2, "code": 0.3}


@dataclass(frozen=True)
class Job:
    id: str
    kind: str
    category: str
    request: str | None        # the user request (None for ``self``: the target writes it)
    opener: str = ""           # ``self``: the first words of the request
    follow_up: str = ""        # ``multiturn``: the second user turn
    sampled: bool = False
    seed: int = 0


class Plan:
    """Jobs in a fixed order for a seed. ``pool`` template requests are drawn once."""

    def __init__(self, seed: int = 0, pool: int = 20000, sample_frac: float = 0.3):
        self.seed = seed
        self.sample_frac = sample_frac
        # stricter than the pool's own filter: no 8-word n-gram in common with an evaluation or a
        # calibration prompt (the calibration set came after the pool; no template touched it)
        self.evals = EvalIndex(p.prompt for p in held_out())
        self.templates = [p for p in training_prompts(pool, seed) if self.evals.find(p.prompt) is None]

    def job(self, j: int) -> Job:
        rng = random.Random(self.seed * 1_000_003 + j)
        kind = rng.choices(list(KIND_MIX), weights=list(KIND_MIX.values()))[0]
        sampled = rng.random() < self.sample_frac
        seed = rng.getrandbits(31)
        if kind in ("template", "multiturn"):
            p = self.templates[j % len(self.templates)]
            sampled = sampled or j >= len(self.templates)   # a reused request: a new sample, not a copy
            fu = prompts_long.follow_up(rng, p.category) if kind == "multiturn" else ""
            return Job(f"{kind}-{j:07d}", kind, p.category, p.prompt, follow_up=fu, sampled=sampled, seed=seed)
        if kind == "long":
            cat = rng.choice(["math", "code"])
            make = prompts_long.long_math if cat == "math" else prompts_long.long_code
            text = make(rng)
            while self.evals.find(text) is not None:   # redraw (seeded) until disjoint from the eval set
                text = make(rng)
            return Job(f"long-{j:07d}", kind, cat, text, sampled=sampled, seed=seed)
        cat = rng.choices(list(SELF_CATEGORY_MIX), weights=list(SELF_CATEGORY_MIX.values()))[0]
        opener = rng.choice(prompts_long.SELF_OPENERS[cat])
        return Job(f"self-{j:07d}", kind, cat, None, opener=opener, sampled=sampled, seed=seed)


assert set(SELF_CATEGORY_MIX) <= set(CATEGORIES)
