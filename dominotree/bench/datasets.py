"""Prompt sets for the benchmark: JSONL files, our own sets in ``assets/``, and the paper's eight
benchmarks by name.

Every source yields ``Prompt(id, category, turns)``; JSONL files and our sets are read by
``dominotree.promptfiles`` (its names are importable here too).

The paper's benchmarks (GSM8K, MATH-500, AIME25, HumanEval, MBPP, LiveCodeBench, MT-Bench,
Alpaca) load through the ``datasets`` library with the prompt formats of the DFlash / DDTree
harnesses (``load_and_process_dataset``). The first successful load is cached as
``$DOMINOTREE_CACHE/datasets/<name>.jsonl``, so later runs work offline (and without
``datasets``). Offline with neither cache, the error names the dataset and how to fetch it.
"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import UserError
from ..promptfiles import (ASSET_SETS, ASSETS_PROMPTS, Prompt, load_assets, load_jsonl,  # noqa: F401
                           parse_prompt_obj, write_jsonl)

_BOXED = "\nPlease reason step by step, and put your final answer within \\boxed{}."
_HUMANEVAL = ("Write a solution to the following problem and make sure that it passes the tests:\n"
              "```python\n{prompt}\n```")
_LCB_FILES = ("test.jsonl", "test2.jsonl", "test3.jsonl", "test4.jsonl", "test5.jsonl", "test6.jsonl")

# name -> (HF dataset repo, config, split, rollup category, paper label)
PAPER_DATASETS = {
    "gsm8k": ("openai/gsm8k", "main", "test", "math", "GSM8K"),
    "math500": ("HuggingFaceH4/MATH-500", None, "test", "math", "MATH-500"),
    "aime25": ("MathArena/aime_2025", None, "train", "math", "AIME25"),
    "humaneval": ("openai/openai_humaneval", None, "test", "code", "HumanEval"),
    "mbpp": ("google-research-datasets/mbpp", "sanitized", "test", "code", "MBPP"),
    "livecodebench": ("livecodebench/code_generation_lite", None, "test", "code", "LiveCodeBench"),
    "mt-bench": ("HuggingFaceH4/mt_bench_prompts", None, "train", "chat", "MT-Bench"),
    "alpaca": ("tatsu-lab/alpaca", None, "train", "chat", "Alpaca"),
}
ALIASES = {"math-500": "math500", "aime2025": "aime25", "lcb": "livecodebench", "mtbench": "mt-bench",
           "mt_bench": "mt-bench", "human-eval": "humaneval"}

# --- the paper's benchmarks ------------------------------------------------------------------------

def dataset_cache_dir() -> Path:
    from ..models.smollm2 import cache_root
    return cache_root() / "datasets"


def _offline() -> bool:
    return any(os.environ.get(k, "").lower() in ("1", "true", "yes", "on")
               for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _format_lcb(doc: dict) -> str:
    system = ("You are an expert Python programmer. You will be given a question (problem specification) and will "
              "generate a correct Python program that matches the specification and passes all tests. You will NOT "
              "return anything except for the program")
    question = f"### Question:\n{doc['question_content']}"
    if doc.get("starter_code"):
        fmt, code = "### Format: Use the following code structure:", f"```python\n{doc['starter_code']}\n```"
    else:
        fmt, code = "### Format: Write your code in the following format:", "```python\n# YOUR CODE HERE\n```"
    return f"{system}\n\n{question}\n\n{fmt}\n{code}\n\n### Answer: (use the provided format with backticks)"


def format_row(name: str, row: dict) -> list[str]:
    """The DFlash / DDTree harness prompt format of one dataset row, as user turns."""
    if name == "gsm8k":
        return [row["question"] + _BOXED]
    if name in ("math500", "aime25"):
        return [row["problem"] + _BOXED]
    if name == "humaneval":
        return [_HUMANEVAL.format(prompt=row["prompt"])]
    if name == "mbpp":
        return [row["prompt"]]
    if name == "livecodebench":
        return [_format_lcb(row)]
    if name == "mt-bench":
        return list(row["prompt"])
    if name == "alpaca":
        return [f"{row['instruction']}\n\nInput:\n{row['input']}" if row.get("input") else row["instruction"]]
    raise KeyError(name)


def _row_id(name: str, row: dict, i: int) -> str:
    for key in ("task_id", "question_id", "prompt_id", "problem_idx", "unique_id", "id"):
        if row.get(key) not in (None, ""):
            return f"{name}-{row[key]}"
    return f"{name}-{i}"


def _how_to_get(name: str) -> str:
    repo = PAPER_DATASETS[name][0]
    return (f"on a machine with network run `python -m dominotree bench --dataset {name} --prepare-only` "
            f"(needs `pip install datasets`; it caches {dataset_cache_dir() / (name + '.jsonl')}), or "
            f"`huggingface-cli download --repo-type dataset {repo}` into the Hugging Face cache, "
            f"or pass --prompts FILE.jsonl")


def _load_hf(name: str) -> list[dict]:
    try:
        import datasets as hfd
    except ImportError:
        raise UserError(f"dataset {name!r} ({PAPER_DATASETS[name][0]}) is not cached and the `datasets` "
                          f"library is not installed: pip install datasets==5.2.0; or {_how_to_get(name)}") from None
    repo, config, split, _, _ = PAPER_DATASETS[name]
    try:
        if name == "livecodebench":
            from huggingface_hub import hf_hub_download
            files = [hf_hub_download(repo, fn, repo_type="dataset", local_files_only=_offline()) for fn in _LCB_FILES]
            ds = hfd.load_dataset("json", data_files={"test": files}, split="test")
        else:
            ds = hfd.load_dataset(repo, config, split=split) if config else hfd.load_dataset(repo, split=split)
        return [dict(r) for r in ds]
    except Exception as e:   # offline, missing cache, hub errors: one actionable line
        why = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        state = "offline and not in the local cache" if _offline() else f"could not be loaded ({why})"
        raise UserError(f"dataset {name!r} ({repo}) is {state}: {_how_to_get(name)}") from None


def load_paper_dataset(name: str, refresh: bool = False) -> list[Prompt]:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in PAPER_DATASETS:
        raise UserError(f"unknown dataset {name!r}; choose one of {', '.join(PAPER_DATASETS)} "
                          f"(or our sets: {', '.join(ASSET_SETS)}), or pass --prompts FILE.jsonl")
    group = PAPER_DATASETS[key][3]
    cat = key
    cached = dataset_cache_dir() / f"{key}.jsonl"
    if cached.is_file() and not refresh:
        ps = load_jsonl(cached, default_category=cat)
    else:
        rows = _load_hf(key)
        ps = [Prompt(_row_id(key, r, i), cat, format_row(key, r)) for i, r in enumerate(rows)]
        seen: dict[str, int] = {}
        for p in ps:   # keep ids unique
            if p.id in seen:
                seen[p.id] += 1
                p.id = f"{p.id}-{seen[p.id]}"
            else:
                seen[p.id] = 0
        write_jsonl(ps, cached)
    for p in ps:
        p.category, p.dataset, p.group = cat, key, group
    return ps


def load_prompts(prompts: str | None = None, dataset: str | None = None, limit: int | None = None,
                 refresh: bool = False) -> list[Prompt]:
    """Resolve ``--prompts FILE`` or ``--dataset NAME[,NAME...]`` (default: our ``eval`` set).

    ``limit`` keeps the first N prompts of each source (the paper uses 50 per dataset).
    """
    if prompts and dataset:
        raise UserError("give either --prompts or --dataset, not both")
    if limit is not None and limit < 1:
        raise UserError(f"--limit must be >= 1, got {limit}")
    if prompts:
        out = load_jsonl(prompts)
        return out[:limit] if limit else out
    out: list[Prompt] = []
    for name in (dataset or "eval").split(","):
        name = name.strip()
        if not name:
            continue
        if name in ASSET_SETS or name.startswith("assets:"):
            ps = load_assets(name.split(":", 1)[-1])
        elif name.endswith(".jsonl"):
            ps = load_jsonl(name)
        else:
            ps = load_paper_dataset(name, refresh=refresh)
        ps = ps[:limit] if limit else ps
        if len(out) and any(p.id in {q.id for q in out} for p in ps):
            for p in ps:
                p.id = f"{p.dataset}/{p.id}"
        out += ps
    if not out:
        raise UserError("no prompts selected")
    return out
