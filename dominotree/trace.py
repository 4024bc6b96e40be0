"""RoundTrace / DecodeTrace: plain data the explorer draws from, serialized as versioned JSON.

Live runs and replays share one renderer because both only ever see these objects.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .config import STAGES
from .errors import TraceError  # defined with every user error in errors.py; importable here
from .tree import Tree

SCHEMA = "dominotree.trace"
SCHEMA_VERSION = 2             # 2: RoundTrace.draft (the drafter rows a rebuild needs, rebuild.py)
READABLE_VERSIONS = (1, 2)     # a version-1 trace loads with draft None: its rounds cannot be rebuilt
MAX_TRACE_BYTES = 64 * 1024 * 1024


@dataclass
class Menu:
    """The children menu of one expanded node: what the scorer offered at ``depth``."""
    node: int                    # row of the expanded node in the tree (-1: never popped)
    depth: int                   # depth of the children
    tokens: list[int]
    logprobs: list[float]        # as scored (corrected for conditional methods)
    base_logprobs: list[float]   # uncorrected full-vocabulary log-probs of the same tokens
    ranks: list[int]             # rank of each child in the Top-M base list (-1: outside it)


UNREAD = -1    # a tree row whose target token the verify did not compute (``verify.TreeRows``)


@dataclass
class RoundTrace:
    round: int
    start: int                   # absolute position of the root
    method: str
    builder: str
    temperature: float
    tree: Tree
    target_tokens: list[int]     # the target's token (sample or argmax) at every tree row; UNREAD
                                 # (-1) where the accept walk did not read the row and no trace asked
    accepted: list[int]          # accepted rows, root first
    bonus: int
    stage_ms: dict[str, float] = field(default_factory=dict)
    candidates: list[list[int]] = field(default_factory=list)         # per depth, Top-M ids
    candidate_logprobs: list[list[float]] = field(default_factory=list)  # their base log-probs
    menus: list[Menu] = field(default_factory=list)
    marginal_tree: Tree | None = None     # DDTree-style tree on the same block
    build_ab: dict | None = None          # {"builders": [a, b], "ms": [ta, tb], "identical": bool}
    draft: dict | None = None             # drafter rows + root state for rebuilds (rebuild.rows_dict)
    extra: dict = field(default_factory=dict)

    @property
    def accept_len(self) -> int:
        """Tokens committed this round (accepted drafts + bonus): the per-round tau."""
        return len(self.accepted)

    def token_ids(self) -> set[int]:
        """Every token id this round mentions (tree, target rows, menus, candidates)."""
        ids = set(self.tree.tokens) | (set(self.target_tokens) - {UNREAD}) | {self.bonus}
        for m in self.menus:
            ids.update(m.tokens)
        if self.marginal_tree is not None:
            ids.update(self.marginal_tree.tokens)
        for c in self.candidates:
            ids.update(c)
        return ids

    @property
    def committed(self) -> list[int]:
        return [self.tree.tokens[i] for i in self.accepted[1:]] + [self.bonus]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["tree"] = self.tree.to_dict()
        d["marginal_tree"] = self.marginal_tree.to_dict() if self.marginal_tree else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RoundTrace":
        d = dict(d)
        d["tree"] = Tree.from_dict(d["tree"])
        d["marginal_tree"] = Tree.from_dict(d["marginal_tree"]) if d.get("marginal_tree") else None
        d["menus"] = [Menu(**m) for m in d.get("menus", [])]
        rt = cls(**d)
        _check_types(rt, {"round": int, "start": int, "bonus": int, "method": str, "builder": str,
                          "temperature": (int, float)}, f"round {d.get('round')!r}")
        _check_list(rt.target_tokens, int, "target_tokens")
        _check_list(rt.accepted, int, "accepted")
        if not isinstance(rt.stage_ms, dict) or not all(isinstance(v, (int, float)) for v in rt.stage_ms.values()):
            raise TraceError(f"round {rt.round}: stage_ms must map stage names to numbers")
        n = len(rt.tree.tokens)
        if len(rt.target_tokens) != n:
            raise TraceError(f"round {rt.round}: target_tokens has {len(rt.target_tokens)} rows, tree has {n}")
        if not rt.accepted or rt.accepted[0] != 0 or any(not 0 <= a < n for a in rt.accepted):
            raise TraceError(f"round {rt.round}: accepted rows must start at the root and lie in the tree")
        return rt


def _check_types(obj, fields: dict, where: str) -> None:
    for name, typ in fields.items():
        v = getattr(obj, name)
        if not isinstance(v, typ) or isinstance(v, bool):
            raise TraceError(f"{where}: field {name!r} has the wrong type ({type(v).__name__})")


def _check_list(v, typ, name: str) -> None:
    if not isinstance(v, list) or not all(isinstance(x, typ) and not isinstance(x, bool) for x in v):
        raise TraceError(f"field {name!r} must be a list of {typ.__name__}")


def counterfactual_accept(tree: Tree, committed: list[int]) -> tuple[int, bool]:
    """How many of ``committed`` (this round's accepted tokens + bonus) ``tree`` would accept.

    Returns (accepted drafts, exact). When the tree matches every committed token the target was
    never asked beyond, so the count is a lower bound and ``exact`` is False.
    """
    from .tree import child_maps
    maps, cur, n = child_maps(tree), 0, 0
    for tok in committed:
        if tok not in maps[cur]:
            return n, True
        cur = maps[cur][tok]
        n += 1
    return n, False


@dataclass
class DecodeTrace:
    method: str
    prompt: str
    prompt_ids: list[int]
    token_ids: list[int]                     # generated tokens
    text: str
    rounds: list[RoundTrace] = field(default_factory=list)
    config: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)          # preset / paths / dtype / device
    token_text: dict[str, str] = field(default_factory=dict)  # id -> decoded piece (for replay)
    wall_s: float = 0.0
    stopped: str = ""                        # "eos", "max_new_tokens", "context", "user"

    @property
    def tau(self) -> float:
        rs = [r for r in self.rounds]
        return sum(r.accept_len for r in rs) / len(rs) if rs else 0.0

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.wall_s if self.wall_s > 0 else 0.0

    def stage_ms(self) -> dict[str, float]:
        """Mean per-round time of each stage."""
        n = max(len(self.rounds), 1)
        return {s: sum(r.stage_ms.get(s, 0.0) for r in self.rounds) / n for s in STAGES}

    def to_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k != "rounds"}
        d["rounds"] = [r.to_dict() for r in self.rounds]
        return {"schema": SCHEMA, "version": SCHEMA_VERSION, **d}

    def to_json(self, path: str | Path | None = None) -> str:
        s = json.dumps(self.to_dict(), ensure_ascii=False)
        if path is not None:
            Path(path).write_text(s, encoding="utf-8")
        return s


def trace_from_dict(d: dict) -> DecodeTrace:
    if not isinstance(d, dict) or d.get("schema") != SCHEMA:
        raise TraceError("not a DominoTree trace (missing schema 'dominotree.trace')")
    if d.get("version") not in READABLE_VERSIONS:
        raise TraceError(f"trace schema version {d.get('version')!r} is not supported (expected one of {READABLE_VERSIONS})")
    d = {k: v for k, v in d.items() if k not in ("schema", "version")}
    try:
        rounds = [RoundTrace.from_dict(r) for r in d.pop("rounds", [])]
        tr = DecodeTrace(rounds=rounds, **d)
        _check_types(tr, {"method": str, "prompt": str, "text": str, "stopped": str, "wall_s": (int, float)}, "trace")
        _check_list(tr.token_ids, int, "token_ids")
        _check_list(tr.prompt_ids, int, "prompt_ids")
        if not isinstance(tr.token_text, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                          for k, v in tr.token_text.items()):
            raise TraceError("field 'token_text' must map token ids to strings")
        return tr
    except TraceError:
        raise
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise TraceError(f"malformed trace: {e}") from None


def load_trace(source: str | Path | bytes) -> DecodeTrace:
    """Load a trace from a path, or from JSON text/bytes, with size and schema checks."""
    if isinstance(source, (bytes, bytearray)):
        raw = bytes(source)
    elif isinstance(source, str) and source.lstrip().startswith("{"):
        raw = source.encode("utf-8")
    else:
        p = Path(source)
        if not p.is_file():
            raise TraceError(f"trace file not found: {p}")
        if p.stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"trace file is larger than {MAX_TRACE_BYTES // 2**20} MiB")
        raw = p.read_bytes()
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceError(f"trace is larger than {MAX_TRACE_BYTES // 2**20} MiB")
    try:
        d = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceError(f"trace is not valid JSON: {e}") from None
    return trace_from_dict(d)


# --- acceptance by depth ---------------------------------------------------------------------------
# reach@d, the share of rounds that accepted at least d draft tokens: the acceptance yardstick
# (``python -m dominotree acceptance``) and the explorer's "Acceptance by depth" plot both read it.

MAX_D = 8


def reach(accepted: list[int], max_d: int = MAX_D) -> list[float]:
    """Share of rounds accepting at least d draft tokens, d = 1..max_d (``accepted``: per round)."""
    n = len(accepted)
    return [sum(a >= d for a in accepted) / n if n else 0.0 for d in range(1, max_d + 1)]
