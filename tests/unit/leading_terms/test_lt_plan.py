"""What a Part I run costs before it starts (chapter 3 and the paper profile): steps, parameters,
the memory autograd keeps, and the paper profile dry-run on the offline sample."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from mechbook.leading_terms.model import AttentionModel, ModelConfig, dense_reference_logits
from mechbook.leading_terms.plan import (
    measure_saved_bytes,
    parameter_count,
    plan_training,
    readable_bytes,
    saved_activation_bytes,
    step_flops,
    steps_for_epochs,
)

SAMPLE = Path(__file__).resolve().parents[4] / "shared" / "data" / "tinystories" / "tinystories-sample.txt"


@given(epochs=st.floats(0.1, 300), n=st.integers(1, 10**6), batch=st.integers(1, 4096))
def test_steps_are_floor_of_epochs_times_n_over_batch(epochs, n, batch):
    steps = steps_for_epochs(epochs, n, batch)
    assert steps <= epochs * n / batch < steps + 1


@settings(max_examples=10, deadline=None)
@given(v=st.integers(2, 12), t=st.integers(1, 6), layers=st.integers(1, 4))
def test_parameter_count_is_the_models(v, t, layers):
    cfg = ModelConfig(v, t, layers)
    assert parameter_count(cfg) == sum(p.numel() for p in AttentionModel(cfg, device="cpu").parameters())


@pytest.mark.parametrize("cfg", [ModelConfig(7, 5, 1), ModelConfig(11, 6, 2), ModelConfig(9, 4, 3, dtype="float64")])
def test_saved_bytes_extrapolated_from_two_batches_equal_the_measured(cfg):
    for batch in (1, 3, 8, 13):
        assert saved_activation_bytes(cfg, batch) == measure_saved_bytes(cfg, batch)
    # the logits alone (batch x T x |V| floats) are kept for the cross-entropy's backward
    assert measure_saved_bytes(cfg, 8) >= 8 * cfg.n_ctx * cfg.d_vocab * cfg.torch_dtype.itemsize


def test_plan_arithmetic_and_a_batch_it_cannot_fill():
    cfg = ModelConfig(13, 6, 3)
    plan = plan_training(1000, cfg, 64, 0.005, epochs=100)
    assert plan.steps == 100 * 1000 // 64 and plan.eta_s == pytest.approx(0.005 * plan.steps)
    assert plan.parameter_bytes == 4 * parameter_count(cfg)
    assert plan.memory_bytes == 2 * plan.parameter_bytes + saved_activation_bytes(cfg, 64)
    assert f"{plan.steps:,} steps" in plan.markdown() and "MiB" in plan.markdown()
    assert readable_bytes(3 * 2**30) == "3.00 GiB" and readable_bytes(2**20) == "1.00 MiB"
    by_steps = plan_training(1000, cfg, None, 0.1, steps=30)
    assert by_steps.batch_size == 1000 and by_steps.epochs == pytest.approx(30.0)
    assert "**30 steps** at batch 1,000 (30 epochs)" in by_steps.markdown() and "⌊" not in by_steps.markdown()
    small = plan_training(100, cfg, 2048, 0.005, epochs=100)
    assert not small.fits and "cannot fill one batch" in small.markdown()
    with pytest.raises(ValueError, match=r"fewer than one batch of 2,048.*MECHBOOK_TINYSTORIES"):
        small.require_fits()


@pytest.mark.parametrize("cfg", [ModelConfig(7, 5, 1), ModelConfig(11, 6, 3)])
def test_step_flops_are_three_dense_forward_passes(cfg):
    """torch's own count of the dense formulation's forward products, times three (the backward
    pass twice the forward's), is the plan's count."""
    model = AttentionModel(cfg, device="cpu")
    tokens = torch.randint(0, cfg.d_vocab, (4, cfg.n_ctx))
    with FlopCounterMode(display=False) as counter:
        dense_reference_logits(model, tokens)
    assert step_flops(cfg, 4) == 3 * counter.get_total_flops()
    plan = plan_training(64, cfg, 4, 0.005, epochs=2)
    assert plan.flops == plan.steps * step_flops(cfg, 4) and "floating-point operations" in plan.markdown()
