"""Frozen configuration dataclasses. Flags (CLI, UI sliders) map 1:1 onto these fields."""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import ConfigError  # defined with every user error in errors.py; importable here

STAGES = ("draft", "build", "verify", "commit")

# method -> which drafter checkpoint it needs ("dflash", "domino", or None for plain AR)
METHOD_DRAFTER = {
    "ar": None,
    "dflash": "dflash",
    "ddtree": "dflash",
    "caddtree": "dflash",
    "domino": "domino",
    "dominotree": "domino",
    "marg": "domino",
    "condstatic": "domino",
    "condadaptive": "domino",
}
METHODS = tuple(METHOD_DRAFTER)
CHAIN_METHODS = ("dflash", "domino")
BUILDERS = ("python", "graph", "frontier")
# the fastest builder the identity tests cover, per device type (bench-build measures them;
# results/build-cpu.json). CUDA keeps the reference until the cuda tests have run on a GPU.
DEFAULT_BUILDERS = {"cpu": "graph", "cuda": "python"}


def default_builder(device=None) -> str:
    """The default tree builder on ``device`` (a torch device or its type name; None: cuda when
    available, else cpu). ``--builder python`` stays the reference."""
    if device is None:
        import torch
        device = "cuda" if torch.cuda.is_available() else "cpu"
    kind = device if isinstance(device, str) else device.type
    return DEFAULT_BUILDERS.get(kind.split(":")[0], "python")

MAX_BUDGET = 1024


@dataclass(frozen=True)
class TreeConfig:
    budget: int = 16          # non-root nodes in the draft tree; 0: none, plain decoding (auto's "no tree pays")
    corr_topm: int = 64       # Top-M base candidates the correction may rescore (0 = full vocab)
    node_topk: int = 8        # K children per expanded node
    max_depth: int | None = None  # None: the drafter's block depth (15 DFlash, 16 Domino)

    def __post_init__(self):
        if not isinstance(self.budget, int) or not 0 <= self.budget <= MAX_BUDGET:
            raise ConfigError(f"budget must be an integer in [0, {MAX_BUDGET}] (0: no tree, plain decoding), "
                              f"got {self.budget!r}")
        if not isinstance(self.corr_topm, int) or self.corr_topm < 0:
            raise ConfigError(f"corr_topm must be >= 0 (0 = full vocabulary), got {self.corr_topm!r}")
        if not isinstance(self.node_topk, int) or self.node_topk < 1:
            raise ConfigError(f"node_topk must be >= 1, got {self.node_topk!r}")
        if self.corr_topm and self.node_topk > self.corr_topm:
            raise ConfigError(f"node_topk ({self.node_topk}) cannot exceed corr_topm ({self.corr_topm})")
        if self.max_depth is not None and self.max_depth < 1:
            raise ConfigError(f"max_depth must be >= 1, got {self.max_depth!r}")


@dataclass(frozen=True)
class DecodeConfig:
    method: str = "dominotree"
    temperature: float = 0.0
    max_new_tokens: int = 128
    seed: int = 0
    builder: str | None = None       # the builder whose tree is verified (None: default_builder(device))
    ab_builder: str | None = None    # also build with this one, record its time and identity
    tree: TreeConfig = field(default_factory=TreeConfig)
    stop_at_eos: bool = True
    draft_vocab: int = 0             # drafters score only the N most frequent tokens (0: all, the paper)

    def __post_init__(self):
        if self.method not in METHOD_DRAFTER:
            raise ConfigError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        t = self.temperature
        if not isinstance(t, (int, float)) or t != t or t < 0 or t > 100:
            raise ConfigError(f"temperature must be a number in [0, 100], got {t!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}")
        dv = self.draft_vocab
        if isinstance(dv, bool) or not isinstance(dv, int) or dv < 0:
            raise ConfigError(f"draft_vocab must be a token count >= 0 (0: the full vocabulary), got {dv!r}")
        for b in (self.builder, self.ab_builder):
            if b is not None and b not in BUILDERS:
                raise ConfigError(f"unknown builder {b!r}; choose one of {', '.join(BUILDERS)}")

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5
