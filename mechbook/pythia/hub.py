"""Real Pythia checkpoints and OpenWebText from the Hugging Face Hub (chapter 6).

Nothing here is called unless :func:`hub_available` says the Hub answers; that check never takes
longer than its deadline, even when name resolution hangs, so an offline build falls back to the
miniature within seconds. Downloads show ``huggingface_hub``'s progress bar per file (silenced with
the rest of the book's bars by ``MECHBOOK_QUIET=1``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from mechbook.data import HUB_HOST, hub_reachable
from mechbook.progress import quiet
from mechbook.pythia.checkpoints import repo_id, revision

OPENWEBTEXT_REPO = "stas/openwebtext-10k"
OPENWEBTEXT_FILE = "plain_text/train/0000.parquet"
OPENWEBTEXT_REVISION = "refs/convert/parquet"


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


def openwebtext_texts(n_texts: int, min_chars: int = 512) -> list[str]:
    """The first ``n_texts`` OpenWebText documents of at least ``min_chars`` characters (from the
    10k-document sample ``stas/openwebtext-10k``, downloaded once)."""
    import pandas as pd
    from huggingface_hub import hf_hub_download

    _bars()
    path = hf_hub_download(OPENWEBTEXT_REPO, OPENWEBTEXT_FILE, repo_type="dataset", revision=OPENWEBTEXT_REVISION)
    texts = [t for t in pd.read_parquet(path, columns=["text"])["text"] if len(t) >= min_chars]
    if len(texts) < n_texts:
        raise ValueError(f"only {len(texts)} OpenWebText texts have {min_chars}+ characters; ask for fewer")
    return texts[:n_texts]


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
