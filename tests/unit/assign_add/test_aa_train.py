"""Training loop of chapter 8: determinism, resume after interruption, cache, bad input."""

import dataclasses
import errno
from pathlib import Path

import numpy as np
import pytest
import torch

import mechbook.assign_add.config as config_mod
import mechbook.assign_add.train as train_mod
import mechbook.cache as cache_mod
from mechbook.assign_add.config import TrainConfig, load_model, with_overrides
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.assign_add.task import POOL_NAMES, TaskConfig
from mechbook.assign_add.train import load_or_train, train

TINY = TrainConfig(
    steps=40,
    batch_size=32,
    eval_every=10,
    eval_per_pool=16,
    keep_every=20,
    resume_every=10,
    model=ModelConfig(d_model=16, d_head=16, d_mlp=32),
)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_history_has_every_pool_at_every_eval_and_is_deterministic():
    a, b = train(TINY, device="cpu"), train(TINY, device="cpu")
    steps = sorted(a.history.step.unique())
    assert steps == [0, 10, 20, 30, 40]
    assert set(a.history.pool) == set(POOL_NAMES) | {"train"}
    assert a.history.accuracy.between(0, 1).all()
    assert _same(a.final_state, b.final_state)
    assert a.history.equals(b.history)
    assert {0, 20, 40} <= set(a.checkpoints)
    assert all(v.dtype == torch.float16 for v in a.checkpoints[40].values())
    diff = (load_model(a).embed.W_E - load_model(a, 40).embed.W_E).abs().max()
    assert 0 < diff < 1e-3  # float16 copy of the same final weights


class Interrupt(Exception):
    pass


def test_resume_after_interrupt_gives_identical_weights(tmp_path, monkeypatch):
    straight = train(TINY, device="cpu")
    real_progress = train_mod.progress

    def interrupting(*args, **kwargs):
        bar = real_progress(*args, **kwargs)
        original = bar.update
        count = {"n": kwargs.get("initial", 0)}

        def update(n=1):
            count["n"] += n
            if count["n"] == 23:
                raise Interrupt()
            return original(n)

        bar.update = update
        return bar

    monkeypatch.setattr(train_mod, "progress", interrupting)
    with pytest.raises(Interrupt):
        train(TINY, resume_dir=tmp_path, device="cpu")
    assert (tmp_path / "state.pt").exists()
    monkeypatch.setattr(train_mod, "progress", real_progress)
    resumed = train(TINY, resume_dir=tmp_path, device="cpu")
    assert _same(straight.final_state, resumed.final_state)
    assert straight.history.equals(resumed.history)
    assert set(straight.checkpoints) == set(resumed.checkpoints)


def test_resume_dir_of_another_config_is_refused(tmp_path):
    short = dataclasses.replace(TINY, steps=20)
    train(dataclasses.replace(short, steps=30), resume_dir=tmp_path, device="cpu")
    with pytest.raises(ValueError, match="another TrainConfig"):
        train(short, resume_dir=tmp_path, device="cpu")


def test_load_or_train_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = dataclasses.replace(TINY, steps=10)
    first = load_or_train(cfg, device="cpu")
    calls = []
    monkeypatch.setattr(train_mod, "Task", lambda *a, **k: calls.append(1))  # training would call it
    again = load_or_train(cfg, device="cpu")
    assert not calls
    assert _same(first.final_state, again.final_state)
    assert not train_mod.resume_folder(cfg, "cpu").exists()


def test_a_run_whose_loss_diverges_stops_with_one_line_and_caches_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = dataclasses.replace(TINY, steps=40, lr=1e6)
    with pytest.raises(train_mod.NonFiniteLoss, match=r"training loss became (nan|inf).*lr=1000000.0.*smaller lr"):
        load_or_train(cfg, device="cpu")
    assert not list((tmp_path / "assign_add" / "train").glob("*.pt"))


def _full_disk(monkeypatch) -> list[Path]:
    """Every write of the cache module fails as on a full disk; returns the paths it was asked to write."""
    tried: list[Path] = []

    def no_space(path, data):
        tried.append(path)
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(cache_mod, "atomic_write_bytes", no_space)
    return tried


def test_a_full_disk_at_a_resume_point_warns_once_and_the_run_finishes(tmp_path, monkeypatch):
    straight = train(TINY, device="cpu")
    tried = _full_disk(monkeypatch)
    with pytest.warns(
        UserWarning, match="could not save the resume state.*No space left.*without resume points"
    ) as seen:
        resumed = train(TINY, resume_dir=tmp_path, device="cpu")
    assert len([w for w in seen if "resume state" in str(w.message)]) == 1
    assert len(tried) == 1  # the first write failed, and no later one was tried
    assert _same(straight.final_state, resumed.final_state)
    assert straight.history.equals(resumed.history)


def test_load_or_train_on_a_full_disk_returns_the_trained_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    cfg = dataclasses.replace(TINY, steps=20)
    straight = train(cfg, device="cpu")
    _full_disk(monkeypatch)
    with pytest.warns(UserWarning) as seen:
        result = load_or_train(cfg, device="cpu")
    assert any("resume state" in str(w.message) for w in seen)
    assert _same(straight.final_state, result.final_state)


def test_model_must_fit_task():
    with pytest.raises(ValueError, match="does not fit the task"):
        TrainConfig(task=TaskConfig(modulus=7))
    ok = with_overrides(TrainConfig(), task__modulus=7, model__d_vocab=7 + 3 + 12, model__d_out=7)
    assert ok.task.modulus == 7 and ok.model.d_out == 7


def test_checkpoint_from_another_config_is_a_clear_error():
    small = AssignAddModel(ModelConfig(d_model=16, d_head=16, d_mlp=32))
    with pytest.raises(ValueError, match="another configuration"):
        AssignAddModel(ModelConfig(d_model=32, d_head=32, d_mlp=32)).load_state_dict(small.state_dict())


def test_missing_checkpoint_step_names_the_nearest():
    result = train(dataclasses.replace(TINY, steps=20), device="cpu")
    with pytest.raises(KeyError, match="nearest"):
        load_model(result, 15)


def test_checkpoint_schedule_is_dense_where_a_curve_moves():
    import pandas as pd

    cfg = TrainConfig(keep_every=1000, keep_change=0.05)
    steps = np.arange(0, 3001, 100)
    jump = np.where(steps >= 1700, 0.9, 0.1) + np.where(steps == 1600, 0.3, 0.0)  # 0.1 -> 0.4 -> 0.9
    rows = [
        {"step": int(s), "pool": p, "accuracy": float(a if p == "1var_train" else 0.5)}
        for p in POOL_NAMES
        for s, a in zip(steps, jump)
    ]
    keep = config_mod.keep_steps(pd.DataFrame(rows), cfg)
    assert keep == [0, 1000, 1500, 1600, 1700, 2000, 3000]


def test_precision_is_checked_and_bf16_refused_without_native_bf16(monkeypatch):
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainConfig(precision="fp16")
    assert config_mod.compute_dtype("fp32", "cpu") == torch.float32
    monkeypatch.setattr(config_mod, "native_bf16", lambda device: False)
    with pytest.raises(ValueError, match=r"precision='bf16' needs native bf16.*precision='fp32'"):
        train(dataclasses.replace(TINY, precision="bf16", steps=10), device="cpu")
    monkeypatch.setattr(config_mod, "native_bf16", lambda device: True)
    assert config_mod.compute_dtype("bf16", "cpu") == torch.bfloat16


def test_native_bf16_reads_the_cpu_flags(monkeypatch, tmp_path):
    real = config_mod.Path

    def fake(flags):
        (tmp_path / "cpuinfo").write_text(f"processor : 0\nflags : {flags}\n")
        monkeypatch.setattr(
            config_mod, "Path", lambda p: real(tmp_path / "cpuinfo") if p == "/proc/cpuinfo" else real(p)
        )

    fake("fpu avx2 avx512f")
    assert not config_mod.native_bf16("cpu")
    fake("fpu avx512f avx512_bf16")
    assert config_mod.native_bf16("cpu")
    fake("fpu amx_bf16 amx_tile")
    assert config_mod.native_bf16("cpu")
