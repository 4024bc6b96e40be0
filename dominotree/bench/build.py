"""``python -m dominotree bench-build``: build time per round for each tree builder.

Rounds are random draft blocks (peaked random base logits, random backbone states z) on a Domino
head at two sets of shapes: the embedded pair's (the shipped drafter and SmolLM2's embedding when
``assets/drafters/smollm2-domino-b8`` is present, else random weights with its shapes) and the
published Qwen3-4B Domino head's with random weights. Every builder builds every round from its
own scorer on the same block (so its lazily prepared depths count), interleaved in rotating order
after warm-up, next to DDTree's build stage on the same block; the tree and menus of each builder
are checked against the reference (every depth prepared up front) on every round. Each graph
builder's capture record (``Built.extra["capture"]``: ``captured``, ``native`` (CPU: the heap in
C++), or ``eager`` / ``fallback`` and why) is reported per shape set, so eager times are never
read as graph replays. Prints a table, then ONE JSON line last.

    python -m dominotree bench-build [--device cpu|cuda] [--rounds 50] [--shapes embedded,qwen3-4b]
                                     [--threads 1] [--dtype float32] [--json-out FILE]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from ..config import TreeConfig
from ..models.drafter import Drafter, DrafterConfig
from ..scoring import ConditionalScorer, DraftBlock
from ..builders import get_builder

BUILDERS = ("python", "graph", "frontier")
SHAPES = {
    "embedded": dict(hidden=576, vocab=49152, gru=256, emb=128, topm=64, topk=8, budget=16, depth=16),
    "qwen3-4b": dict(hidden=2560, vocab=151936, gru=1024, emb=256, topm=64, topk=8, budget=16, depth=16),
}


# --- inputs --------------------------------------------------------------------------------
def random_head(hidden: int, vocab: int, gru: int, emb: int, seed: int = 0, dtype=torch.float32,
                device="cpu", depth: int = 16, **_) -> tuple[Drafter, torch.nn.Embedding]:
    """A Domino drafter (a minimal backbone: only its head is used) and a target embedding table,
    random weights from ``seed``."""
    cfg = DrafterConfig(hidden_size=hidden, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=1, num_key_value_heads=1, head_dim=64, vocab_size=vocab,
                        block_size=depth, num_target_layers=4, mask_token_id=0, target_layer_ids=(1,),
                        projector_type="domino", shift_label=True, emb_dim=emb, gru_hidden_dim=gru)
    torch.manual_seed(seed)
    with torch.no_grad():
        drafter = Drafter(cfg).eval()
        embed = torch.nn.Embedding(vocab, hidden)
        embed.weight.mul_(0.05)
    return drafter.to(device=device, dtype=dtype), embed.to(device=device, dtype=dtype)


def embedded_head(dtype, device) -> tuple[Drafter, torch.nn.Module, str]:
    """The shipped embedded Domino drafter with SmolLM2's embedding, or random weights."""
    from ..presets import EMBEDDED_DRAFTER_DIRS
    folder = EMBEDDED_DRAFTER_DIRS["domino"]
    if (folder / "config.json").is_file():
        try:
            from ..models.checkpoint import load_drafter
            from ..models.smollm2 import ensure_smollm2
            from ..presets import load_target
            drafter = load_drafter(folder, dtype=dtype, device=device)
            target = load_target(ensure_smollm2(), dtype, device)
            return drafter.eval(), target.embed, "assets"
        except Exception as e:  # fall back to random weights with the same shapes
            print(f"note: embedded assets not usable ({e}); using random weights", file=sys.stderr)
    d, e = random_head(**SHAPES["embedded"], dtype=dtype, device=device)
    return d, e, "random"


def random_block(drafter: Drafter, embed, depth: int, gen: torch.Generator, ties: bool = False) -> DraftBlock:
    """One random draft block: per depth, peaked base logits (a few boosted tokens over N(0,1)
    noise, top-1 probability anywhere from ~0.2 to ~1), random z and the root's GRU state.
    ``ties``: integer logits, so many candidates share exact log-probs."""
    dev = drafter.fc.weight.device
    dtype = drafter.fc.weight.dtype
    v, h = drafter.cfg.vocab_size, drafter.cfg.hidden_size
    base = torch.randn(depth, v, generator=gen)
    hot = min(24, v)
    for r in range(depth):
        idx = torch.randperm(v, generator=gen)[:hot]
        a = 4 + 10 * torch.rand(1, generator=gen)
        b = 0.5 + 3 * torch.rand(1, generator=gen)
        base[r, idx] += a * torch.exp(-torch.arange(hot) / b)
    if ties:
        base = base.round()
    z = torch.randn(depth, h, generator=gen)
    root = int(torch.randint(v, (1,), generator=gen))
    with torch.inference_mode():
        root_emb = embed(torch.tensor([root], device=dev)).to(dtype)
        state = drafter.first_state(root_emb)[0]
    return DraftBlock(root, base.to(device=dev, dtype=dtype), z.to(device=dev, dtype=dtype), state)


def same_build(a, b) -> bool:
    """Identical trees (tokens, parents, depths, scores and marginal scores, exactly) and menus."""
    return a.tree.to_dict() == b.tree.to_dict() and [vars(m) for m in a.menus] == [vars(m) for m in b.menus]


# --- timing ------------------------------------------------------------------------------
def _now(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def ddtree_build(block, budget: int, depth: int):
    """DDTree's build stage as the decoder runs it (decode.py: per-depth top-``budget`` marginals,
    then the lazy heap)."""
    from ..builders import build_lazy
    lp = torch.log_softmax(block.base_logits[:depth].float(), dim=-1)
    vals, ids = torch.topk(lp, min(budget, lp.shape[-1]), dim=-1)
    return build_lazy(ids.tolist(), vals.tolist(), block.root, budget)


def bench_shapes(drafter, embed, spec: dict, rounds: int, warmup: int, seed: int = 0,
                 builders=BUILDERS) -> dict:
    """Median build-stage ms per round for each builder (a fresh scorer each: its per-round set-up,
    prepared lazily, counts), for the reference with every depth prepared up front
    (``python_eager``: the build before lazy preparation) and for DDTree's build on the same
    blocks; plus the identity verdict (every builder's tree and menus against the reference)."""
    dev = drafter.fc.weight.device
    tc = TreeConfig(budget=spec["budget"], corr_topm=spec["topm"], node_topk=spec["topk"])
    fns = {n: get_builder(n) for n in builders}
    gen = torch.Generator().manual_seed(seed)
    names = ["ddtree", "python_eager", *builders]
    ms = {n: [] for n in names}
    setup, identical, mismatches, prepared = [], True, 0, []
    captures: dict[str, dict[str, dict]] = {}      # builder -> label -> record (every round's)
    with torch.inference_mode():
        for r in range(warmup + rounds):
            block = random_block(drafter, embed, spec["depth"], gen)
            t0 = _now(dev)
            ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm, lazy=False)
            setup.append((_now(dev) - t0) * 1e3)
            order = names[r % len(names):] + names[:r % len(names)]
            out = {}
            for n in order:
                t = _now(dev)
                if n == "ddtree":
                    ddtree_build(block, tc.budget, spec["depth"])
                else:
                    sc = ConditionalScorer(block, drafter, embed, tc.node_topk, tc.corr_topm, lazy=n != "python_eager")
                    out[n] = fns[n if n != "python_eager" else "python"](sc, block.root, block.root_state, tc,
                                                                       spec["depth"])
                ms[n].append((_now(dev) - t) * 1e3)
                if n == builders[0]:
                    prepared.append(sc.prepared)
            for n in builders:
                cap = out[n].extra.get("capture")
                if cap:
                    captures.setdefault(n, {})[capture_label(cap)] = cap
            ok = all(same_build(out["python_eager"], out[n]) for n in builders)
            identical &= ok
            mismatches += not ok
    res = {f"{n}_ms": round(statistics.median(ms[n][warmup:]), 4) for n in names}
    ref = res[f"{builders[0]}_ms"]
    for n in builders[1:]:
        res[f"{n}_speedup"] = round(ref / res[f"{n}_ms"], 3)
    for n in names[1:]:
        res[f"{n}_vs_ddtree"] = round(res[f"{n}_ms"] / res["ddtree_ms"], 3)
    res.update(identical=identical, mismatched_rounds=mismatches, rounds=rounds, warmup=warmup,
               eager_setup_ms=round(statistics.median(setup[warmup:]), 4),
               mean_depths_prepared=round(statistics.mean(prepared[warmup:]), 2),
               capture={n: list(c.values()) for n, c in captures.items()})
    return res


def capture_label(cap: dict) -> str:
    return cap["mode"] + (f" ({cap['reason']})" if cap.get("reason") else "")


def capture_summary(res: dict) -> str:
    """'graph=captured frontier=eager' from a shape set's result (mixed modes joined by '/')."""
    return " ".join(f"{n}={'/'.join(c['mode'] for c in caps)}" for n, caps in res.get("capture", {}).items())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m dominotree bench-build", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto", help="cpu, cuda, or auto (cuda when present)")
    p.add_argument("--rounds", type=int, default=50, help="timed rounds per shape set (>= 1)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--shapes", default="embedded,qwen3-4b", help=f"comma list of {', '.join(SHAPES)}")
    p.add_argument("--dtype", default=None, help="float32 (CPU default) or bfloat16 (CUDA default)")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads (default 1: per-node work is tiny and OpenMP spin-waits "
                        "dominate on a shared machine; 0 keeps torch's default)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json-out", default=None, help="also write the JSON result here")
    a = p.parse_args(argv)
    from ..presets import parse_dtype
    dev = torch.device("cuda" if a.device == "auto" and torch.cuda.is_available() else
                       ("cpu" if a.device == "auto" else a.device))
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda but no CUDA device is available", file=sys.stderr)
        return 2
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    bad = [s for s in shapes if s not in SHAPES]
    if bad or not shapes or a.rounds < 1:
        print(f"error: --shapes must name {', '.join(SHAPES)} and --rounds must be >= 1", file=sys.stderr)
        return 2
    dtype = parse_dtype(a.dtype or ("bfloat16" if dev.type == "cuda" else "float32"))
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    hw = torch.cuda.get_device_name(dev) if dev.type == "cuda" else _cpu_name()
    result = {"device": dev.type, "hardware": hw, "dtype": str(dtype).replace("torch.", ""),
              "threads": torch.get_num_threads(), "torch": torch.__version__, "shapes": {}}
    print(f"bench-build  device={dev.type} ({hw})  dtype={result['dtype']}  threads={result['threads']}  "
          f"rounds={a.rounds} after {a.warmup} warm-up")
    head = (f"{'shapes':<10} {'src':<6} {'ddtree':>8} {'eager py':>9} {'python':>9} {'graph':>9} {'x':>6} "
            f"{'frontier':>9} {'x':>6} {'best/ddtree':>12} {'depths':>7}  identical  capture")
    print(head)
    print("-" * len(head))
    for name in shapes:
        spec = SHAPES[name]
        if name == "embedded":
            drafter, embed, src = embedded_head(dtype, dev)
            spec = dict(spec, hidden=drafter.cfg.hidden_size, vocab=drafter.cfg.vocab_size,
                        gru=drafter.cfg.gru_hidden_dim, emb=drafter.cfg.emb_dim,
                        depth=drafter.cfg.draft_depth)
        else:
            drafter, embed = random_head(**spec, dtype=dtype, device=dev, seed=a.seed)
            src = "random"
        res = bench_shapes(drafter, embed, spec, a.rounds, a.warmup, seed=a.seed)
        res.update(source=src, **{k: spec[k] for k in ("hidden", "vocab", "gru", "emb", "topm", "topk", "budget", "depth")})
        result["shapes"][name] = res
        best = min(res[f"{n}_vs_ddtree"] for n in BUILDERS)
        print(f"{name:<10} {src:<6} {res['ddtree_ms']:>8.2f} {res['python_eager_ms']:>9.2f} {res['python_ms']:>9.2f} "
              f"{res['graph_ms']:>9.2f} {res['graph_speedup']:>5.2f}x {res['frontier_ms']:>9.2f} "
              f"{res['frontier_speedup']:>5.2f}x {best:>11.2f}x {res['mean_depths_prepared']:>7.1f}  {str(res['identical']):<9}  "
              f"{capture_summary(res)}")
        del drafter, embed
    print("(build-stage ms per round, median, each with its own scorer and its per-round set-up; eager py = the "
          "reference with every depth prepared up front, as before lazy preparation; x = speedup over python; "
          "best/ddtree = the fastest builder's time over DDTree's build on the same blocks; depths = mean depths "
          "prepared per round, of the block's; capture = whether the graph builders replayed CUDA graphs: "
          "captured, native (CPU: graph's heap in one C++ op), eager (no CUDA or DOMINOTREE_GRAPH_EAGER=1) or "
          "fallback (capture failed: the reason is in the JSON))")
    line = json.dumps(result, separators=(",", ":"))
    if a.json_out:
        Path(a.json_out).write_text(line + "\n")
    print(line)
    return 0 if all(r["identical"] for r in result["shapes"].values()) else 1


def _cpu_name() -> str:
    from ..machine import cpu_model
    return cpu_model() + f" x{torch.get_num_threads()} threads"


if __name__ == "__main__":
    raise SystemExit(main())
