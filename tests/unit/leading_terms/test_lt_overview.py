"""The introduction's corpus overview (mechbook.leading_terms.overview): its fast vectorised counts against literal loops."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms import overview
from mechbook.leading_terms.overview import (
    build_overview,
    coverage_histogram,
    headline,
    story_coverage,
    story_table,
    token_coverage,
    words,
)

WORDS = st.sampled_from(["the", "dog", "ran", "tom's", "a", "big", "red", "truck", "sun"])


STORIES = st.lists(st.lists(WORDS, min_size=0, max_size=12).map(" ".join), min_size=1, max_size=8)


def _reference_coverage(stories, vocab_size):
    freq = Counter(w for s in stories for w in words(s))
    top = set(sorted(freq, key=lambda w: (-freq[w], w))[:vocab_size])
    out = []
    for s in stories:
        ws = words(s)
        out.append(sum(w in top for w in ws) / len(ws) if ws else 1.0)
    return out


def test_words_split_on_letters_and_apostrophes():
    assert words("Tom's dog RAN. 3 cats!") == ["tom's", "dog", "ran", "cats"]


@given(STORIES, st.integers(1, 10))
@settings(max_examples=60, deadline=None)
def test_story_coverage_matches_literal_loop(stories, vocab_size):
    ov = build_overview(stories)
    assert np.allclose(story_coverage(ov, vocab_size), _reference_coverage(stories, vocab_size))


@given(STORIES)
@settings(max_examples=40, deadline=None)
def test_table_and_token_coverage_invariants(stories):
    ov = build_overview(stories)
    table = story_table(ov)
    assert list(table.words) == [len(words(s)) for s in stories]
    assert list(table.distinct) == [len(set(words(s))) for s in stories]
    assert (table.distinct <= table.words).all()
    if ov.counts.sum():
        covs = [token_coverage(ov, v) for v in range(1, len(ov.vocab) + 1)]
        assert all(a <= b + 1e-12 for a, b in zip(covs, covs[1:])) and covs[-1] == pytest.approx(1.0)


def test_histogram_counts_every_story_once():
    stories = ["the dog ran", "the the the sun", "a big red truck", "dog"]
    ov = build_overview(stories)
    hist = coverage_histogram(ov, 2, bins=5, lo=0.0)
    assert hist.stories.sum() == len(stories)
    assert np.allclose(hist.hi - hist.lo, 0.2)


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="no stories"):
        build_overview([])
    ov = build_overview(["a b"])
    with pytest.raises(ValueError, match="at least 1"):
        story_coverage(ov, 0)
    with pytest.raises(ValueError, match="lo must be"):
        coverage_histogram(ov, 1, lo=1.0)


def _literal_headline(stories):
    split = [words(s) for s in stories]
    flat = [w for ws in split for w in ws]
    freq = Counter(flat)
    ranked = sorted(freq, key=lambda w: (-freq[w], w))
    lengths = sorted(len(ws) for ws in split)
    n = len(lengths)
    median = (lengths[(n - 1) // 2] + lengths[n // 2]) / 2
    cover = {v: sum(freq[w] for w in ranked[:v]) / len(flat) for v in overview.COVERAGE_SIZES}
    return {
        "n_stories": n,
        "n_words": len(flat),
        "vocabulary": len(freq),
        "median_words": median,
        **{f"coverage_top{v}": c for v, c in cover.items()},
    }


@given(STORIES)
@settings(max_examples=40, deadline=None)
def test_headline_matches_literal_counts(stories):
    if not any(words(s) for s in stories):
        return
    assert headline(build_overview(stories)) == pytest.approx(_literal_headline(stories))
