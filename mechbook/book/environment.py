"""The environment of the chapters' kernels, and the part of it that decides their results.

Kernels run in each notebook's own folder, so every path an environment variable gives
(:data:`PATH_ENV`) is made absolute against the caller's working directory before any kernel
starts (:func:`absolute_paths`). The executor's cache key covers the *contents* of the data that
environment variables choose (:data:`DATA_ENV`, a SHA-256 of the file or of every file of the
folder, memoised by path, size and modification time in ``_build/digests.json``), the values of
the variables that choose device or network (:data:`VALUE_ENV`) and the versions of the numeric
libraries (:data:`VERSIONED`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, MutableMapping
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from mechbook.assign_add.release import unset_release_folder
from mechbook.cache import sha256_file

#: Variables holding paths; relative ones are made absolute against the caller's directory.
PATH_ENV: tuple[str, ...] = (
    "MECHBOOK_CACHE",
    "MECHBOOK_TINYSTORIES",
    "MECHBOOK_AA_RELEASE",
    "MECHBOOK_MATHJAX",
    "HF_HOME",
    "HF_HUB_CACHE",
)
#: Variables choosing data: the cache key holds a digest of what they name.
DATA_ENV: tuple[str, ...] = ("MECHBOOK_TINYSTORIES", "MECHBOOK_AA_RELEASE")
#: The variable naming a copy of the authors' released run (:mod:`mechbook.assign_add.release`).
RELEASE_ENV = "MECHBOOK_AA_RELEASE"
#: Variables choosing device or network: the cache key holds their values.
VALUE_ENV: tuple[str, ...] = ("MECHBOOK_DEVICE", "MECHBOOK_OFFLINE", "HF_HUB_OFFLINE")
#: Distributions whose versions are part of the cache key.
VERSIONED: tuple[str, ...] = ("torch", "numpy")


def absolute_paths(environ: Mapping[str, str], cwd: Path | None = None) -> dict[str, str]:
    """``{variable: absolute path}`` for each variable of :data:`PATH_ENV` in ``environ`` whose
    value is relative (or starts with ``~``), resolved against ``cwd`` (default: the current
    directory); variables already absolute are left out."""
    base = Path.cwd() if cwd is None else Path(cwd)
    changed = {}
    for name in PATH_ENV:
        value = environ.get(name)
        if not value:
            continue
        path = Path(value).expanduser()
        if not path.is_absolute():
            path = base / path
        if str(path) != value:
            changed[name] = os.path.normpath(path)
    return changed


@contextlib.contextmanager
def patched_environ(values: Mapping[str, str]) -> Iterator[None]:
    """Set ``values`` in ``os.environ`` (kernels started inside inherit them), then restore."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class DigestMemo:
    """SHA-256 of files, memoised by ``(size, mtime_ns)`` per absolute path in a JSON file.

    A file whose size or modification time changed is read again; an unreadable memo is
    ignored (and rewritten), so a corrupt memo never gives a stale digest of a changed file.
    """

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, list[Any]] = {}
        self.dirty = False
        if path is not None and path.exists():
            try:
                loaded = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(loaded, dict):
                    self.entries = loaded
            except (OSError, ValueError):
                self.entries = {}

    def file(self, path: Path) -> str:
        """The SHA-256 of one file's bytes."""
        stat = path.stat()
        key = str(path.resolve())
        held = self.entries.get(key)
        if isinstance(held, list) and held[:2] == [stat.st_size, stat.st_mtime_ns]:
            return held[2]
        digest = sha256_file(path)
        self.entries[key] = [stat.st_size, stat.st_mtime_ns, digest]
        self.dirty = True
        return digest

    def tree(self, path: Path) -> str:
        """The SHA-256 of a file, or of a folder's files (relative names and their digests, in
        sorted order); ``missing`` for a path that does not exist."""
        if path.is_file():
            return self.file(path)
        if not path.is_dir():
            return "missing"
        digest = hashlib.sha256()
        for item in sorted(p for p in path.rglob("*") if p.is_file()):
            digest.update(f"{item.relative_to(path).as_posix()}\0{self.file(item)}\n".encode())
        return digest.hexdigest()

    def save(self) -> None:
        """Write the memo atomically when it changed; a memo that cannot be written is skipped
        (digests are then recomputed next time)."""
        if self.path is None or not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
            tmp.write_text(json.dumps(self.entries, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)
            self.dirty = False
        except OSError:
            pass


def versions() -> dict[str, str | None]:
    """The installed versions of :data:`VERSIONED` (None where not installed)."""
    found: dict[str, str | None] = {}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _released_names() -> set[str]:
    """The released files' names, from the package's checksum file (``<hex>  <name>`` lines),
    read without importing the loader (and so torch) into the executor."""
    text = (resources.files("mechbook.assign_add") / "release.sha256").read_text()
    return {line.split()[-1] for line in text.splitlines() if line.strip()}


def release_layout(folder: Path) -> list[str]:
    """The released file names (``model_state_dict.pth``, ``checkpoint_step_N.pth``) present in
    ``folder`` or its ``checkpoints/``, found by name alone (nothing is read or hashed: a huge
    folder that is not a release costs one listing); empty when there is none."""
    released = _released_names()
    found = set()
    for where in (folder, folder / "checkpoints"):
        try:
            with os.scandir(where) as entries:
                found |= {e.name for e in entries if e.name in released and e.is_file()}
        except OSError:
            continue
    return sorted(found)


def release_digest(memo: DigestMemo, folder: Path) -> str:
    """The SHA-256 of the released files ``folder`` holds (:func:`release_layout`: their names
    and digests, the ``checkpoints/`` copy first, as the loader finds them); other files in the
    folder are neither read nor remembered."""
    digest = hashlib.sha256()
    for name in release_layout(folder):
        path = next(p for p in (folder / "checkpoints" / name, folder / name) if p.is_file())
        digest.update(f"{name}\0{memo.file(path)}\n".encode())
    return digest.hexdigest()


def key_environment(memo: DigestMemo, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What of the environment decides a chapter's outputs: for :data:`RELEASE_ENV` the digest of
    the released files it holds (:func:`release_digest`; unset, of the folder the loader reads
    then), for the other
    variables of :data:`DATA_ENV` the digest of what they name (not the path: the same bytes
    elsewhere give the same key), the values of :data:`VALUE_ENV`, and :func:`versions`."""
    env = os.environ if environ is None else environ
    absolute = {**env, **absolute_paths(env)}
    data = {}
    for name in DATA_ENV:
        value = absolute.get(name)
        if name == RELEASE_ENV:  # only the released files, never what else the folder holds
            folder = Path(value) if value else unset_release_folder()  # unset: where the loader looks
            data[name] = release_digest(memo, folder) if folder.is_dir() else None
        elif not value:
            data[name] = None
        else:
            data[name] = memo.tree(Path(value))
    return {
        "data": data,
        "values": {k: env.get(k) for k in VALUE_ENV},
        "versions": versions(),
    }


def check_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """One line per environment variable of the book that is set but unusable, checked once at
    start-up by ``python -m mechbook``: ``MECHBOOK_CACHE`` a folder (created if missing),
    ``MECHBOOK_TINYSTORIES`` an existing file, ``MECHBOOK_AA_RELEASE`` an existing folder holding
    released files by name (:func:`release_layout`, before anything is hashed),
    ``MECHBOOK_DEVICE`` a device this machine has, ``MECHBOOK_PROFILE`` a plain name. Empty when all
    is well."""
    from mechbook.cache import CacheRootError, cache_root, manifest_profile
    from mechbook.device import DEVICE_ENV, DeviceUnavailable, check_device

    env = os.environ if environ is None else environ
    problems = []
    with patched_environ({k: v for k, v in env.items() if k in PATH_ENV}):
        try:
            cache_root()
        except CacheRootError as exc:
            problems.append(str(exc))
    for name, kind, ok in (
        ("MECHBOOK_TINYSTORIES", "an existing TinyStories text file", Path.is_file),
        ("MECHBOOK_AA_RELEASE", "an existing folder holding the release (or its checkpoints/)", Path.is_dir),
    ):
        value = env.get(name)
        if value and not ok(Path(value).expanduser()):
            state = "does not exist" if not Path(value).expanduser().exists() else "is the wrong kind of path"
            problems.append(f"{name}={value} {state}: set it to {kind}, or unset it")
        elif value and name == RELEASE_ENV and not release_layout(Path(value).expanduser()):
            problems.append(
                f"{name}={value} holds no released file (model_state_dict.pth or checkpoint_step_N.pth, in it "
                f"or in its checkpoints/): set it to {kind}, or unset it"
            )
    try:
        manifest_profile(dict(env))
    except ValueError as exc:
        problems.append(str(exc))
    if env.get(DEVICE_ENV):
        try:
            check_device(env[DEVICE_ENV])
        except DeviceUnavailable as exc:
            problems.append(str(exc))
    return problems


def make_paths_absolute(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Rewrite the relative paths of :data:`PATH_ENV` in ``environ`` (default ``os.environ``) as
    absolute ones, and return what changed."""
    env = os.environ if environ is None else environ
    changed = absolute_paths(env)
    env.update(changed)
    return changed


def check_inputs(needs: Mapping[str, list[str]], stems: list[str]) -> list[str]:
    """One line per input that the chapters ``stems`` (about to run) need and cannot get, found
    before the first chapter starts (``execute`` and ``build`` call it): ``needs`` maps
    ``tinystories`` and ``release`` to the chapters that read them (``mechbook/book/pages.json``).
    Each input is resolved as its chapter would (a set variable, the user cache, a download), and
    its line is that resolver's whole advice."""
    from mechbook.assign_add.release import FINAL, ReleaseNotFound, release_path
    from mechbook.data import TinyStoriesUnavailable, tinystories_file

    problems = []
    for name, resolve in (("tinystories", tinystories_file), ("release", lambda: release_path(FINAL))):
        readers = [s for s in stems if s in needs.get(name, [])]
        if not readers:
            continue
        try:
            resolve()
        except (TinyStoriesUnavailable, ReleaseNotFound, FileNotFoundError, ValueError) as exc:
            problems.append(f"{', '.join(readers)} cannot start: {exc}")
    return problems
