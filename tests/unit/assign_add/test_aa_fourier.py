"""Fourier analysis of the adder (mechbook.assign_add.fourier, chapter 9)."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_aa_release import SHARED, needs_release

from mechbook.assign_add import fourier
from mechbook.assign_add.fourier import (
    fourier_basis,
    frequency_fve,
    key_frequencies,
    neuron_frequency_table,
    output_fourier_norms,
    two_cosine_fit,
)

N = 59


def planted(k: int, a: float, alpha: float, b: float, beta: float, c: float, modulus: int = N) -> np.ndarray:
    n = np.arange(modulus)
    return (
        c
        + a * np.cos(2 * math.pi * k * n / modulus + alpha)[:, None]
        + b * np.cos(2 * math.pi * k * n / modulus + beta)[None, :]
    )


def test_basis_is_orthonormal():
    basis, ks = fourier_basis(N)
    assert basis.shape == (N, N - 1) and list(ks) == list(range(1, 30))
    np.testing.assert_allclose(basis.T @ basis, np.eye(N - 1), atol=1e-12)
    np.testing.assert_allclose(basis.sum(axis=0), 0, atol=1e-12)  # orthogonal to constants


def test_even_modulus_is_refused():
    with pytest.raises(ValueError, match="odd"):
        fourier_basis(58)


@settings(max_examples=30, deadline=None)
@given(
    k=st.integers(1, 29),
    a=st.floats(0.5, 5),
    b=st.floats(0.5, 5),
    alpha=st.floats(-3.1, 3.1),
    beta=st.floats(-3.1, 3.1),
    c=st.floats(-3, 3),
)
def test_planted_frequency_and_phase_are_recovered_exactly(k, a, b, alpha, beta, c):
    row = neuron_frequency_table(planted(k, a, alpha, b, beta, c)).iloc[0]
    assert row["k"] == k
    assert row["fve"] == pytest.approx(1.0, abs=1e-9)
    assert row["a"] == pytest.approx(a, rel=1e-9) and row["b"] == pytest.approx(b, rel=1e-9)
    assert np.angle(np.exp(1j * (row["alpha"] - alpha))) == pytest.approx(0, abs=1e-9)
    assert np.angle(np.exp(1j * (row["beta"] - beta))) == pytest.approx(0, abs=1e-9)


def test_fve_matches_a_least_squares_fit_per_neuron():
    """Slow literal reference: regress each centred map on the four grid functions of frequency k."""
    rng = np.random.default_rng(0)
    maps = rng.normal(size=(4, N, N)) + planted(11, 2.0, 0.3, 1.0, -1.0, 0.5)
    fve, _ks = frequency_fve(maps)
    n, m = np.meshgrid(np.arange(N), np.arange(N), indexing="ij")
    for i in range(len(maps)):
        y = (maps[i] - maps[i].mean()).ravel()
        for k in (1, 5, 11, 29):
            t = 2 * math.pi * k / N
            X = np.stack([np.cos(t * n), np.sin(t * n), np.cos(t * m), np.sin(t * m)], axis=-1).reshape(-1, 4)
            coef, *_ = np.linalg.lstsq(X, y, rcond=None)
            explained = 1 - ((y - X @ coef) ** 2).sum() / (y**2).sum()
            assert fve[i, k - 1] == pytest.approx(explained, abs=1e-9)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_fve_is_a_fraction_and_frequencies_do_not_overlap(seed):
    maps = np.random.default_rng(seed).normal(size=(3, N, N))
    fve, _ = frequency_fve(maps)
    assert np.all(fve >= 0) and np.all(fve <= 1)
    assert np.all(fve.sum(axis=1) <= 1 + 1e-9)  # orthogonal parts of one variance


def test_two_cosine_fit_reproduces_a_planted_map_and_leaves_orthogonal_residual():
    target = planted(7, 3.0, 0.4, 2.0, -1.1, 5.0)
    rng = np.random.default_rng(1)
    noisy = target + rng.normal(size=target.shape) * 0.1
    np.testing.assert_allclose(two_cosine_fit(target, 7), target, atol=1e-9)
    residual = noisy - two_cosine_fit(noisy, 7)
    assert np.abs(two_cosine_fit(residual, 7) - residual.mean()).max() < 1e-9
    with pytest.raises(ValueError, match="k must be"):
        two_cosine_fit(target, 30)


def test_constant_map_explains_nothing():
    fve, _ = frequency_fve(np.ones((1, N, N)))
    assert np.all(fve == 0)


def test_key_frequencies_counts_only_good_neurons():
    maps = np.stack(
        [
            planted(11, 1, 0, 1, 0, 0),
            planted(11, 1, 1, 2, 0, 0),
            planted(5, 1, 0, 1, 0, 0),
            np.random.default_rng(0).normal(size=(N, N)),
        ]
    )
    counts = key_frequencies(neuron_frequency_table(maps), min_fve=0.9)
    assert counts.to_dict("list") == {"k": [11, 5], "neurons": [2, 1]}


def test_output_fourier_norms_obey_parseval_and_find_a_planted_frequency():
    rng = np.random.default_rng(2)
    W_out, W_U = rng.normal(size=(16, 8)), rng.normal(size=(8, N))
    norms = output_fourier_norms(W_out, W_U)
    assert (norms["norm"] ** 2).sum() == pytest.approx(((W_out @ W_U) ** 2).sum(), rel=1e-9)
    wave = np.cos(2 * math.pi * 19 * np.arange(N) / N + 0.7)
    planted_norms = output_fourier_norms(np.ones((3, 1)), wave[None, :])
    assert planted_norms.loc[planted_norms["norm"].idxmax(), "k"] == 19


def planted_logits(N: int, ks: list[int], amp: float = 3.0) -> np.ndarray:
    """Logits ``amp * sum_k cos(2 pi k (n + m - c) / N)``, rows the (n, m) pairs row-major."""
    n, m = np.divmod(np.arange(N * N), N)
    c = np.arange(N)
    return amp * sum(np.cos(2 * np.pi * k * ((n + m)[:, None] - c[None, :]) / N) for k in ks)


def cross_entropy(logits: np.ndarray, N: int) -> float:
    n, m = np.divmod(np.arange(N * N), N)
    z = logits - logits.max(axis=1, keepdims=True)
    return float(-(z[np.arange(N * N), (n + m) % N] - np.log(np.exp(z).sum(axis=1))).mean())


def test_fourier_ablation_of_planted_key_frequencies():
    N = 11
    logits = planted_logits(N, [2, 5])
    kept = fourier.fourier_ablated_losses(logits, [2, 5])
    assert kept["restricted"] == pytest.approx(kept["full"], rel=1e-9)
    assert kept["excluded"] == pytest.approx(np.log(N), rel=1e-9)
    other = fourier.fourier_ablated_losses(logits, [1, 3])
    assert other["restricted"] == pytest.approx(np.log(N), rel=1e-9) and other["excluded"] == pytest.approx(
        kept["full"], rel=1e-9
    )


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), ks=st.lists(st.integers(1, 6), min_size=1, max_size=4, unique=True))
def test_fourier_ablation_matches_a_least_squares_fit(seed, ks):
    """Literal reference: fit each residue's logit column over the grid by least squares on a
    constant and cos/sin(2 pi k (n + m) / N); restricted = the fit, excluded = column - fit + mean."""
    N = 13
    logits = np.random.default_rng(seed).normal(size=(N * N, N))
    n, m = np.divmod(np.arange(N * N), N)
    design = np.column_stack([np.ones(N * N)] + [f(2 * np.pi * k * (n + m) / N) for k in ks for f in (np.cos, np.sin)])
    coef, *_ = np.linalg.lstsq(design, logits, rcond=None)
    fit = design @ coef
    got = fourier.fourier_ablated_losses(logits, ks)
    assert got["full"] == pytest.approx(cross_entropy(logits, N), rel=1e-9)
    assert got["restricted"] == pytest.approx(cross_entropy(fit, N), rel=1e-9)
    assert got["excluded"] == pytest.approx(cross_entropy(logits - fit + logits.mean(axis=0), N), rel=1e-9)


def test_fourier_ablation_refuses_bad_input():
    with pytest.raises(ValueError, match="shape"):
        fourier.fourier_ablated_losses(np.zeros((10, 5)), [1])
    with pytest.raises(ValueError, match=r"frequencies must be in 1\.\.2"):
        fourier.fourier_ablated_losses(np.zeros((25, 5)), [3])


def test_circle_fit_finds_a_planted_circle_and_its_step():
    N, k = 59, 11
    rng = np.random.default_rng(0)
    plane = np.linalg.qr(rng.normal(size=(32, 2)))[0]
    angle = 2 * np.pi * k * np.arange(N) / N
    x = np.column_stack([np.cos(angle), np.sin(angle)]) @ plane.T + 0.01 * rng.normal(size=(N, 32))
    fit = fourier.circle_fit(x).sort_values("score", ascending=False)
    assert fit.k.iloc[0] == k and fit.score.iloc[0] > 0.99 and fit.score.iloc[1] < 0.3
    assert fit.pc2_fraction.iloc[0] > 0.95


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000))
def test_frequency_shares_sum_to_one_and_find_planted_weights(seed):
    N = 17
    rng = np.random.default_rng(seed)
    assert fourier.frequency_shares(rng.normal(size=(N, 8))).fraction.sum() == pytest.approx(1.0)
    n = np.arange(N)
    x = np.column_stack(
        [2 * np.cos(2 * np.pi * 3 * n / N), 2 * np.sin(2 * np.pi * 3 * n / N), np.cos(2 * np.pi * 7 * n / N)]
    )
    shares = fourier.frequency_shares(x @ rng.normal(size=(3, 3))).set_index("k").fraction
    assert shares[3] + shares[7] == pytest.approx(1.0) and shares[7] > 0


def test_model_fourier_ablation_full_loss_is_the_models_loss():
    from mechbook.assign_add import circuits
    from mechbook.assign_add.model import AssignAddModel, ModelConfig
    from mechbook.assign_add.task import TaskConfig

    cfg = TaskConfig()
    model = AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32))
    tokens, labels = circuits.direct_sequences(cfg)
    with torch.no_grad():
        expected = float(torch.nn.functional.cross_entropy(model(tokens, last_only=True), labels))
    assert fourier.model_fourier_ablation(model, cfg, [1, 2])["full"] == pytest.approx(expected, rel=1e-5)
    assert fourier.mlp2_maps(model, cfg).shape == (32, 59, 59)


@needs_release
def test_released_final_model_has_the_papers_fourier_features():
    """54 layer-2 neurons explain >= 0.9 of their variance with one frequency, best 0.969,
    k = 11 the most common; keeping only their frequencies keeps the loss, removing them ruins it."""
    from mechbook.assign_add import release
    from mechbook.assign_add.task import Task

    task = Task()
    model = release.load_release(release.FINAL, folder=SHARED, download=False)
    table = fourier.neuron_frequency_table(fourier.mlp2_maps(model, task.cfg))
    keys = fourier.key_frequencies(table)
    assert (table.fve >= 0.9).sum() == 54 and table.fve.max() == pytest.approx(0.969, abs=0.001)
    assert keys.k.iloc[0] == 11
    losses = fourier.model_fourier_ablation(model, task.cfg, keys.k.tolist())
    assert losses["restricted"] <= losses["full"] < 0.05 and losses["excluded"] > np.log(59)
    shares = fourier.embedding_pca(model, 59)["frequency"]
    assert shares[shares.space == "W_E"].fraction.head(10).sum() > 0.9


def test_random_frequency_sets_are_distinct_in_range_and_seeded():
    sets = fourier.random_frequency_sets(59, 9, draws=5, seed=1)
    assert len(sets) == 5 and all(len(set(s)) == 9 and min(s) >= 1 and max(s) <= 29 for s in sets)
    assert sets == fourier.random_frequency_sets(59, 9, draws=5, seed=1)
    assert sets != fourier.random_frequency_sets(59, 9, draws=5, seed=2)
    with pytest.raises(ValueError, match="size must be between 1 and 29"):
        fourier.random_frequency_sets(59, 30, draws=1)
    left = fourier.random_frequency_sets(59, 9, draws=4, seed=1, exclude=range(1, 25))
    assert all(s == [25, 26, 27, 28, 29] for s in left)
    assert fourier.random_frequency_sets(59, 9, draws=4, exclude=range(1, 30)) == []


def test_random_frequency_control_on_planted_logits():
    """Logits built from frequencies 2 and 5 of n + m: the key restriction keeps the full loss;
    random pairs of frequencies that miss both leave the uniform loss log N, pairs holding one
    of them fall in between (the control is only low when it happens to draw a key frequency)."""
    N = 11
    logits = planted_logits(N, [2, 5])
    ab = fourier.ablation(logits, [2, 5], draws=8, seed=0)
    assert ab.n_frequencies == 2 and ab.restricted == pytest.approx(ab.full, rel=1e-9)
    sets = fourier.random_frequency_sets(N, 2, draws=8, seed=0)
    for s, loss in zip(sets, ab.random_restricted):
        expected = fourier.fourier_ablated_losses(logits, s)["restricted"]
        assert loss == pytest.approx(expected)
        if not {2, 5} & set(s):
            assert loss == pytest.approx(np.log(N), rel=1e-9)
    assert ab.random_lowest == min(ab.random_restricted) and list(ab.random_sets) == [tuple(x) for x in sets]
    best = sets[int(np.argmin(ab.random_restricted))]
    assert ab.random_lowest_overlap == len({2, 5} & set(best))
    assert len(ab.nonkey_restricted) == 8 and ab.nonkey_lowest == pytest.approx(np.log(N), rel=1e-9)


def test_ablation_without_key_frequencies_has_no_control():
    ab = fourier.ablation(planted_logits(11, [2]), [])
    assert (ab.n_frequencies, ab.restricted, ab.excluded, ab.random_restricted, ab.random_lowest) == (
        0,
        None,
        None,
        (),
        None,
    )
    assert (ab.nonkey_lowest, ab.random_lowest_overlap) == (None, None)
    assert ab.full > 0


def test_fourier_neurons_filter_known_maps():
    n = np.arange(59)
    cos = lambda k, a, b: np.cos(2 * math.pi * k * n / 59 + a)[:, None] + np.cos(2 * math.pi * k * n / 59 + b)[None, :]  # noqa: E731
    rng = np.random.default_rng(0)
    maps = np.stack(
        [
            cos(11, 0.3, 1.0),
            cos(11, -2.0, 0.5),
            cos(5, 0.0, 0.0),
            cos(7, 0.1, 0.2) + 0.9 * rng.standard_normal((59, 59)),
            np.zeros((59, 59)),
        ]
    )
    found = fourier.fourier_neurons(maps)
    assert list(found.live["neuron"]) == [0, 1, 2, 3] and list(found.good["neuron"]) == [0, 1, 2]
    assert found.keys == [5, 11] and list(found.frequencies["k"]) == [11, 5] and found.best_fve > 0.999
    assert fourier.fourier_neurons(np.zeros((2, 59, 59))).best_fve is None
    ranked = sorted(found.live["fve"], reverse=True)
    assert [found.ranked_fve(k) for k in (1, 4, 5)] == [ranked[0], ranked[3], 0.0]  # four live neurons
    assert found.ranked_fve(4) < 0.9 <= found.ranked_fve(3)  # the noisy neuron is the fourth best
    with pytest.raises(ValueError, match="counts from 1"):
        found.ranked_fve(0)


def test_key_frequencies_over_the_best_random_set():
    ab = fourier.Ablation(0.014, 9, 1.5e-11, 10.7, (0.3, 0.00488), ((1,), (2,)), (3.2,), (11,))
    assert ab.key_over_random == pytest.approx(1.5e-11 / 0.00488)
    assert fourier.Ablation(0.1, 0).key_over_random is None
    assert fourier.Ablation(0.1, 2, 0.0, 5.0, (0.0,), ((1,),)).key_over_random == 0.0
    assert fourier.Ablation(0.1, 2, 0.01, 5.0, (0.0,), ((1,),)).key_over_random == float("inf")
