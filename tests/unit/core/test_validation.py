"""The one validator of config fields and public sizes (mechbook/validation.py, issue 31): random
values against a plain reference of what each annotation admits, and every public config class of
the package refusing a wrong type and an out-of-bounds value with one line naming the field."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from typing import Literal

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mechbook
from mechbook.validation import POSITIVE, SEED, above, at_least, between, check_argument, check_fields, one_of


@dataclasses.dataclass(frozen=True)
class Sample:
    count: int = 1
    rate: float = 0.5
    flag: bool = False
    name: str = "x"
    pair: tuple[float, float] = (0.9, 0.999)
    sizes: tuple[int, ...] = (1, 2)
    kind: Literal["adam", "sgd"] = "adam"
    cap: int | None = None
    inner: Inner | None = None

    def __post_init__(self) -> None:
        check_fields(self)


@dataclasses.dataclass(frozen=True)
class Inner:
    steps: int = 3

    def __post_init__(self) -> None:
        check_fields(self, steps=POSITIVE)


def _is_int(v: object) -> bool:
    return type(v) is int


def _is_float(v: object) -> bool:
    return type(v) in (int, float) and not (type(v) is float and not math.isfinite(v))


#: What each field of :class:`Sample` admits, written out plainly as the reference.
ADMITS = {
    "count": _is_int,
    "rate": _is_float,
    "flag": lambda v: type(v) is bool,
    "name": lambda v: type(v) is str,
    "pair": lambda v: type(v) is tuple and len(v) == 2 and all(_is_float(x) for x in v),
    "sizes": lambda v: type(v) is tuple and all(_is_int(x) for x in v),
    "kind": lambda v: type(v) is str and v in ("adam", "sgd"),
    "cap": lambda v: v is None or _is_int(v),
    "inner": lambda v: v is None or type(v) is Inner,
}

SCALARS = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.sampled_from(["adam", "sgd", "x", "1", ""]),
    st.builds(Inner),
)
VALUES = st.one_of(SCALARS, st.tuples(SCALARS, SCALARS), st.lists(SCALARS, max_size=3), st.tuples(SCALARS))


@given(field=st.sampled_from(sorted(ADMITS)), value=VALUES)
def test_a_field_takes_exactly_what_its_annotation_admits(field, value):
    if ADMITS[field](value):
        assert getattr(Sample(**{field: value}), field) == value
        return
    with pytest.raises((TypeError, ValueError)) as info:
        Sample(**{field: value})
    message = str(info.value)
    assert f"Sample.{field} must " in message and "\n" not in message
    assert repr(value) in message or "nan" in message or "inf" in message


@given(low=st.integers(-3, 3), value=st.integers(-10, 10))
def test_a_bound_refuses_exactly_the_values_outside_it(low, value):
    bound = at_least(low, "what it means")
    if value >= low:
        assert check_argument(value, int, "n", bound) == value
    else:
        with pytest.raises(ValueError, match=rf"^n must be at least {low} \(what it means\), got {value}$"):
            check_argument(value, int, "n", bound)


@given(value=st.floats(-2, 2))
def test_open_and_closed_ends_of_a_range(value):
    closed, half_open = between(0.0, 1.0), between(0.0, 1.0, low_open=True)
    assert closed.admits(value) == (0 <= value <= 1)
    assert half_open.admits(value) == (0 < value <= 1)
    assert above(0).admits(value) == (value > 0)


def test_bool_is_no_int_and_a_float_is_no_int_but_an_int_is_a_float():
    with pytest.raises(TypeError, match=r"^Sample.count must be an int, got bool True$"):
        Sample(count=True)
    with pytest.raises(TypeError, match=r"^Sample.count must be an int, got float 1000.0$"):
        Sample(count=1e3)
    assert Sample(rate=2).rate == 2
    assert Sample(count=np.int64(3)).count == 3


def test_a_bound_applies_to_each_item_of_a_tuple_and_none_skips_it():
    with pytest.raises(ValueError, match=r"^lrs must be above 0, got -1.0 \(in \(0.1, -1.0\)\)$"):
        check_argument((0.1, -1.0), tuple[float, ...], "lrs", above(0))
    assert check_argument(None, int | None, "cap", POSITIVE) is None
    with pytest.raises(ValueError, match="one of 'a', 'b'"):
        check_argument(("a", "c"), tuple[str, ...], "pools", one_of(("a", "b")))


def test_a_bound_on_a_field_the_class_lacks_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Typo:
        steps: int = 1

        def __post_init__(self) -> None:
            check_fields(self, step=POSITIVE)

    with pytest.raises(TypeError, match="Typo has no field step"):
        Typo()


def _smoke(module: str, name: str = "CONFIGS"):
    return getattr(importlib.import_module(module), name)["smoke"]


def _instances():
    """One valid instance of every public config class, with a field, a value of the wrong type
    and an out-of-bounds value (None: the field has no bound)."""
    from mechbook.assign_add.config import TrainConfig as AATrain
    from mechbook.assign_add.dynamics import ReadSettings
    from mechbook.assign_add.jobs import Resources
    from mechbook.assign_add.measures import MeasureConfig
    from mechbook.assign_add.model import ModelConfig as AAModel
    from mechbook.assign_add.phases import PhaseRules
    from mechbook.assign_add.probes import ProbeConfig
    from mechbook.assign_add.seeds import SeedRuns
    from mechbook.assign_add.task import TaskConfig
    from mechbook.benchmarks.leading_terms import BenchConfig
    from mechbook.book.config import ExecuteConfig
    from mechbook.leading_terms.check import CheckConfig, CheckRunsConfig
    from mechbook.leading_terms.corpus import CorpusConfig
    from mechbook.leading_terms.model import ModelConfig as LTModel
    from mechbook.leading_terms.theorem import TheoremRunsConfig
    from mechbook.leading_terms.train import RunConfig, RunsConfig
    from mechbook.leading_terms.train import TrainConfig as LTTrain
    from mechbook.pythia.miniature import MiniatureConfig
    from mechbook.pythia.study import PythiaConfig

    corpus = CorpusConfig(vocab_size=200, context=32)
    ch = "mechbook.chapters."
    return [
        (TaskConfig(), "modulus", 2.5, 1),
        (AAModel(), "d_model", "128", 0),
        (ExecuteConfig(profile="smoke"), "cell_timeout", 1.5, 0),
        (corpus, "context", 3.0, 0),
        (LTModel(10, 5), "n_ctx", 5.0, 0),
        (LTTrain(lr=0.1, steps=5), "lr", "abc", -1.0),
        (LTTrain(lr=0.1, steps=5), "steps", 1e3, -1),
        (RunConfig(corpus, 0.1, None, 1, steps=5), "log_every", 1.5, 0),
        (RunsConfig(corpus, (0.1,), None, 1, steps=5), "lrs", ("a",), (0.0,)),
        (CheckConfig(), "steps", "20", -1),
        (CheckRunsConfig(corpus, 8, (0.1,), 4, (0.1,), 4), "check_steps", 4.0, 3),
        (TheoremRunsConfig(corpus, 8, 0.01, 4), "zero_lr", "0.01", 0.0),
        (TheoremRunsConfig(corpus, 8, 0.01, 4), "steps", 4.0, 0),
        (LTTrain(lr=0.1, steps=5), "init_std", "0", -1e-3),
        (LTTrain(lr=0.1, steps=5), "lr", True, float("inf")),
        (CorpusConfig(vocab_size=200, context=32, n_sequences=64), "n_sequences", 64.0, 0),
        (MiniatureConfig(), "lr", "x", 0.0),
        (PythiaConfig(), "n_texts", 1.0, 0),
        (_smoke(ch + "ch06_pythia").study, "hub_deadline", "5", 0.0),
        (MeasureConfig(), "n_sequences", None, 0),
        (ProbeConfig(), "test_fraction", "0.3", 1.0),
        (PhaseRules(), "phase1_pool", 0, "nope"),
        (ReadSettings(PhaseRules(), MeasureConfig()), "case_sequences", 2.5, 0),
        (SeedRuns(AATrain()), "seeds", (1.5, 2, 3, 4), (-1, 1, 2, 3)),
        (_smoke(ch + "ch11_how_much_data"), "level", "0.9", 1.0),
        (Resources(), "max_parallel", 1.5, 0),
        (BenchConfig(), "repeats", "2", 0),
        (_smoke(ch + "intro"), "chart_stories", 1.5, 0),
        (_smoke(ch + "ch01_corpus_maps"), "table_k", "6", 0),
        (_smoke(ch + "ch02_leading_terms"), "runs", "runs", None),
        (_smoke(ch + "ch03_training"), "seed", 0.5, -1),
        (_smoke(ch + "ch04_associations"), "k", 1.5, 0),
        (_smoke(ch + "ch05_cooperation"), "n_eval", "x", 0),
        (_smoke(ch + "ch06_pythia"), "study", None, None),
        (_smoke(ch + "ch07_task"), "n_per_pool", 2.5, 0),
        (_smoke(ch + "ch08_training_dynamics"), "window", 1.5, 0),
        (_smoke(ch + "ch09_circuits"), "gallery", "1", 0),
        (_smoke(ch + "ch10_why_it_composes"), "per_pool", 1.5, 0),
        (AATrain(), "lr", "abc", -1.0),
        (AATrain(), "steps", 1e3, 0),
    ]


INSTANCES = _instances()


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@pytest.mark.parametrize("cfg, field, wrong, out", INSTANCES, ids=lambda v: getattr(type(v), "__qualname__", None))
def test_each_config_refuses_a_wrong_type_and_an_out_of_bounds_value_naming_the_field(cfg, field, wrong, out):
    name = f"{type(cfg).__name__}.{field}"
    with pytest.raises(TypeError, match=rf"^{name} must be .*, got {type(wrong).__name__} "):
        dataclasses.replace(cfg, **{field: wrong})
    if out is not None:
        with pytest.raises(ValueError, match=rf"^{name} must be .*, got .*{out!r}"):
            dataclasses.replace(cfg, **{field: out})


def _config_classes() -> set[str]:
    """Every dataclass of the package named ``*Config`` (the public configs), plus the ones whose
    name says what they configure otherwise."""
    found = set()
    for info in pkgutil.walk_packages(mechbook.__path__, "mechbook."):
        if info.name.endswith("__main__"):
            continue
        for _, obj in inspect.getmembers(importlib.import_module(info.name), inspect.isclass):
            if dataclasses.is_dataclass(obj) and obj.__module__ == info.name and obj.__name__.endswith("Config"):
                found.add(_qualified(obj))
    return found


def test_every_public_config_class_is_checked_here():
    covered = {_qualified(type(cfg)) for cfg, *_ in INSTANCES}
    missing = _config_classes() - covered
    assert not missing, f"config classes with no check_fields test: {sorted(missing)}"


def test_task_sample_refuses_a_bad_size_with_one_line():
    from mechbook.assign_add.task import Task, TaskConfig

    task, rng = Task(TaskConfig()), np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"^Task.sample's n .* must be at least 1, got -1$"):
        task.sample(-1, rng)
    with pytest.raises(TypeError, match=r"^Task.sample's n .* must be an int, got float 2.5$"):
        task.sample(2.5, rng)
    with pytest.raises(TypeError, match=r"^Task.eval_pools's n_per_pool must be an int, got str '8'$"):
        task.eval_pools("8")
    with pytest.raises(ValueError, match=r"^Task.pool_rows's n must be at least 1, got 0$"):
        task.pool_rows("0var_train", 0, rng)
    with pytest.raises(TypeError, match=r"^Task's cfg must be a TaskConfig"):
        Task({"modulus": 59})
    tokens, labels = task.sample(np.int64(3), rng)
    assert tokens.shape == (3, 16) and labels.shape == (3,)
    assert SEED.admits(0) and not SEED.admits(-1)


def test_a_miniature_this_machine_cannot_hold_is_refused_with_one_line():
    from mechbook.pythia.miniature import MiniatureConfig

    with pytest.raises(ValueError, match=r"^MiniatureConfig needs about [\d,.]+ GiB for training .*lower batch_size"):
        MiniatureConfig(batch_size=10**7)
