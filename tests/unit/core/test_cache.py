"""The on-disk cache (mechbook/cache.py): reuse, invalidation, corrupt files, fingerprints, keys
derived from the code a computation reaches, data-file digests, failed writes, the profile manifest."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import cache
from mechbook.cache import cached, code_digest, computation_modules, file_digest, fingerprint, module_closure


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    return tmp_path


def _counter():
    calls = []

    def compute():
        calls.append(1)
        return {"w": np.arange(3.0), "n": len(calls)}

    return calls, compute


def test_second_call_loads_and_other_key_recomputes():
    calls, compute = _counter()
    first = cached("t", {"k": 1}, compute)
    again = cached("t", {"k": 1}, compute)
    assert len(calls) == 1 and again["n"] == 1 and np.array_equal(again["w"], first["w"])
    cached("t", {"k": 2}, compute)
    assert len(calls) == 2
    cached("t", {"k": 1}, compute, refresh=True)
    assert len(calls) == 3


def test_each_computed_entry_is_told_to_the_executor_and_a_served_one_is_not(tmp_path, monkeypatch):
    told = tmp_path / "computed.txt"
    monkeypatch.setenv(cache.COMPUTED_ENV, str(told))
    _calls, compute = _counter()
    cached("t/told", {"k": 1}, compute)
    cached("t/told", {"k": 1}, compute)  # served from the cache: not told
    cached("t/told", {"k": 2}, compute)
    assert told.read_text().splitlines() == ["t/told", "t/told"]


def _entry(root):
    [path] = [p for p in (root / "t").iterdir() if p.suffix == ".pt"]
    return path


def test_damaged_or_unverified_files_are_recomputed(private_cache):
    _calls, compute = _counter()
    cached("t", "k", compute)
    path = _entry(private_cache)
    path.write_bytes(path.read_bytes()[:-5])  # truncated
    with pytest.warns(UserWarning, match="checksum"):
        assert cached("t", "k", compute)["n"] == 2
    path.with_name(path.name + ".sha256").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cached("t", "k", compute)["n"] == 3


def test_checksum_valid_but_unloadable_is_recomputed(private_cache):
    _calls, compute = _counter()
    cached("t", "k", compute)
    cache.save_verified(_entry(private_cache), b"not a torch file")
    with pytest.warns(UserWarning, match="failed to load"):
        assert cached("t", "k", compute)["n"] == 2


def test_a_crafted_or_old_pickled_entry_is_recomputed_and_runs_nothing(private_cache):
    """An entry whose sidecar matches but which only full pickle loads (a crafted pickle, or what
    the old torch_dumps wrote) is reported and recomputed; the crafted one never runs."""
    import io

    import torch
    from test_safe_format import crafted_pickle

    _calls, compute = _counter()
    cached("t", "k", compute)
    cache.save_verified(_entry(private_cache), crafted_pickle(private_cache.parent / "pwned"))
    with pytest.warns(UserWarning, match=r"failed to load \(not in mechbook's safe format \(it names posix\.system"):
        assert cached("t", "k", compute)["n"] == 2
    assert not (private_cache.parent / "pwned").exists()
    buf = io.BytesIO()
    torch.save({"w": np.arange(3.0), "n": 0}, buf)
    cache.save_verified(_entry(private_cache), buf.getvalue())
    with pytest.warns(UserWarning, match="older mechbook"):
        assert cached("t", "k", compute)["n"] == 3
    assert cached("t", "k", compute)["n"] == 3  # the recomputed entry is in the safe format and is served


def test_a_value_the_safe_format_cannot_hold_is_returned_uncached(private_cache):
    calls = []

    def compute():
        calls.append(1)
        return {"f": lambda: 1}

    for _ in range(2):
        with pytest.warns(UserWarning, match=r"could not serialise .*function.*at value\['f'\]"):
            cached("t", "k", compute)
    assert len(calls) == 2 and not (private_cache / "t").exists()


def test_atomic_write_leaves_no_temporary_files(private_cache):
    target = private_cache / "a" / "b.bin"
    cache.save_verified(target, b"payload")
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.bin", "b.bin.sha256"]
    assert cache.load_verified(target) == b"payload"


@dataclasses.dataclass(frozen=True)
class Cfg:
    steps: int
    lr: float


@given(st.dictionaries(st.text(max_size=4), st.integers(), max_size=6))
def test_fingerprint_ignores_dict_order(d):
    assert fingerprint(d) == fingerprint(dict(reversed(list(d.items()))))


def test_fingerprint_sees_config_and_array_contents():
    assert fingerprint(Cfg(1, 0.1)) != fingerprint(Cfg(2, 0.1))
    a = np.zeros(4)
    b = a.copy()
    b[2] = 1e-12
    assert fingerprint(a) != fingerprint(b) and fingerprint(a) != fingerprint(a.astype(np.float32))
    with pytest.raises(TypeError, match="cannot fingerprint"):
        fingerprint(object())


PACKAGE = Path(cache.__file__).resolve().parent


@pytest.fixture
def package_copy(tmp_path) -> Path:
    """A temporary copy of the mechbook package (root folder returned)."""
    root = tmp_path / "src"
    shutil.copytree(PACKAGE, root / "mechbook", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _append(file: Path, text: str) -> None:
    st = file.stat()
    file.write_text(file.read_text() + text)
    os.utime(file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a new mtime even on a coarse clock


def test_code_digest_follows_the_import_closure_and_nothing_else(package_copy):
    probes = ["mechbook.assign_add.probes"]
    closure = module_closure(probes, package_copy)
    assert {"mechbook.assign_add.task", "mechbook.determinism", "mechbook"} <= set(closure)
    assert "mechbook.leading_terms.train" not in closure
    assert not [m for m in closure if cache.is_unkeyed(m)], "progress, records, profiles, cache ... are not followed"
    before = code_digest(probes, package_copy)
    _append(package_copy / "mechbook" / "leading_terms" / "train.py", "\nX = 1\n")  # not reachable from probes
    assert code_digest(probes, package_copy) == before
    _append(package_copy / "mechbook" / "assign_add" / "task.py", "\nX = 1\n")  # imported by probes
    assert code_digest(probes, package_copy) != before


def test_closure_sees_relative_and_function_level_imports(tmp_path):
    pkg = tmp_path / "mechbook"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("from . import b\n\ndef f():\n    from ..deep import thing\n    return thing\n")
    (pkg / "sub" / "b.py").write_text("from mechbook.sub.c import name\n")
    (pkg / "sub" / "c.py").write_text("name = 1\n")
    (pkg / "deep.py").write_text("import numpy\nthing = 2\n")
    (pkg / "alone.py").write_text("")
    assert module_closure(["mechbook.sub.a"], tmp_path) == [
        "mechbook",
        "mechbook.deep",
        "mechbook.sub",
        "mechbook.sub.a",
        "mechbook.sub.b",
        "mechbook.sub.c",
    ]


def test_computation_modules_include_the_model_a_computation_closes_over():
    from mechbook.assign_add.model import AssignAddModel, ModelConfig
    from mechbook.assign_add.probes import probe_table

    model = AssignAddModel(ModelConfig(d_model=8, d_head=8, d_mlp=8))
    found = computation_modules(lambda: probe_table(model, None, None, None), "mechbook.assign_add.probes")
    assert found == {"mechbook.assign_add.probes", "mechbook.assign_add.model", "mechbook.determinism"}


def _training_entry(monkeypatch) -> Path:
    """The entry path of Part II's cached training (``assign_add.train.load_or_train`` of the smoke
    run), derived as :func:`cached` derives it, without training."""
    from mechbook.assign_add import train as aa_train
    from mechbook.assign_add.runs import TRAIN_PROFILES

    paths = []

    def entry(namespace, key, compute, **_):
        paths.append(cache.entry_path(namespace, key, computation_modules(compute, aa_train.__name__)))

    monkeypatch.setattr(aa_train, "cached", entry)
    aa_train.load_or_train(TRAIN_PROFILES["smoke"], device="cpu")
    (path,) = paths
    return path


@pytest.mark.parametrize(
    "unkeyed",
    [
        "progress.py",
        "records.py",
        "profiles.py",
        "claims.py",
        "viz/charts.py",
        "chapters/ch08_training_dynamics.py",
        "chapters/common.py",
        "book/run.py",
        "cache.py",
        "notices.py",
        "lifeline.py",
        "arguments.py",
    ],
)
def test_a_training_key_ignores_presentation_and_follows_the_model(package_copy, monkeypatch, unkeyed):
    """Issue 23: rewording a progress bar, a record, a chart or a chapter retrains nothing; editing
    the model, or the determinism every computation runs under, does."""
    monkeypatch.setattr(cache, "package_root", lambda: package_copy)
    before = _training_entry(monkeypatch)
    _append(package_copy / "mechbook" / unkeyed, "\nX = 1\n")
    assert _training_entry(monkeypatch) == before
    _append(package_copy / "mechbook" / "assign_add" / "model.py", "\nX = 1\n")
    after_model = _training_entry(monkeypatch)
    assert after_model != before
    _append(package_copy / "mechbook" / "determinism.py", "\nX = 1\n")
    assert _training_entry(monkeypatch) != after_model


def test_a_computation_written_in_a_chapter_module_keys_that_module(package_copy):
    """An unkeyed module is still in the key where the computation itself is written in it, and
    the library it imports is followed from there."""
    start = computation_modules(lambda: None, "mechbook.chapters.ch08_training_dynamics")
    assert start == {"mechbook.chapters.ch08_training_dynamics", "mechbook.determinism"}
    closure = module_closure(start, package_copy)
    assert "mechbook.chapters.ch08_training_dynamics" in closure and "mechbook.assign_add.model" in closure
    assert "mechbook.viz" not in closure and "mechbook.chapters" not in closure
    before = code_digest(start, package_copy)
    _append(package_copy / "mechbook" / "chapters" / "ch08_training_dynamics.py", "\nX = 1\n")
    assert code_digest(start, package_copy) != before


def test_editing_a_dependency_changes_the_entry(package_copy, monkeypatch):
    from mechbook.assign_add.task import TaskConfig

    monkeypatch.setattr(cache, "package_root", lambda: package_copy)
    calls, compute = _counter()
    cached("t/x", "k", lambda: (TaskConfig, compute())[1])
    cached("t/x", "k", lambda: (TaskConfig, compute())[1])
    assert len(calls) == 1
    _append(package_copy / "mechbook" / "assign_add" / "task.py", "\nX = 1\n")
    cached("t/x", "k", lambda: (TaskConfig, compute())[1])
    assert len(calls) == 2


def test_file_digest_tracks_contents(tmp_path):
    data = tmp_path / "stories.txt"
    data.write_text("once upon a time")
    first = file_digest(data)
    assert first == file_digest(str(data)) == __import__("hashlib").sha256(b"once upon a time").hexdigest()
    key_before = cache.entry_path("t/x", {"data": file_digest(data)}, ["mechbook.data"])
    data.write_text("once upon a tide")  # same size
    os.utime(data, ns=(1, data.stat().st_mtime_ns + 1_000_000))
    assert file_digest(data) != first
    assert cache.entry_path("t/x", {"data": file_digest(data)}, ["mechbook.data"]) != key_before
    with pytest.raises(FileNotFoundError):
        file_digest(tmp_path / "missing.txt")


def test_a_failed_write_warns_and_returns_the_value(private_cache, monkeypatch):
    calls, compute = _counter()
    (private_cache / "blocked").write_text("a file where the namespace folder should be")
    with pytest.warns(UserWarning, match="could not write the cache entry"):
        value = cached("blocked", "k", compute)
    assert value["n"] == 1 and len(calls) == 1

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "save_verified", full)
    with pytest.warns(UserWarning, match="No space left"):
        assert cached("t", "k", compute)["n"] == 2


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_cache_still_returns_the_value(private_cache):
    _calls, compute = _counter()
    (private_cache / "ro").mkdir()
    (private_cache / "ro").chmod(0o500)
    try:
        with pytest.warns(UserWarning, match="could not write"):
            assert cached("ro", "k", compute)["n"] == 1
    finally:
        (private_cache / "ro").chmod(0o700)


def test_profile_manifest_lists_every_entry_served(private_cache, monkeypatch):
    _calls, compute = _counter()
    cached("t/a", "k", compute)
    assert not (private_cache / "manifests").exists()
    monkeypatch.setenv("MECHBOOK_PROFILE", "smoke")
    cached("t/a", "k", compute)  # a hit
    cached("t/b", "k", compute)  # a miss
    lines = [json.loads(line) for line in (private_cache / "manifests" / "smoke.jsonl").read_text().splitlines()]
    assert [line["namespace"] for line in lines] == ["t/a", "t/b"]
    assert all((private_cache / line["namespace"] / line["file"]).is_file() for line in lines)
    with pytest.raises(ValueError, match="relative name"):
        cached("../escape", "k", compute)


@pytest.mark.parametrize("name", ["../../x", "a/b", "..", "cpu run", ""])
def test_a_manifest_name_that_is_not_a_plain_name_stops_before_computing(private_cache, monkeypatch, name):
    calls, compute = _counter()
    monkeypatch.setenv("MECHBOOK_PROFILE", name)
    if not name:  # unset in effect: no manifest, nothing refused
        assert cached("t", "k", compute)["n"] == 1 and not (private_cache / "manifests").exists()
        return
    with pytest.raises(ValueError, match=r"MECHBOOK_PROFILE=.* is not a profile name"):
        cached("t", "k", compute)
    assert not calls and not list(private_cache.parent.glob("x*"))
    from mechbook.book.environment import check_environment

    assert any("MECHBOOK_PROFILE" in line for line in check_environment({"MECHBOOK_PROFILE": name}))


def test_an_entry_replaced_by_a_folder_is_recomputed_with_one_line(private_cache):
    _calls, compute = _counter()
    cached("t", "k", compute)
    path = _entry(private_cache)
    path.unlink()
    path.mkdir()
    with pytest.warns(UserWarning) as caught:
        assert cached("t", "k", compute)["n"] == 2
    messages = [str(w.message) for w in caught]
    assert any("is not a file; recomputing it" in m for m in messages)
    assert any("could not write the cache entry" in m for m in messages)


def test_keyed_modules_are_the_closure_of_the_cached_computations_and_not_the_presentation():
    from mechbook.cache import keyed_modules

    keyed = set(keyed_modules())
    assert {"mechbook.assign_add.train", "mechbook.assign_add.model", "mechbook.leading_terms.stats"} <= keyed
    assert set(module_closure(["mechbook.assign_add.probes"])) <= keyed
    presentation = {"mechbook.claims", "mechbook.assign_add.claims", "mechbook.leading_terms.claims"}
    assert not keyed & presentation and not [m for m in keyed if m.startswith(("mechbook.chapters", "mechbook.viz"))]
