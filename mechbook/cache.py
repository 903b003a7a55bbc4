"""On-disk cache for trained models and computed statistics (every chapter that trains).

An entry is keyed by everything that determines it: a namespace, a JSON-able description (the
config dataclass, a data fingerprint, the seed) and the source code of the modules that compute
it. Files are written atomically (temporary file, then rename) next to a ``.sha256`` sidecar; an
entry whose bytes do not match its checksum, or that fails to load, is reported and recomputed,
never silently used.

Root: ``$MECHBOOK_CACHE`` if set, else ``~/.cache/mechbook``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import io
import json
import os
import tempfile
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, TypeVar

from mechbook.determinism import deterministic

T = TypeVar("T")


def cache_root() -> Path:
    """The cache folder (created on demand): ``$MECHBOOK_CACHE`` or ``~/.cache/mechbook``."""
    root = Path(os.environ.get("MECHBOOK_CACHE") or Path.home() / ".cache" / "mechbook")
    root.mkdir(parents=True, exist_ok=True)
    return root


def _canonical(obj: Any) -> Any:
    """A JSON-ready, order-independent form of configs, arrays, paths and containers."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"__dataclass__": type(obj).__name__, **{f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}}
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


def code_version(*modules: ModuleType | Callable[..., Any]) -> str:
    """SHA-256 of the source text of the given modules or functions, so edits invalidate caches."""
    digest = hashlib.sha256()
    for mod in modules:
        digest.update(inspect.getsource(mod).encode())
    return digest.hexdigest()


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
    data = path.read_bytes()
    if hashlib.sha256(data).hexdigest() != side.read_text().strip():
        warnings.warn(f"cache file {path} does not match its checksum; recomputing it", stacklevel=3)
        return None
    return data


def _torch_dumps(obj: Any) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _torch_loads(data: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def cached(
    namespace: str,
    key: Any,
    compute: Callable[[], T],
    *,
    dumps: Callable[[T], bytes] = _torch_dumps,
    loads: Callable[[bytes], T] = _torch_loads,
    refresh: bool = False,
) -> T:
    """Return ``compute()``, stored under ``namespace`` and the fingerprint of ``key``.

    ``key`` must hold everything that determines the result (config, data fingerprint, seed,
    ``code_version(...)`` of the computing modules). Values are serialised with ``torch.save``
    by default (tensors, numpy arrays, dicts). ``refresh=True`` recomputes and overwrites.
    """
    path = cache_root() / namespace / f"{fingerprint(key)}.pt"
    if not refresh:
        data = load_verified(path)
        if data is not None:
            try:
                return loads(data)
            except Exception as exc:  # a file that passes the checksum but will not load
                warnings.warn(f"cache file {path} failed to load ({exc}); recomputing it", stacklevel=2)
    with deterministic():
        value = compute()
    save_verified(path, dumps(value))
    return value
