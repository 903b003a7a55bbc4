"""Chapter 2's closed-form leading terms, checked by autograd on a small Markov corpus."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lt_markov import markov_tokens

from mechbook.leading_terms.check import CheckConfig, autograd_check
from mechbook.leading_terms.leading import coefficient, cosine, kind_of, leading_term, ranking_overlap
from mechbook.leading_terms.stats import corpus_stats

VOCAB = 8


@pytest.fixture(scope="module")
def corpus():
    tokens = markov_tokens(n=30, length=8, vocab=VOCAB, seed=1)
    return tokens, corpus_stats(tokens, VOCAB)


@pytest.fixture(scope="module")
def check(corpus):
    tokens, stats = corpus
    return autograd_check(tokens, stats, VOCAB, CheckConfig(lrs=(0.02,), steps=5, n_layers=3))


def test_every_matrix_matches_its_closed_form_in_direction_and_size(check):
    predicted = check[check["predicted_norm"] > 0]
    assert set(predicted["kind"]) == {"W_O", "V", "W", "P"}
    assert set(predicted.loc[predicted["kind"] == "W", "step"]) == {3, 4, 5}
    assert (predicted["cosine"] > 0.999).all(), predicted.loc[predicted["cosine"] <= 0.999]
    assert ((predicted["ratio"] - 1).abs() < 0.02).all(), predicted.loc[(predicted["ratio"] - 1).abs() >= 0.02]


def test_matrices_vanish_exactly_before_their_first_step(check):
    # V needs W_O != 0 (s >= 2), W and P need V W_O != 0 (s >= 3)
    early = check[
        ((check["kind"] == "V") & (check["step"] <= 1)) | (check["kind"].isin(["W", "P"]) & (check["step"] <= 2))
    ]
    assert len(early) and (early["norm"] == 0).all()


def test_a_wrong_coefficient_would_be_caught(corpus, check):
    # the s^4/8 shortcut is only asymptotic: at s = 3 it is off by far more than 2 %
    assert coefficient("W", 0.02, 3, exact=False) / coefficient("W", 0.02, 3) > 1.5
    _tokens, stats = corpus
    w = check[(check["matrix"] == "blocks.0.attn.W") & (check["step"] == 5)]["norm"].item()
    assert abs(w / np.linalg.norm(leading_term(stats, "W", 0.02, 5, exact=False)) - 1) > 0.02


def test_ratio_error_shrinks_with_the_learning_rate(corpus):
    tokens, stats = corpus
    res = autograd_check(tokens, stats, VOCAB, CheckConfig(lrs=(0.2, 0.05), steps=4, n_layers=1))
    err = (
        res[res["step"] == 4]
        .assign(err=lambda d: (d["ratio"] - 1).abs())
        .pivot(index="kind", columns="lr", values="err")
    )
    assert (err[0.05] < err[0.2]).all()


@given(k=st.integers(1, 40))
def test_exact_coefficient_is_the_sum(k):
    assert coefficient("W", 1.0, k) == pytest.approx(sum(j**2 * (j - 1) for j in range(k)) / 2)
    assert coefficient("V", 1.0, k) == sum(range(k))


@settings(max_examples=50)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.01, 100))
def test_cosine_is_scale_free_and_bounded(seed, scale):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(4, 5))
    c = cosine(a, b)
    assert -1 <= c <= 1
    assert cosine(scale * a, b) == pytest.approx(c)
    assert cosine(a, a) == pytest.approx(1.0)


def test_bad_inputs_say_what_to_do():
    with pytest.raises(ValueError, match="equal shapes"):
        cosine(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="not a parameter"):
        kind_of("blocks.0.mlp.W")
    with pytest.raises(ValueError, match="kind must be one of"):
        coefficient("Z", 0.1, 3)
    assert np.isnan(cosine(np.zeros(3), np.ones(3)))


@settings(max_examples=30)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 6))
def test_ranking_overlap_of_a_matrix_with_itself_and_a_reversal(seed, k):
    rng = np.random.default_rng(seed)
    m = rng.normal(size=(5, 12))
    assert ranking_overlap(m, m, [0, 2, 4], k=k) == 1.0
    assert ranking_overlap(m, 3.0 * m + 1.0, [1], k=k) == 1.0
    assert ranking_overlap(m, -m, [0, 1], k=k) == 0.0
    brute = np.mean([len(set(np.argsort(-m[a])[:k]) & set(np.argsort(-m[a] * np.arange(12))[:k])) / k for a in (0, 3)])
    assert ranking_overlap(m, m * np.arange(12), [0, 3], k=k) == pytest.approx(brute)
    assert ranking_overlap(m, m, [0], k=k, exclude=[0, 1]) == 1.0


def test_ranking_overlap_positive_ignores_ties_at_the_baseline():
    theory = np.array([[3.0, 2.0, -1.0, -1.0, -1.0, -1.0], [-1.0] * 6])
    trained = np.array([[2.9, 2.1, -0.9, -1.1, -1.2, -0.95], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]])
    assert ranking_overlap(theory, trained, [0], k=4) == 0.75
    assert ranking_overlap(theory, trained, [0, 1], k=4, positive=True) == 1.0
    with pytest.raises(ValueError, match="no row has a positive"):
        ranking_overlap(theory, trained, [1], k=4, positive=True)
