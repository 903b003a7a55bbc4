"""Linear probes (mechbook.assign_add.probes, chapter 9)."""

import pytest
import torch

from mechbook.assign_add.probes import ProbeConfig, fit_probe


def planted(n: int = 1200, d: int = 16, classes: int = 6, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=gen)
    centres = torch.randn(classes, d, generator=gen) * 3
    return centres[labels] + torch.randn(n, d, generator=gen), labels


def test_probe_reads_a_planted_linear_signal():
    x, y = planted()
    result = fit_probe(x, y)
    assert result.test_accuracy > 0.95
    assert result.chance < 0.3


def test_probe_on_shuffled_labels_stays_near_chance():
    x, y = planted()
    shuffled = y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))]
    result = fit_probe(x, shuffled)
    assert result.test_accuracy < result.chance + 0.08
    assert result.train_accuracy > result.test_accuracy  # it can only memorise


def test_probe_is_deterministic_for_a_seed():
    x, y = planted()
    assert fit_probe(x, y, ProbeConfig(steps=50, seed=3)) == fit_probe(x, y, ProbeConfig(steps=50, seed=3))


def test_probe_rejects_bad_shapes_and_splits():
    x, y = planted(n=20)
    with pytest.raises(ValueError, match="features"):
        fit_probe(x, y[:10])
    with pytest.raises(ValueError, match="test_fraction"):
        fit_probe(x, y, ProbeConfig(test_fraction=1.0))
    with pytest.raises(ValueError, match="too few"):
        fit_probe(x[:2], y[:2])
