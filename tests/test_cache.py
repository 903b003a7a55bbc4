"""The on-disk cache (mechbook/cache.py): reuse, invalidation, corrupt files, fingerprints."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mechbook import cache
from mechbook.cache import cached, code_version, fingerprint


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


def _entry(root):
    [path] = [p for p in (root / "t").iterdir() if p.suffix == ".pt"]
    return path


def test_damaged_or_unverified_files_are_recomputed(private_cache):
    calls, compute = _counter()
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
    calls, compute = _counter()
    cached("t", "k", compute)
    cache.save_verified(_entry(private_cache), b"not a torch file")
    with pytest.warns(UserWarning, match="failed to load"):
        assert cached("t", "k", compute)["n"] == 2


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


def test_code_version_changes_with_source():
    def f():
        return 1

    def g():
        return 2

    assert code_version(f) == code_version(f) and code_version(f) != code_version(g)
    assert code_version(cache) != code_version(f)
