"""Chapter 9's readings of a model as one record (mechbook.assign_add.circuit_readings): the seed stack
read once per seed (known readings reused), the numbers it records against the functions they come
from, and the answer accuracy against the model's own argmax."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from mechbook.assign_add import circuit_readings as R
from mechbook.assign_add import circuits, measures
from mechbook.assign_add.circuit_readings import answer_accuracy
from mechbook.assign_add.config import TrainResult
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.runs import SEED_RUNS
from mechbook.assign_add.task import Task, TaskConfig


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return AssignAddModel(SEED_RUNS["smoke"].train.model).eval()


@pytest.fixture(scope="module")
def task():
    return Task(TaskConfig())


@pytest.fixture(scope="module")
def small(task):
    torch.manual_seed(0)
    model = AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32, seed=5)).eval()
    pools = task.eval_pools(12, seed=R.POOL_SEED)
    return model, pools, R.read_circuits(model, task, pools, ProbeConfig(steps=5), 16)


def test_numbers_come_from_the_functions_they_name(small, task):
    model, pools, r = small
    tokens = np.concatenate([pools[p][0] for p in R.EVAL_POOLS])
    pattern = circuits.attention_patterns(model, torch.as_tensor(tokens))[1, :, -1].numpy()
    top2 = measures.top2_hits(pattern, circuits.needed_positions(tokens, task.cfg)).mean()
    n = r.numbers()
    assert n["eq_to_needed_top2"] == pytest.approx(top2)
    assert n["ov2_shuffled_cosine"] == pytest.approx(r.ov2["shuffled"].mean())
    assert n["ov2_other_pair_cosine"] == pytest.approx(r.ov2["other_pair"].mean())
    assert n["qk1_prev_positional_share"] == r.qk1_split["positional_share"]
    assert n["adder_loss_random_restricted_lowest"] == r.ablation.random_lowest
    assert n["neurons_fve_ge_0.9"] == len(r.fourier.good)


def test_seed_runs_are_read_once_each_and_known_readings_reused(small, task, monkeypatch):
    model, pools, r = small
    state = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = dataclasses.replace(SEED_RUNS["smoke"].train, model=model.cfg)
    runs = [TrainResult(None, {}, state, dataclasses.replace(cfg, seed=s), 0.0) for s in (3, 1, 2)]
    calls = []
    monkeypatch.setattr(R, "read_circuits", lambda m, *a: calls.append(m) or r)
    out = R.read_seed_runs(runs, task, pools, ProbeConfig(steps=5), 16, known={1: "known"})
    assert list(out) == [3, 1, 2] and out[1] == "known" and len(calls) == 2


def test_answer_accuracy_is_the_models_own_argmax_at_eq(model):
    pools = Task().eval_pools(8, seed=0)
    names = ("0var_train", "1var_train")
    right = [int(model(torch.as_tensor(t[None]))[0, -1].argmax()) == int(y) for p in names for t, y in zip(*pools[p])]
    assert answer_accuracy(model, pools, names) == pytest.approx(sum(right) / len(right))
