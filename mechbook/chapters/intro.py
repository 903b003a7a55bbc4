"""The introduction (book/intro.ipynb): a first look at TinyStories with plain word counts.

Words are maximal runs of letters and apostrophes, lower-cased: ``"Tom's dog ran."`` gives
``["tom's", "dog", "ran"]``. This is deliberately simpler than Part I's tokenizer; it only serves
to show what TinyStories looks like: how long stories are, how many distinct words they use, and
how much of the text a vocabulary of the ``V`` most frequent words covers. The module holds the
chapter's profiles (:data:`CONFIGS`), its claims (the book's two readings of the corpus), its
counts, its two charts and its computed sentences, in page order, and ``record_all``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.claims import Claim, Evidence, Rule
from mechbook.validation import POSITIVE, SEED, at_least, check_fields

WORD = re.compile(r"[a-z']+")
PAPER_VOCAB = 3000
""":math:`|V|` of the paper's experiment in Part I (Im et al., 2026)."""
COLUMN_WIDTH = 520
"""Plot-area width (px) of the introduction's charts: with their axes they fit the ~680 px text column."""
COVERAGE_SIZES = (1000, PAPER_VOCAB)
"""The vocabulary sizes whose token coverage the introduction records."""


@dataclasses.dataclass(frozen=True)
class ChapterConfig:
    """Sizes of the introduction's overview."""

    max_stories: int | None
    """The first n stories read (None: all of them; smoke reads 1,000 to stay within its minute)."""
    chart_stories: int
    """How many of them the length chart draws (a random sample: a scatter of every story is unreadable)."""
    vocab_sizes: tuple[int, ...]
    """The slider positions of the coverage explorer (increasing, up to the paper's 3,000)."""
    seed: int = 0
    """Seed of the chart's sample."""

    def __post_init__(self) -> None:
        check_fields(
            self,
            max_stories=at_least(1, "or None for every story"),
            chart_stories=POSITIVE,
            vocab_sizes=POSITIVE,
            seed=SEED,
        )
        sizes = self.vocab_sizes
        if not sizes or list(sizes) != sorted(set(sizes)):
            raise ValueError(f"ChapterConfig.vocab_sizes must be strictly increasing and not empty, got {sizes!r}")


_SLIDER = tuple(range(250, 3001, 250))
#: The chapter's config per profile: ``smoke`` reads the first ``max_stories`` stories, ``cpu`` and
#: ``paper`` all of them.
CONFIGS: dict[str, ChapterConfig] = {
    "smoke": ChapterConfig(max_stories=1000, chart_stories=300, vocab_sizes=_SLIDER),
    "cpu": ChapterConfig(max_stories=None, chart_stories=1500, vocab_sizes=_SLIDER),
    "paper": ChapterConfig(max_stories=None, chart_stories=1500, vocab_sizes=_SLIDER),
}


def resolve(
    profile: str, max_stories: int | None = None, chart_stories: int | None = None, seed: int | None = None
) -> ChapterConfig:
    """The introduction's config for ``profile`` with the reader's knobs (None: from the profile)."""
    return mechbook.resolve_profile(CONFIGS, profile, max_stories=max_stories, chart_stories=chart_stories, seed=seed)


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "intro.longer_stories_reuse_words",
        "intro",
        "book",
        "A longer story mostly reuses the words it already has: the share of distinct words falls with length",
        "median share of distinct words in the longest quarter of the stories minus that in the shortest quarter",
        Rule("<", 0.0),
        section="intro-corpus",
        spec=".2f",
    ),
    Claim(
        "intro.small_vocabulary_keeps_the_text",
        "intro",
        "book",
        f"A small vocabulary keeps almost all of TinyStories: the {PAPER_VOCAB:,} most frequent words cover at least "
        "95% of the word occurrences",
        f"share of all word occurrences among the {PAPER_VOCAB:,} most frequent words",
        Rule(">=", 0.95, partly=0.8),
        section="intro-vocabulary",
        spec=".1%",
    ),
)
"""The introduction's claims: the book's two readings of the corpus that its sentences assert."""


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


def load_overview(cfg: ChapterConfig) -> CorpusOverview:
    """The overview of the stories ``cfg`` selects (see :func:`mechbook.data.load_stories` for
    where they come from)."""
    from mechbook.data import load_stories

    return build_overview(load_stories(max_stories=cfg.max_stories))


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


def reuse_evidence(ov: CorpusOverview) -> Evidence:
    """Evidence of ``intro.longer_stories_reuse_words``."""
    return CLAIMS[0].evidence(reuse_gap(ov))


def coverage_evidence(ov: CorpusOverview) -> Evidence:
    """Evidence of ``intro.small_vocabulary_keeps_the_text``."""
    return CLAIMS[1].evidence(token_coverage(ov, PAPER_VOCAB))


def corpus_prose(ov: CorpusOverview) -> str:
    """The sentence under the corpus counts: stories, words, distinct words, median and quartiles
    of the story length."""
    n = headline(ov)
    q25, q75 = np.quantile(ov.lengths, [0.25, 0.75])
    return (
        f"We read **{n['n_stories']:,} stories** with **{n['n_words']:,} words** in all, "
        f"**{n['vocabulary']:,} of them distinct**. The median story has **{n['median_words']:.0f} words**; "
        f"half of the stories have between {q25:.0f} and {q75:.0f}."
    )


def chart_sample(ov: CorpusOverview, cfg: ChapterConfig) -> pd.DataFrame:
    """The :func:`story_table` rows the length chart draws: ``cfg.chart_stories`` stories drawn
    without replacement with ``cfg.seed`` (all of them when there are fewer)."""
    table = story_table(ov)
    return table.sample(n=min(cfg.chart_stories, len(table)), random_state=cfg.seed)


def length_chart(ov: CorpusOverview, cfg: ChapterConfig) -> alt.VConcatChart:
    """Histogram of story length with an interval brush over a scatter of distinct words against
    length (the brushed stories light up), with the limit d = n dashed; the scatter's title gives
    the median share of distinct words in the sample."""
    sample = chart_sample(ov, cfg)
    ratio = float((sample.distinct / sample.words.clip(lower=1)).median())
    brush = alt.selection_interval(encodings=["x"], name="length_range")
    lengths = (
        alt.Chart(sample)
        .mark_bar()
        .encode(
            x=alt.X("words:Q", bin=alt.Bin(maxbins=40), title="story length (words)"),
            y=alt.Y("count():Q", title="stories"),
        )
        .add_params(brush)
        .properties(width=COLUMN_WIDTH, height=160, title="Story length: drag to select a range")
    )
    diagonal = (
        alt.Chart(pd.DataFrame({"words": [0, int(sample.distinct.max())]}))
        .mark_line(strokeDash=[4, 4], color="gray")
        .encode(x="words:Q", y=alt.Y("words:Q", title="distinct words"))
    )
    points = (
        alt.Chart(sample)
        .mark_circle(size=22)
        .encode(
            x=alt.X("words:Q", title="story length (words)"),
            y=alt.Y("distinct:Q", title="distinct words"),
            color=alt.condition(brush, alt.value("#1f77b4"), alt.value("#d0d0d0")),
            opacity=alt.condition(brush, alt.value(0.8), alt.value(0.4)),
            tooltip=[alt.Tooltip("words:Q", title="words"), alt.Tooltip("distinct:Q", title="distinct")],
        )
    )
    gap = reuse_gap(ov)
    headline_title = (
        "Distinct words grow slower than story length"
        if CLAIMS[0].rule.holds(gap)
        else "Longer stories use no smaller a share of distinct words"
    )
    scatter = (diagonal + points).properties(
        width=COLUMN_WIDTH,
        height=280,
        title=f"In the median story {ratio:.0%} of the words are distinct",
    )
    return alt.vconcat(lengths, scatter).properties(
        title=alt.Title(
            headline_title,
            subtitle=f"{len(sample):,} TinyStories stories, a random sample",
            anchor="start",
        )
    )


def length_prose(ov: CorpusOverview) -> str:
    """The sentence under the length chart: the median share of distinct words in the shortest and
    the longest quarter of the stories (the word derived from the numbers), then the verdict."""
    short, long, a, b = quarter_shares(ov)
    return (
        f"In the shortest quarter of the stories (at most {short:.0f} words) the median story has {a:.0%} distinct "
        f"words; in the longest quarter (at least {long:.0f}) it has {b:.0%}, "
        f"{claims.difference(100 * b, 100 * a, '.0f', 'points more', 'points less', 'no different')}.\n\n{reuse_evidence(ov).sentence()}"
    )


def coverage_explorer(ov: CorpusOverview, cfg: ChapterConfig) -> Any:
    """The book's first :func:`mechbook.viz.explore`: the histogram of c_s(V) over stories, with a
    slider over ``cfg.vocab_sizes``."""
    import mechbook.viz

    def chart(base: alt.Chart) -> alt.Chart:
        return (
            base.mark_bar()
            .encode(
                x=alt.X(
                    "lo:Q",
                    bin="binned",
                    title="share of the story's words inside the vocabulary",
                    axis=alt.Axis(format="%"),
                ),
                x2="hi:Q",
                y=alt.Y("stories:Q", title="stories"),
            )
            .properties(width=COLUMN_WIDTH)
        )

    top = cfg.vocab_sizes[-1]
    median = float(np.median(story_coverage(ov, top)))
    return mechbook.viz.explore(
        lambda vocab_size: coverage_histogram(ov, vocab_size),
        chart,
        controls={"vocab_size": list(cfg.vocab_sizes)},
        title=f"V = {top:,}: the median story has {median:.0%} of its words inside",
    )


def coverage_prose(ov: CorpusOverview) -> str:
    """The sentence after the coverage explorer: token coverage of the 1,000 and 3,000 most
    frequent words, then the verdict of the reading that a small vocabulary keeps the text."""
    small, paper = (token_coverage(ov, v) for v in COVERAGE_SIZES)
    return (
        f"Over the whole corpus the {COVERAGE_SIZES[0]:,} most frequent words cover **{small:.1%}** of all word "
        f"occurrences, and the {PAPER_VOCAB:,} most frequent (the vocabulary size of the paper in Part I) "
        f"cover **{paper:.1%}**.\n\n{coverage_evidence(ov).sentence()}"
    )


def record_all(ov: CorpusOverview) -> dict[str, Any]:
    """Record the introduction's numbers (:func:`headline`) and its claims; returns the records."""
    records = record_numbers(headline(ov))
    records.update(claims.record_claims([reuse_evidence(ov), coverage_evidence(ov)]))
    return records
