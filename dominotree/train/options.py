"""The trainer's command line: every flag of ``python -m dominotree.train.trainer``, with its checks.

A usage error (``argparse`` exits with status 2 and a message) changes nothing on disk; the trainer
(``dominotree.train.trainer``) reads the parsed namespace and nothing else from the command line.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m dominotree.train.trainer",
                                 description="Train the DFlash and Domino drafters together on self-distillation data.")
    ap.add_argument("--data", type=Path, default=Path("data/distill"), help="folder of *.jsonl shards")
    ap.add_argument("--shards", type=int, default=None,
                    help="train on the first N shards only (name order): the same data while more are appended")
    ap.add_argument("--target", type=Path, default=None, help="target model folder (default: embedded SmolLM2)")
    ap.add_argument("--out-dflash", type=Path, default=None, help="default: data/train/smollm2-dflash-b<block size>")
    ap.add_argument("--out-domino", type=Path, default=None, help="default: data/train/smollm2-domino-b<block size>")
    ap.add_argument("--time-budget-min", type=float, default=75.0)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time budget only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layers", type=int, default=2, help="draft decoder layers")
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--heads", type=int, default=0, help="0: the target's")
    ap.add_argument("--kv-heads", type=int, default=0, help="0: the target's")
    ap.add_argument("--head-dim", type=int, default=0, help="0: the target's")
    ap.add_argument("--taps", default="", help="tapped target layers, e.g. 1,8,14,20,27 (default: DFlash's rule, 5 layers)")
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--mask-token-id", type=int, default=16, help="SmolLM2 <empty_output>, never in chat output")
    ap.add_argument("--gru-hidden", type=int, default=256)
    ap.add_argument("--emb-dim", type=int, default=128)
    ap.add_argument("--decay-ratio", type=float, default=0.3, help="Domino base-anchored curriculum length")
    ap.add_argument("--lam-floor", type=float, default=0.0,
                    help="lower bound of the base-loss weight lam (0: the released curriculum, lam -> 0). "
                         "A floor keeps the base logits a usable Top-M candidate list for DominoTree")
    ap.add_argument("--resume-dflash", type=Path, default=None,
                    help="start from this DFlash checkpoint folder (released format) instead of a fresh init")
    ap.add_argument("--resume-domino", type=Path, default=None,
                    help="start from this Domino checkpoint folder (released format) instead of a fresh init")
    ap.add_argument("--gamma", type=float, default=7.0, help="row loss-weight decay exp(-(k-1)/gamma)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-domino", type=float, default=None,
                    help="the Domino drafter's peak lr (default: --lr); the same warmup and cosine schedule")
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=float, default=0.03, help="warmup fraction of training")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--batch", type=int, default=4, help="sequences per step")
    ap.add_argument("--anchors", type=int, default=32, help="blocks (anchors) per sequence per step")
    ap.add_argument("--init-from-target", action="store_true", help="copy the target's last layers into the draft layers")
    ap.add_argument("--feat-cache-gb", type=float, default=3.0, help="in-memory target-feature cache")
    ap.add_argument("--n-eval", type=int, default=24, help="held-out sequences (at most 10%% of the data)")
    ap.add_argument("--eval-anchors", type=int, default=8, help="anchors per held-out sequence")
    ap.add_argument("--eval-every-min", type=float, default=5.0)
    ap.add_argument("--save-every-min", type=float, default=10.0)
    ap.add_argument("--log-every", type=int, default=10, help="steps")
    ap.add_argument("--log", type=Path, default=None, help="also append log lines to this file")
    ap.add_argument("--summary-md", type=Path, default=None,
                    help="append a markdown section with the final numbers to this file at the end")
    ap.add_argument("--threads", default="auto",
                    help="torch threads: a number, or 'auto' (on a shared machine an oversubscribed "
                         "OpenMP pool can be 5x slower than one thread: every --probe-every steps, "
                         "try 1 and the default count for a few steps and keep the faster)")
    ap.add_argument("--probe-every", type=int, default=60)
    ap.add_argument("--no-amp", action="store_true", help="float32 instead of bf16 autocast")
    ap.add_argument("--device", default="cpu",
                    help="where the target and both drafters run (cpu, cuda, cuda:N): the same code path on each")
    ap.add_argument("--curve-json", type=Path, default=None,
                    help="append every held-out evaluation (step, seconds, acceptance, reach) to this JSON-lines file")
    ap.add_argument("--target-dtype", choices=("bfloat16", "float32"), default="bfloat16",
                    help="the frozen target's dtype for features (kept as bf16 either way); float32 is "
                         "the faster one on CPUs without native bf16 (AVX2)")
    ap.add_argument("--head-vocab", type=int, default=0,
                    help="training loss over the N most frequent answer tokens plus each step's labels "
                         "instead of the full vocabulary (0: full; evaluation is always full)")
    ap.add_argument("--state", type=Path, default=None,
                    help="write the full training state (fp32 weights, optimizers, schedule position, random "
                         "states) to this file at every save, for --resume (not committed: ~12 bytes/param)")
    ap.add_argument("--run-minutes", type=float, default=0.0,
                    help="end this run (saving, with --state) after this many minutes; the schedule still spans "
                         "--time-budget-min, so a later --resume continues it (0: no limit)")
    ap.add_argument("--run-steps", type=int, default=0, help="end this run after this many steps (0: no limit)")
    ap.add_argument("--skip-seqs", type=int, default=0,
                    help="leave out the first N sequences of the first epoch's order (the ones an earlier stage "
                         "with the same --seed and data trained on: its steps x --batch)")
    ap.add_argument("--heldout-shards", type=int, default=None, metavar="K",
                    help="make the held-out split from the first K shards only, exactly as a run with --shards K "
                         "did (so a later stage on more data is evaluated on the same sequences, none trained on)")
    ap.add_argument("--train-from-shard", type=int, default=0, metavar="S",
                    help="train only on shards S and later (name order): data that earlier stages never saw")
    ap.add_argument("--train-to-shard", type=int, default=None, metavar="E",
                    help="and only on shards before E: an earlier stage's sequences and order after shards were added")
    ap.add_argument("--resume", action="store_true",
                    help="continue the run saved in --state: same schedule, same sequence order, same randomness "
                         "(automatic when the --state file exists, unless --no-auto-resume)")
    ap.add_argument("--no-auto-resume", action="store_true", help="start afresh even when the --state file exists")
    ap.add_argument("--soft-k", type=int, default=0, metavar="K",
                    help="label = the target's own distribution: KL to its top-K next-token log-probs + CE on its "
                         "argmax (run once per sequence with its features, kept in memory; 0: the data tokens)")
    ap.add_argument("--loop-weight", type=float, default=1.0,
                    help="loss weight of label positions that continue a 5-gram already in the answer (1: none)")
    ap.add_argument("--topm-loss", type=int, default=0, metavar="M",
                    help="add Domino's correction loss over the Top-M base candidates, as the tree scores "
                         "children (scoring.ConditionalScorer); 0: off")
    ap.add_argument("--topm-weight", type=float, default=1.0, help="weight of the --topm-loss term")
    a = ap.parse_args(argv)
    a.out_dflash = a.out_dflash or Path(f"data/train/smollm2-dflash-b{a.block_size}")
    a.out_domino = a.out_domino or Path(f"data/train/smollm2-domino-b{a.block_size}")
    a.lr_domino = a.lr if a.lr_domino is None else a.lr_domino
    if a.state is not None and a.state.is_file() and not a.resume and not a.no_auto_resume:
        a.resume = True
        print(f"found the training state {a.state}: resuming (--no-auto-resume starts afresh)", file=sys.stderr)
    if a.soft_k < 0 or a.topm_loss < 0 or not 0.0 <= a.loop_weight <= 1.0:
        ap.error("--soft-k and --topm-loss must be >= 0, --loop-weight in [0, 1]")
    if a.lr <= 0 or a.lr_domino <= 0:
        ap.error("--lr and --lr-domino must be > 0")
    try:
        dev = torch.device(a.device)
    except RuntimeError as e:
        ap.error(f"--device {a.device!r}: {e}")
    if dev.type == "cuda" and not torch.cuda.is_available():
        ap.error(f"--device {a.device}: this torch sees no CUDA device")
    if a.resume and a.state is None:
        ap.error("--resume needs --state FILE")
    return a
