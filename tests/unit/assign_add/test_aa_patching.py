"""Activation patching (mechbook.assign_add.patching, chapter 9)."""

import numpy as np
import pytest
import torch

from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.patching import one_var_patch_pairs, patched_logits, value_patching_effect
from mechbook.assign_add.task import Task


@pytest.fixture(scope="module")
def model():
    return AssignAddModel(ModelConfig(d_model=16, d_head=8, d_mlp=32, seed=5)).eval()


@pytest.fixture(scope="module")
def task():
    return Task()


def test_patching_a_run_with_itself_changes_nothing(model, task):
    tokens = torch.from_numpy(task.sample(32, np.random.default_rng(0))[0])
    positions = torch.arange(32) % 16
    with torch.no_grad():
        plain = model(tokens, last_only=True)
    for hook in ("blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre", "blocks.1.hook_resid_mid"):
        torch.testing.assert_close(patched_logits(model, tokens, tokens, positions, hook), plain)


def test_patching_the_only_differing_embedding_reproduces_the_source(model, task):
    pairs = one_var_patch_pairs(task, 40, seed=2)
    with torch.no_grad():
        source_logits = model(pairs.source, last_only=True)
        clean_logits = model(pairs.clean, last_only=True)
    got = patched_logits(model, pairs.clean, pairs.source, pairs.value_pos, "blocks.0.hook_resid_pre")
    torch.testing.assert_close(got, source_logits)
    assert not torch.allclose(got, clean_logits)


def test_patch_pairs_differ_only_where_they_should(task):
    p = one_var_patch_pairs(task, 200, seed=3)
    rows = torch.arange(200)
    diff = (p.clean != p.source).sum(1)
    assert torch.all(diff == 1) and torch.all((p.clean != p.source)[rows, p.value_pos])
    assert torch.all((p.clean != p.control_source).sum(1) == 1)
    assert torch.all((p.clean != p.control_source)[rows, p.distractor_pos])
    queried = torch.where(p.clean[:, 13] >= task.cfg.var0, p.clean[:, 13], p.clean[:, 14])
    assert torch.all(p.clean[rows, p.value_pos - 1] == queried)
    assert torch.all(p.clean[rows, p.distractor_pos - 1] != queried)
    assert torch.all(p.clean[rows, p.distractor_pos - 1] >= task.cfg.var0)
    delta = p.source[rows, p.value_pos] - p.clean[rows, p.value_pos]
    assert torch.all((p.source_label - p.clean_label - delta) % 59 == 0)


def test_patching_effect_is_a_set_of_rates(model, task):
    effect = value_patching_effect(model, one_var_patch_pairs(task, 64))
    assert set(effect) == {"clean_accuracy", "patched_to_source", "patched_as_source_run", "control_unchanged"}
    assert all(0 <= v <= 1 for v in effect.values())


def test_patched_logits_rejects_mismatched_inputs(model, task):
    tokens = torch.from_numpy(task.sample(4, np.random.default_rng(0))[0])
    with pytest.raises(ValueError, match="one index per row"):
        patched_logits(model, tokens, tokens, torch.tensor([1, 2]))
