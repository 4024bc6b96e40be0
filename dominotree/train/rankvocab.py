"""Rank the target's tokens for a draft vocabulary (``dominotree/draftvocab.py``).

    python -m dominotree.train.rankvocab --data assets/distill [--shards N] [--keep 32768]
        [--out assets/drafters/draft-vocab.json]

Counts every answer token of the self-distilled data (the target's own outputs, so the tokens it
writes) and ranks them, most frequent first; ids that never occur follow in id order (a BPE
tokenizer numbers its merges roughly by frequency). The file keeps the first ``--keep`` ids, the
data it came from, and the share of answer tokens each draft-vocabulary size covers, measured on
held-out shards (the last tenth of the shards, not counted) and then on all of them.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from dominotree.draftvocab import DEFAULT_FILE
from dominotree.train.data import read_data, shard_files
from dominotree.train.headvocab import ranked_tokens

SIZES = (2048, 4096, 8192, 16384, 24576, 32768)


def coverage(order: torch.Tensor, counts: torch.Tensor, sizes=SIZES) -> dict[str, float]:
    """Share of the counted tokens inside the first n ranked ids, for each n."""
    total = max(1, int(counts.sum()))
    csum = counts[order].cumsum(0)
    return {str(n): round(float(csum[min(n, len(order)) - 1]) / total, 4) for n in sizes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("assets/distill"))
    ap.add_argument("--shards", type=int, default=None, help="the first N shards only")
    ap.add_argument("--vocab-size", type=int, default=49152, help="the target's vocabulary rows")
    ap.add_argument("--keep", type=int, default=32768, help="ranked ids kept in the file")
    ap.add_argument("--out", type=Path, default=DEFAULT_FILE)
    a = ap.parse_args(argv)
    n_shards = len(shard_files(a.data, a.shards))
    seqs = read_data(a.data, shards=n_shards)
    answers = [s.ids[s.prompt_len:] for s in seqs]
    # held-out coverage: rank on the first nine tenths of the shards, count on the rest
    cut = max(1, n_shards - max(1, n_shards // 10))
    head = read_data(a.data, shards=cut)
    order_h, _ = ranked_tokens((s.ids[s.prompt_len:] for s in head), a.vocab_size)
    _, counts_rest = ranked_tokens(answers[len(head):], a.vocab_size)
    order, counts = ranked_tokens(answers, a.vocab_size)
    blob = {"ranked_ids": order[: a.keep].tolist(),
            "made_by": "python -m dominotree.train.rankvocab " + " ".join(sys.argv[1:] if argv is None else argv),
            "data": str(a.data), "shards": n_shards, "answer_tokens": int(counts.sum()),
            "distinct_tokens": int((counts > 0).sum()),
            "coverage_heldout": {"ranked_on_shards": cut, **coverage(order_h, counts_rest)},
            "coverage_all": coverage(order, counts)}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(blob) + "\n")
    print(f"{a.out}: {a.keep} ranked ids from {blob['answer_tokens']} answer tokens in {n_shards} shards "
          f"({blob['distinct_tokens']} distinct); held-out coverage {blob['coverage_heldout']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
