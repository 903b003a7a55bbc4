"""The book's frequency restriction and chance levels (mechbook.assign_add.readings)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mechbook.assign_add import fourier
from mechbook.assign_add import readings as readings_module

N = 59


def _sum_logits(*ks: int) -> np.ndarray:
    """Logits (N², N) that are a pure function of n + m: cos(2 pi k (n + m - r) / N) summed over ``ks``."""
    n, m = np.divmod(np.arange(N * N), N)
    r = np.arange(N)
    return sum(np.cos(2 * math.pi * k * ((n + m)[:, None] - r[None, :]) / N) for k in ks)


def test_positional_chance_is_the_mean_of_one_over_the_keys():
    assert readings_module.positional_chance(2) == pytest.approx(1 / 2)
    assert readings_module.positional_chance(3) == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert readings_module.positional_chance(12) == pytest.approx(0.191, abs=5e-4)


def test_keeping_frequencies_keeps_each_pairs_own_part():
    rng = np.random.default_rng(0)
    noise = rng.normal(size=(N * N, N))
    logits = _sum_logits(3, 7) + noise
    kept = readings_module.keep_frequencies(logits, [3])
    np.testing.assert_allclose(readings_module.keep_frequencies(logits, range(1, 30)), logits)
    np.testing.assert_allclose(readings_module.keep_frequencies(kept, [3]), kept, atol=1e-9)  # a projection
    # without the noise, keeping 3 leaves exactly the k = 3 part: the k = 7 part goes, nothing is averaged
    np.testing.assert_allclose(readings_module.keep_frequencies(_sum_logits(3, 7), [3]), _sum_logits(3), atol=1e-9)
    # keeping nothing leaves the pairs' own part: no sum frequency left in it, and most of the noise kept
    own = readings_module.keep_frequencies(noise, [])
    basis = fourier.sum_frequency_basis(N, list(range(1, 30)))
    np.testing.assert_allclose(basis.T @ own, 0.0, atol=1e-9)
    assert np.linalg.norm(own) > 0.95 * np.linalg.norm(noise)


def test_restriction_singles_out_the_frequency_that_carries_the_sum():
    found = readings_module.restriction(_sum_logits(3), [3], draws=4)
    assert found.kept == 1.0 and found.full == 1.0 and found.keys == (3,)
    assert found.nonkey_best < 0.1  # without k = 3 the logits are flat up to round-off: no better than a guess
    assert all((acc == 1.0) == (3 in s) for acc, s in zip(found.random, found.random_sets))
    assert readings_module.restriction(_sum_logits(3), []) is None
    assert readings_module.direct_answers(_sum_logits(3))[0] == 1.0
