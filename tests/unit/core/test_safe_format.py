"""The cache's safe format (mechbook/safe_format.py): every value type the package caches round-trips
(hypothesis over nested trees and frames, and each cached type as the package builds it), values it
cannot hold fail to encode naming where they sit, and no file can make loading run code or build a
class that is not a mechbook dataclass."""

from __future__ import annotations

import collections
import dataclasses
import io
import math
import os
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from hypothesis.extra import pandas as hpd

from mechbook import safe_format
from mechbook.safe_format import FORMAT, NotSafeFormat, UnsafeValue, dumps, loads


def same(a, b) -> bool:
    """Equal values of exactly the same types (arrays by dtype, shape, layout and bits; NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return (
            a.dtype == b.dtype and a.shape == b.shape and a.detach().numpy().tobytes() == b.detach().numpy().tobytes()
        )
    if isinstance(a, np.ndarray):
        if a.dtype.hasobject:
            return a.shape == b.shape and all(same(x, y) for x, y in zip(a.ravel(), b.ravel()))
        layout = a.flags.f_contiguous and not a.flags.c_contiguous
        return (
            a.dtype == b.dtype
            and a.shape == b.shape
            and a.tobytes() == b.tobytes()
            and layout == (b.flags.f_contiguous and not b.flags.c_contiguous)
        )
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b)
        return True
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return a == b


def round_trip(value):
    return loads(dumps(value))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**130), max_value=2**130),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
)
arrays = hnp.arrays(
    st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int8, np.uint16, np.bool_, np.complex64, "<U3"]),
    hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
tensors = arrays.filter(lambda a: a.dtype.kind in "fib" and a.dtype != np.uint16).map(
    lambda a: torch.from_numpy(np.ascontiguousarray(a))
)
keys = st.one_of(st.text(max_size=5), st.integers(-5, 5), st.tuples(st.integers(0, 3), st.text(max_size=2)))
trees = st.recursive(
    st.one_of(
        scalars,
        arrays,
        arrays.map(np.asfortranarray),
        tensors,
        arrays.filter(lambda a: a.ndim == 0).map(lambda a: a[()]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(keys, inner, max_size=4),
        st.dictionaries(st.text(max_size=4), inner, max_size=3).map(collections.OrderedDict),
        st.frozensets(keys, max_size=3),
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(trees)
def test_nested_trees_round_trip_exactly(value):
    assert same(round_trip(value), value)


frames = hpd.data_frames(
    columns=[
        hpd.column("step", dtype=np.int64),
        hpd.column("pool", elements=st.sampled_from(["0var", "1var", "train"])),
        hpd.column("accuracy", dtype=float),
        hpd.column("loss", dtype=np.float32),
        hpd.column("flag", dtype=bool),
        hpd.column("label", elements=st.one_of(st.none(), st.text(max_size=4))),
    ],
    index=st.one_of(hpd.range_indexes(max_size=6), hpd.indexes(dtype=np.int64, max_size=6)),
)


@settings(max_examples=30, deadline=None)
@given(frames, st.sampled_from(["plain", "category", "string index", "multiindex", "pivot", "series"]))
def test_frames_round_trip_under_assert_frame_equal(frame, shape):
    if shape == "category":
        frame = frame.assign(pool=frame["pool"].astype("category"))
    elif shape == "string index":
        frame = frame.set_index("pool")
    elif shape == "multiindex":
        frame = frame.set_index(["step", "pool"])
    elif shape == "pivot":
        frame = frame.drop_duplicates(["step", "pool"]).pivot(index="step", columns="pool", values="accuracy")
    if shape == "series":
        series = frame["accuracy"].rename("acc")
        pd.testing.assert_series_equal(round_trip(series), series)
    else:
        pd.testing.assert_frame_equal(round_trip(frame), frame)


def test_a_part2_train_result_round_trips_with_float16_checkpoints():
    from mechbook.assign_add.config import TrainConfig, TrainResult

    history = pd.DataFrame(
        {
            "step": [0, 0, 50],
            "pool": ["0var_train", "train", "0var_train"],
            "accuracy": [0.1, 0.5, 0.9],
            "loss": [2.0, 1.0, 0.3],
        }
    )
    state = collections.OrderedDict(w=torch.randn(4, 3), e=torch.randn(3))
    result = TrainResult(
        history=history,
        checkpoints={s: {k: v.half() for k, v in state.items()} for s in (0, 50)},
        final_state=state,
        config=TrainConfig(seed=3),
        train_seconds=12.5,
    )
    back = round_trip(result)
    assert type(back) is TrainResult and back.config == result.config and same(back, result)
    assert back.checkpoints[50]["w"].dtype == torch.float16 and type(back.final_state) is collections.OrderedDict


def test_a_resume_state_round_trips_and_restores_the_generators():
    """What train_stacked saves every resume_every steps: parameters, AdamW's state, the data streams'
    generator states (PCG64's 128-bit integers), the history rows and the kept steps."""
    param = torch.nn.Parameter(torch.randn(3, 2))
    opt = torch.optim.AdamW([param], lr=1e-3, betas=(0.9, 0.98))
    param.sum().backward()
    opt.step()
    rngs = [np.random.default_rng([s, 7]) for s in range(2)]
    for r in rngs:
        r.integers(0, 10, size=5)
    state = {
        "config": "ab" * 32,
        "step": 100,
        "params": {"w": param.detach().cpu()},
        "optim": opt.state_dict(),
        "rng": [r.bit_generator.state for r in rngs] + [None],
        "history": [[{"step": 0, "pool": "train", "accuracy": 0.25, "loss": 1.5}]],
        "checkpoint_steps": [0, 100],
        "elapsed": 3.25,
    }
    back = round_trip(state)
    assert same(back, state)
    fresh = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(3, 2))], lr=1.0)
    fresh.load_state_dict(back["optim"])
    assert fresh.param_groups[0]["betas"] == (0.9, 0.98)
    for saved, r in zip(back["rng"], rngs):
        again = np.random.default_rng()
        again.bit_generator.state = saved
        assert np.array_equal(again.integers(0, 1000, size=8), r.integers(0, 1000, size=8))


def test_part1_values_round_trip():
    """Chapters 1-6's cached values: a corpus (tokenizer and sequences), its statistics, a run as
    cached_train stores it, chapter 5's cooperation, chapter 6's features and miniature run."""
    from mechbook.leading_terms.ablation import Cooperation, OutputSplit
    from mechbook.leading_terms.model import ModelConfig
    from mechbook.leading_terms.stats import corpus_stats
    from mechbook.leading_terms.tokenize import BPETokenizer, CasedBPETokenizer, NaturalTokenizer, make_sequences
    from mechbook.leading_terms.train import TrainConfig
    from mechbook.pythia.features import LeadingFeatures
    from mechbook.pythia.miniature import MiniatureConfig, MiniatureRun

    stories = ["Tom saw a big dog. The dog ran to Tom and sat down."] * 4 + ["Sue had a red ball."]
    for tok in (NaturalTokenizer.fit(stories, 8), CasedBPETokenizer.fit(stories, 30), BPETokenizer.fit(stories, 260)):
        seqs = make_sequences(stories, tok, 4, "unk")
        back_tok, back_seqs = round_trip((tok, seqs))
        assert type(back_tok) is type(tok) and back_tok.encode(stories[0]) == tok.encode(stories[0])
        assert back_tok.id_to_token == tok.id_to_token and same(back_seqs, seqs)
    stats = corpus_stats(make_sequences(stories, NaturalTokenizer.fit(stories, 8), 4, "unk").tokens, 8)
    assert stats.G.flags.f_contiguous and not stats.G.flags.c_contiguous
    assert same(round_trip(stats), stats)
    run = {
        "history": pd.DataFrame({"step": [0, 1], "kind": ["B", "Phi"], "norm": [0.0, 1e-3]}),
        "state": {"W": torch.randn(8, 8)},
        "model_cfg": ModelConfig(d_vocab=8, n_ctx=4),
        "train_cfg": TrainConfig(lr=0.1, steps=2, keep=(1,)),
        "checkpoints": {1: {"W": torch.randn(8, 8)}},
    }
    assert same(round_trip(run), run)
    split = OutputSplit(*np.linspace(0.0, 1.0, len(dataclasses.fields(OutputSplit))).tolist())
    coop = Cooperation(pd.DataFrame({"a": [1.0]}), pd.DataFrame({"removal": ["x"], "delta_loss": [0.5]}), split, 0.25)
    assert same(round_trip(coop), coop)
    feats = LeadingFeatures(np.arange(3), np.eye(3), np.ones((3, 3)), 0.125)
    assert same(round_trip(feats), feats)
    bpe = BPETokenizer.fit(stories, 260)
    mini = MiniatureRun(
        MiniatureConfig(steps=20), bpe, np.zeros((2, 5), np.int64), {0: {"w": torch.ones(2)}}, [1.5, 1.25]
    )
    back = round_trip(mini)
    assert back.tokenizer.encode("Tom") == bpe.encode("Tom") and same(back.checkpoints, mini.checkpoints)
    scores = {"0var_test": np.float64(0.75), "union": 0.5}
    assert same(round_trip(scores), scores)
    assert same(
        round_trip({"p": PurePosixPath("a/b"), "q": Path("/x"), "d": torch.float16}),
        {
            "p": PurePosixPath("a/b"),
            "q": Path("/x"),
            "d": torch.float16,
        },
    )


@dataclasses.dataclass
class Local:
    x: int


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"run": {"f": lambda: 1}}, r"function.*at value\['run'\]\['f'\]"),
        ([1, Local(2)], r"tests?.*Local.*only dataclasses defined at the top of a mechbook module.*at value\[1\]"),
        (np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]), "structured or void"),
        (pd.DataFrame({"t": pd.to_datetime(["2020"]).tz_localize("UTC")}), r"dtype datetime64.*UTC.*at value\['t'\]"),
        ({frozenset(): object()}, "builtins.object"),
    ],
    ids=["lambda", "foreign-dataclass", "structured-array", "tz-column", "object"],
)
def test_what_the_format_cannot_hold_fails_to_encode_naming_where(value, message):
    with pytest.raises(UnsafeValue, match=message):
        dumps(value)


def test_a_dataclass_with_an_attribute_outside_its_fields_is_refused():
    from mechbook.assign_add.config import TrainConfig, TrainResult

    result = TrainResult(pd.DataFrame(), {}, {}, TrainConfig(), 0.0)
    result.extra = 1
    with pytest.raises(UnsafeValue, match=r"not fields \(\['extra'\]\)"):
        dumps(result)


class _Evil:
    """Unpickled by full pickle, this creates ``path``; the safe loader must never get that far."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


def crafted_pickle(path: Path) -> bytes:
    """A torch file with the safe format's marker whose value, loaded with full pickle, runs a shell
    command that creates ``path``."""
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "value": _Evil(path)}, buf)
    return buf.getvalue()


def test_a_crafted_pickle_is_refused_and_runs_nothing(tmp_path):
    data = crafted_pickle(tmp_path / "proof")
    torch.load(io.BytesIO(data), weights_only=False)  # the hazard is real: full pickle runs the command
    assert (tmp_path / "proof").exists()
    data = crafted_pickle(tmp_path / "pwned")
    with pytest.raises(NotSafeFormat, match=r"names posix\.system, which only full pickle would load"):
        loads(data)
    assert not (tmp_path / "pwned").exists()


def _file(value) -> bytes:
    buf = io.BytesIO()
    torch.save({"format": FORMAT, "value": value}, buf)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        ({"t": "dataclass", "class": "os:system", "fields": {}}, "does not name a class of a mechbook module"),
        ({"t": "dataclass", "class": "mechbook.cache:Path", "fields": {}}, "is not a class defined in mechbook.cache"),
        ({"t": "dataclass", "class": "mechbook.cache:os.system", "fields": {}}, "not a class defined"),
        ({"t": "dataclass", "class": "mechbook.cache:CacheRootError", "fields": {}}, "is not a dataclass"),
        ({"t": "dataclass", "class": "mechbook.nowhere:X", "fields": {}}, "no module mechbook.nowhere"),
        ({"t": "dataclass", "class": "mechbook.assign_add.config:TrainConfig", "fields": {"x": 1}}, "not its fields"),
        (
            {"t": "object", "class": "mechbook.cache:CacheRootError", "state": {}},
            "not a class the safe format rebuilds",
        ),
        (
            {"t": "ndarray", "dtype": "|O", "shape": [1], "order": "C", "data": torch.zeros(8, dtype=torch.uint8)},
            "dtype object",
        ),
        (
            {"t": "ndarray", "dtype": "<f8", "shape": [2], "order": "C", "data": torch.zeros(8, dtype=torch.uint8)},
            "8 bytes",
        ),
        ({"t": "dataclass", "class": "mechbook.__main__:main", "fields": {}}, "does not name a class"),
        ({"t": "torch.dtype", "name": "load"}, "torch.load is not a torch dtype"),
        ({"t": "eval", "code": "1"}, "unknown node 'eval'"),
        ([1, 2], "a bare list"),
    ],
    ids=[
        "foreign-module",
        "re-export",
        "attribute-path",
        "not-dataclass",
        "no-module",
        "wrong-fields",
        "not-stateful",
        "object-array",
        "short-bytes",
        "dunder-module",
        "not-a-dtype",
        "unknown-node",
        "bare-list",
    ],
)
def test_a_file_naming_anything_else_is_refused(tree, message):
    with pytest.raises(NotSafeFormat, match=message):
        loads(_file(tree))


def test_an_old_pickled_entry_is_not_the_safe_format():
    buf = io.BytesIO()
    torch.save({"w": np.arange(3.0)}, buf)  # what the old torch_dumps wrote for a dict with an array
    with pytest.raises(NotSafeFormat, match="older mechbook"):
        loads(buf.getvalue())
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf)  # loadable with weights_only, but not this format
    with pytest.raises(NotSafeFormat, match="found None"):
        loads(buf.getvalue())


def test_only_listed_plain_classes_are_rebuilt_from_their_state():
    from mechbook.leading_terms.tokenize import NaturalTokenizer

    assert safe_format.class_name(NaturalTokenizer) in safe_format.STATEFUL
    assert all(not dataclasses.is_dataclass(safe_format.resolve(name)) for name in safe_format.STATEFUL)


def test_no_module_of_the_package_loads_with_full_pickle():
    package = Path(safe_format.__file__).parent
    offenders = [str(p) for p in package.rglob("*.py") if "weights_only=False" in p.read_text()]
    assert offenders == []
