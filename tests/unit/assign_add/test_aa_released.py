"""The released run read as a rebuild is read (:mod:`mechbook.assign_add.released`), and every
chapter-8 reading gathered from it and a tiny rebuild (:mod:`mechbook.assign_add.dynamics`)."""

from __future__ import annotations

import pytest
from test_aa_release import needs_release

from mechbook.assign_add import released, scores
from mechbook.assign_add.config import TrainConfig
from mechbook.assign_add.dynamics import ReadSettings, read_dynamics
from mechbook.assign_add.measures import MeasureConfig
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.phases import PhaseRules
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.seeds import Dissected, seed_summary
from mechbook.assign_add.task import POOL_NAMES
from mechbook.assign_add.train import train


def test_release_steps_and_sizes_are_checked():
    with pytest.raises(ValueError, match="not released checkpoints"):
        released.check_release_steps((1, 150))
    released.check_release_steps(None)
    with pytest.raises(ValueError, match="per_pool"):
        released.release_run((1,), per_pool=0)


def test_exact_scores_are_computed_once_and_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    calls = []
    monkeypatch.setattr(released.release, "load_release", lambda *a, **k: "model")
    monkeypatch.setattr(scores, "exact_scores", lambda model, task: calls.append(model) or {"2var_union_paper": 0.5})
    assert released.release_exact_scores() == {"2var_union_paper": 0.5}
    assert released.release_exact_scores() == {"2var_union_paper": 0.5} and calls == ["model"]


@needs_release
def test_the_released_run_reads_as_a_train_result():
    run = released.release_run((1, 101), per_pool=16)
    assert sorted(run.checkpoints) == [1, 101] and run.config == TrainConfig()
    assert set(run.accuracy().columns) == set(POOL_NAMES) and list(run.accuracy().index) == [1, 101]


@needs_release
def test_read_dynamics_gathers_every_reading(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = TrainConfig(
        steps=20,
        batch_size=32,
        eval_every=10,
        eval_per_pool=16,
        keep_every=10,
        resume_every=10,
        model=ModelConfig(d_model=16, d_head=16, d_mlp=32),
    )
    run = train(cfg, device="cpu")
    rules = PhaseRules()
    dissected = Dissected([run], seed_summary([run], rules), run.config.seed, run)
    settings = ReadSettings(
        rules,
        MeasureConfig(n_sequences=16),
        case_sequences=8,
        probe_sequences=32,
        probe=ProbeConfig(steps=5),
        release_steps=(1, 101),
        release_exact=False,
    )
    d = read_dynamics(dissected, released.release_run((1, 101), per_pool=16), settings)
    assert sorted(d.rebuild.measures.step.unique()) == sorted(run.checkpoints)
    assert sorted(d.release.plateau.history.step.unique()) == [1, 101]
    assert set(d.release.probe.frame["where"]) == {"embedding", "after layer 1"}
    assert d.rebuild.jump is None and d.release_exact is None  # 20 steps cannot bind
    assert [s.seed for s in d.seeds] == [run.config.seed] and d.seed_plateaus == {}
    assert d.baselines.chance == pytest.approx(1 / 59)
