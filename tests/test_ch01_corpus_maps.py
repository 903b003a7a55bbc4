"""Chapter 1's module (mechbook.chapters.ch01_corpus_maps) and the helpers it uses: escaping
corpus text for Markdown (mechbook.viz.escape_markdown, rendered back by markdown-it), the validated config, the recorded numbers against literal
counts, the computed sentences, the heatmap blocks, and the smoke bounds against a broken corpus."""

from __future__ import annotations

import dataclasses
import html
import itertools
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

import mechbook
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch01_corpus_maps as ch01
from mechbook.leading_terms.stats import corpus_stats
from mechbook.viz.fmt import escape_markdown as markdown_text

SAMPLE = Path(
    os.environ.get(
        "MECHBOOK_TINYSTORIES",
        Path(__file__).resolve().parents[2] / "shared" / "data" / "tinystories" / "tinystories-sample.txt",
    )
)
needs_sample = pytest.mark.skipif(not SAMPLE.exists(), reason="needs the TinyStories sample")
RENDER = MarkdownIt("commonmark").use(dollarmath_plugin)


def _rendered_text(markdown: str) -> str:
    out = RENDER.render(markdown)
    assert "<em>" not in out and "<strong>" not in out and "<a " not in out and "math" not in out, out
    return html.unescape(re.sub(r"</?p>|\n", "", out))


@given(st.text(alphabet=st.sampled_from(list("abc XYZ<>&*_`$[]()#+-.!|~\\{}'\"=;:/")), min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_markdown_text_renders_back_to_the_text(text):
    text = re.sub(r" +", " ", text).strip()
    if not text:
        return
    assert _rendered_text(markdown_text(text)) == text


def test_special_tokens_survive_markdown():
    for token in ("<unk>", "<|endoftext|>"):
        assert token in _rendered_text(f'said, "{markdown_text(token)}, your car"')
    assert "&lt;unk&gt;" in RENDER.render(markdown_text('said, "<unk>, your car"'))
    assert "<unk>" in RENDER.render('said, "<unk>, your car"')  # unescaped, a tag the browser drops


@pytest.mark.parametrize(
    "field", ["table_k", "n_adjectives", "n_per_class", "block_per_class", "successors_k", "purity_k"]
)
@pytest.mark.parametrize("value", [0, -3, True])
def test_sizes_must_be_positive_integers(field, value):
    with pytest.raises(ValueError, match=f"{field} must be a positive integer"):
        dataclasses.replace(ch01.CONFIGS["smoke"], **{field: value})


def test_corpus_knobs_reach_the_nested_config():
    cfg = mechbook.resolve_profile(ch01.CONFIGS, "smoke", corpus__vocab_size=300, corpus__policy="drop")
    assert (cfg.corpus.vocab_size, cfg.corpus.policy, cfg.corpus.context) == (300, "drop", 32)
    with pytest.raises(ValueError, match="policy"):
        mechbook.resolve_profile(ch01.CONFIGS, "smoke", corpus__policy="keep")
    with pytest.raises(ValueError, match="n_stories"):
        mechbook.resolve_profile(ch01.CONFIGS, "smoke", corpus__n_stories=-5)


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    if not SAMPLE.exists():
        pytest.skip("needs the TinyStories sample")
    mp = pytest.MonkeyPatch()
    mp.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    mp.setenv("MECHBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield ch01.build(ch01.CONFIGS["smoke"])
    mp.undo()


def _literal_successor_rank(tokens, tok, row, column):
    """Rank of ``column`` after ``row`` by bigram count (ties by id), the <unk> column left out."""
    a, c = tok.token_to_id[row], tok.token_to_id[column]
    counts = np.zeros(tok.vocab_size)
    for seq in tokens:
        for x, y in itertools.pairwise(seq):
            if x == a:
                counts[y] += 1
    keep = [i for i in range(tok.vocab_size) if i != tok.unk_id]
    order = sorted(keep, key=lambda i: (-counts[i], i))
    return order.index(c) + 1


def test_headline_against_literal_counts(maps):
    n = ch01.headline(maps)
    assert n["b_rank_upon_after_once"] == _literal_successor_rank(maps.sequences.tokens, maps.tokenizer, "once", "upon")
    assert n["n_sequences"] == len(maps.sequences.tokens) and n["context"] == maps.sequences.tokens.shape[1] - 1
    unk = maps.tokenizer.unk_id
    assert n["unk_fraction"] == pytest.approx(float((maps.sequences.tokens == unk).mean()))
    ranks = ch01.pair_rank_table(maps)
    assert n["phi_pair_median_rank"] == float(np.median(ranks["rank in Φ"]))
    fish = ch01.context_table(maps).loc["fish"].tolist()
    if n["phi_rank_pond_for_fish"] <= len(fish):
        assert fish[n["phi_rank_pond_for_fish"] - 1] == "pond"


def test_sentences_quote_the_numbers(maps):
    n = ch01.headline(maps)
    assert f"*upon* ranks **{n['b_rank_upon_after_once']}**" in ch01.bigram_prose(maps, n)
    assert f"**{n['phi_pair_median_rank']:.0f}** in $\\Phi$" in ch01.context_prose(maps, n)
    assert f"**{n['sigma_class_purity']:.0%}**" in ch01.sigma_prose(maps, n)
    assert f"**{maps.sequences.n_kept:,} sequences**" in ch01.corpus_prose(maps)
    assert "the first 5,000 stories" in ch01.profile_note(maps.cfg).lower()
    sentence = ch01.sample_sentence(maps)
    assert sentence.startswith("> ") and "<unk>" not in sentence and "&lt;unk&gt;" in RENDER.render(sentence)


def test_heatmap_blocks_hold_the_tables_words(maps):
    blocks = ch01.map_blocks(maps)
    _, rows, cols = blocks["B: adjective → next word"]
    table = ch01.bigram_table(maps)
    assert rows == list(table.index) and set(table["1"]) <= set(cols)
    _, rows, cols = blocks["Σ_B (cosine): interchangeable words"]
    assert rows == cols and len(rows) == 3 * maps.cfg.block_per_class
    spec = ch01.heatmap(__import__("altair").Chart(__import__("pandas").DataFrame())).to_dict()
    assert spec["width"] <= 560 and spec["encoding"]["color"]["legend"]["orient"] == "bottom"


def test_smoke_bounds_pass_the_maps_and_reject_a_shuffled_corpus(maps):
    bounds = load_thresholds("01_corpus_maps")["smoke"]
    assert check_thresholds(ch01.headline(maps), bounds) == []
    rng = np.random.default_rng(0)
    shuffled = rng.permuted(maps.sequences.tokens, axis=1)  # same tokens, order destroyed
    broken = dataclasses.replace(maps, stats=corpus_stats(shuffled, maps.tokenizer.vocab_size))
    problems = check_thresholds(ch01.headline(broken), bounds)
    assert any(p.startswith("b_rank_upon_after_once") for p in problems), problems
