"""Method specs of ``bench --methods``: ``NAME[@BUDGET|@auto][/mM][/vN]`` -> a ``Variant`` (a method with
its tree settings, named by its label): ``dominotree@32``, ``dominotree@auto``, ``condadaptive@64`` (max
budget), ``dominotree/m16`` (Top-M 16; ``/mfull`` for the full vocabulary), ``dominotree/v16384`` (a
draft vocabulary of the 16384 most frequent tokens, ``draftvocab.py``; ``/vfull`` or ``/v0``: the full
vocabulary). A spec without ``/vN`` drafts over the pair's default vocabulary (8192 tokens for the
embedded pair, the full one for others: ``presets.DEFAULT_DRAFT_VOCAB``); once the pair is loaded,
``resolve_variants`` fixes it and names it in the label, so ``dominotree@3/v8192`` is every run that
drafted over 8192 tokens, asked or by default, and a label without ``/vN`` always drafted over the
full vocabulary."""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..config import METHODS, ConfigError, TreeConfig
from ..errors import UserError

user_error = UserError      # the bench modules' old name for it


@dataclass(frozen=True)
class Variant:
    """One benchmarked configuration: a method with its tree settings, named by ``label``."""
    label: str
    method: str
    tree: TreeConfig
    auto: bool = False      # ``NAME@auto``: the budget is chosen by ``--budget auto`` before the run
    # ``/vN``: the drafters score only the N most frequent tokens (0: all, ``/vfull``); None: the
    # pair's default, until ``resolve_variants`` sets it
    draft_vocab: int | None = 0

    @property
    def budget(self) -> int:
        return self.tree.budget


HF_GENERATE = "hf-generate"
# Rows that are not decoders of this target (another implementation, its own precision): they get
# a tokens/s and a speedup, but no lossless check, tie diagnosis or paper claim.
REFERENCE_ROWS = (HF_GENERATE,)

_SPEC = re.compile(r"^(?P<m>[a-z]+)(?:@(?P<b>\d+|auto))?(?:/m(?P<topm>\d+|full))?(?:/v(?P<v>\d+|full))?$")
_VOCAB = re.compile(r"/v(\d+|full)$")


def vocab_free(label: str) -> str:
    """``label`` without its draft-vocabulary part: ``dominotree@3/v8192`` -> ``dominotree@3``."""
    return _VOCAB.sub("", label)


def parse_variant(spec: str, base: TreeConfig) -> Variant:
    s = spec.strip().lower()
    if s == HF_GENERATE:
        return Variant(HF_GENERATE, HF_GENERATE, base)
    m = _SPEC.match(s)
    if not m or m["m"] not in METHODS:
        raise UserError(f"bad method {spec!r}: use NAME[@BUDGET][/mM][/vN or /vfull] with NAME one of {', '.join(METHODS)}, "
                          f"or {HF_GENERATE} (plain transformers generate, bf16)")
    tree = base
    label = m["m"]
    auto = m["b"] == "auto"
    if auto:
        from ..auto.budget import AUTO_METHODS
        if m["m"] not in AUTO_METHODS:
            raise UserError(f"{spec.strip()!r}: @auto is for the fixed-budget tree methods ({', '.join(AUTO_METHODS)})")
        label += "@auto"
    elif m["b"] is not None:
        tree = replace(tree, budget=int(m["b"]))
        label += f"@{int(m['b'])}"
    if m["topm"] is not None:
        tm = 0 if m["topm"] == "full" else int(m["topm"])
        tree = replace(tree, corr_topm=tm, node_topk=min(tree.node_topk, tm) if tm else tree.node_topk)
        label += "/mfull" if tm == 0 else f"/m{tm}"
    vocab = None                    # the pair's default
    if m["v"] is not None:
        vocab = 0 if m["v"] == "full" else int(m["v"])
        if m["m"] == "ar":
            raise UserError(f"{spec.strip()!r}: ar drafts nothing, so it has no draft vocabulary")
        label += f"/v{vocab}" if vocab else "/vfull"
    return Variant(label, m["m"], tree, auto, vocab)


def resolve_variants(pair, variants: list[Variant]) -> list[Variant]:
    """Every variant with its draft vocabulary for ``pair`` (None: the pair's default,
    ``Pair.resolve_draft_vocab``; a size the pair cannot give is a UserError) and its label naming
    it: ``/v<N>`` when N tokens, nothing for the full vocabulary."""
    out, seen = [], {}
    for v in variants:
        if v.method == HF_GENERATE:
            n = 0
        else:
            try:
                n = pair.resolve_draft_vocab(v.draft_vocab, v.method)
            except ConfigError as e:
                raise UserError(f"method {v.label!r}: {e}") from None
        label = vocab_free(v.label) + (f"/v{n}" if n else "")
        if label in seen:
            raise UserError(f"methods {seen[label]!r} and {v.label!r} both run as {label!r} on this pair (its default "
                            f"draft vocabulary is {pair.default_draft_vocab or 'the full one'}; /vfull asks for the "
                            f"full vocabulary, /vN for N tokens)")
        seen[label] = v.label
        out.append(replace(v, label=label, draft_vocab=n))
    return out


def parse_variants(specs: str, base: TreeConfig) -> list[Variant]:
    out, seen = [], set()
    for s in specs.split(","):
        if not s.strip():
            continue
        try:
            v = parse_variant(s, base)
        except ConfigError as e:
            raise UserError(f"method {s.strip()!r}: {e}") from None
        if v.label in seen:
            raise UserError(f"method {v.label!r} is listed twice")
        seen.add(v.label)
        out.append(v)
    if not out:
        raise UserError("--methods is empty")
    return out
