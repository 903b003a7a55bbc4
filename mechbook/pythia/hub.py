"""Real Pythia checkpoints and the web texts of the leading terms (OpenWebText, FineWeb) from the
Hugging Face Hub (chapter 6).

Nothing here is called unless :func:`hub_available` says the Hub answers; that check never takes
longer than its deadline, even when name resolution hangs, so an offline build falls back to the
miniature within seconds. Downloads show ``huggingface_hub``'s progress bar per file (silenced with
the rest of the book's bars by ``MECHBOOK_QUIET=1``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mechbook.data import HUB_HOST, hub_reachable
from mechbook.progress import quiet
from mechbook.pythia.checkpoints import repo_id, revision


@dataclass(frozen=True)
class WebText:
    """A text on the Hub as parquet shards with a ``text`` column: ``name`` in words, the dataset
    ``repo`` at ``revision``, and ``folder``, whose ``.parquet`` files, in name order, are the
    dataset in its order."""

    name: str
    repo: str
    revision: str
    folder: str


TEXTS: dict[str, WebText] = {
    # the paper's text: the first 100k OpenWebText samples of at least 512 characters (section 5.2)
    "openwebtext": WebText("OpenWebText", "Skylion007/openwebtext", "refs/convert/parquet", "plain_text/train"),
    # the paper's second text (Figure 8), read the same way; the 10BT sample is FineWeb's smallest published cut
    "fineweb": WebText("FineWeb", "HuggingFaceFW/fineweb", "main", "sample/10BT"),
    # the cpu profile's budget (the book's choice): a published sample of OpenWebText's first 10k documents
    "openwebtext-10k": WebText(
        "OpenWebText (its first 10k documents)", "stas/openwebtext-10k", "refs/convert/parquet", "plain_text/train"
    ),
}
"""The texts the leading terms of real Pythia can come from, by name."""
MIN_CHARS = 512
"""The paper keeps samples of at least 512 characters."""
PAPER_N_TEXTS = 100_000
"""The paper reads the first 100k such samples."""


def _hub_answers(host: str, timeout: float) -> bool:
    """A TCP connection opens (:func:`mechbook.data.hub_reachable`) and the Hub's API answers an
    HTTPS request with 200 (a proxy that accepts every connection is not the Hub)."""
    import urllib.request

    if not hub_reachable(timeout=timeout, host=host):
        return False
    try:
        with urllib.request.urlopen(f"https://{host}/api/models/{repo_id('70m')}", timeout=timeout) as resp:
            return resp.status == 200
    except (OSError, ValueError):
        return False


def hub_available(deadline: float = 5.0, host: str = HUB_HOST) -> bool:
    """True if the Hub at ``host`` answers within ``deadline`` seconds.

    The check runs in a daemon thread that is abandoned at the deadline, because a stalled DNS
    lookup ignores socket timeouts. ``MECHBOOK_OFFLINE=1`` or ``HF_HUB_OFFLINE=1`` answer False
    at once.
    """
    answer: list[bool] = []
    worker = threading.Thread(target=lambda: answer.append(_hub_answers(host, deadline)), daemon=True)
    worker.start()
    worker.join(deadline)
    return bool(answer and answer[0])


def _bars() -> None:
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    (disable_progress_bars if quiet() else enable_progress_bars)()


def load_pythia(size: str, step: int, deduped: bool = False, device: str | None = None):
    """``TransformerBridge`` of ``EleutherAI/pythia-{size}[-deduped]`` at revision ``step{step}``
    (downloaded once into the Hugging Face cache, with a progress bar per file)."""
    from transformer_lens.model_bridge import TransformerBridge

    from mechbook.device import default_device

    _bars()
    bridge = TransformerBridge.boot_transformers(
        repo_id(size, deduped), revision=revision(step), device=device or default_device()
    )
    bridge.eval()
    return bridge


def pythia_config(size: str, deduped: bool = False):
    """The ``GPTNeoXConfig`` of a Pythia model (for a randomly initialised control)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(repo_id(size, deduped), revision=revision(0))


def pythia_tokenizer(size: str, deduped: bool = False):
    """Pythia's tokenizer (the same at every checkpoint)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(repo_id(size, deduped), revision=revision(0))


def web_texts(text: str, n_texts: int, min_chars: int = MIN_CHARS) -> list[str]:
    """The first ``n_texts`` documents of ``TEXTS[text]`` with at least ``min_chars`` characters, in
    the dataset's order: its parquet shards are listed, then downloaded one at a time (once, into
    the Hugging Face cache) until enough texts are read. Call only after :func:`hub_available`."""
    import pandas as pd
    from huggingface_hub import HfApi, hf_hub_download

    if text not in TEXTS:
        raise ValueError(f"unknown text {text!r}; choose one of {', '.join(TEXTS)}")
    if n_texts < 1:
        raise ValueError(f"n_texts must be at least 1, got {n_texts}")
    spec = TEXTS[text]
    _bars()
    files = HfApi().list_repo_files(spec.repo, repo_type="dataset", revision=spec.revision)
    shards = sorted(f for f in files if f.startswith(spec.folder.rstrip("/") + "/") and f.endswith(".parquet"))
    if not shards:
        raise FileNotFoundError(f"{spec.repo}@{spec.revision} has no parquet files under {spec.folder}/")
    texts: list[str] = []
    for shard in shards:
        path = hf_hub_download(spec.repo, shard, repo_type="dataset", revision=spec.revision)
        texts += [t for t in pd.read_parquet(path, columns=["text"])["text"] if len(t) >= min_chars]
        if len(texts) >= n_texts:
            return texts[:n_texts]
    raise ValueError(f"only {len(texts)} {spec.name} texts have {min_chars}+ characters; ask for fewer")


def hf_sequences(texts: Sequence[str], tokenizer, context: int) -> np.ndarray:
    """(N, T+1) int64: the first ``context + 1`` tokens of every text that has that many."""
    rows = [
        ids[: context + 1]
        for ids in (tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts)
        if len(ids) > context
    ]
    if not rows:
        raise ValueError(f"no text has {context + 1} tokens; use longer texts or a shorter context")
    return np.asarray(rows, dtype=np.int64)
