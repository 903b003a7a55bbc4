"""TinyStories: find the text, download it once if needed, split it into stories.

Used by chapters 1-6. Where the text comes from, in this order:

1. an explicit ``path`` argument;
2. the ``MECHBOOK_TINYSTORIES`` environment variable (a file path);
3. the user cache (``$MECHBOOK_CACHE`` or ``~/.cache/mechbook``, folder ``tinystories/``);
4. a download of the real dataset from the Hugging Face Hub (``roneneldan/TinyStories``), with a
   progress bar, a size and SHA-256 check against the Hub's metadata, written atomically.

With no network and no file it fails within seconds with one message naming both ways out.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from pathlib import Path

from mechbook.arguments import path_argument, text_sequence
from mechbook.cache import cache_root, sha256_file
from mechbook.notices import notice
from mechbook.progress import progress

REPO_ID = "roneneldan/TinyStories"
HUB_HOST = "huggingface.co"
FILES = {"valid": "TinyStories-valid.txt", "train": "TinyStories-train.txt"}
SEPARATOR = "<|endoftext|>"
ENV_VAR = "MECHBOOK_TINYSTORIES"


class TinyStoriesUnavailable(RuntimeError):
    """Neither a local file nor the network could provide TinyStories."""


def hub_reachable(timeout: float = 3.0, host: str | None = None) -> bool:
    """True if a TCP connection to ``host`` (default :data:`HUB_HOST`) opens within ``timeout``
    seconds (and offline mode is not forced with ``HF_HUB_OFFLINE=1`` or ``MECHBOOK_OFFLINE=1``)."""
    host = host or HUB_HOST
    if os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or os.environ.get("MECHBOOK_OFFLINE", "") not in ("", "0"):
        return False
    try:
        with socket.create_connection((host, 443), timeout=timeout):
            return True
    except OSError:
        return False


def _cached_file(split: str) -> Path:
    return cache_root() / "tinystories" / FILES[split]


def _cache_is_valid(path: Path) -> bool:
    side = path.with_name(path.name + ".sha256")
    return path.exists() and side.exists() and sha256_file(path) == side.read_text().strip()


def download(split: str = "valid", timeout: float = 10.0) -> Path:
    """Download ``TinyStories-{split}.txt`` into the user cache and return its path.

    Checks size and SHA-256 against the Hub's metadata; writes to a temporary file and renames it,
    so an interrupted download leaves no partial file behind.
    """
    if split not in FILES:
        raise ValueError(f"split must be one of {sorted(FILES)}, got {split!r}")
    if not hub_reachable():
        raise TinyStoriesUnavailable(_unavailable_message(split))
    import urllib.request

    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    url = hf_hub_url(REPO_ID, FILES[split], repo_type="dataset")
    try:
        meta = get_hf_file_metadata(url, timeout=timeout)
    except Exception as exc:  # a network that opens sockets but cannot reach the Hub (DNS, proxy, HTTP)
        raise TinyStoriesUnavailable(f"{_unavailable_message(split)} (the Hub did not answer: {exc})") from exc
    target = _cached_file(split)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            bar = progress(total=meta.size, unit="B", unit_scale=True, desc=f"TinyStories {split}")
            for block in iter(lambda: resp.read(1 << 20), b""):
                out.write(block)
                digest.update(block)
                bar.update(len(block))
            bar.close()
        size = Path(tmp).stat().st_size
        if meta.size is not None and size != meta.size:
            raise OSError(f"download of {FILES[split]} is {size} bytes, the Hub says {meta.size}")
        etag = (meta.etag or "").strip('"')
        if len(etag) == 64 and etag != digest.hexdigest():
            raise OSError(f"download of {FILES[split]} has the wrong SHA-256; try again")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    target.with_name(target.name + ".sha256").write_text(digest.hexdigest())
    return target


def _unavailable_message(split: str) -> str:
    return (
        f"TinyStories ({FILES[split]}) is not available: no local file and the Hugging Face Hub "
        f"cannot be reached. Either pass a path (load_stories(path=...)) or set {ENV_VAR}=/path/to/"
        f"TinyStories text, or connect to the network so it can be downloaded once into "
        f"{_cached_file(split).parent}."
    )


def tinystories_file(path: str | Path | None = None, split: str = "valid") -> Path:
    """Resolve where TinyStories text comes from (argument, env var, cache, download)."""
    if split not in FILES:
        raise ValueError(f"split must be one of {sorted(FILES)}, got {split!r}")
    if path is not None:
        found = path_argument(path, "path")
        if not found.is_file():
            raise FileNotFoundError(f"TinyStories file {found} does not exist (given as path=...)")
        return found
    env = os.environ.get(ENV_VAR)
    if env:
        found = Path(env).expanduser()
        if not found.is_file():
            raise FileNotFoundError(f"{ENV_VAR}={env} does not name an existing file")
        return found
    cached = _cached_file(split)
    if _cache_is_valid(cached):
        return cached
    return download(split)


def split_stories(text: str, source: str = "text") -> list[str]:
    """Split TinyStories text on ``<|endoftext|>`` lines into stripped, non-empty stories."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str of TinyStories text, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{source} is empty: expected TinyStories text separated by '{SEPARATOR}' lines")
    if SEPARATOR not in text:
        raise ValueError(f"{source} has no '{SEPARATOR}' separators: it does not look like TinyStories text")
    stories = [s.strip() for s in text.split(SEPARATOR)]
    return [s for s in stories if s]


class FewerStoriesWarning(UserWarning):
    """The corpus holds fewer stories than were asked for; all of them are used."""


def load_stories(path: str | Path | None = None, split: str = "valid", max_stories: int | None = None) -> list[str]:
    """Return TinyStories stories as a list of strings (first ``max_stories`` if given).

    A UTF-8 byte-order mark at the start of the file is dropped. When the corpus holds fewer
    than ``max_stories`` stories, all are returned with a :class:`FewerStoriesWarning` naming
    both numbers.
    """
    if max_stories is not None and (
        isinstance(max_stories, bool) or not isinstance(max_stories, int) or max_stories < 1
    ):
        raise ValueError(f"max_stories must be a whole number of at least 1 (or None for all), got {max_stories!r}")
    file = tinystories_file(path, split)
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{file} is not UTF-8 text (byte {exc.start}); give the TinyStories .txt file") from exc
    stories = split_stories(text, source=str(file))
    if max_stories is None:
        return stories
    if len(stories) < max_stories:
        notice(
            f"{file} holds {len(stories):,} stories, fewer than the {max_stories:,} asked for; "
            f"using all {len(stories):,}",
            FewerStoriesWarning,
            stacklevel=2,
        )
    return stories[:max_stories]


def data_fingerprint(stories: list[str]) -> str:
    """SHA-256 of the stories, for cache keys of anything computed from them."""
    digest = hashlib.sha256()
    for s in text_sequence(stories, "stories"):
        digest.update(s.encode())
        digest.update(b"\0")
    return digest.hexdigest()
