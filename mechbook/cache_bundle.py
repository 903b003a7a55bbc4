"""Cache bundles: the trained models and statistics of a profile's build in one file, so a reader
can skip the training (``python -m mechbook cache export PATH [--profile P]`` / ``cache import PATH``).

A bundle is an uncompressed tar holding ``manifest.json`` and one member ``entries/<namespace>/<file>``
per cache entry. The manifest lists, per entry, its namespace, its key (the entry's file name: the
fingerprint of its key and code) and the sha256 and size of its bytes. ``import`` reads the whole
bundle and checks every entry against the manifest before it installs any; a corrupt, truncated or
tampered bundle is refused with an error and leaves the cache as it was.

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

from mechbook.cache import CACHE_ENV, CacheRootError, atomic_write_bytes, cache_root, load_verified, save_verified

FORMAT = "mechbook-cache-bundle/1"
_ENTRY = re.compile(r"[0-9a-f]{64}\.pt")  # what cached() names its entries (not resume states)


class BundleError(ValueError):
    """A bundle that cannot be installed (what is wrong and what to do is in the message)."""


def profile_entries(profile: str | None, root: Path | None = None) -> list[tuple[str, str]]:
    """``(namespace, file)`` of every entry the profile's build used (every entry in the cache when
    ``profile`` is None), in first-use order, without repeats."""
    root = root or cache_root()
    if profile is None:
        return sorted(
            (str(p.parent.relative_to(root).as_posix()), p.name) for p in root.rglob("*.pt") if _ENTRY.fullmatch(p.name)
        )
    listing = root / "manifests" / f"{profile}.jsonl"
    if not listing.is_file():
        raise FileNotFoundError(
            f"no record of the entries the {profile!r} profile used ({listing} is missing): run the book with "
            f"`python -m mechbook execute --profile {profile}` first (it sets MECHBOOK_PROFILE), or export without --profile"
        )
    seen: dict[tuple[str, str], None] = {}
    for line in listing.read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            seen[(item["namespace"], item["file"])] = None
    return list(seen)


def export_bundle(path: str | Path, profile: str | None = None) -> dict:
    """Write the bundle of ``profile``'s entries to ``path`` (atomically); returns its manifest.
    Entries that are gone or fail their checksum are left out and listed under ``missing``."""
    root = cache_root()
    entries, missing, blobs = [], [], []
    for namespace, name in profile_entries(profile, root):
        data = load_verified(root / namespace / name)
        if data is None:
            missing.append(f"{namespace}/{name}")
            continue
        entries.append(
            {"namespace": namespace, "key": name, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        )
        blobs.append((f"entries/{namespace}/{name}", data))
    manifest = {"format": FORMAT, "profile": profile, "entries": entries, "missing": missing}
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
    if PurePosixPath(namespace).is_absolute() or ".." in member.parts or not _ENTRY.fullmatch(key):
        raise BundleError(f"bundle entry {namespace}/{key} points outside the cache; the bundle is not safe to install")
    return member.as_posix()


def read_bundle(path: str | Path) -> tuple[dict, dict[str, bytes]]:
    """The manifest and the verified bytes of every entry (``"namespace/key"`` -> bytes) of the
    bundle at ``path``; a :class:`BundleError` names the first problem found."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no bundle at {path}: give the file that `python -m mechbook cache export PATH` wrote")
    try:
        with tarfile.open(path, mode="r:") as tar:
            members = {m.name: m for m in tar.getmembers()}
            if "manifest.json" not in members:
                raise BundleError(f"{path} has no manifest.json: it is not a mechbook cache bundle")
            manifest = json.loads(tar.extractfile(members["manifest.json"]).read())
            if manifest.get("format") != FORMAT:
                raise BundleError(
                    f"{path} is a bundle of format {manifest.get('format')!r}; this mechbook reads {FORMAT!r}"
                )
            listed = {_safe(e["namespace"], e["key"]): e for e in manifest["entries"]}
            extra = sorted(set(members) - set(listed) - {"manifest.json"})
            if extra:
                raise BundleError(
                    f"{path} holds files its manifest does not list ({extra[:3]}): it was altered; ask for a fresh bundle"
                )
            out = {}
            for member, entry in listed.items():
                if member not in members or not members[member].isfile():
                    raise BundleError(f"{path} lacks {member}, which its manifest lists: the bundle is incomplete")
                data = tar.extractfile(members[member]).read()
                if len(data) != entry["size"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
                    raise BundleError(
                        f"{member} in {path} does not match its checksum: the bundle is corrupt or was altered; nothing was installed"
                    )
                out[f"{entry['namespace']}/{entry['key']}"] = data
    except (tarfile.TarError, EOFError, OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise BundleError(
            f"{path} cannot be read as a cache bundle ({type(exc).__name__}: {exc}); nothing was installed"
        ) from exc
    return manifest, out


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
            + (f"; left out (missing or damaged): {len(manifest['missing'])}" if manifest["missing"] else "")
        )
    else:
        print(f"installed {import_bundle(args.path)} entries into {cache_root()}")
    return 0
