"""The draft vocabulary (``dominotree/draftvocab.py``): drafters scoring only the N most frequent
tokens. Lossless whatever N; N = all tokens gives the very rounds of the full vocabulary; the
restricted base logits are the full logits' columns, bit for bit; bad files and sizes are clear
errors; the ranking command writes what the decoder reads."""
import json
import random

import pytest
import torch

from dominotree.config import ConfigError, DecodeConfig, TreeConfig
from dominotree.decode import Decoder
from dominotree.draftvocab import DraftVocab, read_ranked

from oracle import ar_continuation, make_oracle

METHODS = ["dflash", "ddtree", "domino", "dominotree", "marg", "condstatic"]


@pytest.fixture(scope="module")
def vocab_decoder(tiny_pair, tmp_path_factory):
    """A decoder on the tiny pair whose draft-vocab file ranks the vocabulary in a shuffled order."""
    path = tmp_path_factory.mktemp("dv") / "draft-vocab.json"
    ranked = list(range(tiny_pair.target.vocab_rows))
    random.Random(0).shuffle(ranked)
    path.write_text(json.dumps({"ranked_ids": ranked}))
    dec = Decoder(tiny_pair)
    dec.pair = type(tiny_pair)(tiny_pair.target, tiny_pair.drafters, tiny_pair.name, tiny_pair.paths)
    dec.pair.draft_vocab_file = lambda: path
    return dec


def test_every_method_equals_ar_with_a_small_draft_vocab(vocab_decoder):
    dec = vocab_decoder
    v = dec.target.vocab_rows
    for prompt in ("Hello", "def fib(n):"):
        ar = dec.generate(prompt, DecodeConfig(method="ar", max_new_tokens=30)).token_ids
        for m in METHODS:
            for n in (v // 8, v // 2):
                cfg = DecodeConfig(method=m, max_new_tokens=30, draft_vocab=n,
                                   tree=TreeConfig(budget=8, corr_topm=16, node_topk=4))
                tr = dec.generate(prompt, cfg)
                assert tr.token_ids == ar, (m, n)
                allowed = set(dec.draft_vocab(n).id_list)
                for r in tr.rounds:    # every drafted token comes from the vocabulary, in target ids
                    assert set(r.tree.tokens[1:]) <= allowed, (m, n)
                    assert all(set(mn.tokens) <= allowed for mn in r.menus)
                    assert all(set(c) <= allowed for c in r.candidates)


def test_oracle_drafter_with_a_draft_vocab_still_goes_deep_and_stays_lossless(vocab_decoder):
    dec = vocab_decoder
    prompt_ids = dec.encode_prompt("Tell me a story about a cat.")
    seq = ar_continuation(dec, prompt_ids, 80)
    ar = seq[len(prompt_ids):len(prompt_ids) + 60]
    ranked = read_ranked(dec.pair.draft_vocab_file())
    # a vocabulary holding every token of the continuation, plus half the rest
    need = set(seq)
    rest = [t for t in ranked if t not in need]
    n = len(need) + len(rest) // 2
    path = dec.pair.draft_vocab_file().with_name("cover.json")
    path.write_text(json.dumps({"ranked_ids": sorted(need) + rest}))
    keep = dec.pair.draft_vocab_file
    dec.pair.draft_vocab_file, dec._vocabs = (lambda: path), {}
    try:
        for m in ("dominotree", "ddtree", "domino"):
            tr = dec.generate(prompt_ids, DecodeConfig(method=m, max_new_tokens=60, stop_at_eos=False, draft_vocab=n),
                              draft_fn=make_oracle(dec, seq, seed=1))
            assert tr.token_ids == ar, m
            assert max(r.accept_len for r in tr.rounds) >= 6, m
    finally:
        dec.pair.draft_vocab_file, dec._vocabs = keep, {}


def test_the_whole_vocabulary_gives_the_very_rounds_of_no_draft_vocab(vocab_decoder):
    """N = V: the columns are all tokens in id order, so trees, scores, menus and candidates are
    the full vocabulary's, exactly (the column space and its mapping change nothing)."""
    dec = vocab_decoder
    v = dec.target.vocab_rows
    for m in ("dominotree", "ddtree", "domino", "condstatic"):
        a = dec.generate("What is 17 times 23?", DecodeConfig(method=m, max_new_tokens=24))
        b = dec.generate("What is 17 times 23?", DecodeConfig(method=m, max_new_tokens=24, draft_vocab=v))
        assert [r.tree.to_dict() for r in a.rounds] == [r.tree.to_dict() for r in b.rounds], m
        assert [[vars(x) for x in r.menus] for r in a.rounds] == [[vars(x) for x in r.menus] for r in b.rounds], m
        assert [r.candidates for r in a.rounds] == [r.candidates for r in b.rounds], m
        assert [r.marginal_tree.to_dict() for r in a.rounds] == [r.marginal_tree.to_dict() for r in b.rounds], m


def test_restricted_base_logits_are_the_full_logits_columns(tiny_pair):
    tgt = tiny_pair.target
    ranked = list(range(tgt.vocab_rows))[::-1]
    dv = DraftVocab(tgt, ranked, tgt.vocab_rows // 3)
    rows = torch.randn(16, tgt.hidden_size, generator=torch.Generator().manual_seed(0))
    assert torch.equal(dv.logits(rows), tgt.logits(rows)[:, dv.ids])
    assert dv.id_list == sorted(ranked[: tgt.vocab_rows // 3])


def test_bad_sizes_and_files_are_clear_errors(tiny_pair, tmp_path, vocab_decoder):
    tgt = tiny_pair.target
    with pytest.raises(ConfigError, match="draft_vocab"):
        DecodeConfig(method="dominotree", draft_vocab=-1)
    with pytest.raises(ConfigError, match="draft_vocab"):
        DecodeConfig(method="dominotree", draft_vocab=True)
    with pytest.raises(ConfigError, match="ranked list has"):
        vocab_decoder.generate("Hi", DecodeConfig(method="dominotree", draft_vocab=tgt.vocab_rows + 1))
    with pytest.raises(ConfigError, match="python -m dominotree.train.rankvocab"):
        read_ranked(tmp_path / "none.json")
    for bad in ("{not json", json.dumps({"ids": [1, 2]}), json.dumps({"ranked_ids": [3, 3]})):
        (tmp_path / "bad.json").write_text(bad)
        with pytest.raises(ConfigError, match="draft-vocab|distinct"):
            read_ranked(tmp_path / "bad.json")
    with pytest.raises(ConfigError, match="outside the target"):
        DraftVocab(tgt, [tgt.vocab_rows + 5], 1)
    # ar drafts nothing: a draft vocabulary is ignored, not an error
    assert vocab_decoder.generate("Hi", DecodeConfig(method="ar", max_new_tokens=3, draft_vocab=5)).token_ids


def test_bench_variant_names_the_draft_vocab():
    from dominotree.bench.variants import parse_variant
    from dominotree.cli import UserError
    v = parse_variant("dominotree@8/v16384", TreeConfig())
    assert (v.label, v.budget, v.draft_vocab) == ("dominotree@8/v16384", 8, 16384)
    assert parse_variant("ddtree", TreeConfig()).draft_vocab is None      # the pair's default, resolved on load
    assert parse_variant("ddtree/v0", TreeConfig()).draft_vocab == 0         # the full vocabulary, as /vfull
    for bad in ("ar/v100", "ar/vfull", "dominotree/v-1", "dominotree/vsome"):
        with pytest.raises(UserError):
            parse_variant(bad, TreeConfig())


def test_ranking_command_writes_the_file_the_decoder_reads(tmp_path):
    from dominotree.train import rankvocab as draftvocab
    data = tmp_path / "data"
    data.mkdir()
    for s in range(3):
        recs = [{"id": f"{s}-{i}", "prompt_len": 2, "ids": [1, 2] + [7] * (3 + s) + [5, 9, 2]} for i in range(4)]
        (data / f"shard-{s:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    out = tmp_path / "dv.json"
    assert draftvocab.main(["--data", str(data), "--vocab-size", "12", "--keep", "10", "--out", str(out)]) == 0
    blob = json.loads(out.read_text())
    ranked = read_ranked(out)
    assert ranked[:4] == [7, 2, 5, 9]            # by count; ties (5, 9: 12 each) by id
    assert ranked[4:] == [0, 1, 3, 4, 6, 8]      # unseen ids follow in id order ("1" is a prompt token)
    assert blob["coverage_all"]["2048"] == 1.0 and blob["shards"] == 3
