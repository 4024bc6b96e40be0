"""The transformers forward gets its KV cache under the keyword its release takes (target.cache_keyword).

transformers before the ``cache=`` rename takes ``past_key_values`` and swallows an unknown
``cache=`` in ``**kwargs``: passing the wrong one runs without the cache and fails later (or
silently attends to nothing), as the first GPU check found with transformers 5.17.
"""
from __future__ import annotations

import inspect

import torch

from dominotree.models.target import cache_keyword


class _Old(torch.nn.Module):
    def forward(self, input_ids=None, past_key_values=None, use_cache=None, **kwargs):
        return past_key_values


class _New(torch.nn.Module):
    def forward(self, input_ids=None, cache=None, use_cache=None, **kwargs):
        return cache


def test_cache_keyword_follows_the_signature():
    assert cache_keyword(_Old()) == "past_key_values"
    assert cache_keyword(_New()) == "cache"
    marker = object()
    for m in (_Old(), _New()):
        assert m(**{cache_keyword(m): marker}) is marker


def test_installed_transformers_models_take_cache():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1)
    model = LlamaForCausalLM(cfg)
    assert cache_keyword(model) in {"cache", "past_key_values"}
    assert cache_keyword(model) in inspect.signature(model.forward).parameters
