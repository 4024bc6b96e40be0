"""Run controls (mapped 1:1 onto DecodeConfig / TreeConfig fields) and the model choice."""
from __future__ import annotations

import json

import gradio as gr

from dominotree.config import BUILDERS, METHODS, ConfigError, DecodeConfig, TreeConfig, default_builder
from dominotree.presets import ASSETS

from . import backend as be

DEFAULT_METHODS = ("ar", "ddtree", "dominotree")


def example_prompts(limit: int = 12) -> list[str]:
    try:
        lines = (ASSETS / "prompts" / "eval.jsonl").read_text(encoding="utf-8").splitlines()
        return [json.loads(x)["prompt"] for x in lines if x.strip()][:limit]
    except (OSError, ValueError, KeyError):
        return []


NO_AB = "none"


def available_builders() -> list[str]:
    """Builders whose code imports here (the graph/frontier ones may be missing or partial)."""
    from dominotree.builders import get_builder
    out = []
    for name in BUILDERS:
        try:
            get_builder(name)
            out.append(name)
        except Exception:  # noqa: BLE001 - an unavailable builder is simply not offered
            pass
    return out


def decode_config(method: str, temperature, seed, budget, topm, topk, max_new, builder,
                  ab_builder=NO_AB) -> DecodeConfig:
    """Slider values -> DecodeConfig (raises ConfigError with a readable message)."""
    from dominotree.builders import get_builder
    for b in (builder, ab_builder):
        if b not in (None, NO_AB):
            try:
                get_builder(b)
            except ValueError as e:
                raise ConfigError(str(e)) from None
    return DecodeConfig(method=method, temperature=float(temperature), max_new_tokens=int(max_new),
                        seed=int(seed), builder=builder,
                        ab_builder=None if ab_builder in (None, NO_AB) else ab_builder,
                        tree=TreeConfig(budget=int(budget), corr_topm=int(topm), node_topk=int(topk)))


def check_request(prompt, methods, max_new) -> list[str]:
    """The methods to run, in METHODS order (``ar`` first: it is the speedup baseline); raises
    ConfigError with a message for the user on anything out of bounds."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError("The prompt is empty: type something to decode.")
    if len(prompt) > be.MAX_PROMPT_CHARS:
        raise ConfigError(f"The prompt is {len(prompt)} characters; the limit is {be.MAX_PROMPT_CHARS}.")
    unknown = sorted(set(map(str, methods or [])) - set(METHODS))
    if unknown:
        raise ConfigError(f"Unknown method(s): {', '.join(unknown)[:200]}")
    wanted = [m for m in METHODS if m in (methods or [])]
    if not wanted:
        raise ConfigError("Pick at least one method.")
    if len(wanted) > be.MAX_METHODS:
        raise ConfigError(f"Pick at most {be.MAX_METHODS} methods to compare side by side (got {len(wanted)}).")
    if not isinstance(max_new, (int, float)) or max_new != int(max_new):
        raise ConfigError("Max new tokens must be a whole number.")
    if not 1 <= int(max_new) <= be.MAX_NEW_TOKENS:
        raise ConfigError(f"Max new tokens must be between 1 and {be.MAX_NEW_TOKENS} (got {int(max_new)}).")
    return wanted


def model_choice(preset, target, drafters, device, dtype) -> be.ModelChoice:
    if preset == be.CUSTOM:
        folders = tuple(d.strip() for d in (drafters or "").replace(",", "\n").splitlines() if d.strip())
        if not (target or "").strip():
            raise ValueError("custom model: give a target folder (a transformers causal LM)")
        return be.ModelChoice(target=target.strip(), drafters=folders, dtype=dtype, device=device)
    return be.ModelChoice(preset=preset, dtype=dtype, device=device)


def build_controls(backend: be.Backend) -> dict:
    prompt = gr.Textbox(label="Prompt", lines=3, max_length=be.MAX_PROMPT_CHARS, elem_id="prompt",
                        value="Explain speculative decoding in one sentence.",
                        info=f"up to {be.MAX_PROMPT_CHARS} characters")
    examples = gr.Dropdown(example_prompts(), value=None, label="Example prompts", elem_id="examples")
    choices = backend.methods()
    methods = gr.CheckboxGroup(choices, value=[m for m in DEFAULT_METHODS if m in choices],
                               label=f"Methods (up to {be.MAX_METHODS}, side by side)", elem_id="methods")
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run")
        stop = gr.Button("Stop", variant="stop", elem_id="stop")
    with gr.Accordion("Decoding", open=True):
        temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature (0 = greedy)", elem_id="temperature")
        seed = gr.Number(0, precision=0, minimum=0, label="Seed", elem_id="seed")
        max_new = gr.Slider(1, be.MAX_NEW_TOKENS, value=48, step=1, label="Max new tokens", elem_id="max-new")
        budget = gr.Slider(1, 256, value=16, step=1, label="Budget (tree nodes; paper: 16)", elem_id="budget")
        topm = gr.Slider(0, 256, value=64, step=1, label="Top-M (0 = full vocabulary)", elem_id="topm-m")
        topk = gr.Slider(1, 32, value=8, step=1, label="K (children per node)", elem_id="topk")
        builders = available_builders()
        with gr.Row():
            builder = gr.Dropdown(builders, value=default_builder(), label="Tree builder", elem_id="builder-choice")
            ab_builder = gr.Dropdown([NO_AB] + builders, value=NO_AB, label="Also time (A/B)",
                                     elem_id="ab-builder", info="dominotree: build each round twice")
    with gr.Accordion("Model", open=False):
        start = backend.choice.preset or be.CUSTOM
        presets = be.available_presets()
        presets += [p for p in (start, be.CUSTOM) if p not in presets]
        preset = gr.Dropdown(presets, value=start, label="Preset (available on this machine)", elem_id="preset")
        target = gr.Textbox(label="Custom target folder", placeholder="/path/to/target (transformers causal LM)",
                            elem_id="target", value=backend.choice.target or "")
        drafters = gr.Textbox(label="Custom drafter folders (one per line)", lines=2, elem_id="drafters",
                              value="\n".join(backend.choice.drafters))
        with gr.Row():
            devices = be.devices()
            device = gr.Radio(devices, value=backend.choice.device if backend.choice.device in devices else "cpu",
                              label="Device", elem_id="device")
            dtype = gr.Radio(["float32", "bfloat16"], value=backend.choice.dtype, label="dtype", elem_id="dtype")
        load = gr.Button("Load model", elem_id="load")
    return dict(prompt=prompt, examples=examples, methods=methods, run=run, stop=stop,
                temperature=temperature, seed=seed, max_new=max_new, budget=budget, topm_m=topm, topk=topk,
                builder_choice=builder, ab_builder=ab_builder, preset=preset, target=target, drafters=drafters,
                device=device, dtype=dtype, load=load)
