"""The training changes of issue 29 on tiny models: the soft-label loss, Domino's Top-M restricted
loss and the loop mask against hand computations; the target's top-k labels against its own
logits; a block-8 drafter fine-tuned from block-16 weights; automatic resume."""
from __future__ import annotations

import math

import pytest
import torch

pytest.importorskip("transformers")

from dominotree.models.checkpoint import load_drafter  # noqa: E402
from dominotree.train import trainer as T  # noqa: E402
from dominotree.train.data import read_data  # noqa: E402
from dominotree.train.features import TargetFeatures  # noqa: E402
from dominotree.train.losses import loop_mask, soft_loss, topm_loss  # noqa: E402

from test_trainer import ARGS, one_thread, tiny  # noqa: E402,F401  (fixtures)


def test_soft_loss_by_hand():
    # q = softmax([0, ln 2, 0]) = [1/4, 1/2, 1/4]; the target's top-2 = tokens 1, 0 with p 0.6, 0.2,
    # renormalised to 0.75, 0.25: KL = 0.75 ln(0.75/0.5) + 0.25 ln(0.25/0.25); CE(argmax 1) = ln 2
    logits = torch.tensor([[0.0, math.log(2.0), 0.0]])
    loss = soft_loss(logits, torch.tensor([[1, 0]]), torch.tensor([[math.log(0.6), math.log(0.2)]]))
    assert loss.shape == (1,)
    assert abs(float(loss[0]) - (0.75 * math.log(1.5) + math.log(2.0))) < 1e-6
    # the target's distribution exactly reproduced on its top-k: KL 0, only the CE on the argmax is left
    lp = torch.log_softmax(torch.tensor([[2.0, 1.0, -1.0]]), -1)
    exact = soft_loss(torch.tensor([[2.0, 1.0, -1.0]]), torch.tensor([[0, 1, 2]]), lp)
    assert abs(float(exact[0]) + float(lp[0, 0])) < 1e-6


def test_topm_loss_by_hand():
    base = torch.tensor([[3.0, 2.0, 1.0, 0.0]] * 3)
    final = torch.tensor([[0.0, 1.0, 0.0, 5.0]] * 3)
    # M = 2: candidates 0, 1 of base; the restricted softmax of final over them is [1, e] / (1 + e)
    out = topm_loss(base, final, torch.tensor([1, 1, 3]), torch.tensor([1, 0, 2]), 2)
    assert abs(float(out[0]) - (math.log(1 + math.e) - 1)) < 1e-6
    assert float(out[1]) == 0.0        # row 0: never corrected
    assert float(out[2]) == 0.0        # label 3 is outside the Top-2: the tree could not draft it


def test_loop_mask_marks_answer_positions_only():
    ids = torch.tensor([9, 9, 9, 9, 9, 9, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5])
    m = loop_mask(ids, 6)
    assert m.tolist() == [False] * 6 + [False] * 9 + [True]


def test_soft_labels_are_the_targets_own_top_k(tiny):
    from transformers import AutoModelForCausalLM
    target = AutoModelForCausalLM.from_pretrained(tiny / "target", dtype=torch.float32).eval()
    seq = read_data(tiny / "data")[0]
    tf = TargetFeatures(target, (0, 1, 3), 1.0, soft_k=5)
    feats = tf(seq)
    ids, lp = tf.labels(seq)
    with torch.no_grad():
        want = torch.log_softmax(target(seq.ids[None]).logits[0].float(), -1).topk(5, -1)
    assert torch.equal(ids.long(), want.indices)
    assert torch.allclose(lp, want.values, atol=1e-5)
    # the features are those of a run without labels
    assert torch.equal(feats, TargetFeatures(target, (0, 1, 3), 1.0)(seq))
    assert tf.soft_tokens == len(seq.ids)


def _run(tiny, out, *extra):
    log = out / "log.txt"
    rc = T.main(["--target", str(tiny / "target"), "--data", str(tiny / "data"), "--out-dflash", str(out / "dflash"),
                 "--out-domino", str(out / "domino"), "--time-budget-min", "10000", "--log", str(log),
                 "--n-eval", "2", *ARGS, *extra])
    assert rc == 0
    return log.read_text()


def test_new_losses_train_and_log(tiny, tmp_path):
    text = _run(tiny, tmp_path, "--max-steps", "3", "--soft-k", "8", "--loop-weight", "0.25", "--topm-loss", "16",
                "--head-vocab", "60")
    assert "soft labels (top-8):" in text and "saved (final) step 3" in text


def test_block8_fine_tunes_from_block16_weights(tiny, tmp_path):
    _run(tiny, tmp_path / "b16", "--max-steps", "1")
    src = load_drafter(tmp_path / "b16" / "domino")
    _run(tiny, tmp_path / "b8", "--max-steps", "1", "--block-size", "8", "--lr", "1e-12",
         "--resume-dflash", str(tmp_path / "b16" / "dflash"), "--resume-domino", str(tmp_path / "b16" / "domino"))
    d8, m8 = load_drafter(tmp_path / "b8" / "dflash"), load_drafter(tmp_path / "b8" / "domino")
    assert d8.cfg.block_size == m8.cfg.block_size == 8 and src.cfg.block_size == 16
    # it started from the block-16 weights (an lr of 1e-12 leaves them as they were, up to bf16 storage)
    for (name, a), b in zip(src.state_dict().items(), m8.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-2), name


def test_state_file_resumes_automatically(tiny, tmp_path):
    state = tmp_path / "b" / "state.pt"
    common = ("--max-steps", "6", "--decay-ratio", "0.5", "--state", str(state), "--soft-k", "4", "--loop-weight", "0.5")
    straight = _run(tiny, tmp_path / "a", *common[:4], "--state", str(tmp_path / "a" / "state.pt"), *common[6:])
    first = _run(tiny, tmp_path / "b", *common, "--run-steps", "3")
    assert "resumed from" not in first
    second = _run(tiny, tmp_path / "b", *common)[len(first):]    # no --resume: the state file is found (same log)
    assert "resumed from" in second and "step 6 |" in second

    def sched(text):
        return [ln.split("] ", 1)[1].split(" | ")[0:4:3] for ln in text.splitlines()
                if "| lr " in ln and ln.split("] ", 1)[1].startswith("step ")]
    assert sched(straight) == sched(first) + sched(second)     # same lr and lambda at every step
    s = torch.load(state, weights_only=False)
    assert s["position"]["step"] == 6
    # the soft labels were recomputed in the resumed process, not assumed
    assert "soft labels (top-4):" in second
    fresh = _run(tiny, tmp_path / "b", *common, "--no-auto-resume")
    assert "resumed from" not in fresh[len(first) + len(second):]


def test_topm_loss_is_the_conditional_scorers_softmax(tiny_pair):
    """The restricted loss reads exactly the distribution the tree scores children with:
    ``ConditionalScorer.corrected_logprobs`` over the depth's Top-M base candidates."""
    from dominotree.scoring import ConditionalScorer, DraftBlock
    drafter, target = tiny_pair.drafters["domino"], tiny_pair.target
    g = torch.Generator().manual_seed(3)
    D, V, M = 4, target.vocab_rows, 16
    base = torch.randn(D, V, generator=g) * 3
    z = torch.randn(D, drafter.cfg.hidden_size, generator=g)
    state = torch.randn(drafter.cfg.gru_hidden_dim, generator=g)
    scorer = ConditionalScorer(DraftBlock(5, base, z, state), drafter, target.embed, 4, M)
    for depth in (2, 3):
        lp, cand = scorer.corrected_logprobs(state, depth)
        with torch.no_grad():
            final = base[depth - 1] + drafter.correction(z[depth - 1:depth], state[None])[0]
            for j in (0, 5, M - 1):
                got = topm_loss(base[depth - 1:depth], final[None], cand[j:j + 1], torch.tensor([depth - 1]), M)
                assert abs(float(got[0]) + float(lp[j])) < 1e-4, (depth, j)
