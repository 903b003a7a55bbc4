"""The introduction's first look at TinyStories with plain word counts (computed here, presented by
:mod:`mechbook.chapters.intro`).

Words are maximal runs of letters and apostrophes, lower-cased: ``"Tom's dog ran."`` gives
``["tom's", "dog", "ran"]``. This is deliberately simpler than Part I's tokenizer; it only serves
to show what TinyStories looks like: how long stories are, how many distinct words they use, and
how much of the text a vocabulary of the ``V`` most frequent words covers.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

WORD = re.compile(r"[a-z']+")
PAPER_VOCAB = 3000
""":math:`|V|` of the paper's experiment in Part I (Im et al., 2026)."""
COVERAGE_SIZES = (1000, PAPER_VOCAB)
"""The vocabulary sizes whose token coverage the introduction records."""


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


def load_overview(max_stories: int | None) -> CorpusOverview:
    """The overview of the first ``max_stories`` stories (None: all; see
    :func:`mechbook.data.load_stories` for where they come from)."""
    from mechbook.data import load_stories

    return build_overview(load_stories(max_stories=max_stories))


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


def headline(ov: CorpusOverview) -> dict[str, Any]:
    """The numbers the introduction records: stories, words, distinct words, the median story
    length, and the token coverage of the 1,000 and 3,000 most frequent words."""
    numbers: dict[str, Any] = {
        "n_stories": ov.n_stories,
        "n_words": int(ov.lengths.sum()),
        "vocabulary": len(ov.vocab),
        "median_words": float(np.median(ov.lengths)),
    }
    numbers.update({f"coverage_top{v}": token_coverage(ov, v) for v in COVERAGE_SIZES})
    return numbers


def quarter_shares(ov: CorpusOverview) -> tuple[float, float, float, float]:
    """(shortest-quarter length bound, longest-quarter length bound, median share of distinct words
    d_s / n_s in the shortest quarter, the same in the longest quarter), empty stories left out."""
    table = story_table(ov)
    table = table[table.words > 0]
    share = table.distinct / table.words
    short, long = table.words.quantile([0.25, 0.75])
    return (
        float(short),
        float(long),
        float(share[table.words <= short].median()),
        float(share[table.words >= long].median()),
    )


def reuse_gap(ov: CorpusOverview) -> float:
    """Median share of distinct words in the longest quarter of the stories minus that in the
    shortest quarter (negative: longer stories reuse more of their words)."""
    _, _, short_share, long_share = quarter_shares(ov)
    return long_share - short_share
