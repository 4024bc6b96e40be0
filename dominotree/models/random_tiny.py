"""The ``random-tiny`` pair: a tiny Qwen3 target (byte-level tokenizer, ChatML template) and DFlash
+ Domino drafters with random weights from a fixed seed, written once to the cache in the released
formats, so tests and offline demos load it through the same code as a trained pair."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from .checkpoint import save_drafter
from .drafter import Drafter, DrafterConfig
from .smollm2 import cache_root

TINY_VOCAB = 320          # 256 bytes + specials; the last row is the drafters' mask token
TINY_SEED = 1234
TINY_VERSION = 2


def _tiny_tokenizer():
    """A byte-level tokenizer (no merges) with a ChatML-style template, built offline."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    bytes_map = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(bytes_map))}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
    for s in specials:
        vocab[s] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(specials)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token="<|im_start|>")
    fast.chat_template = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
                          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return fast


def ensure_random_tiny() -> dict[str, str]:
    root = cache_root() / f"random-tiny-v{TINY_VERSION}"
    paths = {k: str(root / k) for k in ("target", "dflash", "domino")}
    if (root / "COMPLETE").is_file():
        return paths
    import shutil
    import tempfile
    from transformers import Qwen3Config, Qwen3ForCausalLM
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=".tiny-"))
    torch.manual_seed(TINY_SEED)
    cfg = Qwen3Config(vocab_size=TINY_VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=4096,
                      tie_word_embeddings=True, initializer_range=0.25, rope_theta=10000.0,
                      eos_token_id=258, pad_token_id=256, bos_token_id=257)
    model = Qwen3ForCausalLM(cfg)
    model.save_pretrained(tmp / "target")
    tok = _tiny_tokenizer()
    tok.save_pretrained(tmp / "target")
    mask_id = tok.convert_tokens_to_ids("<|mask|>")
    for kind in ("dflash", "domino"):
        dcfg = DrafterConfig(
            hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=TINY_VOCAB, block_size=16, num_target_layers=4,
            mask_token_id=mask_id, target_layer_ids=(1, 2), rope_theta=10000.0,
            projector_type="domino" if kind == "domino" else None, shift_label=kind == "domino",
            emb_dim=16 if kind == "domino" else 0, gru_hidden_dim=32 if kind == "domino" else 0)
        d = Drafter(dcfg)
        with torch.no_grad():
            for p in d.parameters():
                if p.dim() > 1:
                    p.normal_(0, 0.2)
        save_drafter(d, tmp / kind, dtype=torch.float32)
    (tmp / "COMPLETE").write_text(json.dumps({"seed": TINY_SEED, "version": TINY_VERSION}))
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    return paths
