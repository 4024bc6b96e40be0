"""Requests the target writes itself: the chat template up to the opening of a user turn, plus an
optional first word or two (``prompts.long.SELF_OPENERS``), continued by sampling until the
turn ends. The cleaned request is then answered like any other prompt.

This broadens the prompt mix toward what the target itself finds natural to be asked, which is
the distribution its answers (and so the drafter's training data) are most fluent on.
"""
from __future__ import annotations

import re

from dominotree.train.prompts import normalize

MIN_WORDS, MAX_WORDS = 4, 80


def opener_ids(tok, opener: str) -> list[int]:
    """Token ids of the chat template up to an open user turn, followed by ``opener``."""
    marker = "\x00USER\x00"
    text = tok.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                   add_generation_prompt=False)
    head = text.split(marker)[0]
    if head == text:
        raise ValueError("the chat template does not place the user message verbatim")
    return tok(head + opener, add_special_tokens=False)["input_ids"]


def written_job(job, tok, out, trunc: bool, evals, stats):
    """The job with the request the target wrote for it (``out``: the writing's token ids, the
    last one its end unless ``trunc``), or None when the writing is rejected: degenerate
    (``clean_request``) or sharing an 8-word n-gram with an evaluation prompt (``evals.find``).
    Rejections are counted in ``stats``."""
    text = tok.decode(out[:-1] if not trunc else out)
    request = None if trunc else clean_request(job.opener, text)
    if request is not None and evals.find(request) is not None:
        stats["self rejected: overlaps eval"] += 1
        request = None
    if request is None:
        stats["self rejected"] += 1
        return None
    return type(job)(**{**job.__dict__, "request": request})


def clean_request(opener: str, continuation: str) -> str | None:
    """The request text, or None when it is degenerate: too short or long, mostly symbols,
    repetitive, or talking as the assistant rather than asking."""
    text = (opener + continuation).strip()
    text = re.sub(r"\s+\n", "\n", text)
    words = normalize(text).split()
    if not (MIN_WORDS <= len(words) <= MAX_WORDS):
        return None
    letters = sum(c.isalpha() for c in text)
    if letters < 0.6 * len(text.replace(" ", "")):
        return None
    if len(set(words)) < 0.5 * len(words):
        return None
    low = text.lower()
    if any(m in low for m in ("<|im_start|>", "<|im_end|>", "assistant:", "as an ai", "i'm smollm",
                              "i am smollm", "smollm")):
        return None
    return text
