"""Stacked training (mechbook.assign_add.train, chapters 8 and 11): K runs at once equal K runs alone."""

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.assign_add.config import TrainConfig, keep_steps, native_bf16, with_overrides
from mechbook.assign_add.model import ModelConfig
from mechbook.assign_add.task import Task
from mechbook.assign_add.train import _draw_stream, check_stackable, groups_of, train, train_stacked

BASE = TrainConfig(
    steps=24,
    batch_size=16,
    eval_every=8,
    eval_per_pool=8,
    keep_every=8,
    resume_every=8,
    model=ModelConfig(d_model=16, d_head=16, d_mlp=32),
)
RUNS = [
    with_overrides(BASE, task__train_pair_fraction=0.3),
    with_overrides(BASE, task__two_var_fraction=0.5, seed=7, model__seed=3),
    with_overrides(BASE, task__train_pair_fraction=0.9, model__seed=11),
]


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    monkeypatch.setenv("MECHBOOK_QUIET", "1")


PRECISIONS = ["fp32", pytest.param("bf16", marks=pytest.mark.skipif(not native_bf16("cpu"), reason="no native bf16"))]


@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_stacked_run_equals_training_it_alone_bit_for_bit(precision):
    if precision == "bf16" and torch.backends.cpu.get_cpu_capability() == "DEFAULT":
        pytest.skip(
            "torch's scalar kernels (ATEN_CPU_CAPABILITY=default, make test-other-paths) split bf16 reductions by "
            "the stack's size; no CPU with native bf16 runs them: every such CPU has AVX-512"
        )
    runs = [dataclasses.replace(c, precision=precision) for c in RUNS]
    stacked = train_stacked(runs, device="cpu", chunk=5)
    for cfg, got in zip(runs, stacked):
        alone = train(cfg, device="cpu")
        assert alone.final_state.keys() == got.final_state.keys()
        for name, w in alone.final_state.items():
            assert torch.equal(got.final_state[name], w), name
        assert alone.history.equals(got.history)
        assert list(got.checkpoints) == [cfg.steps]


def test_bf16_changes_the_weights_but_not_what_is_learned():
    """bf16 products round differently (the run is not fp32's), yet the losses stay close."""
    fp32 = train_stacked(RUNS[:1], device="cpu")[0]
    if not native_bf16("cpu"):
        with pytest.raises(ValueError, match="precision='fp32'"):
            train_stacked([dataclasses.replace(RUNS[0], precision="bf16")], device="cpu")
        return
    bf16 = train_stacked([dataclasses.replace(RUNS[0], precision="bf16")], device="cpu")[0]
    assert not torch.equal(fp32.final_state["blocks.0.attn.W_Q"], bf16.final_state["blocks.0.attn.W_Q"])
    np.testing.assert_allclose(bf16.history["loss"], fp32.history["loss"], rtol=0.02)


def test_draw_stream_continues_the_generator_like_train():
    cfg = RUNS[0]
    task = Task(cfg.task)
    rng = np.random.default_rng(cfg.seed)
    expected = [task.sample(cfg.batch_size, rng) for _ in range(5)]
    x1, y1, state = _draw_stream(cfg.task, cfg.seed, None, cfg.batch_size, 2)
    x2, y2, _ = _draw_stream(cfg.task, cfg.seed, state, cfg.batch_size, 3)
    for i, (x, y) in enumerate(expected):
        xs, ys = (x1[i], y1[i]) if i < 2 else (x2[i - 2], y2[i - 2])
        assert np.array_equal(xs, x) and np.array_equal(ys, y)


def test_runs_that_cannot_share_a_stack_are_refused_with_the_field():
    with pytest.raises(ValueError, match="lr"):
        check_stackable([BASE, dataclasses.replace(BASE, lr=0.01)])
    with pytest.raises(ValueError, match="shape"):
        check_stackable([BASE, with_overrides(BASE, model__d_mlp=64)])
    with pytest.raises(ValueError, match="at least one"):
        check_stackable([])
    check_stackable([BASE, with_overrides(BASE, model__seed=5, seed=9)])


def test_default_workers_use_spare_cores_on_a_gpu_only(monkeypatch):
    from mechbook.assign_add import train as stacked

    monkeypatch.setattr(stacked.os, "sched_getaffinity", lambda pid: set(range(8)), raising=False)
    assert stacked.default_workers(20, "cpu") == 1
    assert stacked.default_workers(20, "cuda") == 7
    assert stacked.default_workers(3, "cuda:0") == 3
    monkeypatch.setattr(stacked.os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert stacked.default_workers(20, "cuda") == 1


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), size=st.integers(1, 8))
def test_groups_cut_the_runs_in_order_into_near_equal_stacks(n, size):
    runs = list(range(n))
    groups = groups_of(runs, size)
    assert [r for g in groups for r in g] == runs
    assert len(groups) == -(-n // size)
    assert max(map(len, groups)) <= size
    assert max(map(len, groups)) - min(map(len, groups)) <= 1


def test_each_run_of_a_stack_keeps_its_own_checkpoints_as_if_trained_alone():
    """With ``keep``, run k of a stack keeps the steps its own history asks for (not run 0's), and
    each kept checkpoint is the weights of run k trained alone at that step."""
    runs = [with_overrides(c, keep_every=16, keep_change=0.0) for c in RUNS]
    stacked = train_stacked(runs, device="cpu", keep=True)
    for cfg, got in zip(runs, stacked):
        alone = train(cfg, device="cpu")
        assert sorted(got.checkpoints) == keep_steps(got.history, cfg) == sorted(alone.checkpoints)
        assert len(got.checkpoints) > 1
        for step, state in alone.checkpoints.items():
            for name, w in state.items():
                assert torch.equal(got.checkpoints[step][name], w)
    (plain,) = train_stacked(runs[:1], device="cpu")
    assert list(plain.checkpoints) == [runs[0].steps]


def _train_losses(result) -> dict[int, float]:
    train_rows = result.history[result.history["pool"] == "train"]
    return dict(zip(train_rows["step"], train_rows["loss"]))


def _stop_loss_between_runs() -> tuple[float, list]:
    """A stop loss that the best run's first evaluation meets and some other run's does not, and the
    runs trained without it."""
    full = train_stacked(RUNS, device="cpu")
    first = sorted(_train_losses(r)[BASE.eval_every] for r in full)
    assert first[0] < first[-1]
    return (first[0] + first[1]) / 2 if first[0] < first[1] else first[0], full


def test_a_run_stops_where_it_fits_and_equals_the_run_of_that_many_steps():
    """With ``stop_loss`` each run of a stack leaves at the first evaluation whose training loss
    meets it; its history is the full run's up to there, its weights bit for bit those of the run
    trained alone for that many steps, and the runs still training are unchanged by its leaving."""
    stop, full = _stop_loss_between_runs()
    stopped = train_stacked([dataclasses.replace(c, stop_loss=stop) for c in RUNS], device="cpu", chunk=5)
    ends = []
    for cfg, whole, got in zip(RUNS, full, stopped):
        losses = _train_losses(whole)
        end = next((s for s in sorted(losses) if losses[s] <= stop), cfg.steps)
        ends.append(end)
        assert int(got.history["step"].max()) == end
        assert got.history.equals(whole.history[whole.history["step"] <= end].reset_index(drop=True))
        short = train(dataclasses.replace(cfg, steps=end), device="cpu")
        for name, w in short.final_state.items():
            assert torch.equal(got.final_state[name], w), name
        assert list(got.checkpoints) == [end]
    assert min(ends) < max(ends)


def test_a_stopped_stack_resumes_to_the_same_bits(tmp_path, monkeypatch):
    """A stack interrupted after one of its runs stopped resumes with the runs still training."""
    from mechbook.assign_add import train as train_mod

    stop, _ = _stop_loss_between_runs()
    runs = [dataclasses.replace(c, stop_loss=stop) for c in RUNS]
    straight = train_stacked(runs, device="cpu", keep=True)
    assert min(int(r.history["step"].max()) for r in straight) < BASE.steps

    calls = []

    def interrupt(done: int) -> None:
        calls.append(done)
        if len(calls) == BASE.eval_every + 1:  # just after the resume point at the first evaluation
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_stacked(runs, device="cpu", keep=True, resume_dir=tmp_path, on_step=interrupt)
    assert train_mod._resume_file(tmp_path / "state.pt")["live"] != list(range(len(runs)))
    resumed = train_stacked(runs, device="cpu", keep=True, resume_dir=tmp_path)
    for a, b in zip(straight, resumed):
        assert a.history.equals(b.history)
        assert sorted(a.checkpoints) == sorted(b.checkpoints)
        for name in a.final_state:
            assert torch.equal(a.final_state[name], b.final_state[name])


def test_runs_that_cannot_share_a_stack_are_trained_in_their_own_stacks(tmp_path, monkeypatch):
    """load_or_train_runs cuts the missing runs by what they must share (here: a stop loss), and
    each comes out as it would from its own stack."""
    from mechbook.assign_add import run_cache
    from mechbook.assign_add.train import stack_key

    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    stopping = dataclasses.replace(RUNS[0], stop_loss=1e-6)
    mixed = [stopping, RUNS[1], RUNS[2]]
    assert stack_key(stopping) != stack_key(RUNS[1]) == stack_key(RUNS[2])
    got = run_cache.load_or_train_runs(mixed, "cpu")
    (alone,) = train_stacked([stopping], device="cpu")
    pair = train_stacked(RUNS[1:], device="cpu")
    for a, b in zip(got, [alone, *pair]):
        assert a.config == b.config and a.history.equals(b.history)
        for name in a.final_state:
            assert torch.equal(a.final_state[name], b.final_state[name])
