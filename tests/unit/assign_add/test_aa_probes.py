"""Linear probes (mechbook.assign_add.probes, chapter 9)."""

import numpy as np
import pytest
import torch

from mechbook.assign_add.probes import ProbeConfig, fit_probe
from mechbook.assign_add.task import Task


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


def test_probe_sites_read_the_sequences_literally():
    import numpy as np

    from mechbook.assign_add.probes import answer_sites, operand_value_sites, variable_identity_sites
    from mechbook.assign_add.task import Task

    task = Task()
    pools = task.eval_pools(40, seed=1)
    tokens = np.concatenate([pools[p][0] for p in ("0var_train", "1var_train", "2var_train")])
    labels = np.concatenate([pools[p][1] for p in ("0var_train", "1var_train", "2var_train")])
    rows, pos, y = variable_identity_sites(tokens, task.cfg)
    expected = [
        (b, p, tokens[b, p - 1] - 62)
        for b in range(len(tokens))
        for p in range(1, 12)
        if tokens[b, p] < 59 and tokens[b, p - 1] >= 62
    ]
    assert sorted(zip(rows, pos, y)) == sorted(expected)
    rows, pos, y = operand_value_sites(tokens, task.cfg)
    assert len(rows) == 40 + 80  # none in 0-var, one per 1-var sequence, two per 2-var
    for b, p, v in zip(rows, pos, y):
        ctx = list(tokens[b, :12])
        assert tokens[b, p] >= 62 and ctx[ctx.index(tokens[b, p]) + 1] == v
    rows, pos, y = answer_sites(tokens, labels)
    assert (pos == 15).all() and (y == labels).all()


def test_probe_table_covers_every_target_and_depth():
    import numpy as np

    from mechbook.assign_add.model import AssignAddModel, ModelConfig
    from mechbook.assign_add.probes import PROBE_HOOKS, probe_table
    from mechbook.assign_add.task import Task

    task = Task()
    pools = task.eval_pools(30, seed=2)
    tokens = np.concatenate([pools[p][0] for p in ("1var_train", "2var_train")])
    labels = np.concatenate([pools[p][1] for p in ("1var_train", "2var_train")])
    table = probe_table(
        AssignAddModel(ModelConfig(d_model=16, d_head=8, d_mlp=32)), task.cfg, tokens, labels, ProbeConfig(steps=5)
    )
    assert len(table) == 3 * len(PROBE_HOOKS)
    assert table["accuracy"].between(0, 1).all() and (table["n"] > 0).all()
    assert list(table[table.target == "answer"]["where"]) == list(PROBE_HOOKS)


def test_variable_identity_over_training_is_the_probe_at_each_step():
    from mechbook.assign_add.model import AssignAddModel, ModelConfig
    from mechbook.assign_add.probes import (
        PROBE_HOOKS,
        fit_probe,
        variable_identity_over_training,
        variable_identity_sites,
    )

    task = Task()
    tokens, _ = task.sample(60, np.random.default_rng(2))
    models = {s: AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32, seed=s)).eval() for s in (4, 5)}
    got = variable_identity_over_training(models.__getitem__, [4, 5], task.cfg, tokens, where=("after layer 1",))
    rows, pos, y = variable_identity_sites(tokens, task.cfg)
    for step, model in models.items():
        with torch.no_grad():
            _, cache = model.run_with_cache(torch.as_tensor(tokens))
        res = fit_probe(
            cache[PROBE_HOOKS["after layer 1"]][torch.as_tensor(rows), torch.as_tensor(pos)], torch.as_tensor(y)
        )
        assert got[got.step == step].accuracy.item() == res.test_accuracy
    with pytest.raises(ValueError, match="unknown probe sites"):
        variable_identity_over_training(models.__getitem__, [4], task.cfg, tokens, where=("layer 7",))


def test_a_probe_that_diverges_stops_with_one_line():
    x = torch.randn(60, 4, generator=torch.Generator().manual_seed(0)) * 1e30
    y = torch.arange(60) % 3
    with pytest.raises(FloatingPointError, match="the probe diverged") as info:
        fit_probe(x, y, ProbeConfig(lr=1e30, steps=50))
    assert "\n" not in str(info.value)
