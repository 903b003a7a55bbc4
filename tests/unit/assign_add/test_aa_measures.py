"""Progress measures of chapter 8: top-2 keys against a literal loop, values on known models,
one row per checkpoint and measure, cached."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import mechbook.assign_add.measures as measures_mod
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.measures import MEASURES, MeasureConfig, checkpoint_measures, measures_over_training, top2_hits
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.task import Task
from mechbook.assign_add.train import train

TASK = Task()
SMALL = ModelConfig(d_model=16, d_head=16, d_mlp=32)


@settings(max_examples=40, deadline=None)
@given(rows=arrays(np.float64, (6, 16), elements=st.floats(0, 1)), seed=st.integers(0, 100))
def test_top2_hits_matches_a_literal_loop(rows, seed):
    rng = np.random.default_rng(seed)
    targets = np.array([rng.choice(16, 2, replace=False) for _ in range(6)])
    expected = []
    for r, t in zip(rows, targets):
        best = sorted(range(16), key=lambda i: (-r[i], i))[:2]
        expected.append(sorted(best) == sorted(t.tolist()))
    assert top2_hits(rows, targets).tolist() == expected


def test_zero_query_key_weights_give_uniform_layer1_attention():
    model = AssignAddModel(SMALL)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
    tokens, _ = TASK.sample(64, np.random.default_rng(0))
    got = checkpoint_measures(model, TASK, tokens)
    cfg = TASK.cfg
    shares = [1 / (p + 1) for seq in tokens for p in range(1, 12) if seq[p] < cfg.modulus and seq[p - 1] >= cfg.var0]
    assert got["prev_token"] == pytest.approx(np.mean(shares), rel=1e-5)
    assert got["l1_operands_mass"] == pytest.approx(2 / 16, rel=1e-5)
    assert set(MEASURES) <= set(got)
    assert all(0.0 <= v <= 1.0 for v in got.values())


def test_adder_measures_match_a_literal_pair_loop():
    """``adder``: MLP_2(h) W_U alone (the paper's); ``adder_with_residual``: (h + MLP_2(h)) W_U."""
    model = AssignAddModel(SMALL)
    tokens, _ = TASK.sample(8, np.random.default_rng(1))
    got = checkpoint_measures(model, TASK, tokens)
    sd = {k: v.double().numpy() for k, v in model.state_dict().items()}
    ov2 = sd["blocks.1.attn.W_V"][0] @ sd["blocks.1.attn.W_O"][0]
    n_mod = TASK.cfg.modulus
    alone = with_residual = 0
    for a in range(n_mod):
        for b in range(n_mod):
            h = sd["embed.W_E"][a] @ ov2 + sd["embed.W_E"][b] @ ov2
            mlp = np.maximum(h @ sd["blocks.1.mlp.W_in"], 0) @ sd["blocks.1.mlp.W_out"]
            alone += int(np.argmax(mlp @ sd["unembed.W_U"]) == (a + b) % n_mod)
            with_residual += int(np.argmax((h + mlp) @ sd["unembed.W_U"]) == (a + b) % n_mod)
    assert got["adder"] == pytest.approx(alone / n_mod**2, abs=1 / n_mod**2)
    assert got["adder_with_residual"] == pytest.approx(with_residual / n_mod**2, abs=1 / n_mod**2)


def test_measures_over_training_rows_and_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = TrainConfig(
        steps=20, batch_size=32, eval_every=10, eval_per_pool=16, keep_every=10, resume_every=10, model=SMALL
    )
    result = train(cfg, device="cpu")
    table = measures_over_training(result, MeasureConfig(n_sequences=32))
    assert sorted(table.step.unique()) == sorted(result.checkpoints)
    assert set(MEASURES) <= set(table.measure)
    assert len(table) == len(result.checkpoints) * table.measure.nunique()
    assert table.value.between(0, 1).all()
    monkeypatch.setattr(measures_mod, "load_model", lambda *a, **k: pytest.fail("recomputed a cached table"))
    again = measures_over_training(result, MeasureConfig(n_sequences=32))
    assert again.equals(table)
