"""mechbook.chapters.intro (the introduction): fast vectorised counts vs literal loops, the
validated profile config, the computed sentences and charts, and the smoke bounds."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import intro
from mechbook.chapters.intro import (
    CONFIGS,
    OverviewConfig,
    build_overview,
    coverage_histogram,
    headline,
    story_coverage,
    story_table,
    token_coverage,
    words,
)

SAMPLE = Path(
    os.environ.get(
        "MECHBOOK_TINYSTORIES",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "tinystories" / "tinystories-sample.txt",
    )
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


@pytest.mark.parametrize(
    "knobs, message",
    [
        ({"max_stories": -5}, "max_stories must be a positive integer or None"),
        ({"max_stories": 0}, "max_stories must be a positive integer or None"),
        ({"max_stories": 2.5}, "max_stories must be a positive integer or None"),
        ({"chart_stories": 0}, "chart_stories must be a positive integer"),
        ({"chart_stories": True}, "chart_stories must be a positive integer"),
        ({"vocab_sizes": ()}, "non-empty tuple"),
        ({"vocab_sizes": (500, 250)}, "strictly increasing"),
        ({"vocab_sizes": (0, 250)}, "vocab_sizes must be a positive integer"),
        ({"seed": -1}, "seed must be a non-negative integer"),
    ],
)
def test_every_knob_is_checked(knobs, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(CONFIGS["smoke"], **knobs)


def test_a_negative_max_stories_knob_is_refused_not_sliced():
    with pytest.raises(ValueError, match="max_stories must be a positive integer or None"):
        mechbook.resolve_profile(CONFIGS, "smoke", max_stories=-5)


def test_profiles_are_valid_and_max_stories_none_means_all():
    assert set(CONFIGS) == set(mechbook.PROFILES)
    assert mechbook.resolve_profile(CONFIGS, "smoke", max_stories=7).max_stories == 7
    assert dataclasses.replace(CONFIGS["cpu"], max_stories=None).max_stories is None


def _literal_headline(stories):
    split = [words(s) for s in stories]
    flat = [w for ws in split for w in ws]
    freq = Counter(flat)
    ranked = sorted(freq, key=lambda w: (-freq[w], w))
    lengths = sorted(len(ws) for ws in split)
    n = len(lengths)
    median = (lengths[(n - 1) // 2] + lengths[n // 2]) / 2
    cover = {v: sum(freq[w] for w in ranked[:v]) / len(flat) for v in intro.COVERAGE_SIZES}
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


def test_prose_quotes_the_computed_numbers():
    stories = ["the dog ran", "the the the sun", "a big red truck", "dog", "sun"]
    ov = build_overview(stories)
    text = intro.corpus_prose(ov)
    assert "**5 stories**" in text and "**13 words**" in text and "**8 of them distinct**" in text
    assert "median story has **3 words**" in text and "between 1 and 4" in text
    coverage = intro.coverage_prose(ov)
    assert coverage.count("**100.0%**") == 2  # 8 distinct words: both vocabularies cover every occurrence


def test_chart_sample_is_seeded_and_bounded():
    ov = build_overview([" ".join([f"w{i}"] * (i + 1)).replace("0", "a") for i in range(50)])
    cfg = OverviewConfig(max_stories=None, chart_stories=20, vocab_sizes=(10,), seed=3)
    a, b = intro.chart_sample(ov, cfg), intro.chart_sample(ov, cfg)
    assert len(a) == 20 and a.equals(b) and a.story.is_unique
    other = intro.chart_sample(ov, dataclasses.replace(cfg, seed=4))
    assert not a.story.equals(other.story)
    assert len(intro.chart_sample(ov, dataclasses.replace(cfg, chart_stories=500))) == 50


def test_length_chart_fits_the_column_and_states_the_share():
    ov = build_overview(["the dog ran and the dog sat", "a cat", "sun sun sun sun"])
    spec = intro.length_chart(ov, OverviewConfig(None, 10, (2,))).to_dict()
    widths = [v["width"] for v in spec["vconcat"]]
    assert all(w <= intro.COLUMN_WIDTH for w in widths)
    share = np.median([5 / 7, 1.0, 0.25])
    assert spec["vconcat"][1]["title"] == f"In the median story {share:.0%} of the words are distinct"
    assert spec["title"]["subtitle"] == "3 TinyStories stories, a random sample"


@pytest.mark.skipif(not SAMPLE.exists(), reason="needs the TinyStories sample")
def test_smoke_bounds_pass_the_corpus_and_reject_a_broken_word_split():
    from mechbook.data import load_stories

    stories = load_stories(SAMPLE, max_stories=CONFIGS["smoke"].max_stories)
    bounds = load_thresholds("intro")["smoke"]
    assert check_thresholds(headline(build_overview(stories)), bounds) == []
    # a word split that keeps only the first word of each sentence
    broken = [". ".join(line.split(" ")[0] for line in s.split(". ")) for s in stories]
    assert check_thresholds(headline(build_overview(broken)), bounds)
    # reading every story instead of the profile's 1,000
    assert check_thresholds(headline(build_overview(load_stories(SAMPLE))), bounds)
