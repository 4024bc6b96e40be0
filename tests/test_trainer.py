"""The drafter trainer on a tiny random Llama target: features, losses, checkpoints."""
from __future__ import annotations

import json
import random

import pytest
import torch

transformers = pytest.importorskip("transformers")

from dominotree.models.checkpoint import load_drafter  # noqa: E402
from dominotree.models.drafter import Drafter  # noqa: E402
from dominotree.train import trainer as T  # noqa: E402
from dominotree.train.blocks import make_blocks  # noqa: E402
from dominotree.train.data import Seq, read_data  # noqa: E402
from dominotree.train.drafters import init_drafter, make_configs  # noqa: E402
from dominotree.train.features import TargetFeatures  # noqa: E402
from dominotree.train.step import Trainer  # noqa: E402

VOCAB = 300


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama target folder and a synthetic self-distillation data folder."""
    root = tmp_path_factory.mktemp("tiny")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=512, tie_word_embeddings=True,
                                   initializer_range=0.3)  # larger embeddings: peaked logits are reachable
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(root / "target")
    data = root / "data"
    data.mkdir()
    rng = random.Random(0)
    succ = list(range(20, VOCAB))
    rng.shuffle(succ)  # answers follow a fixed successor map, so a drafter can learn them
    with open(data / "shard-00000.jsonl", "w") as f:
        for i in range(10):
            pl = rng.randint(5, 12)
            ans = [rng.randint(20, VOCAB - 1)]
            for _ in range(rng.randint(20, 40)):
                ans.append(succ[ans[-1] - 20])
            ans.append(2)
            ids = [1] + [rng.randint(20, VOCAB - 1) for _ in range(pl - 1)] + ans
            f.write(json.dumps({"id": f"x{i}", "category": "chat", "sampled": i % 3 == 0,
                                "prompt_len": pl, "ids": ids}) + "\n")
        f.write('{"id": "torn", "ids": [1, 2')  # a torn last line is skipped
    return root


ARGS = ["--layers", "1", "--intermediate", "96", "--taps", "0,1,3", "--gru-hidden", "32", "--emb-dim", "16",
        "--mask-token-id", "3", "--batch", "3", "--anchors", "6", "--log-every", "1"]


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny matmuls on a shared 2-core machine are faster (and steadier) on one thread."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_features_match_hidden_states(tiny):
    model = transformers.AutoModelForCausalLM.from_pretrained(tiny / "target", dtype=torch.float32)
    taps = (0, 1, 3)
    tf = TargetFeatures(model, taps, cache_gb=0.01)
    ids = torch.randint(0, VOCAB, (17,))
    feats = tf.compute(ids)
    with torch.no_grad():
        hs = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    ref = torch.cat([hs[l + 1] for l in taps], dim=-1)
    torch.testing.assert_close(feats, ref)


def test_blocks_mask_and_labels():
    seq = Seq(torch.arange(100, 130), prompt_len=10, sampled=False, key=0)
    blk = make_blocks(seq, [27, 12], bs=4, mask_id=3)
    assert blk.anchors.tolist() == [12, 27]
    assert blk.blk_ids.tolist() == [112, 3, 3, 3, 127, 3, 3, 3]
    assert blk.positions.tolist() == [12, 13, 14, 15, 27, 28, 29, 30]
    assert blk.lab_dflash.tolist() == [-100, 113, 114, 115, -100, 128, 129, -100]
    assert blk.lab_domino.tolist() == [113, 114, 115, 116, 128, 129, -100, -100]
    m = blk.mask[0, 0]
    assert m.shape == (8, 27 + 8)
    assert m[0, :12].all() and not m[0, 12:27].any()          # block 1 sees ctx < 12
    assert m[4, :27].all()                                    # block 2 sees ctx < 27
    assert m[0, 27:31].all() and not m[0, 31:].any()           # own block only, non-causal
    assert m[7, 31:].all() and not m[7, 27:31].any()


def _setup(tiny, extra=()):
    a = T.parse_args(["--target", str(tiny / "target"), "--data", str(tiny / "data"), "--lr", "3e-3", *ARGS, *extra])
    torch.manual_seed(0)
    target = transformers.AutoModelForCausalLM.from_pretrained(tiny / "target", dtype=torch.bfloat16)
    target.requires_grad_(False)
    cd, cm = make_configs(target.config, a)
    d, m = Drafter(cd), Drafter(cm)
    with torch.no_grad():
        init_drafter(d, target, False)
        init_drafter(m, target, False)
    return a, target, d, m


def test_losses_decrease_on_repeated_batch(tiny):
    a, target, d, m = _setup(tiny)
    tr = Trainer(a, target, d, m)
    seqs = read_data(a.data)
    assert len(seqs) == 10
    batch = seqs[:3]
    opts = [torch.optim.AdamW(x.parameters(), lr=1e-2) for x in (d, m)]
    hist = []
    for i in range(16):
        out = tr.step(batch, lam=max(0.0, 1 - i / 6), rng=random.Random(0), gen=torch.Generator().manual_seed(1))
        for o, x in zip(opts, (d, m)):
            torch.nn.utils.clip_grad_norm_(x.parameters(), 1.0)
            o.step()
            o.zero_grad()
        hist.append(out)
    assert hist[0]["rows_d"] > 0 and hist[0]["rows_m"] > 0
    # same rows every step (same anchors, same row sample): a plain optimisation check
    first, last = hist[0], hist[-1]
    assert last["dflash"] < 0.6 * first["dflash"], (first, last)
    assert last["domino_base"] < 0.6 * first["domino_base"], (first, last)
    # the GRU sees the true previous tokens, so the corrected loss falls far below the base
    assert last["domino_final"] < 0.75 * first["domino_final"], (first, last)
    assert last["domino_final"] < last["domino_base"] - 0.3, (first, last)
    # the correction head learned something once lambda reached 0
    assert m.embed_proj[2].weight.abs().sum() > 0
    r = tr.evaluate([(s, [s.prompt_len, s.prompt_len + 3]) for s in batch])
    assert r["acc_dflash"] >= 1.0 and r["acc_domino"] >= 1.0


def test_main_saves_loadable_checkpoints(tiny, tmp_path):
    out_d, out_m, log = tmp_path / "dflash", tmp_path / "domino", tmp_path / "log.txt"
    rc = T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"), "--out-dflash", str(out_d),
                 "--out-domino", str(out_m), "--max-steps", "3", "--time-budget-min", "5", "--log", str(log),
                 "--n-eval", "2", "--summary-md", str(tmp_path / "README.md"), *ARGS])
    assert rc == 0
    d, m = load_drafter(out_d), load_drafter(out_m)
    assert d.cfg.kind == "dflash" and not d.cfg.shift_label and d.cfg.block_size == 16
    assert m.cfg.kind == "domino" and m.cfg.shift_label and m.cfg.pure_draft_prefix_len == 1
    assert d.cfg.mask_token_id == m.cfg.mask_token_id == 3
    assert d.cfg.target_layer_ids == m.cfg.target_layer_ids == (0, 1, 3)
    assert d.cfg.num_target_layers == 4 and m.cfg.vocab_size == VOCAB
    assert m.cfg.gru_hidden_dim == 32 and m.cfg.emb_dim == 16
    text = log.read_text()
    assert "eval step 0" in text and "saved (final) step 3" in text
    done = json.loads(text.strip().splitlines()[-1].split("done: ", 1)[1])
    assert done["steps"] == 3 and done["acc_dflash"] >= 1.0
    assert "held-out greedy chain acceptance" in (tmp_path / "README.md").read_text()
    assert not (tmp_path / "dflash.tmp").exists() and not (tmp_path / "dflash.old").exists()


def test_packed_blocks_equal_decode_time_forward(tiny):
    """Many anchors in one masked forward == one decode-style forward per anchor (context =
    positions < p, block at p..p+B-1, no mask), rows and GRU states included."""
    a, target, d, m = _setup(tiny, ["--no-amp"])
    target = target.float()
    tr = Trainer(a, target, d, m)
    seq = read_data(a.data)[0]
    anchors = [seq.prompt_len, seq.prompt_len + 5, len(seq.ids) - 3]
    blk = make_blocks(seq, anchors, 16, a.mask_token_id)
    feats = tr.feats(seq).float()       # the trainer keeps features in bf16
    with torch.no_grad():
        z_d, z_m, s = tr._backbones(feats, blk)
        emb = target.get_input_embeddings()
        for j, p in enumerate(sorted(anchors)):
            ids = torch.full((16,), a.mask_token_id)
            ids[0] = seq.ids[p]
            for model, z in ((d, z_d), (m, z_m)):
                ref = model(feats[:, :p], emb(ids)[None], torch.arange(p), torch.arange(p, p + 16))[0]
                torch.testing.assert_close(z[16 * j:16 * (j + 1)], ref, atol=1e-4, rtol=1e-4)
            # GRU state after consuming x_p .. x_{p+i}, as the decoder's gru_step chain builds it
            st = None
            for i in range(3):
                st = m.gru_step(emb(seq.ids[p + i:p + i + 1]), st)
                torch.testing.assert_close(s[16 * j + i], st[0], atol=1e-5, rtol=1e-5)


def test_resume_continues_the_same_schedule(tiny, tmp_path):
    """6 steps in one run == 3 steps, stop, --resume for the rest: the same lr and lambda at every
    step and bit-identical final float32 weights and optimizer moments."""
    import torch

    def run(tag, *extra):
        out = tmp_path / tag
        log = out / "log.txt"
        rc = T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"),
                     "--out-dflash", str(out / "dflash"), "--out-domino", str(out / "domino"),
                     "--max-steps", "6", "--time-budget-min", "10000", "--decay-ratio", "0.5", "--log", str(log),
                     "--n-eval", "2", "--state", str(out / "state.pt"), "--summary-md", str(out / "summary.md"),
                     *ARGS, *extra])
        assert rc == 0
        return log
    straight = run("a")
    run("b", "--run-steps", "3")
    mid = torch.load(tmp_path / "b" / "state.pt", weights_only=False)
    assert mid["position"]["step"] == 3
    assert "resume with --resume" in (tmp_path / "b" / "log.txt").read_text()
    # a run's share ends without the held-out pass and the summary: those belong to the schedule's end
    assert not (tmp_path / "b" / "summary.md").exists()
    resumed = run("b", "--resume")
    assert "## Final results" in (tmp_path / "b" / "summary.md").read_text()

    def sched(log):
        out = {}
        for line in log.read_text().splitlines():
            if "| lr " in line and line.split("] ", 1)[1].startswith("step "):
                step = int(line.split("step ", 1)[1].split(" ", 1)[0])
                out[step] = line.split("| lr ", 1)[1].split(" |", 1)[0]
        return out
    assert sched(straight) == sched(resumed) and sorted(sched(straight)) == [1, 2, 3, 4, 5, 6]
    assert "resumed from" in resumed.read_text()
    sa = torch.load(tmp_path / "a" / "state.pt", weights_only=False)
    sb = torch.load(tmp_path / "b" / "state.pt", weights_only=False)
    for key in ("step", "epoch", "order"):
        assert sa["position"][key] == sb["position"][key]
    assert sa["position"]["step"] == 6
    for k in ("dflash", "domino"):
        ma, mb = sa["opts"][k]["state"], sb["opts"][k]["state"]
        assert sorted(ma) == sorted(mb)
        assert all(float(ma[i]["step"]) == float(mb[i]["step"]) == 6 for i in ma)   # moments carried over, not restarted
        moved = 0.0
        for name, t in sa["models"][k].items():
            # Not ==: two *straight* runs already differ by ~1e-8 after one step and ~1e-5 after six
            # (CPU GEMM rounding depends on buffer alignment), so equality is not a property of
            # the trainer; and Adam turns such rounding on a near-zero gradient into a step of
            # either sign, so a few entries of a large weight (the vocabulary rows) can differ by
            # more. 2e-4 is well below the distance the weights move in the last 3 steps.
            close = ((t - sb["models"][k][name]).abs() <= 2e-4).float().mean()
            assert close >= 0.999, (k, name, float(close))
            moved = max(moved, float((t - mid["models"][k][name]).abs().max()))
        assert moved > 1e-3, (k, moved)
    # a state made with other schedule flags is refused
    with pytest.raises(SystemExit, match="other settings"):
        run("b", "--resume", "--lr", "0.5")


def test_lr_domino_sets_the_domino_drafters_own_peak(tiny, tmp_path):
    """--lr-domino scales the Domino drafter's schedule alone; a state remembers it, a state made
    before the flag existed resumes as if it had been --lr, and another value is refused."""
    state = tmp_path / "state.pt"

    def run(*extra):
        return T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"),
                       "--out-dflash", str(tmp_path / "dflash"), "--out-domino", str(tmp_path / "domino"),
                       "--max-steps", "4", "--time-budget-min", "10000", "--n-eval", "2", "--state", str(state),
                       "--lr", "3e-3", *ARGS, *extra])
    assert run("--run-steps", "2", "--lr-domino", "1e-3") == 0
    blob = torch.load(state, weights_only=False)
    assert blob["flags"]["lr"] == 3e-3 and blob["flags"]["lr_domino"] == 1e-3
    (lr_d,) = {g["lr"] for g in blob["opts"]["dflash"]["param_groups"]}
    (lr_m,) = {g["lr"] for g in blob["opts"]["domino"]["param_groups"]}
    assert lr_m > 0 and lr_d == pytest.approx(3 * lr_m, rel=1e-12)
    with pytest.raises(SystemExit, match="other settings"):
        run("--resume", "--lr-domino", "2e-3")
    # the same state as one written before --lr-domino existed, made with a single --lr
    del blob["flags"]["lr_domino"]
    for g in blob["opts"]["domino"]["param_groups"]:
        g["lr"] *= 3
    torch.save(blob, state)
    assert run("--resume") == 0
    assert torch.load(state, weights_only=False)["flags"]["lr_domino"] == 3e-3
    with pytest.raises(SystemExit):
        T.parse_args(["--lr-domino", "0"])


def test_head_vocab_candidates_and_labels():
    from dominotree.train.headvocab import HeadVocab, frequent_tokens
    answers = [torch.tensor([5, 5, 7, 9, 9, 9]), torch.tensor([7, 3, 3])]
    # counts: 9:3, 3:2, 5:2, 7:2 -> top 3 = 9 and the two smallest ids among the ties (3, 5)
    assert frequent_tokens(answers, 3, 12).tolist() == [3, 5, 9]
    with pytest.raises(ValueError):
        frequent_tokens(answers, 0, 12)
    hv = HeadVocab(frequent_tokens(answers, 3, 12))
    assert hv.coverage(answers) == pytest.approx(7 / 9)
    la, lb = torch.tensor([11, 3]), torch.tensor([0, 9, 11])
    cand, (ia, ib) = hv(la, lb)
    assert cand.tolist() == [0, 3, 5, 9, 11]
    assert cand[ia].tolist() == la.tolist() and cand[ib].tolist() == lb.tolist()


def test_head_vocab_logits_are_the_full_logits_restricted(tiny):
    """The candidate-set loss scores exactly the full logits' columns of its candidates (base and
    Domino-corrected), so it is the full softmax restricted to them: never above the full CE."""
    from dominotree.train.headvocab import HeadVocab
    a, target, d, m = _setup(tiny, ["--no-amp"])
    with torch.no_grad():
        m.embed_proj[2].weight.normal_()     # a non-zero correction, so the restriction is tested
    tr = Trainer(a, target, d, m)
    torch.manual_seed(0)
    z, s = torch.randn(7, 64), torch.randn(7, 32)
    row = torch.tensor([0, 1, 2, 3, 4, 5, 6])
    lab = torch.tensor([4, 40, 41, 299, 20, 4, 150])
    cand, (idx,) = HeadVocab(torch.tensor([1, 2, 4, 100]))(lab)
    with torch.no_grad():
        base, final = tr._domino_logits(z, s, row, None)
        base_c, final_c = tr._domino_logits(z, s, row, cand)
    torch.testing.assert_close(base_c, base[:, cand])
    torch.testing.assert_close(final_c, final[:, cand])
    full = torch.nn.functional.cross_entropy(final, lab)
    restricted = torch.nn.functional.cross_entropy(final_c, idx)
    assert restricted <= full


def test_main_with_head_vocab_trains_and_logs_it(tiny, tmp_path):
    log = tmp_path / "log.txt"
    rc = T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"),
                 "--out-dflash", str(tmp_path / "d"), "--out-domino", str(tmp_path / "m"), "--max-steps", "2",
                 "--time-budget-min", "5", "--log", str(log), "--n-eval", "2", "--head-vocab", "50", *ARGS])
    assert rc == 0
    text = log.read_text()
    assert "head vocabulary: the 50 most frequent answer tokens" in text
    vocab = [int(line.split(" vocab ")[1].split()[0]) for line in text.splitlines() if line.startswith("[") and "| rows " in line]
    assert vocab and all(50 <= v < VOCAB for v in vocab)


def test_shards_limits_the_data_to_the_first_shards(tmp_path):
    """``--shards N`` reads the first N shards in name order, so a run keeps its data (and its
    resume fingerprint) while the generator appends shards; impossible counts are clear errors."""
    from dominotree.train.data import shard_files
    for i in range(3):
        rec = {"id": f"s{i}", "prompt_len": 2, "ids": [1, 5, 6 + i, 7, 8]}
        (tmp_path / f"shard-{i:05d}.jsonl").write_text(json.dumps(rec) + "\n")
    (tmp_path / "shard-00003.jsonl.tmp").write_text("{}\n")        # a shard being written: never read
    assert [s.ids[2].item() for s in read_data(tmp_path)] == [6, 7, 8]
    assert [s.ids[2].item() for s in read_data(tmp_path, shards=2)] == [6, 7]
    assert [f.name for f in shard_files(tmp_path, 1)] == ["shard-00000.jsonl"]
    for bad in (0, 4):
        with pytest.raises(SystemExit, match="shards"):
            read_data(tmp_path, shards=bad)


def test_split_stage_keeps_the_earlier_held_out_and_trains_on_new_shards(tmp_path):
    """A later stage on more shards: ``heldout_shards`` K gives exactly the held-out set a run on
    the first K shards had (none of it trained on), ``train_from_shard`` S trains only on shard S
    and later, ``train_to_shard`` E only before E; impossible shard numbers are clear errors."""
    from dominotree.train.data import split_heldout, split_stage
    for i in range(6):
        recs = [{"id": f"s{i}-{j}", "prompt_len": 2, "ids": [1, 5, 100 * i + j, 7, 8, 9]} for j in range(20)]
        (tmp_path / f"shard-{i:05d}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    first = read_data(tmp_path, shards=3)
    old_train, old_held = split_heldout(first, 6, 0)
    seqs = read_data(tmp_path)
    assert [s.ids[2].item() for s in split_heldout(seqs, 6, 0)[1]] != [s.ids[2].item() for s in old_held]
    train, held = split_stage(seqs, 6, 0, heldout_shards=3)
    assert [s.ids[2].item() for s in held] == [s.ids[2].item() for s in old_held]
    assert len(train) == len(seqs) - len(held) and not {s.key for s in train} & {s.key for s in held}
    train, held = split_stage(seqs, 6, 0, heldout_shards=3, train_from_shard=3)
    assert sorted(s.ids[2].item() // 100 for s in train) == [3] * 20 + [4] * 20 + [5] * 20
    assert [s.ids[2].item() for s in held] == [s.ids[2].item() for s in old_held]
    assert split_stage(seqs, 6, 0) == split_heldout(seqs, 6, 0)
    for bad in (-1, 6):
        with pytest.raises(SystemExit, match="train-from-shard"):
            split_stage(seqs, 6, 0, train_from_shard=bad)
    # a range: exactly the sequences a stage on shards 3-4 had before shard 5 was added, same order
    five = read_data(tmp_path, shards=5)
    before = split_stage(five, 6, 0, heldout_shards=3, train_from_shard=3)
    after = split_stage(seqs, 6, 0, heldout_shards=3, train_from_shard=3, train_to_shard=5)
    assert [s.key for s in after[0]] == [s.key for s in before[0]]
    assert [s.key for s in after[1]] == [s.key for s in before[1]]
    assert sorted({s.shard for s in after[0]}) == [3, 4]
    for lo, hi in ((3, 3), (3, 2), (0, 7)):
        with pytest.raises(SystemExit, match="train-to-shard"):
            split_stage(seqs, 6, 0, train_from_shard=lo, train_to_shard=hi)


def test_skip_seqs_leaves_out_the_start_of_the_first_epoch(tiny, tmp_path):
    """A later stage with the same seed and data skips the sequences an earlier one trained on:
    after one step its remaining order is the plain run's with the first N left out."""
    import torch

    def order_after_one_step(tag, *extra):
        out = tmp_path / tag
        rc = T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"),
                     "--out-dflash", str(out / "dflash"), "--out-domino", str(out / "domino"),
                     "--max-steps", "1", "--time-budget-min", "10000", "--n-eval", "2",
                     "--state", str(out / "state.pt"), *ARGS, *extra])
        assert rc == 0
        return torch.load(out / "state.pt", weights_only=False)["position"]["order"]
    plain = order_after_one_step("plain")
    skipped = order_after_one_step("skip", "--skip-seqs", "2")
    assert len(plain) >= 3 and skipped == plain[2:]
