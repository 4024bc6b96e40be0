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

MAX_BUDGET = 256


@dataclass(frozen=True)
class Bound:
    """A number's range and its one message, read by the library (the configs below), the
    command line (``pairargs``) and the explorer (its sliders and checks): ``lo <= value <= hi``
    (``hi`` None: no upper end); ``note`` says what a special value means. ``slider_hi`` is where
    the explorer's slider ends when ``hi`` is open."""
    name: str
    lo: float
    hi: float | None = None
    note: str = ""
    whole: bool = True
    slider_hi: float | None = None

    def message(self, got, label: str | None = None, hi: float | None = None) -> str:
        hi = self.hi if hi is None else hi
        kind = "an integer" if self.whole else "a number"
        where = f"in [{self.lo:g}, {hi:g}]" if hi is not None else f">= {self.lo:g}"
        shown = f"{got:g}" if isinstance(got, (int, float)) and not isinstance(got, bool) else repr(got)
        return f"{label or self.name} must be {kind} {where}" + (f" ({self.note})" if self.note else "") + f", got {shown}"

    def check(self, value, label: str | None = None, hi: float | None = None):
        """``value`` when it is in range (an int where ``whole``; a bool never), else a ConfigError."""
        top = self.hi if hi is None else hi
        ok_type = not isinstance(value, bool) and (isinstance(value, int) if self.whole else isinstance(value, (int, float)))
        if not ok_type or value != value or value < self.lo or (top is not None and value > top):
            raise ConfigError(self.message(value, label, hi))
        return value

    def parse(self, value, label: str | None = None, hi: float | None = None):
        """``check`` of a typed or slid value (a string, a float that is whole): the explorer's controls."""
        try:
            x = float(value)
        except (TypeError, ValueError):
            raise ConfigError(self.message(str(value)[:40], label, hi)) from None
        if self.whole and x == x and x == int(x):
            x = int(x)
        return self.check(x, label, hi)


BOUNDS = {b.name: b for b in (
    Bound("budget", 0, MAX_BUDGET, "0: no tree, plain decoding", slider_hi=MAX_BUDGET),
    Bound("corr_topm", 0, None, "0: the full vocabulary", slider_hi=256),
    Bound("node_topk", 1, None, slider_hi=32),
    Bound("max_depth", 1, None),
    Bound("temperature", 0, 100, "0: greedy", whole=False, slider_hi=2),
    Bound("max_new_tokens", 1, None),
    Bound("seed", 0, 2**63 - 1),        # torch.Generator.manual_seed takes a signed 64-bit integer
    Bound("draft_vocab", 0, None, "0: the full vocabulary"),
)}


@dataclass(frozen=True)
class TreeConfig:
    budget: int = 16          # non-root nodes in the draft tree; 0: none, plain decoding (auto's "no tree pays")
    corr_topm: int = 64       # Top-M base candidates the correction may rescore (0 = full vocab)
    node_topk: int = 8        # K children per expanded node
    max_depth: int | None = None  # None: the drafter's block depth (15 DFlash, 16 Domino)

    def __post_init__(self):
        for name in ("budget", "corr_topm", "node_topk"):
            BOUNDS[name].check(getattr(self, name))
        if self.corr_topm and self.node_topk > self.corr_topm:
            raise ConfigError(f"node_topk ({self.node_topk}) cannot exceed corr_topm ({self.corr_topm})")
        if self.max_depth is not None:
            BOUNDS["max_depth"].check(self.max_depth)


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
        for name in ("temperature", "max_new_tokens", "seed", "draft_vocab"):
            BOUNDS[name].check(getattr(self, name))
        for b in (self.builder, self.ab_builder):
            if b is not None and b not in BUILDERS:
                raise ConfigError(f"unknown builder {b!r}; choose one of {', '.join(BUILDERS)}")

    @property
    def greedy(self) -> bool:
        return self.temperature < 1e-5
