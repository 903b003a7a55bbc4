"""The introduction's module (mechbook.chapters.intro): its validated profile config, computed
sentences and charts, the claims it reads, and the smoke bounds (the overview's counts:
leading_terms/test_lt_overview.py; the claims' rules: leading_terms/test_lt_claims.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import SAMPLE
from hypothesis import given, settings
from test_lt_overview import STORIES

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import intro
from mechbook.chapters.intro import CONFIGS, ChapterConfig
from mechbook.leading_terms import overview
from mechbook.leading_terms.claims import INTRO, TABLES
from mechbook.leading_terms.overview import (
    build_overview,
    headline,
    token_coverage,
    words,
)


def _ev(ov):
    """The introduction's verdicts on ``ov``, computed once as its notebook does."""
    return mechbook.claims.evidence(INTRO, ov)


@pytest.mark.parametrize(
    "knobs, error, message",
    [
        ({"max_stories": -5}, ValueError, r"max_stories must be at least 1 \(or None for every story\)"),
        ({"max_stories": 0}, ValueError, r"max_stories must be at least 1 \(or None for every story\)"),
        ({"max_stories": 2.5}, TypeError, "max_stories must be an int or None"),
        ({"chart_stories": 0}, ValueError, "chart_stories must be at least 1"),
        ({"chart_stories": True}, TypeError, "chart_stories must be an int, got bool"),
        ({"vocab_sizes": ()}, ValueError, "not empty"),
        ({"vocab_sizes": (500, 250)}, ValueError, "strictly increasing"),
        ({"vocab_sizes": (0, 250)}, ValueError, r"vocab_sizes must be at least 1, got 0 \(in"),
        ({"seed": -1}, ValueError, "seed must be at least 0"),
    ],
)
def test_every_knob_is_checked(knobs, error, message):
    with pytest.raises(error, match=message):
        dataclasses.replace(CONFIGS["smoke"], **knobs)


def test_a_negative_max_stories_knob_is_refused_not_sliced():
    with pytest.raises(ValueError, match=r"max_stories must be at least 1 \(or None for every story\)"):
        intro.resolve("smoke", max_stories=-5)


def test_profiles_are_valid_and_max_stories_none_means_all():
    assert set(CONFIGS) == set(mechbook.PROFILES)
    assert intro.resolve("smoke", max_stories=7, seed=2).max_stories == 7
    assert dataclasses.replace(CONFIGS["cpu"], max_stories=None).max_stories is None


def test_prose_quotes_the_computed_numbers():
    stories = ["the dog ran", "the the the sun", "a big red truck", "dog", "sun"]
    ov = build_overview(stories)
    text = intro.corpus_prose(ov)
    assert "**5 stories**" in text and "**13 words**" in text and "**8 of them distinct**" in text
    assert "median story has **3 words**" in text and "between 1 and 4" in text
    coverage = intro.coverage_prose(ov, _ev(ov))
    assert coverage.count("**100.0%**") == 2  # 8 distinct words: both vocabularies cover every occurrence
    assert "**Holds.**" in coverage and "100.0% (rule ≥ 95.0% (partly from 80.0%))" in coverage


def test_chart_sample_is_seeded_and_bounded():
    ov = build_overview([" ".join([f"w{i}"] * (i + 1)).replace("0", "a") for i in range(50)])
    cfg = ChapterConfig(max_stories=None, chart_stories=20, vocab_sizes=(10,), seed=3)
    a, b = intro.chart_sample(ov, cfg), intro.chart_sample(ov, cfg)
    assert len(a) == 20 and a.equals(b) and a.story.is_unique
    other = intro.chart_sample(ov, dataclasses.replace(cfg, seed=4))
    assert not a.story.equals(other.story)
    assert len(intro.chart_sample(ov, dataclasses.replace(cfg, chart_stories=500))) == 50


def test_length_chart_fits_the_column_and_states_the_share():
    ov = build_overview(["the dog ran and the dog sat", "a cat", "sun sun sun sun"])
    spec = intro.length_chart(ov, ChapterConfig(None, 10, (2,)), _ev(ov)).to_dict()
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


def test_length_prose_and_title_follow_the_reuse_reading():
    # long stories repeat one word: their share of distinct words falls
    reuse = build_overview(["a b", "c d", "e f g", "h i", "x x x x x x x x y", "z z z z z z z w", "q q q q q q q q"])
    assert overview.reuse_gap(reuse) < 0
    text = intro.length_prose(reuse, _ev(reuse))
    assert "**Holds.**" in text and "points less" in text
    title = intro.length_chart(reuse, ChapterConfig(None, 10, (2,)), _ev(reuse)).to_dict()["title"]["text"]
    assert title == "Distinct words grow slower than story length"
    # every story all distinct words: the share does not fall
    fresh = build_overview(["a b", "c d e", "f g h i j k", "l m n o p q r s", "t u"])
    assert overview.reuse_gap(fresh) == 0.0
    assert "**Does not hold.**" in intro.length_prose(fresh, _ev(fresh)) and "no different" in intro.length_prose(
        fresh, _ev(fresh)
    )
    assert (
        intro.length_chart(fresh, ChapterConfig(None, 10, (2,)), _ev(fresh))
        .to_dict()["title"]["text"]
        .startswith("Longer")
    )


@given(STORIES)
@settings(max_examples=30, deadline=None)
def test_the_coverage_sentence_never_contradicts_its_number(stories):
    if not any(words(s) for s in stories):
        return
    ov = build_overview(stories)
    text = intro.coverage_prose(ov, _ev(ov))
    value = token_coverage(ov, overview.PAPER_VOCAB)
    assert ("**Holds.**" in text) == (value >= 0.95)
    assert f"{value:.1%}" in text


def test_the_table_reads_the_overview_values_and_the_ledger_still_finds_it():
    ov = build_overview(["a b c", "d e", "x x x x x x y", "z z z z z z w", "q q q q q q q"])
    ev = mechbook.claims.evidence(TABLES["intro"], ov)
    assert list(ev) == [c.id for c in INTRO]
    assert ev["intro.longer_stories_reuse_words"].values == [overview.reuse_gap(ov)]
    assert ev["intro.small_vocabulary_keeps_the_text"].values == [token_coverage(ov, overview.PAPER_VOCAB)]
    assert intro.record_all(ov, ev)["claim.intro.longer_stories_reuse_words"]["verdict"] == "reproduced"
