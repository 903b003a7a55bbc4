"""A first look at the corpus with plain word counts (the introduction, book/intro.ipynb).

Words are maximal runs of letters and apostrophes, lower-cased: ``"Tom's dog ran."`` gives
``["tom's", "dog", "ran"]``. This is deliberately simpler than Part I's tokenizer; it only serves
to show what TinyStories looks like: how long stories are, how many distinct words they use, and
how much of the text a vocabulary of the ``V`` most frequent words covers.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import numpy as np
import pandas as pd

WORD = re.compile(r"[a-z']+")


@dataclasses.dataclass(frozen=True)
class OverviewConfig:
    """Sizes of the introduction's overview: stories read, stories drawn in the chart, seed."""

    max_stories: int | None
    chart_stories: int
    vocab_sizes: tuple[int, ...]
    seed: int = 0


def words(text: str) -> list[str]:
    """The lower-cased words of ``text`` (runs of letters and apostrophes)."""
    return WORD.findall(text.lower())


@dataclasses.dataclass(frozen=True)
class CorpusOverview:
    """Every story as word ids, where id ``r`` is the word of frequency rank ``r`` (0 = most common).

    ``ids[offsets[s]:offsets[s + 1]]`` are the words of story ``s``; ``counts[r]`` is how often
    word ``vocab[r]`` occurs in the whole corpus.
    """

    vocab: tuple[str, ...]
    counts: np.ndarray
    ids: np.ndarray
    offsets: np.ndarray

    @property
    def n_stories(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        """Words per story."""
        return np.diff(self.offsets)


def build_overview(stories: list[str]) -> CorpusOverview:
    """Split every story into words and rank the words by corpus frequency (ties alphabetically)."""
    if not stories:
        raise ValueError("no stories to look at: load_stories() returned an empty list")
    split = [words(s) for s in stories]
    freq = Counter(w for ws in split for w in ws)
    vocab = tuple(sorted(freq, key=lambda w: (-freq[w], w)))
    rank = {w: r for r, w in enumerate(vocab)}
    ids = np.fromiter((rank[w] for ws in split for w in ws), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum([len(ws) for ws in split])]).astype(np.int64)
    counts = np.array([freq[w] for w in vocab], dtype=np.int64)
    return CorpusOverview(vocab, counts, ids, offsets)


def story_table(ov: CorpusOverview) -> pd.DataFrame:
    """One row per story: ``words`` (length) and ``distinct`` (number of different words)."""
    distinct = [len(np.unique(ov.ids[a:b])) for a, b in zip(ov.offsets[:-1], ov.offsets[1:])]
    return pd.DataFrame({"story": np.arange(ov.n_stories), "words": ov.lengths, "distinct": distinct})


def story_coverage(ov: CorpusOverview, vocab_size: int) -> np.ndarray:
    r"""Per story, the fraction of its words among the ``vocab_size`` most frequent words:
    :math:`c_s = \frac{1}{n_s} \sum_{i} [\mathrm{rank}(w_{s,i}) < V]` (empty stories count as 1)."""
    if vocab_size < 1:
        raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
    inside = (ov.ids < vocab_size).astype(np.int64)
    covered = np.add.reduceat(np.append(inside, 0), ov.offsets[:-1])
    lengths = ov.lengths
    return np.where(lengths > 0, covered / np.maximum(lengths, 1), 1.0)


def token_coverage(ov: CorpusOverview, vocab_size: int) -> float:
    """The fraction of all word occurrences among the ``vocab_size`` most frequent words."""
    return float(ov.counts[:vocab_size].sum() / ov.counts.sum())


def coverage_histogram(ov: CorpusOverview, vocab_size: int, bins: int = 25, lo: float = 0.5) -> pd.DataFrame:
    """Stories per bin of :func:`story_coverage` on ``[lo, 1]`` (equal bins; stories below ``lo``
    are counted in the first bin); columns ``lo``, ``hi`` (fractions) and ``stories``."""
    if not 0.0 <= lo < 1.0:
        raise ValueError(f"lo must be in [0, 1), got {lo}")
    values = np.clip(story_coverage(ov, vocab_size), lo, 1.0)
    counts, edges = np.histogram(values, bins=bins, range=(lo, 1.0))
    return pd.DataFrame({"lo": edges[:-1], "hi": edges[1:], "stories": counts})
