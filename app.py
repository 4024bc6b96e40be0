"""DominoTree explorer: ``python app.py`` serves it on http://127.0.0.1:7860 (offline, no share link).

    python app.py                                   # embedded default (smollm2 once its drafters exist)
    python app.py --preset random-tiny              # tiny random pair, builds itself in seconds
    python app.py --target DIR --drafter DIR [--drafter DIR] --dtype bfloat16
The model loads on the first run (or with "Load model"), never at import.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")   # before gradio is imported
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import ui  # noqa: E402
from ui.backend import Backend, ModelChoice, default_preset  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="DominoTree explorer (Gradio)")
    p.add_argument("--preset", default=None, help="smollm2, random-tiny, qwen3-4b, qwen3-8b (default: smollm2 "
                                                  "when its drafters are installed, else random-tiny)")
    p.add_argument("--target", default=None, help="custom target folder (transformers causal LM)")
    p.add_argument("--drafter", action="append", default=[], help="custom drafter folder (repeatable)")
    p.add_argument("--dtype", default=None, choices=["float32", "bfloat16"],
                   help="default: bfloat16 where the CPU has native bf16 (or on CUDA), else float32")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    env = os.environ      # Gradio's own variables; an explicit flag wins over them
    p.add_argument("--host", default=env.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                   help="bind address (default $GRADIO_SERVER_NAME or 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=None, help="default $GRADIO_SERVER_PORT or 7860")
    p.add_argument("--allow-model-switch", action="store_true",
                   help="off the loopback address, let visitors load other models and folders")
    a = p.parse_args(argv)
    try:
        a.port = a.port if a.port is not None else int(env.get("GRADIO_SERVER_PORT", 7860))
    except ValueError:
        p.error(f"GRADIO_SERVER_PORT must be a port number, got {env['GRADIO_SERVER_PORT']!r}")
    if a.drafter and not a.target:
        p.error("--drafter needs --target")
    if a.target and a.preset:
        p.error("give either --preset or --target/--drafter, not both")
    return a


def make_backend(a: argparse.Namespace) -> Backend:
    from dominotree.view.live import default_dtype
    from dominotree.presets import default_device
    device = a.device or default_device()
    preset = None if a.target else (a.preset or default_preset())
    dtype = a.dtype or default_dtype(device, preset)
    locked = not (a.allow_model_switch or a.host in ("127.0.0.1", "localhost", "::1"))
    if a.target:
        choice = ModelChoice(target=a.target, drafters=tuple(a.drafter), dtype=dtype, device=device)
    else:
        choice = ModelChoice(preset=preset, dtype=dtype, device=device)
    return Backend(choice, locked=locked)


if __name__ == "__main__":
    args = parse_args()
    demo = ui.build_app(make_backend(args))
    demo.queue(default_concurrency_limit=1).launch(server_name=args.host, server_port=args.port, **ui.launch_kwargs())
else:
    demo = ui.build_app(make_backend(parse_args([])))
