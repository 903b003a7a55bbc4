"""Cache bundles: the trained models and statistics of a profile's build in one file, so a reader
can skip the training (``python -m mechbook cache export PATH [--profile P]`` / ``cache import PATH``).

A bundle is an uncompressed tar holding ``manifest.json`` and one regular-file member
``entries/<namespace>/<file>`` per cache entry. The manifest lists, per entry, its namespace, its
key (the entry's file name: the fingerprint of its key and code) and the sha256 and size of its
bytes, which begin by naming that key (:func:`mechbook.cache.bind`): an entry under another
entry's name is refused. The sums find damage; the names inside the entries find mislabelling
and swaps; neither proves who made the bundle (anyone can write consistent sums and names), which
is why entries are data that loading cannot run. Entries are in the cache's safe format (:mod:`mechbook.safe_format`): data that
``torch.load(weights_only=True)`` reads, so a bundle from someone else cannot run code. ``import``
reads the whole bundle and checks every entry (its checksum, then that it decodes safely) before
it installs any; a corrupt, truncated, tampered or unsafe bundle is refused with one line naming
the problem and leaves the cache as it was. Bundles of format 1 held pickled entries and are refused.

Which entries a profile used comes from ``<cache>/manifests/<profile>.jsonl``, written by
:func:`mechbook.cache.cached` whenever ``MECHBOOK_PROFILE`` is set (the executor sets it).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import sys
import tarfile
from pathlib import Path, PurePosixPath

from mechbook import safe_format
from mechbook.cache import (
    CACHE_ENV,
    CacheRootError,
    atomic_write_bytes,
    bind,
    cache_root,
    load_verified,
    save_verified,
    unbind,
)
from mechbook.profiles import PROFILES

FORMAT = "mechbook-cache-bundle/2"
"""Format 2: entries in :data:`mechbook.safe_format.FORMAT` (format 1 held pickled entries)."""
_ENTRY = re.compile(r"[0-9a-f]{64}\.pt")  # what cached() names its entries (not resume states)


class BundleError(ValueError):
    """A bundle that cannot be made or installed (what is wrong and what to do is in the message)."""


def profile_entries(profile: str | None, root: Path | None = None) -> list[tuple[str, str]]:
    """``(namespace, file)`` of every entry the profile's build used (every entry in the cache when
    ``profile`` is None), in first-use order, without repeats."""
    root = root or cache_root()
    if profile is not None and profile not in PROFILES:
        raise BundleError(f"unknown profile {profile!r}: the profiles are {', '.join(PROFILES)}")
    every = sorted(
        (str(p.parent.relative_to(root).as_posix()), p.name) for p in root.rglob("*.pt") if _ENTRY.fullmatch(p.name)
    )
    if not every:
        raise BundleError(
            f"nothing to export: the cache {root} holds no entries. A build fills it, but chapters executed "
            f"before with another cache are reused as executed and fill nothing: run `python -m mechbook execute "
            f"--force` to recompute them into this cache, or set {CACHE_ENV} to the cache they used"
        )
    if profile is None:
        return every
    listing = root / "manifests" / f"{profile}.jsonl"
    if not listing.is_file():
        raise BundleError(
            f"the cache {root} has {len(every)} entries but no record of which the {profile!r} build used "
            f"({listing} is missing: builds since the cache was filled did not run with that profile); "
            f"export the whole cache without --profile"
        )
    seen: dict[tuple[str, str], None] = {}
    for number, line in enumerate(listing.read_text().splitlines(), 1):
        if line.strip():
            try:
                item = json.loads(line)
                seen[(item["namespace"], item["file"])] = None
            except (ValueError, KeyError, TypeError):
                raise BundleError(
                    f"line {number} of {listing} is not a record of an entry: delete the file (the next "
                    f"`python -m mechbook execute --profile {profile}` writes it again) or export without --profile"
                ) from None
    return list(seen)


def export_bundle(path: str | Path, profile: str | None = None) -> dict:
    """Write the bundle of ``profile``'s entries to ``path`` (atomically); returns its manifest.
    Entries that are gone, fail their checksum or are not in the safe format (pickled by an older
    mechbook) are left out and listed under ``missing``; a :class:`BundleError` when none is left."""
    root = cache_root()
    entries, missing, blobs = [], [], []
    listed = profile_entries(profile, root)
    for namespace, name in listed:
        data = load_verified(root / namespace / name)
        named, payload = unbind(data) if data is not None else (None, b"")
        if data is None or named not in (None, name.removesuffix(".pt")) or _undecodable(payload):
            missing.append(f"{namespace}/{name}")
            continue
        data = bind(name.removesuffix(".pt"), payload)  # an entry from before entries named their key
        entries.append(
            {"namespace": namespace, "key": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        )
        blobs.append((f"entries/{namespace}/{name}", data))
    if not entries:
        which = f"the {profile!r} build used" if profile else "in the cache"
        raise BundleError(
            f"nothing to export: none of the {len(listed)} entries {which} is there and loadable (gone, damaged or "
            f"pickled by an older mechbook); a build recomputes them"
        )
    manifest = {
        "format": FORMAT,
        "entry_format": safe_format.FORMAT,
        "profile": profile,
        "entries": entries,
        "missing": missing,
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for member, data in [("manifest.json", json.dumps(manifest, indent=1).encode()), *blobs]:
            info = tarfile.TarInfo(member)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    atomic_write_bytes(Path(path), buf.getvalue())
    return manifest


def _safe(namespace: str, key: str) -> str:
    member = PurePosixPath("entries", namespace, key)
    if PurePosixPath(namespace).is_absolute() or ".." in member.parts:
        raise BundleError(f"bundle entry {namespace}/{key} points outside the cache; the bundle is not safe to install")
    if not _ENTRY.fullmatch(key):
        raise BundleError(
            f"bundle entry {namespace}/{key} is not named like a cache entry (64 hex digits, .pt); the bundle was "
            f"altered, nothing was installed"
        )
    return member.as_posix()


def _members(tar: tarfile.TarFile, path: str | Path) -> dict[str, tarfile.TarInfo]:
    """The tar's members by name; a :class:`BundleError` for one whose name leaves the folder it is
    read into (absolute, ``..``) or that is not a regular file (a link, a folder, a device)."""
    members = {}
    for member in tar.getmembers():
        name = PurePosixPath(member.name)
        if name.is_absolute() or ".." in name.parts:
            raise BundleError(
                f"{path} holds the member {member.name!r}, which points outside the cache: the bundle is not safe "
                f"to install; nothing was installed"
            )
        if not member.isfile():
            kinds = ((member.issym, "a symbolic link"), (member.islnk, "a hard link"), (member.isdir, "a folder"))
            what = next((name for test, name in kinds if test()), "a special file")
            raise BundleError(
                f"{path} holds {what}, {member.name!r}, where a bundle holds only regular files: it is not safe "
                f"to install; nothing was installed"
            )
        members[member.name] = member
    return members


_FIELDS = {"namespace": str, "key": str, "sha256": str, "size": int}


def _manifest(raw: object, path: str | Path) -> dict:
    """The manifest ``raw`` (parsed JSON) if it is one that ``export`` writes; a
    :class:`BundleError` saying what it is otherwise."""
    if not isinstance(raw, dict):
        kind = {list: "a list", str: "a string"}.get(type(raw), "a " + type(raw).__name__)
        raise BundleError(
            f"the manifest.json of {path} holds {kind}, not the JSON object `cache export` writes: it is not a "
            f"mechbook cache bundle; nothing was installed"
        )
    if raw.get("format") != FORMAT:
        why = (
            ": its entries are pickled, which this mechbook does not load; export it again with this mechbook"
            if raw.get("format") == "mechbook-cache-bundle/1"
            else ""
        )
        raise BundleError(f"{path} is a bundle of format {raw.get('format')!r}; this mechbook reads {FORMAT!r}{why}")
    entries = raw.get("entries")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and all(type(e.get(k)) is t for k, t in _FIELDS.items()) for e in entries
    ):
        raise BundleError(
            f"the manifest.json of {path} does not list its entries as {{namespace, key, sha256, size}}: the bundle "
            f"was altered; ask for a fresh one. Nothing was installed"
        )
    return raw


def read_bundle(path: str | Path) -> tuple[dict, dict[str, bytes]]:
    """The manifest and the verified bytes of every entry (``"namespace/key"`` -> bytes) of the
    bundle at ``path``: each matches its checksum and decodes in the safe format
    (:func:`mechbook.safe_format.loads`, which runs no code). A :class:`BundleError` names the
    first problem found."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no bundle at {path}: give the file that `python -m mechbook cache export PATH` wrote")
    try:
        with tarfile.open(path, mode="r:") as tar:
            members = _members(tar, path)
            if "manifest.json" not in members:
                raise BundleError(f"{path} has no manifest.json: it is not a mechbook cache bundle")
            manifest = _manifest(json.loads(tar.extractfile(members["manifest.json"]).read()), path)
            listed = {_safe(e["namespace"], e["key"]): e for e in manifest["entries"]}
            extra = sorted(set(members) - set(listed) - {"manifest.json"})
            if extra:
                raise BundleError(
                    f"{path} holds files its manifest does not list ({extra[:3]}): it was altered; ask for a fresh bundle"
                )
            out = {}
            for member, entry in listed.items():
                if member not in members:
                    raise BundleError(f"{path} lacks {member}, which its manifest lists: the bundle is incomplete")
                data = tar.extractfile(members[member]).read()
                if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                    raise BundleError(
                        f"{member} in {path} does not match its checksum: the bundle is corrupt or was altered; nothing was installed"
                    )
                named, payload = unbind(data)
                if named != entry["key"].removesuffix(".pt"):
                    raise BundleError(
                        f"{member} in {path} "
                        + ("names no key" if named is None else f"holds the result of another key ({named[:16]}...)")
                        + ": the bundle was altered or mislabelled (or made by an older mechbook: export it again); "
                        "nothing was installed"
                    )
                problem = _undecodable(payload)
                if problem:
                    raise BundleError(f"{member} in {path} is {problem}; nothing was installed")
                out[f"{entry['namespace']}/{entry['key']}"] = data
    except BundleError:
        raise
    except (tarfile.TarError, EOFError, OSError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if "unexpected end of data" in str(exc):
            raise BundleError(
                f"{path} is cut short (the download or copy did not finish): fetch it again; nothing was installed"
            ) from exc
        raise BundleError(
            f"{path} cannot be read as a cache bundle ({type(exc).__name__}: {exc}); nothing was installed"
        ) from exc
    return manifest, out


def _undecodable(data: bytes) -> str | None:
    """Why ``data`` is not a cache entry in the safe format (None when it decodes): the check
    ``import`` and ``export`` make of every entry, without running anything in it."""
    try:
        safe_format.loads(data)
    except safe_format.NotSafeFormat as exc:
        return str(exc)
    except Exception as exc:  # a class's own state check (a tokenizer's JSON) refusing the stored state
        return f"not a value mechbook can rebuild ({type(exc).__name__}: {exc})"
    return None


def import_bundle(path: str | Path) -> int:
    """Install every entry of the bundle at ``path`` into the cache, after all passed their
    checks; returns how many were installed."""
    _, entries = read_bundle(path)
    root = cache_root()
    for name, data in entries.items():
        save_verified(root / name, data)
    return len(entries)


def main(argv: list[str]) -> int:
    """``cache export PATH [--profile P]`` | ``cache import PATH``."""
    parser = argparse.ArgumentParser(prog="python -m mechbook cache", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    exp = sub.add_parser("export", help="write the cache entries of a profile's build into one bundle file")
    exp.add_argument("path")
    exp.add_argument(
        "--profile", default=None, help="only the entries this profile's last build used (default: the whole cache)"
    )
    imp = sub.add_parser("import", help="verify a bundle and install its entries into the cache")
    imp.add_argument("path")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except (BundleError, FileNotFoundError, CacheRootError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except OSError as exc:
        print(f"error: {_os_problem(args, exc)}", file=sys.stderr)
    return 1


def _os_problem(args: argparse.Namespace, exc: OSError) -> str:
    """One line for a file-system failure of ``export`` (the target) or ``import`` (the cache)."""
    where = exc.filename or args.path
    if args.action == "export":
        return f"cannot write the bundle {args.path} ({exc.strerror or exc} at {where}): choose a path you can write to"
    return (
        f"cannot install into the cache {cache_root()} ({exc.strerror or exc} at {where}): make it writable or set "
        f"{CACHE_ENV} to a folder you can write to; what was installed before this entry is intact"
    )


def _run(args: argparse.Namespace) -> int:
    if args.action == "export":
        manifest = export_bundle(args.path, args.profile)
        size = Path(args.path).stat().st_size
        print(
            f"{args.path}: {len(manifest['entries'])} entries, {size / 2**20:.1f} MiB"
            + (
                f"; left out (missing, damaged or pickled by an older mechbook): {len(manifest['missing'])}"
                if manifest["missing"]
                else ""
            )
        )
    else:
        print(f"installed {import_bundle(args.path)} entries into {cache_root()}")
    return 0
