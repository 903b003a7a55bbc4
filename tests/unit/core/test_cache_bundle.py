"""Cache bundles (mechbook/cache_bundle.py): a profile's entries round-trip into an empty cache
byte for byte; a corrupt, tampered or unsafe bundle (a crafted pickle, a link, a member outside the
folder, a truncated tar, wrong sums, a manifest that is not an object, an old format) is refused in
one line before anything is installed, and nothing appears outside the cache; export says plainly
when there is nothing to export."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from test_safe_format import crafted_pickle

from mechbook import cache, cache_bundle
from mechbook.__main__ import main
from mechbook.cache import bind, cached, save_verified, unbind
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
        (lambda b: b.write_bytes(b.read_bytes()[: len(b.read_bytes()) // 2]), "checksum|cut short|lacks"),
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


def test_command_line_reports_errors_plainly(filled, capsys):
    _, target, bundle, _ = filled
    _rewrite(bundle, _flip_entry)
    assert main(["cache", "import", str(bundle)]) == 1
    assert "nothing was installed" in capsys.readouterr().err and _entries(target) == {}


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _with_manifest(bundle: Path, edit) -> None:
    """Rewrite the bundle's manifest as ``edit(manifest)`` returns it (any JSON value)."""

    def change(name, data):
        return (name, json.dumps(edit(json.loads(data))).encode()) if name == "manifest.json" else (name, data)

    _rewrite(bundle, change)


def _replace_entry(bundle: Path, payload: bytes, named: str | None = "own") -> None:
    """Put ``payload`` in place of the entry of part/b, naming its own key (``"own"``), another
    (a fingerprint) or none (None), with the manifest's sha256 and size updated to match (what a
    tamperer who knows the format does)."""
    with tarfile.open(bundle) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
    key = next(e for e in manifest["entries"] if e["namespace"] == "part/b")["key"].removesuffix(".pt")
    data = payload if named is None else bind(key if named == "own" else named, payload)

    def edit(manifest):
        entry = next(e for e in manifest["entries"] if e["namespace"] == "part/b")
        entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        return manifest

    _with_manifest(bundle, edit)
    _rewrite(bundle, lambda name, old: (name, data) if name.startswith("entries/part/b/") else (name, old))


def _add_member(bundle: Path, info: tarfile.TarInfo, data: bytes = b"") -> None:
    with tarfile.open(bundle, mode="a") as tar:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _symlink(bundle: Path, outside: Path) -> None:
    """The entry of part/a becomes a symbolic link to a file outside the cache."""
    with tarfile.open(bundle) as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for info, data in members:
            if info.name.startswith("entries/part/a/"):
                info = tarfile.TarInfo(info.name)
                info.type, info.linkname, data = tarfile.SYMTYPE, str(outside), b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    bundle.write_bytes(buf.getvalue())


def _last_data_middle(bundle: Path) -> int:
    """The offset halfway through the last member's bytes (a download cut off there)."""
    with tarfile.open(bundle) as tar:
        last = tar.getmembers()[-1]
    return last.offset_data + last.size // 2


def _renamed(manifest):
    manifest["entries"][0]["key"] = "state.pt"
    return manifest


def _sums_off(manifest):
    manifest["entries"][1]["sha256"] = "0" * 64
    return manifest


def _typed_wrong(manifest):
    manifest["entries"][0]["size"] = "12"
    return manifest


BAD_BUNDLES = {
    "crafted-pickle": (
        lambda b, out: _replace_entry(b, crafted_pickle(out)),
        r"entries/part/b/.* is not in mechbook's safe format \(it names posix\.system",
    ),
    "symlink-member": (lambda b, out: _symlink(b, out), "holds a symbolic link"),
    "dotdot-member": (
        lambda b, out: _add_member(b, tarfile.TarInfo("entries/../../" + out.name), b"x"),
        "points outside the cache",
    ),
    "absolute-member": (lambda b, out: _add_member(b, tarfile.TarInfo(str(out)), b"x"), "points outside the cache"),
    "truncated-header": (lambda b, out: b.write_bytes(b.read_bytes()[:700]), "is cut short"),
    "truncated-entry": (lambda b, out: b.write_bytes(b.read_bytes()[: _last_data_middle(b)]), "is cut short"),
    "entry-name": (lambda b, out: _with_manifest(b, _renamed), "is not named like a cache entry"),
    "sums-do-not-match": (lambda b, out: _with_manifest(b, _sums_off), "does not match its checksum"),
    "manifest-is-a-list": (
        lambda b, out: _with_manifest(b, lambda m: m["entries"]),
        "holds a list, not the JSON object",
    ),
    "manifest-entry-types": (lambda b, out: _with_manifest(b, _typed_wrong), r"\{namespace, key, sha256, size\}"),
    "format-1": (
        lambda b, out: _with_manifest(b, lambda m: {**m, "format": "mechbook-cache-bundle/1"}),
        "its entries are pickled",
    ),
}


@pytest.mark.parametrize("case", list(BAD_BUNDLES))
def test_an_unsafe_bundle_is_refused_in_one_line_and_writes_nothing(filled, tmp_path, capsys, case):
    _, target, bundle, _ = filled
    damage, message = BAD_BUNDLES[case]
    outside = tmp_path / "outside.pt"
    damage(bundle, outside)
    before = _files(tmp_path)
    assert main(["cache", "import", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert re.search(message, err), err
    assert "Traceback" not in err and "AttributeError" not in err
    assert _files(tmp_path) == before and not outside.exists() and _entries(target) == {}


def test_a_bundle_of_safe_entries_imports_and_each_entry_was_decoded(filled, monkeypatch):
    _, _, bundle, manifest = filled
    decoded = []
    real = cache_bundle.safe_format.loads
    monkeypatch.setattr(cache_bundle.safe_format, "loads", lambda data: decoded.append(len(data)) or real(data))
    assert import_bundle(bundle) == 2
    header = len(bind("0" * 64, b""))
    assert sorted(decoded) == sorted(e["size"] - header for e in manifest["entries"])


def _swapped(bundle: Path) -> None:
    """The two entries' contents swapped, the manifest's sums rewritten to match."""
    with tarfile.open(bundle) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    a, b = sorted(n for n in members if n.startswith("entries/"))
    swap = {a: members[b], b: members[a]}

    def edit(manifest):
        for entry in manifest["entries"]:
            data = swap[f"entries/{entry['namespace']}/{entry['key']}"]
            entry.update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
        return manifest

    _with_manifest(bundle, edit)
    _rewrite(bundle, lambda name, old: (name, swap.get(name, old)))


def test_a_bundle_whose_entries_lie_about_their_keys_is_refused(filled, capsys):
    _, target, bundle, _ = filled
    _swapped(bundle)
    assert main(["cache", "import", str(bundle)]) == 1
    err = capsys.readouterr().err
    assert "holds the result of another key" in err and "nothing was installed" in err and _entries(target) == {}


def test_an_entry_that_names_no_key_is_refused(filled, capsys):
    _, target, bundle, _ = filled
    _replace_entry(bundle, unbind(cache.torch_dumps({"w": 1}))[1], named=None)
    assert main(["cache", "import", str(bundle)]) == 1
    assert "names no key" in capsys.readouterr().err and _entries(target) == {}


def test_a_cache_entry_under_another_keys_name_is_recomputed(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path))
    calls: list = []
    cached("part/x", {"lr": 1e-3}, _compute("small", calls))
    cached("part/x", {"lr": 2e-3}, _compute("large", calls))
    small, large = sorted((tmp_path / "part" / "x").glob("*.pt"), key=lambda p: p.stat().st_mtime_ns)
    save_verified(small, large.read_bytes())  # the other run's bytes, checksum and all
    with pytest.warns(UserWarning, match="holds the result of another key"):
        assert cached("part/x", {"lr": 1e-3}, _compute("small", calls))["tag"] == "small"
    assert len(calls) == 3


def test_an_entry_from_before_entries_named_their_key_still_loads_and_exports_bound(tmp_path, monkeypatch):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "c"))
    calls: list = []
    cached("part/x", "k", _compute("v", calls))
    [path] = (tmp_path / "c" / "part" / "x").glob("*.pt")
    save_verified(path, unbind(path.read_bytes())[1])  # as an older mechbook wrote it
    assert cached("part/x", "k", _compute("v", calls))["tag"] == "v" and len(calls) == 1
    export_bundle(tmp_path / "b.tar")
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "d"))
    assert import_bundle(tmp_path / "b.tar") == 1


def _export(tmp_path, capsys, *args) -> tuple[int, str]:
    code = main(["cache", "export", str(tmp_path / "x.tar"), *args])
    return code, capsys.readouterr().err


def test_export_refuses_an_unknown_profile_naming_the_profiles(filled, tmp_path, capsys):
    code, err = _export(tmp_path, capsys, "--profile", "nope")
    assert code == 1 and err == "error: unknown profile 'nope': the profiles are smoke, cpu, paper\n"
    assert not (tmp_path / "x.tar").exists()


def test_export_from_an_empty_cache_says_there_is_nothing_to_export(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "fresh"))
    for args in ([], ["--profile", "cpu"]):
        code, err = _export(tmp_path, capsys, *args)
        assert code == 1 and err.startswith("error: nothing to export: the cache") and "holds no entries" in err
        assert "execute --force" in err and err.count("\n") == 1, "how to fill it when the chapters come from cache"
    assert not (tmp_path / "x.tar").exists()


def test_export_of_a_profile_without_a_record_offers_the_whole_cache(filled, tmp_path, monkeypatch, capsys):
    source, *_ = filled
    monkeypatch.setenv("MECHBOOK_CACHE", str(source))
    code, err = _export(tmp_path, capsys, "--profile", "cpu")
    assert code == 1 and "no record of which the 'cpu' build used" in err and "without --profile" in err
    assert "execute" not in err


def test_export_with_a_damaged_profile_record_names_its_line(filled, tmp_path, monkeypatch, capsys):
    source, *_ = filled
    monkeypatch.setenv("MECHBOOK_CACHE", str(source))
    with (source / "manifests" / "smoke.jsonl").open("a") as fh:
        fh.write('["not", "a", "record"]\n')
    code, err = _export(tmp_path, capsys, "--profile", "smoke")
    assert code == 1 and "line 4 of" in err and "smoke.jsonl is not a record of an entry" in err


def test_export_leaves_out_an_old_pickled_entry_so_the_bundle_imports(filled, tmp_path, monkeypatch):
    source, target, *_ = filled
    monkeypatch.setenv("MECHBOOK_CACHE", str(source))
    old = source / "part" / "old" / ("1" * 64 + ".pt")
    buf = io.BytesIO()
    torch.save({"w": np.arange(3.0)}, buf)  # what the old torch_dumps wrote
    save_verified(old, buf.getvalue())
    manifest = export_bundle(tmp_path / "all.tar")
    assert "part/old/" + old.name in manifest["missing"] and len(manifest["entries"]) == 3
    monkeypatch.setenv("MECHBOOK_CACHE", str(target))
    assert import_bundle(tmp_path / "all.tar") == 3
