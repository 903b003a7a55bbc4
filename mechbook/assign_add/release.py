"""The authors' released training run of Assign and Add, loaded into :class:`AssignAddModel`
(chapters 8-10 read it beside the book's rebuild).

The public repository ``bexoo/assign-and-add`` holds, in ``checkpoints/`` at the pinned commit
:data:`RELEASE_COMMIT`, the final model ``model_state_dict.pth`` (40,000 steps) and 400 training
checkpoints ``checkpoint_step_N.pth`` for N = 1, 101, ..., 39901 (saved at step N, whenever
N - 1 is a multiple of 100). Each is a ``torch.save``d TransformerLens state dict whose biases and
whole layer-0 MLP are exactly zero; :func:`release_state` checks that and drops them, which maps
the keys onto :class:`AssignAddModel` (same names, no biases, no layer-0 MLP).

A file is looked for, in order, in

1. the ``folder`` argument (the release folder or its ``checkpoints/``),
2. :func:`release_folder` (the same): ``$MECHBOOK_AA_RELEASE`` if set, else
   ``../shared/data/assign-and-add-release`` beside the checkout if it is there,
3. the user cache (``<cache root>/assign_add_release/<commit>/``),
4. the repository at the pinned commit (one download per file, with a progress bar, written
   atomically into the user cache).

Loading: every file is read with ``torch.load(weights_only=True)`` (tensors and plain containers
only, never code); one that asks for more is refused with one line.

The tests that need the released run skip by the same :func:`release_folder`, so they run
wherever the loader finds it.

Verification: the package data file ``release.sha256`` (:data:`SUMS_FILE`, in the ``SHA256SUMS``
format: ``<hex>  <file name>`` lines, computed from the repository's own objects at
:data:`RELEASE_COMMIT`) holds the SHA-256 of every released file (the 400 checkpoints and the
final model), read into :data:`SHA256`. A file is checked against its sum before use, wherever
it comes from (a local folder, the user cache, a download); one that does not match is refused
with one line naming it, and a download that does not match is not kept. There is no trust on
first use. :func:`available_steps` ignores, with one warning each, files in those folders whose
name is not that of a released step (``checkpoint_step_latest.pth``). The files carry no license:
the project never commits them.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import threading
import urllib.request
from importlib import resources
from pathlib import Path

import torch

from mechbook.arguments import path_argument
from mechbook.assign_add.model import AssignAddModel, ModelConfig
from mechbook.cache import atomic_write_bytes, cache_root, package_root, sha256_file
from mechbook.notices import notice
from mechbook.progress import progress

RELEASE_COMMIT = "d60c064bfa17e4e55f3753daf11e50d4cc764c1e"
"""The commit of ``bexoo/assign-and-add`` whose ``checkpoints/`` the book reads."""

RELEASE_URL = f"https://raw.githubusercontent.com/bexoo/assign-and-add/{RELEASE_COMMIT}/checkpoints/"
"""Where a missing file is downloaded from (``RELEASE_URL + file name``)."""

ENV_VAR = "MECHBOOK_AA_RELEASE"

SHARED_COPY = package_root().parent / "shared" / "data" / "assign-and-add-release"
"""Where a checkout's shared data holds the release (``../shared/data/assign-and-add-release``
beside the checkout): :func:`release_folder` when ``$MECHBOOK_AA_RELEASE`` is unset."""

FINAL = "final"
"""The step name of the final model (40,000 steps, ``model_state_dict.pth``)."""

FINAL_STEP = 40_000

RELEASE_STEPS: tuple[int, ...] = tuple(range(1, 40_000, 100))
"""The 400 released checkpoint steps (1, 101, ..., 39901)."""

DOWNLOAD_DEADLINE_S = 8.0
"""Seconds a download may take to start (connect and first bytes) before it counts as offline."""

_ZERO_PREFIXES = ("blocks.0.mlp.",)
_DROPPED_BUFFERS = re.compile(r"blocks\.\d+\.attn\.(mask|IGNORE)$")
_BIAS = re.compile(r"(^|\.)b_[A-Za-z]+$")


SUMS_FILE = "release.sha256"
"""The package data file of the released files' SHA-256 sums, beside this module."""

_SUM_LINE = re.compile(r"(?P<hex>[0-9a-f]{64})  (?P<name>\S+)")


def read_sums(text: str, source: str = SUMS_FILE) -> dict[str, str]:
    """``{file name: SHA-256}`` of a ``SHA256SUMS`` text (``<hex>  <name>`` lines, blank lines
    skipped): the loader's :data:`SHA256`, and the tests' reading of the release's own list. A
    line of another form, or a name listed twice, is an error naming ``source`` and the line."""
    sums: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _SUM_LINE.fullmatch(line)
        if match is None or match["name"] in sums:
            why = "lists its file a second time" if match else "is not '<64 lowercase hex digits>  <file name>'"
            raise ValueError(f"{source} line {number} {why}: {line!r}; write each line as sha256sum does")
        sums[match["name"]] = match["hex"]
    return sums


SHA256: dict[str, str] = read_sums((resources.files(__package__) / SUMS_FILE).read_text())
"""The SHA-256 of every released file, by file name (from :data:`SUMS_FILE`)."""


class ReleaseNotFound(FileNotFoundError):
    """No copy of a released file was found and none could be downloaded."""


def file_name(step: int | str) -> str:
    """The released file of ``step`` (an int from :data:`RELEASE_STEPS`, or ``"final"``)."""
    if step in (FINAL, FINAL_STEP):
        return "model_state_dict.pth"
    if isinstance(step, bool) or not isinstance(step, int) or step not in RELEASE_STEPS:
        raise ValueError(
            f"the release has checkpoints at steps 1, 101, ..., 39901 (every 100, plus 1) and the final "
            f"model ('final' or {FINAL_STEP}); got {step!r}"
        )
    return f"checkpoint_step_{step}.pth"


def release_folder() -> Path:
    """The folder of the authors' release: ``$MECHBOOK_AA_RELEASE`` if set, else
    :data:`SHARED_COPY` if it is there, else the user cache that downloads go to. The one
    resolver of the release: the loader searches it (:func:`release_path`,
    :func:`available_steps`) and the tests that need the release skip by it."""
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return unset_release_folder()


def unset_release_folder() -> Path:
    """The folder :func:`release_folder` reads when ``$MECHBOOK_AA_RELEASE`` is unset:
    :data:`SHARED_COPY` if it is there, else the user cache that downloads go to (the executor's
    key digests what it holds, so a release that appears there re-executes the chapters)."""
    return SHARED_COPY if SHARED_COPY.is_dir() else _cache_dir()


def _folders(folder: str | Path | None) -> list[Path]:
    """The local folders searched, in order (each as given and its ``checkpoints/``)."""
    roots = [path_argument(folder, "folder")] if folder is not None else []
    out = []
    for root in [*roots, release_folder()]:
        out += [root / "checkpoints", root]
    return list(dict.fromkeys([*out, _cache_dir()]))


def _cache_dir() -> Path:
    return cache_root() / "assign_add_release" / RELEASE_COMMIT


def _verify(path: Path) -> None:
    """Raise (one line) if ``path`` does not match the released file's SHA-256 of its name."""
    expected = SHA256[path.name]
    actual = sha256_file(path)
    if actual != expected:
        raise ValueError(
            f"{path} does not match its SHA-256 ({actual[:12]}... instead of {expected[:12]}...): the copy is "
            f"corrupt or not the released {path.name}; delete it (it is downloaded again) or point {ENV_VAR} at a "
            f"good copy"
        )


def _download(name: str, dest: Path, base_url: str) -> None:
    """Fetch ``base_url + name`` into ``dest`` atomically; raise :class:`ReleaseNotFound` if the
    server cannot be reached within :data:`DOWNLOAD_DEADLINE_S` (name resolution included)."""
    url = base_url + name
    opened: dict[str, object] = {}

    def connect() -> None:
        try:
            opened["response"] = urllib.request.urlopen(url, timeout=DOWNLOAD_DEADLINE_S)
        except (OSError, ValueError, http.client.HTTPException) as exc:  # reported below, with the ways out
            opened["error"] = exc

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(DOWNLOAD_DEADLINE_S)
    if "response" not in opened:
        reason = opened.get("error", f"no answer within {DOWNLOAD_DEADLINE_S:.0f} s")
        raise ReleaseNotFound(str(reason))
    response = opened["response"]
    total = int(response.headers.get("Content-Length") or 0) or None
    chunks = []
    with response, progress(total=total, unit="B", unit_scale=True, desc=f"download {name}") as bar:
        for chunk in iter(lambda: response.read(1 << 16), b""):
            chunks.append(chunk)
            bar.update(len(chunk))
    data = b"".join(chunks)
    expected = SHA256[name]
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ValueError(
            f"the download of {url} does not match its SHA-256 ({actual[:12]}... instead of {expected[:12]}...); "
            f"nothing was kept: try again later, or point {ENV_VAR} at a copy of the release"
        )
    atomic_write_bytes(dest, data)


def release_path(
    step: int | str = FINAL, folder: str | Path | None = None, download: bool = True, base_url: str = RELEASE_URL
) -> Path:
    """The verified local file of ``step``: found in the folders of the module docstring, else
    downloaded into the user cache (unless ``download`` is False)."""
    name = file_name(step)
    for where in _folders(folder):
        path = where / name
        if path.is_file():
            _verify(path)
            return path
    searched = [str(f) for f in _folders(folder)]
    dest = _cache_dir() / name
    reason = "downloads were turned off"
    if download:
        try:
            _download(name, dest, base_url)
            return dest
        except ReleaseNotFound as exc:
            reason = f"the download failed ({exc})"
    raise ReleaseNotFound(
        f"the released Assign-and-Add file {name} is not available: {reason}, and it is not in "
        f"{', '.join(searched)}. Ways out: pass folder=<a copy of the release>; or set {ENV_VAR} to one "
        f"(e.g. ../shared/data/assign-and-add-release); or allow the download from {base_url}{name}"
    )


def release_state_from(raw: dict[str, torch.Tensor], name: str = "checkpoint") -> dict[str, torch.Tensor]:
    """The :class:`AssignAddModel` state dict of a released TransformerLens state dict ``raw``:
    checks that every bias and the whole layer-0 MLP are exactly zero (a clear error naming the
    tensor otherwise), drops them and the attention mask buffers, and checks every shape."""
    own = AssignAddModel(ModelConfig()).state_dict()
    state: dict[str, torch.Tensor] = {}
    for key, value in raw.items():
        if _DROPPED_BUFFERS.search(key):
            continue
        if _BIAS.search(key) or key.startswith(_ZERO_PREFIXES):
            if torch.count_nonzero(value):
                raise ValueError(
                    f"{name}: {key} is not zero (largest |entry| {float(value.abs().max()):.3g}); AssignAddModel has no "
                    f"biases and no layer-0 MLP, so this file cannot be loaded faithfully: it is not the authors' release"
                )
            continue
        if key not in own:
            raise ValueError(
                f"{name}: unexpected tensor {key}; the released files hold TransformerLens names such as embed.W_E"
            )
        if tuple(value.shape) != tuple(own[key].shape):
            raise ValueError(f"{name}: {key} has shape {tuple(value.shape)}, the model expects {tuple(own[key].shape)}")
        state[key] = value.float()
    missing = sorted(set(own) - set(state))
    if missing:
        raise ValueError(f"{name}: missing tensors {missing}")
    return state


def release_state(
    step: int | str = FINAL, folder: str | Path | None = None, download: bool = True
) -> dict[str, torch.Tensor]:
    """The checked :class:`AssignAddModel` state dict of released ``step``, read with
    ``torch.load(weights_only=True)``: a file that only full pickle could load is refused in one
    line (every released file is a plain dict of tensors, and is checked against its sum first)."""
    path = release_path(step, folder, download)
    try:
        raw = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # the weights-only unpickler refusing what the file asks for
        raise ValueError(
            f"{path} cannot be loaded as plain tensors ({type(exc).__name__}); the book never unpickles a "
            f"checkpoint: point {ENV_VAR} at a copy of the release"
        ) from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} holds a {type(raw).__name__}, not the state dict of the release")
    return release_state_from(raw, path.name)


def load_release(step: int | str = FINAL, folder: str | Path | None = None, download: bool = True) -> AssignAddModel:
    """The released model at ``step`` (``"final"`` or one of :data:`RELEASE_STEPS`), in eval mode."""
    model = AssignAddModel(ModelConfig())
    model.load_state_dict(release_state(step, folder, download))
    return model.eval()


_STEP_FILE = re.compile(r"checkpoint_step_([1-9][0-9]*)\.pth")
_WARNED: set[str] = set()


def step_of(name: str) -> int | None:
    """The released step a file name stands for (``checkpoint_step_1401.pth``: 1401); None for any
    other name (``checkpoint_step_latest.pth``, ``checkpoint_step_600.pth``)."""
    match = _STEP_FILE.fullmatch(name)
    step = int(match.group(1)) if match else None
    return step if step in RELEASE_STEPS else None


MANIFEST = "SHA256SUMS"
"""A release folder's own list of the files it holds (``<hex>  <file name>`` lines), in it or in
the folder above its ``checkpoints/``, as ``../shared/data/assign-and-add-release`` has."""

_CHECKED: set[tuple[str, int, int]] = set()


def check_folder(where: Path) -> None:
    """Check a release folder once per state of its manifest, at start-up (before hours of work
    read it): every file its manifest (:data:`MANIFEST`) lists is there, and every file it lists
    has the released file's sum (:data:`SHA256`). A missing file is said in one warning naming
    what is missing (the chapters read the steps that are there); a listed sum that is not the
    release's, or a file that does not match it, is refused with one line. A folder without a
    manifest is not checked here: each file is still verified when it is loaded."""
    if (where / "checkpoints").is_dir():
        return  # the files, and the manifest beside them, are checked as the folder checkpoints/
    manifest = next((m for m in (where / MANIFEST, where.parent / MANIFEST) if m.is_file()), None)
    if manifest is None:
        return
    stat = manifest.stat()
    state = (str(where), stat.st_size, stat.st_mtime_ns)
    if state in _CHECKED:
        return
    listed = read_sums(manifest.read_text(encoding="utf-8"), str(manifest))
    wrong = sorted(name for name, digest in listed.items() if SHA256.get(name) != digest)
    if wrong:
        raise ValueError(
            f"{manifest} lists sums that are not the released files' for {', '.join(wrong[:3])}"
            f"{' and more' if len(wrong) > 3 else ''}: it is not the release at commit {RELEASE_COMMIT[:12]}; "
            f"point {ENV_VAR} at a copy of that release"
        )
    present = {name: where / name for name in listed if (where / name).is_file()}
    missing = sorted(set(listed) - set(present), key=lambda n: (step_of(n) is None, step_of(n) or 0, n))
    for path in present.values():
        _verify(path)
    if missing:
        notice(
            f"the release folder {where} lacks {len(missing)} of the {len(listed)} files its {MANIFEST} lists "
            f"({', '.join(missing[:4])}{' and more' if len(missing) > 4 else ''}): the chapters read the "
            f"{len(present)} that are there; copy the missing ones back to read them too",
            stacklevel=3,
        )
    _CHECKED.add(state)


def available_steps(folder: str | Path | None = None, online: bool = False) -> list[int]:
    """The released checkpoint steps present locally (folder argument, :func:`release_folder`,
    user cache), ascending; with ``online`` all 400 (any missing one is downloaded on use). A
    ``checkpoint_step_*.pth`` whose name is not a released step is ignored, with one warning
    naming it. Each folder is checked first (:func:`check_folder`); each file is verified again
    when it is loaded (:func:`release_path`)."""
    if online:
        return list(RELEASE_STEPS)
    found = set()
    for where in _folders(folder):
        if where.is_dir():
            check_folder(where)
            for path in where.glob("checkpoint_step_*.pth"):
                step = step_of(path.name)
                if step is not None:
                    found.add(step)
                elif str(path) not in _WARNED:
                    _WARNED.add(str(path))
                    notice(
                        f"{path} is not a released checkpoint (checkpoint_step_N.pth for N = 1, 101, ..., 39901); "
                        f"ignored: rename or remove it",
                        stacklevel=2,
                    )
    return sorted(found)
