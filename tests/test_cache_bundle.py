"""Cache bundles (mechbook/cache_bundle.py): a profile's entries round-trip into an empty cache
byte for byte, and a corrupt or tampered bundle is refused before anything is installed."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from mechbook.__main__ import main
from mechbook.cache import cached
from mechbook.cache_bundle import BundleError, export_bundle, import_bundle


def _compute(tag: str, calls: list):
    def compute():
        calls.append(tag)
        return {"tag": tag, "w": np.arange(5.0) * len(tag)}

    return compute


def _entries(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*.pt*") if "manifests" not in p.parts}


@pytest.fixture
def filled(tmp_path, monkeypatch):
    """A cache where the smoke build used two entries and a third was made outside any build."""
    source = tmp_path / "source"
    monkeypatch.setenv("MECHBOOK_CACHE", str(source))
    calls: list = []
    cached("part/other", "k", _compute("outside", calls))
    monkeypatch.setenv("MECHBOOK_PROFILE", "smoke")
    cached("part/a", "k", _compute("a", calls))
    cached("part/b", {"n": 2}, _compute("b", calls))
    cached("part/a", "k", _compute("a", calls))
    monkeypatch.delenv("MECHBOOK_PROFILE")
    bundle = tmp_path / "smoke.tar"
    manifest = export_bundle(bundle, "smoke")
    target = tmp_path / "target"
    monkeypatch.setenv("MECHBOOK_CACHE", str(target))
    return source, target, bundle, manifest


def test_round_trip_gives_hits_with_identical_bytes(filled):
    source, target, bundle, manifest = filled
    assert [e["namespace"] for e in manifest["entries"]] == ["part/a", "part/b"] and manifest["missing"] == []
    assert import_bundle(bundle) == 2
    calls: list = []
    assert cached("part/a", "k", _compute("a", calls))["tag"] == "a"
    assert cached("part/b", {"n": 2}, _compute("b", calls))["tag"] == "b"
    assert calls == []
    copied = _entries(target)
    assert copied == {k: v for k, v in _entries(source).items() if k.startswith("part/a") or k.startswith("part/b")}
    assert len(copied) == 4  # two entries and their checksums; the entry made outside the build stays behind


def _rewrite(bundle: Path, change) -> None:
    """Rewrite the tar with ``change(name, data) -> (name, data) | None`` applied to each member."""
    with tarfile.open(bundle) as tar:
        members = [(m.name, tar.extractfile(m).read()) for m in tar.getmembers()]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            out = change(name, data)
            if out is not None:
                info = tarfile.TarInfo(out[0])
                info.size = len(out[1])
                tar.addfile(info, io.BytesIO(out[1]))
    bundle.write_bytes(buf.getvalue())


def _flip_entry(name, data):
    if name.startswith("entries/part/b"):
        data = bytes([data[0] ^ 1]) + data[1:]
    return name, data


def _escape(name, data):
    if name == "manifest.json":
        m = json.loads(data)
        m["entries"][0]["namespace"] = "../../outside"
        data = json.dumps(m).encode()
    return name, data


def _drop_entry(name, data):
    return None if name.startswith("entries/part/a") else (name, data)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: _rewrite(b, _flip_entry), "does not match its checksum"),
        (lambda b: _rewrite(b, _escape), "outside the cache"),
        (lambda b: _rewrite(b, _drop_entry), "lacks"),
        (lambda b: b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2]), "checksum|cannot be read|lacks"),
        (lambda b: b.write_bytes(b"not a tar at all" * 100), "cannot be read"),
    ],
    ids=["flipped-byte", "path-escape", "missing-entry", "truncated", "not-a-tar"],
)
def test_a_damaged_bundle_is_refused_and_installs_nothing(filled, damage, message):
    _, target, bundle, _ = filled
    damage(bundle)
    with pytest.raises(BundleError, match=message):
        import_bundle(bundle)
    assert _entries(target) == {}


def test_an_unlisted_member_is_refused(filled):
    _, target, bundle, _ = filled
    with tarfile.open(bundle, mode="a") as tar:
        info = tarfile.TarInfo("entries/part/a/" + "0" * 64 + ".pt")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"bad"))
    with pytest.raises(BundleError, match="does not list"):
        import_bundle(bundle)
    assert _entries(target) == {}


def test_command_line_reports_errors_plainly(filled, tmp_path, capsys):
    _, target, bundle, _ = filled
    assert main(["cache", "export", str(tmp_path / "x.tar"), "--profile", "cpu"]) == 1
    assert "run the book" in capsys.readouterr().err
    _rewrite(bundle, _flip_entry)
    assert main(["cache", "import", str(bundle)]) == 1
    assert "nothing was installed" in capsys.readouterr().err and _entries(target) == {}
