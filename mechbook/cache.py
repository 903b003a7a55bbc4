"""On-disk cache for trained models and computed statistics (every chapter that trains).

An entry is keyed by everything that determines it: a namespace (``part/name``), a JSON-able
description (the config dataclass, a data fingerprint, the seed) and, derived rather than listed,
the code: the parsed code, docstrings and comments left out (:func:`code_fingerprint`), of every
``mechbook`` module the computation can reach (the static import closure of the module that calls
:func:`cached` and of the modules ``compute`` refers to), plus the versions of Python, torch and
numpy. Rewording a docstring or a comment therefore retrains nothing. The closure does not follow imports into the modules of
:data:`UNKEYED` (progress bars, records, profiles, claims, charts, chapters, the book's
machinery, this cache itself, console notices, worker lifetime, argument checks): their code cannot change a cached value, so rewording a progress
bar or a chapter's prose retrains nothing. They count only where the computation itself is
written in one (a chapter module that calls :func:`cached` with its own ``compute``).
:mod:`mechbook.determinism`, under which every computation runs, is always in. Data files enter keys by their contents
(:func:`file_digest`). Files are written atomically (temporary file, then rename) next to a
``.sha256`` sidecar; an entry whose bytes do not match its checksum, or that fails to load, is
reported and recomputed, never silently used. Each entry's bytes begin by naming the fingerprint
it was computed for (:func:`bind`): one found under another key's name (a mislabelled or altered
copy) is reported and recomputed too. Entries are stored as data
(:mod:`mechbook.safe_format`, read with ``torch.load(weights_only=True)``), so loading one never
runs code; one in any other format (pickled by an older mechbook) is recomputed. A write that fails (read-only or full disk) warns
and still returns the computed value.

With ``MECHBOOK_PROFILE`` set (the executor sets it; a plain name, :func:`manifest_profile`), every
entry served is listed in ``<root>/manifests/<profile>.jsonl``, which ``python -m mechbook cache
export`` bundles. An entry path that is not a file (a folder put there) is reported and recomputed.

Root: ``$MECHBOOK_CACHE`` if set, else ``~/.cache/mechbook``.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import platform
import re
import sys
import tempfile
import types
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from mechbook.determinism import deterministic
from mechbook.notices import notice

T = TypeVar("T")


CACHE_ENV = "MECHBOOK_CACHE"
PROFILE_ENV = "MECHBOOK_PROFILE"


def manifest_profile(environ: dict[str, str] | None = None) -> str | None:
    """``$MECHBOOK_PROFILE``, the name of the manifest served entries are listed in (None: unset);
    a :class:`ValueError` naming the variable when it is not a plain name (letters, digits, ``-``,
    ``_``), which could put the manifest outside the cache."""
    value = (os.environ if environ is None else environ).get(PROFILE_ENV)
    if not value:
        return None
    if not re.fullmatch(r"[A-Za-z0-9_-]+", value):
        raise ValueError(
            f"{PROFILE_ENV}={value!r} is not a profile name (letters, digits, - and _): set it to one, or unset it"
        )
    return value


class CacheRootError(NotADirectoryError):
    """``$MECHBOOK_CACHE`` (or the default cache folder) cannot be a folder; the message says why."""


def cache_root() -> Path:
    """The cache folder (created on demand): ``$MECHBOOK_CACHE`` or ``~/.cache/mechbook``; a
    :class:`CacheRootError` naming the variable when that is a file or cannot be created."""
    value = os.environ.get(CACHE_ENV)
    root = Path(value).expanduser() if value else Path.home() / ".cache" / "mechbook"
    named = f"{CACHE_ENV}={value}" if value else f"the cache folder {root}"
    blocker = next((p for p in (root, *root.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        what = "is a file" if blocker == root else f"lies under the file {blocker}"
        raise CacheRootError(f"{named} {what}, not a folder: set {CACHE_ENV} to a folder (it is created if missing)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheRootError(
            f"{named} cannot be created ({exc.strerror}): set {CACHE_ENV} to a folder you can write to"
        ) from exc
    return root


def _canonical(obj: Any) -> Any:
    """A JSON-ready, order-independent form of configs, arrays, paths and containers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            "__dataclass__": type(obj).__name__,
            **{f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)},
        }
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, bytes):
        return hashlib.sha256(obj).hexdigest()
    if hasattr(obj, "tobytes") and hasattr(obj, "shape"):  # numpy array
        return {"shape": list(obj.shape), "dtype": str(obj.dtype), "sha256": hashlib.sha256(obj.tobytes()).hexdigest()}
    if hasattr(obj, "detach") and hasattr(obj, "shape"):  # torch tensor
        arr = obj.detach().cpu().contiguous().numpy()
        return _canonical(arr)
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    raise TypeError(f"cannot fingerprint a {type(obj).__name__}; pass plain data, a dataclass or an array")


def fingerprint(*parts: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``parts`` (configs, arrays, strings ...)."""
    text = json.dumps(_canonical(list(parts)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: str | Path) -> str:
    """SHA-256 (hex) of a file's contents, memoised by (absolute path, size, mtime): loaders of
    data files chosen by environment variables put this into their cache keys."""
    file = Path(path).resolve()
    st = file.stat()
    memo = (str(file), st.st_size, st.st_mtime_ns)
    if memo not in _DIGESTS:
        _DIGESTS[memo] = sha256_file(file)
    return _DIGESTS[memo]


def sha256_file(path: str | Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks (no memo: see :func:`file_digest`)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_root() -> Path:
    """The folder that holds the imported ``mechbook`` package."""
    return Path(__file__).resolve().parent.parent


#: Modules (and their submodules) whose code cannot change a cached value: they show progress,
#: record a chapter's outputs, name the profiles and write the reader's note, word the claims, draw
#: charts, present chapters, run the executor and the site, or store and load entries (this
#: module: what a computation returns does not depend on how it is keyed or written). A
#: computation's code dependency does not follow imports into them. A new module is followed
#: until it is listed here: an unlisted one costs a retrain, a wrongly listed one a stale result,
#: so list only modules that print, record, draw or store, never one that computes what a cached
#: value holds.
UNKEYED: tuple[str, ...] = (
    "mechbook.progress",
    "mechbook.records",
    "mechbook.profiles",
    "mechbook.claims",
    "mechbook.viz",
    "mechbook.chapters",
    "mechbook.book",
    "mechbook.site",
    "mechbook.cache",
    "mechbook.notices",
    "mechbook.lifeline",
    "mechbook.arguments",
    "mechbook.validation",
)


def _is_ours(name: str) -> bool:
    return name == "mechbook" or name.startswith("mechbook.")


def _within(name: str, packages: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def is_unkeyed(name: str) -> bool:
    """Whether module ``name`` is one of :data:`UNKEYED` or inside one."""
    return _within(name, UNKEYED)


def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for file in (base.with_suffix(".py"), base / "__init__.py"):
        if file.is_file():
            return file
    return None


def imports_of(tree: ast.AST, root: Path, name: str = "", is_pkg: bool = False) -> set[str]:
    """The ``mechbook`` modules (under ``root``) that the parsed code ``tree`` imports anywhere,
    their parent packages included; relative imports resolve against module ``name`` (a package
    when ``is_pkg``). Used by :func:`module_closure` and, for a notebook's cells, by the executor's
    key (:func:`mechbook.book.run.cache_key`)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if _module_file(f"{base}.{a.name}", root))
    out = set()
    for mod in filter(_is_ours, found):
        parts = mod.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in out if _module_file(m, root)}


@functools.cache
def _imported(name: str, file: str, size: int, mtime: int, root: str) -> tuple[str, ...]:
    """:func:`imports_of` module ``name`` (at ``file``), sorted (memoised by the file's size and mtime)."""
    tree = _parsed(file, size, mtime)
    return tuple(sorted(imports_of(tree, Path(root), name, Path(file).name == "__init__.py")))


def module_closure(modules: Iterable[str], root: Path | None = None, unkeyed: Iterable[str] | None = None) -> list[str]:
    """Every ``mechbook`` module reachable from ``modules`` through imports (static, via ``ast``:
    imports inside functions count), with their parent packages; sorted. ``modules`` themselves
    are always in; a module of ``unkeyed`` (default :data:`UNKEYED`) reached by an import or as a
    parent package is not, nor is anything reached only through it. The executor passes
    ``unkeyed=()``: a notebook's prose, charts and records come from every module it reaches."""
    root = root or package_root()
    stops = UNKEYED if unkeyed is None else tuple(unkeyed)
    starts = {m for m in modules if _is_ours(m)}
    todo = list(starts)
    for m in starts:
        parts = m.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        file = _module_file(name, root)
        if name in seen or file is None or (_within(name, stops) and name not in starts):
            continue
        seen.add(name)
        st = file.stat()
        todo.extend(_imported(name, str(file), st.st_size, st.st_mtime_ns, str(root)))
    return sorted(seen)


def keyed_modules(root: Path | None = None) -> list[str]:
    """The ``mechbook`` modules whose code keys some cached result: the import closure
    (:func:`module_closure`) of every module that calls :func:`cached`. An edit to one of them
    beyond a docstring or a comment re-keys its entries, so new code a chapter needs goes into a
    module outside this list (DEVELOPING.md, "Cache keys"). A call through another name is not
    seen; every cached computation calls ``cached`` by that name."""
    root = root or package_root()
    callers = []
    for file in sorted((root / "mechbook").rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        calls = (n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
        if any(call.func.id == "cached" for call in calls):
            rel = file.relative_to(root).with_suffix("")
            callers.append(".".join(p for p in rel.parts if p != "__init__"))
    callers = [m for m in callers if m != __name__]
    return module_closure(callers, root) if callers else []


def _is_prose(stmt: ast.stmt) -> bool:
    """A statement that is only a string literal: a docstring, or a comment written as a string."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


@functools.cache
def _parsed(file: str, size: int, mtime: int) -> ast.Module:
    """The parsed module at ``file`` with every statement that is only a string literal
    (docstrings of the module, its classes and functions, attribute docstrings) removed; comments,
    blank lines and line numbers never reach the tree. Parsed once per size and mtime for both
    :func:`_imported` (a string statement holds no import) and :func:`_code_of`."""
    tree = ast.parse(Path(file).read_text(), filename=file)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list):
                setattr(node, field, [s for s in statements if not _is_prose(s)])
    return tree


@functools.cache
def _code_of(file: str, size: int, mtime: int) -> str:
    """SHA-256 of ``ast.dump`` of :func:`_parsed` (memoised by size and mtime)."""
    return hashlib.sha256(ast.dump(_parsed(file, size, mtime)).encode()).hexdigest()


def code_fingerprint(file: str | Path) -> str:
    """SHA-256 of a module's code without its docstrings and comments: a docstring or comment edit
    leaves it unchanged, a changed constant or statement does not. Used by :func:`module_digests`
    for the cache's keys and the executor's (:func:`mechbook.book.run.cache_key`)."""
    st = Path(file).stat()
    return _code_of(str(file), st.st_size, st.st_mtime_ns)


def module_digests(
    modules: Iterable[str], root: Path | None = None, unkeyed: Iterable[str] | None = None
) -> dict[str, str]:
    """``{module: code_fingerprint}`` over :func:`module_closure` of ``modules`` (same ``root`` and
    ``unkeyed``), sorted by module name."""
    root = root or package_root()
    out = {}
    for name in module_closure(modules, root, unkeyed):
        file = _module_file(name, root)
        assert file is not None
        out[name] = code_fingerprint(file)
    return out


def code_digest(modules: Iterable[str], root: Path | None = None) -> str:
    """SHA-256 over the code (:func:`module_digests`: docstrings and comments left out) of
    :func:`module_closure` of ``modules`` and the versions of Python, torch and numpy: what a
    cached result's code dependency is."""
    import numpy
    import torch

    digest = hashlib.sha256(
        f"python {platform.python_version()} torch {torch.__version__} numpy {numpy.__version__}".encode()
    )
    for name, code in module_digests(modules, root).items():
        digest.update(f"\0{name}\0{code}".encode())
    return digest.hexdigest()


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            out |= _names(const)
    return out


def _module_of(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return getattr(value, "__module__", None)
    return type(value).__module__


def computation_modules(compute: Callable[..., Any], caller: str | None = None) -> set[str]:
    """The ``mechbook`` modules a cached computation starts from: the caller's module, the module
    of ``compute`` and of every global it names (functions, classes, modules), and the types of
    the objects it closes over (a model passed in brings the module that defines its forward).
    The caller's and ``compute``'s modules are always in (the computation is written there), and
    :mod:`mechbook.determinism` (:func:`cached` runs it under :func:`deterministic`); the others
    only when they are not :data:`UNKEYED`."""
    func = compute
    while isinstance(func, functools.partial):
        func = func.func
    func = getattr(func, "__func__", func)
    written = {caller, getattr(func, "__module__", None), deterministic.__module__}
    found: set[str | None] = set()
    code = getattr(func, "__code__", None)
    if code is not None:
        glob = getattr(func, "__globals__", {})
        found.update(_module_of(glob[n]) for n in _names(code) if n in glob)
        for cell in getattr(func, "__closure__", None) or ():
            try:
                found.add(_module_of(cell.cell_contents))
            except ValueError:  # an empty cell
                continue
    return {m for m in written if m and _is_ours(m)} | {m for m in found if m and _is_ours(m) and not is_unkeyed(m)}


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_verified(path: Path, data: bytes) -> None:
    """Atomically write ``data`` and its ``.sha256`` sidecar (the sidecar last)."""
    atomic_write_bytes(path, data)
    atomic_write_bytes(path.with_name(path.name + ".sha256"), hashlib.sha256(data).hexdigest().encode())


def load_verified(path: Path) -> bytes | None:
    """Return the bytes at ``path`` if they match their sidecar checksum, else None (with a warning
    when a file is there but damaged)."""
    side = path.with_name(path.name + ".sha256")
    if not path.exists() or not side.exists():
        return None
    if not (path.is_file() and side.is_file()):
        notice(f"cache entry {path} (or its checksum) is not a file; recomputing it", stacklevel=3)
        return None
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != side.read_text().strip():
        notice(f"cache file {path} does not match its checksum; recomputing it", stacklevel=3)
        return None
    return data


ENTRY_HEADER = b"mechbook-entry "
"""What :func:`bind` puts before an entry's bytes, followed by the fingerprint it was computed for."""


def bind(fingerprint: str, payload: bytes) -> bytes:
    """An entry's stored bytes: a header naming the ``fingerprint`` (its file's name, the key and
    code it was computed for), a newline, then ``payload``; so an entry copied or swapped onto
    another key's file says so when read (:func:`unbind`)."""
    return ENTRY_HEADER + fingerprint.encode("ascii") + b"\n" + payload


def unbind(data: bytes) -> tuple[str | None, bytes]:
    """(the fingerprint an entry names, its payload) of stored bytes; (None, data) for an entry
    written before entries named their key."""
    if not data.startswith(ENTRY_HEADER):
        return None, data
    named, _, payload = data[len(ENTRY_HEADER) :].partition(b"\n")
    return named.decode("ascii", errors="replace"), payload


def torch_dumps(obj: Any) -> bytes:
    """``obj`` in the safe format (:func:`mechbook.safe_format.dumps`: tensors, arrays, frames,
    plain data, mechbook dataclasses): the serialiser of every cache entry and resume state. A
    value it cannot hold raises :class:`~mechbook.safe_format.UnsafeValue` naming where it sits."""
    from mechbook import safe_format

    return safe_format.dumps(obj)


def torch_loads(data: bytes) -> Any:
    """The value :func:`torch_dumps` wrote, on the CPU, read with ``torch.load(weights_only=True)``
    (:func:`mechbook.safe_format.loads`): nothing in ``data`` runs code. A file in any other format
    (an entry pickled by an older mechbook, a crafted pickle) raises
    :class:`~mechbook.safe_format.NotSafeFormat`, which :func:`cached` reports and recomputes."""
    from mechbook import safe_format

    return safe_format.loads(data)


def _note_served(namespace: str, path: Path) -> None:
    """Append the entry to ``<root>/manifests/$MECHBOOK_PROFILE.jsonl`` (when that is set)."""
    profile = manifest_profile()
    if not profile:
        return
    line = json.dumps({"namespace": namespace, "file": path.name}) + "\n"
    try:
        folder = cache_root() / "manifests"
        folder.mkdir(exist_ok=True)
        with (folder / f"{profile}.jsonl").open("a") as fh:
            fh.write(line)
    except OSError as exc:
        warnings.warn(f"could not list cache entry {path} in the {profile!r} manifest ({exc})", stacklevel=3)


def entry_path(namespace: str, key: Any, modules: Iterable[str]) -> Path:
    """Where :func:`cached` keeps the entry of ``key`` computed by code in ``modules``."""
    if not namespace or namespace.startswith("/") or ".." in namespace.split("/"):
        raise ValueError(f"namespace must be a relative name like 'part/name', got {namespace!r}")
    return cache_root() / namespace / f"{fingerprint({'key': key, 'code': code_digest(modules)})}.pt"


COMPUTED_ENV = "MECHBOOK_COMPUTED_FILE"
"""Names a file where :func:`cached` appends the namespace of each entry it computes (the
executor's side channel: a chapter that computed nothing ran from the model cache)."""


def _note_computed(namespace: str) -> None:
    """Append ``namespace`` to the file :data:`COMPUTED_ENV` names, if any (best effort)."""
    target = os.environ.get(COMPUTED_ENV)
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(namespace + "\n")
    except OSError:
        pass


def cached(
    namespace: str,
    key: Any,
    compute: Callable[[], T],
    *,
    dumps: Callable[[T], bytes] = torch_dumps,
    loads: Callable[[bytes], T] = torch_loads,
    refresh: bool = False,
) -> T:
    """Return ``compute()``, stored under ``namespace`` (``part/name``) and the fingerprint of
    ``key`` and of the code the computation can reach (:func:`computation_modules`,
    :func:`code_digest`).

    ``key`` must hold the data the result depends on (config, data fingerprint, seed); the code
    is added here. ``compute`` runs under :func:`~mechbook.determinism.deterministic`. Values are
    stored in the safe format by default (:func:`torch_dumps`: tensors, numpy arrays, pandas
    frames, plain data, mechbook dataclasses) and read without running code. ``refresh=True``
    recomputes and overwrites. A failed write warns and returns the value.
    """
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str like 'part/name', got {type(namespace).__name__}")
    if not callable(compute):
        raise TypeError(f"compute must be a function of no arguments, got {type(compute).__name__}")
    manifest_profile()  # a bad manifest name stops here, before anything is computed
    caller = sys._getframe(1).f_globals.get("__name__")
    path = entry_path(namespace, key, computation_modules(compute, caller))
    if not refresh:
        data = load_verified(path)
        named, payload = unbind(data) if data is not None else (None, None)
        if named is not None and named != path.stem:
            notice(f"cache entry {path} holds the result of another key ({named[:16]}...); recomputing it")
        elif payload is not None:
            try:
                value = loads(payload)
            except Exception as exc:  # a file that passes the checksum but will not load
                notice(f"cache file {path} failed to load ({exc}); recomputing it")
            else:
                _note_served(namespace, path)
                return value
    with deterministic():
        value = compute()
    _note_computed(namespace)
    try:
        data = bind(path.stem, dumps(value))
    except Exception as exc:  # a value the serialiser cannot write (a lambda, an open file ...)
        notice(
            f"could not serialise the value of the cache entry {path} ({type(exc).__name__}: {exc}); "
            f"using the computed value without caching it",
            stacklevel=2,
        )
        return value
    try:
        save_verified(path, data)
    except OSError as exc:
        notice(
            f"could not write the cache entry {path} ({exc}); using the computed value without caching it", stacklevel=2
        )
    else:
        _note_served(namespace, path)
    return value
