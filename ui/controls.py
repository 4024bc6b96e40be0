"""Run controls (mapped 1:1 onto DecodeConfig / TreeConfig fields) and the model choice."""
from __future__ import annotations

import json

import gradio as gr

from dominotree.auto.budget import apply_auto, auto_available
from dominotree.config import BOUNDS, BUILDERS, METHODS, ConfigError, DecodeConfig, TreeConfig, default_builder
from dominotree.presets import ASSETS, DRAFT_VOCAB_CHOICES, default_draft_vocab, draft_vocab_label

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


def number(name: str, label: str, value, hi=None):
    """A control's value checked against its range in ``config.BOUNDS`` (the library's; ``hi``: a
    lower end this server sets): Gradio's own bounds check is switched off (``lenient``) so that a
    mistake gets this message instead of an error over every output."""
    return BOUNDS[name].parse(value, label, hi)


def check_seed(seed) -> int:
    try:
        return number("seed", "Seed", seed)
    except ConfigError as e:
        raise ConfigError(f"Seed out of range: {e}") from None


def slider(name: str, **kw):
    """A lenient slider over ``config.BOUNDS[name]``'s range (to its ``slider_hi`` where open)."""
    b = BOUNDS[name]
    return lenient(gr.Slider(b.lo, b.slider_hi if b.slider_hi is not None else b.hi, **kw))


def lenient(component):
    """Skip Gradio's preprocess bounds check on this Slider/Number (set on the instance); the
    run handler checks every value itself and answers with a message, not an error badge."""
    component.preprocess = lambda payload: payload
    return component


DRAFT_VOCABS = {draft_vocab_label(n): n for n in DRAFT_VOCAB_CHOICES}


def draft_vocab_size(label) -> int:
    """The draft-vocabulary dropdown's label -> token count (0: the full vocabulary)."""
    if label in (None, ""):
        return 0
    if label not in DRAFT_VOCABS:
        raise ConfigError(f"unknown draft vocabulary {label!r}; choose one of {', '.join(DRAFT_VOCABS)}")
    return DRAFT_VOCABS[label]


def draft_vocab_default(choice: be.ModelChoice, decoder=None) -> str:
    """The dropdown's label for the pair's default draft vocabulary (the library's: 8192 tokens for
    the embedded pair, the full one for others): the loaded ``decoder``'s pair when given, else the
    choice's preset, found without loading it."""
    n = decoder.pair.default_draft_vocab if decoder is not None else default_draft_vocab(choice.pair_name)
    return next((k for k, v in DRAFT_VOCABS.items() if v == n), next(iter(DRAFT_VOCABS)))


def draft_vocab_control(preset, target, drafters, device, dtype):
    """The dropdown set to the default of the pair the Model controls name now (loaded or not)."""
    try:
        return gr.Dropdown(value=draft_vocab_default(model_choice(preset, target, drafters, device, dtype)))
    except ConfigError:          # a custom choice without its target yet: the full vocabulary
        return gr.Dropdown(value=next(iter(DRAFT_VOCABS)))


def decode_config(method: str, temperature, seed, budget, topm, topk, max_new, builder,
                  ab_builder=NO_AB, draft_vocab=None) -> DecodeConfig:
    """Slider values -> DecodeConfig (raises ConfigError with a readable message)."""
    from dominotree.builders import get_builder
    temperature = number("temperature", "Temperature", temperature)
    seed = check_seed(seed)
    budget, topm = number("budget", "Budget", budget), number("corr_topm", "Top-M", topm)
    topk = number("node_topk", "K (children per node)", topk)
    if topm and topk > topm:
        raise ConfigError(f"K ({topk}) cannot exceed Top-M ({topm}); raise Top-M or lower K.")
    for b in (builder, ab_builder):
        if b not in (None, NO_AB):
            try:
                get_builder(b)
            except ValueError as e:
                raise ConfigError(str(e)) from None
    return DecodeConfig(method=method, temperature=temperature, max_new_tokens=int(max_new), seed=seed,
                        builder=builder, ab_builder=None if ab_builder in (None, NO_AB) else ab_builder,
                        draft_vocab=draft_vocab_size(draft_vocab),
                        tree=TreeConfig(budget=budget, corr_topm=topm, node_topk=topk))


AUTO_LABEL = "Budget: auto (calibrated for this machine)"


def auto_budget_control(choice: be.ModelChoice, draft_vocab: int | None = None) -> dict:
    """The auto checkbox's settings for this pair, device and draft vocabulary (None: the pair's
    default, as the page opens with it): usable when a budget calibration exists (its info says
    what auto chooses), else off, with the one-line reason (the button below makes one; so do the
    commands)."""
    if draft_vocab is None:
        draft_vocab = default_draft_vocab(choice.pair_name)
    chosen, reason = auto_available(choice.pair_name, choice.device, choice.dtype, draft_vocab, choice.weights)
    if not chosen:
        return dict(value=False, interactive=False,
                    info=f"unavailable until this machine is calibrated (the button below, or the commands): {reason}")
    made = sorted({c.created[:10] for c in chosen.values() if c.created})
    warn = sorted({w for c in chosen.values() for w in c.warnings})
    return dict(interactive=True, info="auto = " + ", ".join(f"{m} {c.budget or 'plain decoding'}"
                                                             for m, c in chosen.items())
                + f" (calibrated {', '.join(made) or 'here'}); other methods keep the slider's budget"
                + "".join(f" · warning: {w}" for w in warn))


def auto_budgets(cfgs: list[DecodeConfig], choice: be.ModelChoice, on: bool) -> tuple[list[DecodeConfig], dict, str]:
    """With auto on, the configs with the calibrated budget where a method has one (the CLI's
    ``--budget auto`` resolution, never calibrating), the choices by method, and the status
    note saying what auto chose and which methods kept the slider's budget and why."""
    if not on:
        return cfgs, {}, ""
    cfgs, chosen, kept = apply_auto(cfgs, choice.pair_name, choice.device, choice.dtype, choice.weights)
    return cfgs, chosen, " · ".join([f"{m}: {c.describe()}" for m, c in chosen.items()] + kept)


def auto_control(preset, target, drafters, device, dtype, draft_vocab=None) -> gr.Checkbox:
    """The auto checkbox for the model the Model controls name now (loaded or not)."""
    try:
        return gr.Checkbox(**auto_budget_control(model_choice(preset, target, drafters, device, dtype),
                                                 draft_vocab_size(draft_vocab)))
    except ConfigError as e:
        return gr.Checkbox(value=False, interactive=False, info=f"unavailable: {e}")


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
    number("max_new_tokens", "Max new tokens", max_new, hi=be.MAX_NEW_TOKENS)
    return wanted


def model_choice(preset, target, drafters, device, dtype) -> be.ModelChoice:
    if preset == be.CUSTOM:
        folders = tuple(d.strip() for d in (drafters or "").replace(",", "\n").splitlines() if d.strip())
        if not (target or "").strip():
            raise ConfigError("custom model: give a target folder (a transformers causal LM)")
        return be.ModelChoice(target=target.strip(), drafters=folders, dtype=dtype, device=device)
    return be.ModelChoice(preset=preset, dtype=dtype, device=device)


def dtype_info(choice: be.ModelChoice) -> str:
    from dominotree.view.live import default_dtype
    fastest = default_dtype(choice.device, choice.preset if choice.target is None else None)
    return (f"float32: every method's text equals ar's token for token (the embedded target then runs its "
            f"4-bit GGUF weights times 8-bit activation blocks, as llama.cpp does, where the C++ kernels build); "
            f"the faster one on this machine: {fastest}")


def build_controls(backend: be.Backend) -> dict:
    prompt = gr.Textbox(label="Prompt", lines=3, max_length=be.MAX_PROMPT_CHARS, elem_id="prompt",
                        value="Explain speculative decoding in one sentence.",
                        info=f"up to {be.MAX_PROMPT_CHARS} characters")
    examples = gr.Dropdown(example_prompts(), value=None, label="Example prompts", elem_id="examples")
    choices = backend.methods()
    methods = gr.CheckboxGroup(choices, value=[m for m in DEFAULT_METHODS if m in choices],
                               label=f"Methods (up to {be.MAX_METHODS}, side by side)", elem_id="methods")
    dtype = gr.Radio(["float32", "bfloat16"], value=backend.choice.dtype, label="dtype", elem_id="dtype",
                     info=dtype_info(backend.choice), interactive=not backend.locked)
    with gr.Row():
        run = gr.Button("Run", variant="primary", elem_id="run")
        stop = gr.Button("Stop", variant="stop", elem_id="stop")
    with gr.Accordion("Decoding", open=True):
        temperature = slider("temperature", value=0, step=0.05, label="Temperature (0 = greedy)", elem_id="temperature")
        seed = lenient(gr.Number(0, precision=0, minimum=0, label="Seed", elem_id="seed"))
        max_new = lenient(gr.Slider(1, be.MAX_NEW_TOKENS, value=48, step=1, label="Max new tokens", elem_id="max-new"))
        budget = slider("budget", value=16, step=1, label="Budget (tree nodes; paper: 16; 0: plain decoding)", elem_id="budget")
        budget_auto = gr.Checkbox(label=AUTO_LABEL, elem_id="budget-auto", **auto_budget_control(backend.choice))
        calibrate = gr.Button("Calibrate this machine for auto (about 2 min)", size="sm", elem_id="calibrate",
                              interactive=not backend.locked)
        topm = slider("corr_topm", value=64, step=1, label="Top-M (0 = full vocabulary)", elem_id="topm-m")
        topk = slider("node_topk", value=8, step=1, label="K (children per node)", elem_id="topk")
        builders = available_builders()
        with gr.Row():
            builder = gr.Dropdown(builders, value=default_builder(), label="Tree builder", elem_id="builder-choice")
            ab_builder = gr.Dropdown([NO_AB] + builders, value=NO_AB, label="Also time (A/B)",
                                     elem_id="ab-builder", info="dominotree: build each round twice")
        draft_vocab = gr.Dropdown(list(DRAFT_VOCABS), value=draft_vocab_default(backend.choice, backend.loaded_decoder),
                                  label="Draft vocabulary", elem_id="draft-vocab",
                                  info="the drafters score only the tokens the target writes most: a cheaper draft, "
                                       "never-drafted rare tokens; lossless either way. Default: the pair's own "
                                       "(8192 tokens for the embedded pair, whose acceptance loses nothing with it; "
                                       "the full vocabulary for others)")
    free = not backend.locked
    with gr.Accordion("Model", open=False):
        if backend.locked:
            gr.Markdown(f"**Model switching is off:** {be.LOCKED_NOTE}.", elem_id="model-locked")
        start = backend.choice.preset or be.CUSTOM
        presets = be.available_presets()
        presets += [p for p in (start, be.CUSTOM) if p not in presets]
        preset = gr.Dropdown(presets, value=start, label="Preset (available on this machine)", elem_id="preset",
                             interactive=free)
        target = gr.Textbox(label="Custom target folder", placeholder="/path/to/target (transformers causal LM)",
                            elem_id="target", value=backend.choice.target or "", interactive=free)
        drafters = gr.Textbox(label="Custom drafter folders (one per line)", lines=2, elem_id="drafters",
                              value="\n".join(backend.choice.drafters), interactive=free)
        with gr.Row():
            devices = be.devices()
            device = gr.Radio(devices, value=backend.choice.device if backend.choice.device in devices else "cpu",
                              label="Device", elem_id="device", interactive=free)
        load = gr.Button("Load model", elem_id="load", interactive=free)
    return dict(prompt=prompt, examples=examples, methods=methods, run=run, stop=stop,
                temperature=temperature, seed=seed, max_new=max_new, budget=budget, budget_auto=budget_auto,
                calibrate=calibrate,
                topm_m=topm, topk=topk,
                builder_choice=builder, ab_builder=ab_builder, draft_vocab=draft_vocab, preset=preset, target=target, drafters=drafters,
                device=device, dtype=dtype, load=load)
