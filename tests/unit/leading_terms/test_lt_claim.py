"""mechbook.leading_terms.claim (chapter 3): the step arithmetic, the <unk> share and the cosines
without <unk> against literal loops, the theory-setting runs on a tiny synthetic corpus against a
plain full-batch run, and the one rule that names the cause, in each branch."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from lt_markov import markov_tokens

from mechbook.leading_terms import claim
from mechbook.leading_terms.claim import SettingConfig
from mechbook.leading_terms.leading import bases
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.stats import corpus_stats
from mechbook.leading_terms.train import TrainConfig, train

VOCAB = 8


def test_steps_reach_the_eta_s_or_stop_at_the_cap():
    assert claim.steps_to(27.915, 0.005, None) == 5583 and claim.steps_to(27.915, 0.005, 100) == 100
    assert claim.steps_to(1.0, 0.005, None) == 200  # exact, not 201 from float rounding


def test_unk_share_counts_the_unk_tokens():
    tokens = np.array([[0, 1, 0, 2], [3, 0, 1, 1]])
    assert claim.unk_share(tokens, 0) == 3 / 8 and claim.unk_share(tokens, None) == 0.0


def test_cosines_excluding_leave_out_the_row_and_the_column_literally():
    tokens = markov_tokens(n=12, length=7, vocab=VOCAB, seed=3)
    stats = corpus_stats(tokens, VOCAB)
    rng = np.random.default_rng(0)
    state = {"W_O": torch.tensor(rng.normal(size=(VOCAB, VOCAB)))}
    for layer in range(2):
        for kind, shape in (("W", (VOCAB, VOCAB)), ("V", (VOCAB, VOCAB)), ("P", (6,))):
            state[f"blocks.{layer}.attn.{kind}"] = torch.tensor(rng.normal(size=shape))
    basis = bases(stats)

    def literal(w, b, skip):
        pairs = [(w[i][j], b[i][j]) for i in range(VOCAB) for j in range(VOCAB) if skip is None or skip not in (i, j)]
        dot = sum(x * y for x, y in pairs)
        return dot / math.sqrt(sum(x * x for x, _ in pairs) * sum(y * y for _, y in pairs))

    for skip in (None, 2):
        got = claim.cosines_excluding(state, stats, skip)
        assert got["W_O"] == pytest.approx(literal(state["W_O"].numpy(), basis["W_O"], skip), rel=1e-12)
        want_v = min(literal(state[f"blocks.{l}.attn.V"].numpy(), basis["V"], skip) for l in range(2))
        assert got["V"] == pytest.approx(want_v, rel=1e-12)
        ps = [state[f"blocks.{l}.attn.P"].numpy() for l in range(2)]
        want_p = min(float(p @ basis["P"]) / (np.linalg.norm(p) * np.linalg.norm(basis["P"])) for p in ps)
        assert got["P"] == pytest.approx(want_p, rel=1e-12)  # P is compared whole
    assert claim.cosines_excluding(state, stats, 2)["W"] != claim.cosines_excluding(state, stats, None)["W"]


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("MECHBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    tokens = markov_tokens(n=10, length=9, vocab=VOCAB, seed=5)
    setting = SettingConfig(n_sequences=6, context=5, batch_sizes=(2, 6, 9), max_steps=30, lr=0.05)
    runs = claim.setting_runs(tokens, VOCAB, 0, setting, eta_s=10.0, n_layers=2)
    yield tokens, setting, runs
    mp.undo()


def test_setting_runs_the_series_then_the_full_batch(synthetic):
    _, setting, runs = synthetic
    assert setting.series == (2, None)  # 6 and 9 are not below the 6 sequences: the full batch
    assert [r.batch_size for r in runs] == [2, None] and [r.batch for r in runs] == [2, 6]
    assert all(r.steps == 30 and r.eta_s == pytest.approx(1.5) for r in runs)  # capped at 30 steps of 0.05


def test_full_batch_setting_run_equals_a_plain_full_batch_run_on_the_subset(synthetic):
    tokens, _, runs = synthetic
    sub = tokens[:6, :6]
    stats = corpus_stats(sub, VOCAB)
    result = train(sub, stats, ModelConfig(VOCAB, 5, n_layers=2), TrainConfig(lr=0.05, steps=30))
    last = result.history[result.history["step"] == 30]
    full = runs[-1]
    for kind in ("W_O", "V", "W", "P"):
        assert full.cosines[kind] == pytest.approx(float(last.loc[last["kind"] == kind, "cosine"].min()), abs=1e-6)
    with torch.no_grad():
        assert full.loss == pytest.approx(float(result.model(device="cpu").loss(torch.as_tensor(sub))), rel=1e-6)
    assert full.log_vocab == pytest.approx(math.log(VOCAB)) and full.loss < full.log_vocab
    assert full.cosines_no_unk["W_O"] != full.cosines["W_O"]  # token 0 is this corpus's <unk>


def test_setting_refuses_a_subset_larger_than_the_corpus():
    with pytest.raises(ValueError, match="lower them"):
        claim.subset(np.zeros((4, 6), dtype=int), SettingConfig(n_sequences=8, context=4, batch_sizes=()))
    with pytest.raises(ValueError, match="n_sequences must be at least 2"):
        SettingConfig(n_sequences=1, context=4, batch_sizes=())


@pytest.mark.parametrize(
    ("verdicts", "cause"),
    [
        ((True, None, None, None), "none"),
        ((False, True, True, False), "noise"),
        ((False, True, False, True), "noise"),
        ((False, False, True, False), "vocabulary"),
        ((False, False, False, False), "departure"),
        ((False, False, False, None), "departure"),
        ((False, False, False, True), "unsettled"),
        ((None, True, True, True), "untested"),
        ((False, None, False, False), "untested"),
    ],
)
def test_explain_names_one_cause_per_branch(verdicts, cause):
    assert claim.explain(*verdicts) == cause


@given(st.booleans(), st.booleans(), st.booleans(), st.sampled_from([True, False, None]))
@settings(max_examples=40, deadline=None)
def test_explain_blames_noise_only_when_the_full_batch_holds(a, b, c, d):
    got = claim.explain(a, b, c, d)
    assert got in claim.CAUSES and (got == "noise") == (not a and b) and (got == "none") == a
    assert (got == "departure") == (not a and not b and not c and not d)
