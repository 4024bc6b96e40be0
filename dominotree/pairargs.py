"""The command-line arguments every decoding command shares, and loading a pair from them.

``add_model_args`` (which pair: ``--preset`` or ``--target``/``--drafter``, dtype, device, weights,
forward), ``load_pair_from_args`` (those arguments -> ``presets.load_pair``, with a ``UserError``
for folders that are not there) and ``add_tree_args`` (budget, Top-M, children, builder, draft
vocabulary). ``generate`` (``cli.py``), ``bench`` and the profiling commands (``bench/``) all
take them; call ``pairargs.load_pair_from_args`` through the module, so a test can swap it.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from .config import BOUNDS, BUILDERS, ConfigError
from .errors import UserError


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model pair")
    g.add_argument("--preset", default=None, help="smollm2 (default), random-tiny, qwen3-4b, qwen3-8b")
    g.add_argument("--target", default=None, help="target folder (transformers causal LM)")
    g.add_argument("--drafter", action="append", default=None,
                   help="drafter folder in the released format (repeat for a DFlash and a Domino drafter); "
                        "without --target they replace the preset's drafters")
    g.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    g.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    g.add_argument("--weights", default=None, choices=["int4", "int4-q8", "bf16", "float32"],
                   help="target weights (default: int4-q8 for the embedded pair in float32 where the C++ kernels build, "
                        "else --dtype); int4-q8 = the GGUF's Q4_1 blocks times 8-bit activation blocks, as llama.cpp "
                        "multiplies (the fastest); int4 = the same blocks with float32 activations (the float32 model's "
                        "tokens; bf16 activations without the kernels)")
    g.add_argument("--forward", default="fast", choices=["fast", "hf"],
                   help="target forward: fast (Llama/Qwen3; others fall back) or the transformers one")


def add_tree_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tree")
    g.add_argument("--budget", type=budget_arg, default=16,
                   help="draft tree nodes (default 16), or auto: the fixed budget with the best predicted "
                        "tokens/s on this device (needs a profile-cost profile; calibrates once)")
    g.add_argument("--corr-topm", type=int, default=64, help="Top-M base candidates the correction rescores (0 = full vocab)")
    g.add_argument("--node-topk", type=int, default=8, help="children per expanded node (default 8)")
    g.add_argument("--builder", default=None, choices=BUILDERS,
                   help="tree builder (default: the fastest the identity tests cover on the device: "
                        "graph on CPU, python on CUDA; python is the reference)")
    g.add_argument("--ab-builder", default=None, choices=BUILDERS,
                   help="also build every round with this builder and record both times")
    add_draft_vocab_arg(g)


DRAFT_VOCAB_HELP = ("the drafters score only the N most frequent tokens (FR-Spec style: a cheaper draft LM head and "
                    "build; lossless either way). Default: the pair's own (8192 for the embedded smollm2 pair, whose "
                    "acceptance loses nothing with it; the full vocabulary for every other pair); 0: the full "
                    "vocabulary, as the paper")


def add_draft_vocab_arg(p, help: str = DRAFT_VOCAB_HELP) -> None:
    """``--draft-vocab N``: None (not given) is the pair's default, resolved once the pair is loaded
    (``Pair.resolve_draft_vocab``); a negative count is refused here."""
    p.add_argument("--draft-vocab", type=draft_vocab_arg, default=None, metavar="N", help=help)


def bounded(name: str, value: str):
    """``value`` parsed and checked against ``config.BOUNDS[name]``, as an argparse type error."""
    try:
        return BOUNDS[name].parse(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def draft_vocab_arg(s: str) -> int:
    """``--draft-vocab``: a token count >= 0 (0: the full vocabulary)."""
    return bounded("draft_vocab", s)


def budget_arg(s: str):
    """``--budget``: an integer or ``auto`` (its range is checked with every other setting, by
    ``config.TreeConfig``, before the pair loads)."""
    if s.strip().lower() == "auto":
        return "auto"
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer or auto, got {s!r}") from None


def load_pair_from_args(a):
    from .presets import load_pair
    if a.target is not None and a.preset:
        raise UserError("give either --preset or --target/--drafter, not both")
    # --drafter alone: the preset's target and weights (the default preset's) with other drafters
    for path in ([a.target] if a.target is not None else []) + list(a.drafter or []):
        if not Path(path).is_dir():
            raise UserError(f"folder does not exist: {path}")
    return load_pair(a.preset, a.target, a.drafter, dtype=a.dtype, device=a.device,
                     forward=getattr(a, "forward", "fast"), weights=getattr(a, "weights", None))
