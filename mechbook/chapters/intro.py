"""The introduction (book/intro.ipynb): a first look at TinyStories with plain word counts.

The counts are :mod:`mechbook.leading_terms.overview`'s and the claims (the book's two readings
of the corpus) :data:`mechbook.leading_terms.claims.INTRO`, which read the
:class:`~mechbook.leading_terms.overview.CorpusOverview`; the notebook computes their verdicts once.
This module holds the chapter's profiles (:data:`CONFIGS`), its two charts and its computed
sentences, in page order, and ``record_all``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters.common import record_all as record_numbers
from mechbook.leading_terms.overview import (
    COVERAGE_SIZES,
    PAPER_VOCAB,
    CorpusOverview,
    coverage_histogram,
    headline,
    quarter_shares,
    story_coverage,
    story_table,
    token_coverage,
)
from mechbook.validation import POSITIVE, SEED, at_least, check_fields

STEM = "intro"
COLUMN_WIDTH = 520
"""Plot-area width (px) of the introduction's charts: with their axes they fit the ~680 px text column."""


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


def length_chart(ov: CorpusOverview, cfg: ChapterConfig, ev: dict[str, claims.Evidence]) -> alt.VConcatChart:
    """Histogram of story length with an interval brush over a scatter of distinct words against
    length (the brushed stories light up), with the limit d = n dashed; the scatter's title gives
    the median share of distinct words in the sample, the headline the verdict of the reuse reading."""
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
    headline_title = (
        "Distinct words grow slower than story length"
        if ev["intro.longer_stories_reuse_words"].verdict == "reproduced"
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


def length_prose(ov: CorpusOverview, ev: dict[str, claims.Evidence]) -> str:
    """The sentence under the length chart: the median share of distinct words in the shortest and
    the longest quarter of the stories (the word derived from the numbers), then the verdict."""
    short, long, a, b = quarter_shares(ov)
    return (
        f"In the shortest quarter of the stories (at most {short:.0f} words) the median story has {a:.0%} distinct "
        f"words; in the longest quarter (at least {long:.0f}) it has {b:.0%}, "
        f"{claims.difference(100 * b, 100 * a, '.0f', 'points more', 'points less', 'no different')}.\n\n{ev['intro.longer_stories_reuse_words'].sentence()}"
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


def coverage_prose(ov: CorpusOverview, ev: dict[str, claims.Evidence]) -> str:
    """The sentence after the coverage explorer: token coverage of the 1,000 and 3,000 most
    frequent words, then the verdict of the reading that a small vocabulary keeps the text."""
    small, paper = (token_coverage(ov, v) for v in COVERAGE_SIZES)
    return (
        f"Over the whole corpus the {COVERAGE_SIZES[0]:,} most frequent words cover **{small:.1%}** of all word "
        f"occurrences, and the {PAPER_VOCAB:,} most frequent (the vocabulary size of the paper in Part I) "
        f"cover **{paper:.1%}**.\n\n{ev['intro.small_vocabulary_keeps_the_text'].sentence()}"
    )


def record_all(readings: CorpusOverview, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the introduction's numbers (:func:`~mechbook.leading_terms.overview.headline`) and its
    claims' verdicts; returns the records."""
    records = record_numbers(headline(readings))
    records.update(claims.record_claims(ev.values()))
    return records
