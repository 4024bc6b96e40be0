"""Self-distillation data generation: the continuous-batching generator, the plan, the overlap check."""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")

from dominotree.train import selfdistill as S  # noqa: E402
from dominotree.train.batchgen import Request, SlotGenerator  # noqa: E402
from dominotree.train.jobs import Plan  # noqa: E402
from dominotree.train.overlap import EvalIndex, find_overlaps, ngrams  # noqa: E402
from dominotree.train.prompts import held_out, load_eval, training_prompts  # noqa: E402
from dominotree.train.selfprompt import clean_request  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=200, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=512, initializer_range=0.5)
    return transformers.LlamaForCausalLM(cfg).eval()


def _greedy_one(model, prompt, n, end_ids):
    out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                         max_new_tokens=n, do_sample=False, eos_token_id=sorted(end_ids), pad_token_id=0)
    ans = out[0, len(prompt):].tolist()
    return S.trim_answer(ans, end_ids)


@pytest.mark.parametrize("slots,sort_every,row_chunk", [(3, 0, 16), (5, 3, 2)])
def test_slots_equal_one_at_a_time_greedy(tiny_llama, monkeypatch, slots, sort_every, row_chunk):
    """More requests than slots, different prompt lengths and limits: every answer equals
    plain one-at-a-time greedy ``generate`` token for token (float32). The second case re-sorts
    the cache rows every 3 steps and gives every 2 rows their own attention window."""
    from dominotree.train import batchgen
    monkeypatch.setattr(batchgen, "ROW_CHUNK", row_chunk)
    rng = random.Random(1)
    end = {7}
    reqs = [Request(i, [1] + [rng.randrange(10, 200) for _ in range(rng.randint(1, 12))], rng.randint(3, 30))
            for i in range(9)]
    gen = SlotGenerator(tiny_llama, slots=slots, end_ids=end, crop_every=4, sort_every=sort_every)
    got = {r.key: (ans, trunc) for r, ans, trunc in gen.run(reqs)}
    assert sorted(got) == list(range(9))
    for r in reqs:
        want = _greedy_one(tiny_llama, r.prompt, r.max_new_tokens, end)
        assert got[r.key] == want, r.key
    ends = sum(not t for _, t in got.values())
    assert 0 < ends < 9 or ends == 0  # mixed or none: both fine; the equality is the check


def test_slots_refill_callback_and_bad_requests(tiny_llama):
    gen = SlotGenerator(tiny_llama, slots=2, end_ids={7})
    calls = []

    def refill(q):
        if len(calls) < 3:
            calls.append(1)
            q.append(Request(len(calls), [1, 20, 30], 4))
    out = list(gen.run([], refill))
    assert sorted(r.key for r, _, _ in out) == [1, 2, 3]
    with pytest.raises(ValueError, match="empty prompt"):
        list(SlotGenerator(tiny_llama, 2, {7}).run([Request("x", [], 3)]))
    with pytest.raises(ValueError, match="end_ids"):
        SlotGenerator(tiny_llama, 2, set())


def test_follow_ups_appended_while_iterating_are_served(tiny_llama):
    """selfdistill appends a request that depends on an answer (a self-written request's answer,
    a chat's second turn) to the deque it passed in: it must be answered, as the same greedy
    continuation of the first answer that a fresh request would get."""
    from collections import deque
    pending = deque([Request("first", [1, 20, 30], 5)])
    out = {}
    for r, ans, trunc in SlotGenerator(tiny_llama, slots=2, end_ids={7}).run(pending):
        out[r.key] = ans
        if r.key == "first":
            pending.append(Request("second", [1, 20, 30] + ans + [40], 5))
    assert sorted(out) == ["first", "second"]
    want, _ = _greedy_one(tiny_llama, [1, 20, 30] + out["first"] + [40], 5, {7})
    assert out["second"] == want


def test_sampled_requests_do_not_depend_on_batch_mates(tiny_llama):
    """A sampled request's answer depends on its own seed, not on which requests share its batch
    (compared in float64, where batched products round alike)."""
    m = tiny_llama.to(torch.float64)
    try:
        a = Request("a", [1, 50, 60], 12, temperature=1.0, top_p=0.9, seed=5)
        others = [Request(i, [1, 70 + i], 12, temperature=1.0, seed=i) for i in range(3)]
        alone = next(ans for r, ans, _ in SlotGenerator(m, 1, {7}).run([a]))
        mixed = {r.key: ans for r, ans, _ in SlotGenerator(m, 4, {7}).run(others + [a])}
        assert mixed["a"] == alone
    finally:
        tiny_llama.to(torch.float32)


@pytest.mark.slow   # the embedded SmolLM2
def test_smollm2_slots_equal_greedy_generate():
    """The real target in float32: three chat requests, two slots, equal to one-at-a-time greedy."""
    from dominotree.models.smollm2 import ensure_smollm2
    path = ensure_smollm2()
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa",
                                                              local_files_only=True).eval()
    chat = S.Chat(tok)
    end = {tok.convert_tokens_to_ids("<|im_end|>")}
    reqs = [Request(i, chat.first(p), 20) for i, p in
            enumerate(["Name a fruit.", "What is 2 plus 3?", "Write a Python function that adds two numbers."])]
    got = {r.key: (ans, t) for r, ans, t in SlotGenerator(model, 2, end).run(reqs)}
    for r in reqs:
        assert got[r.key] == _greedy_one(model, r.prompt, 20, end)
    # the second turn is laid out exactly as the chat template lays out a two-turn conversation
    ans = tok("Banana.", add_special_tokens=False)["input_ids"] + sorted(end)
    two = chat.second(chat.first("Name a fruit."), ans, "Another one?")
    ref = tok.apply_chat_template([{"role": "user", "content": "Name a fruit."},
                                   {"role": "assistant", "content": "Banana."},
                                   {"role": "user", "content": "Another one?"}], add_generation_prompt=True, tokenize=True)
    assert two == list(ref["input_ids"] if hasattr(ref, "keys") else ref)


def test_ngram_overlap_check_finds_planted_overlaps():
    ev = ["Why do cats purr?", "Explain what a rainbow is to a seven-year-old in simple words please."]
    idx = EvalIndex(ev)
    assert idx.find("why do cats purr") is not None                     # equal after normalization
    assert idx.find("Tell me: why do cats purr, and why do dogs bark?") is not None   # contains a short one
    assert idx.find("Please explain what a rainbow is to a seven-year-old in simple words.") is not None
    assert idx.find("Explain what a rainbow is.") is None
    assert len(ngrams("one two three four five six seven eight nine")) == 2
    assert find_overlaps(["Why do cats purr?", "Hello there friend"], ev)[0].eval == ev[0]


def _committed_requests():
    out = []
    for r in S.read_examples(ROOT / "assets" / "distill"):
        req = r.get("request")
        out.extend(req if isinstance(req, list) else [req] if req else [])
    return out


@pytest.mark.slow   # reads all of assets/distill (~5 s)
def test_training_requests_are_disjoint_from_evaluation_prompts():
    """Every request the plan can issue from templates, and every request in the committed data
    (self-written ones included), shares no 8-word n-gram with an evaluation prompt nor with a
    budget calibration prompt (``assets/prompts/calibrate.jsonl``, written after much of the
    data: checked against all of it). The plan filters both sets, and adding the calibration set
    dropped no template, so every job index still means the job it meant when its shard was made."""
    ev = [p.prompt for p in held_out()]
    assert len(ev) == len(load_eval()) + 48
    plan = Plan(seed=0, pool=20000)
    eval_only = EvalIndex(p.prompt for p in load_eval())
    assert plan.templates == [p for p in training_prompts(20000, 0) if eval_only.find(p.prompt) is None]
    texts = [p.prompt for p in plan.templates]
    texts += [j.request for j in (plan.job(i) for i in range(3000)) if j.request]
    texts += [j.follow_up for j in (plan.job(i) for i in range(3000)) if j.follow_up]
    texts += _committed_requests()
    assert find_overlaps(texts, ev) == []


def test_self_written_requests_are_cleaned():
    assert clean_request("Explain", " how a rainbow forms after rain.") == "Explain how a rainbow forms after rain."
    assert clean_request("", "Hi") is None                                  # too short
    assert clean_request("", "the the the the the the the the") is None     # repetitive
    assert clean_request("", "I am SmolLM, an AI assistant. How can I help?") is None
    assert clean_request("", "$$$ ### %%% &&& *** ((( )))") is None


def test_shards_are_gzip_json_lines_and_resume(tmp_path):
    S.write_shard(tmp_path, [{"id": "a", "ids": [1, 2], "prompt_len": 1}])
    S.write_shard(tmp_path, [{"id": "b", "ids": [1, 2, 3], "prompt_len": 1}])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shard-00000.jsonl.gz", "shard-00001.jsonl.gz"]
    with gzip.open(tmp_path / "shard-00001.jsonl.gz", "rt") as f:
        assert json.loads(f.readline())["id"] == "b"
    (tmp_path / "shard-00002.jsonl").write_text('{"id": "c", "ids": [1], "prompt_len": 1}\n{"id": "torn"')
    assert [r["id"] for r in S.read_examples(tmp_path)] == ["a", "b", "c"]
    assert S._next_shard(tmp_path).name == "shard-00003.jsonl.gz"


def test_plan_is_deterministic():
    a, b = Plan(seed=3, pool=500), Plan(seed=3, pool=500)
    assert [a.job(i) for i in range(200)] == [b.job(i) for i in range(200)]
    kinds = {a.job(i).kind for i in range(200)}
    assert kinds == {"template", "long", "self", "multiturn"}


def test_rerun_starts_an_interrupted_second_turn_from_the_stored_first():
    """A chat stopped between its turns has only ``<job>:1`` on disk: the rerun builds the second
    turn's prompt from that record, exactly as the uninterrupted run did (``chat.second`` of the
    first prompt and answer); a cut first answer has no second turn; finished chats are left."""
    class Chat:
        def second(self, first_ids, answer, follow_up):
            return first_ids + answer + [len(follow_up)]

    recs = [{"id": "m1:1", "prompt_len": 3, "ids": [1, 2, 3, 7, 8, 2], "truncated": False},
            {"id": "m2:1", "prompt_len": 2, "ids": [1, 4, 9, 9], "truncated": True},
            {"id": "m3:1", "prompt_len": 2, "ids": [1, 5, 6], "truncated": False},
            {"id": "m3", "prompt_len": 5, "ids": [1, 5, 6, 0, 0, 7], "truncated": False},
            {"id": "t1", "prompt_len": 1, "ids": [1, 2], "truncated": False}]
    first = S.interrupted_first_turns(recs)
    assert sorted(first) == ["m1", "m2"]
    assert S.second_turn_prompt(Chat(), first["m1"], "why?") == Chat().second([1, 2, 3], [7, 8, 2], "why?")
    assert S.second_turn_prompt(Chat(), first["m2"], "why?") is None


@pytest.mark.parametrize("sharp", [8.0, 0.01])
def test_nucleus_from_top_k_equals_the_full_sort(sharp):
    """The top-k shortcut keeps the same tokens with the same probabilities as sorting the whole
    vocabulary; a flat distribution (``sharp`` 0.01: the top 64 hold far less than top_p) takes the
    full sort."""
    from dominotree.train.batchgen import nucleus
    g = torch.Generator().manual_seed(3)
    probs = torch.softmax(torch.randn(5000, generator=g, dtype=torch.float64) * sharp, -1)
    for top_p in (0.5, 0.9, 0.95):
        sp, si = torch.sort(probs, descending=True)
        keep = int((torch.cumsum(sp, 0) - sp < top_p).sum())
        idx, p = nucleus(probs, top_p, k=64)
        assert idx.tolist() == si[:keep].tolist()
        assert torch.equal(p, sp[:keep])
    idx, p = nucleus(probs, 1.0, k=64)
    assert len(idx) == 5000 and torch.equal(p, probs)
