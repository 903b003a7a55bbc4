"""Chapter 1's module (mechbook.chapters.ch01_corpus_maps): the validated config, the recorded
numbers against literal counts, the computed sentences, the heatmap blocks, the claims each section
reads, and the smoke bounds against a broken corpus (the claims' rules: leading_terms/test_lt_claims.py)."""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SAMPLE
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fmt import RENDER

from mechbook import claims
from mechbook.book.checks import check_thresholds, load_thresholds
from mechbook.chapters import ch01_corpus_maps as ch01
from mechbook.leading_terms.claims import CH01_CLAIMS, TABLES
from mechbook.leading_terms.maps import FIGURE5, FIGURE5_TOP, chapter_maps, map_row, maps_numbers, pair_rank_table
from mechbook.leading_terms.readings import MapsReadings, read_maps
from mechbook.leading_terms.stats import corpus_stats

CFG = ch01.CONFIGS["smoke"]


def _measured(m):
    """The chapter's readings of ``m`` at the smoke config's sizes, as its notebook computes them."""
    return read_maps(m, successors_k=CFG.successors_k, purity_k=CFG.purity_k)


def _ev(r):
    """Chapter 1's verdicts on the readings ``r``, computed once as its notebook does."""
    return claims.evidence(CH01_CLAIMS, r)


@pytest.mark.parametrize(
    "field", ["table_k", "n_adjectives", "n_per_class", "block_per_class", "successors_k", "purity_k"]
)
@pytest.mark.parametrize(
    "value, error, allowed",
    [(0, ValueError, "at least 1"), (-3, ValueError, "at least 1"), (True, TypeError, "an int")],
)
def test_sizes_must_be_positive_integers(field, value, error, allowed):
    with pytest.raises(error, match=rf"ChapterConfig\.{field} must be {allowed}, got"):
        dataclasses.replace(ch01.CONFIGS["smoke"], **{field: value})


def test_corpus_knobs_reach_the_nested_config():
    cfg = ch01.resolve("smoke", vocab_size=300, policy="drop")
    assert (cfg.corpus.vocab_size, cfg.corpus.policy, cfg.corpus.context) == (300, "drop", 32)
    assert ch01.resolve("cpu") == ch01.CONFIGS["cpu"]
    with pytest.raises(ValueError, match="policy"):
        ch01.resolve("smoke", policy="keep")
    with pytest.raises(ValueError, match="n_stories"):
        ch01.resolve("smoke", n_stories=-5)


@pytest.fixture(scope="module")
def maps(tmp_path_factory):
    if not SAMPLE.exists():
        pytest.skip("needs the TinyStories sample")
    mp = pytest.MonkeyPatch()
    mp.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    mp.setenv("MECHBOOK_CACHE", str(tmp_path_factory.mktemp("cache")))
    yield chapter_maps(CFG.corpus, CFG.block_per_class)

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
    n = _measured(maps)
    assert n.b_rank_upon_after_once == _literal_successor_rank(maps.sequences.tokens, maps.tokenizer, "once", "upon")
    assert n.n_sequences == len(maps.sequences.tokens) and n.context == maps.sequences.tokens.shape[1] - 1
    unk = maps.tokenizer.unk_id
    assert n.unk_fraction == pytest.approx(float((maps.sequences.tokens == unk).mean()))
    ranks = pair_rank_table(maps)
    assert n.phi_pair_median_rank == float(np.median(ranks["rank in Φ"]))
    fish = ch01.context_table(maps, CFG).loc["fish"].tolist()
    if n.phi_rank_pond_for_fish <= len(fish):
        assert fish[n.phi_rank_pond_for_fish - 1] == "pond"


def test_the_readings_record_what_maps_numbers_measures(maps):
    """The typed readings hold every number of maps_numbers and give them back under the same
    names, in the same order, so the records and their bounds are unchanged."""
    numbers = maps_numbers(maps, successors_k=CFG.successors_k, purity_k=CFG.purity_k)
    readings = MapsReadings.of(numbers)
    assert readings.numbers() == numbers and list(readings.numbers()) == list(numbers)
    assert readings == _measured(maps)
    assert set(readings.fig5) == {a.key for a in FIGURE5}


def test_sentences_quote_the_numbers(maps):
    n = _measured(maps)
    ev = _ev(n)
    assert f"*upon* ranks **{n.b_rank_upon_after_once}**" in ch01.bigram_prose(maps, CFG, n, ev)
    assert f"**{n.phi_pair_median_rank:.0f}** in $\\Phi$" in ch01.context_prose(maps, n, ev)
    assert f"**{n.sigma_class_purity:.0%}**" in ch01.sigma_prose(maps, CFG, n, ev)
    assert f"**{maps.sequences.n_kept:,} sequences**" in ch01.corpus_prose(maps, ev)
    assert "the first 5,000 stories" in ch01.profile_prose(CFG).lower()
    sentence = ch01.sample_prose(maps)
    assert sentence.startswith("> ") and "<unk>" not in sentence and "&lt;unk&gt;" in RENDER.render(sentence)


def test_heatmap_blocks_hold_the_tables_words(maps):
    blocks = ch01.map_blocks(maps, CFG)
    _, rows, cols = blocks["B: adjective → next word"]
    table = ch01.bigram_table(maps, CFG)
    assert rows == list(table.index) and set(table["1"]) <= set(cols)
    _, rows, cols = blocks["Σ_B (cosine): interchangeable words"]
    assert rows == cols and len(rows) == 3 * CFG.block_per_class
    spec = ch01.heatmap(__import__("altair").Chart(__import__("pandas").DataFrame())).to_dict()
    assert spec["width"] <= 560 and spec["encoding"]["color"]["legend"]["orient"] == "bottom"


def test_smoke_bounds_pass_the_maps_and_reject_a_shuffled_corpus(maps):
    bounds = load_thresholds("01_corpus_maps")["smoke"]
    assert check_thresholds(_measured(maps).numbers(), bounds) == []
    rng = np.random.default_rng(0)
    shuffled = rng.permuted(maps.sequences.tokens, axis=1)  # same tokens, order destroyed
    broken = dataclasses.replace(maps, stats=corpus_stats(shuffled, maps.tokenizer.vocab_size))
    problems = check_thresholds(_measured(broken).numbers(), bounds)
    assert any(p.startswith("b_rank_upon_after_once") for p in problems), problems


def _numbers(drop=0.0, rank=1, noun_ratio=3.0, phi=3.0, b_over_phi=10.0, class_ratio=2.5, other_over_phi=100.0):
    """Chapter 1's readings with each claim's value set (chance levels and sizes fixed)."""
    return MapsReadings(
        n_stories=100,
        n_sequences=90,
        vocab_size=1000,
        context=32,
        unk_fraction=0.05,
        drop_kept=int(100 * drop),
        drop_kept_fraction=drop,
        b_rank_upon_after_once=rank,
        b_adj_noun_share=noun_ratio * 0.1,
        b_adj_noun_chance=0.1,
        phi_pair_median_rank=phi,
        b_pair_median_rank=b_over_phi * phi,
        n_context_pairs=9,
        phi_pair_mismatched_median_rank=other_over_phi * phi,
        phi_rank_pond_for_fish=None,
        sigma_class_purity=class_ratio * 0.3,
        sigma_class_purity_raw=0.3,
        sigma_class_chance=0.3,
        fig5={a.key: _named(a) for a in FIGURE5},
        fig3_fish={"scores": {"the": 1.0, "pond": 2.0}, "missing": ["contains"], "pond_rank": 1},
    )


def _with_fig5(r, key, record):
    """``r`` with the Figure 5 group ``key`` read as ``record``."""
    return dataclasses.replace(r, fig5={**r.fig5, key: record})


def _named(a, ranks=None, missing=()):
    """A Figure 5 group's record with the partners at ``ranks`` (default 1, 2, ...)."""
    ranks = list(ranks or range(1, len(a.partners) + 1))
    share = None if missing else sum(r <= FIGURE5_TOP for r in ranks) / len(ranks)
    return {"ranks": dict(zip(a.partners, ranks)), "missing": list(missing), "share": share}


def test_every_claim_is_declared_once_with_a_section_of_the_page():
    ids = [c.id for c in CH01_CLAIMS]
    assert len(ids) == len(set(ids)) and set(claims.evidence(CH01_CLAIMS, _numbers())) == set(ids)
    source = Path(__file__).resolve().parents[3] / "book" / "part1" / "01_corpus_maps.ipynb"
    text = source.read_text()
    assert all(f"({c.section})=" in text for c in CH01_CLAIMS)
    assert TABLES[ch01.STEM] is CH01_CLAIMS and {c.chapter for c in CH01_CLAIMS} == {ch01.STEM}


def test_takeaway_reads_the_verdicts():
    assert "already hold recognisable pieces of language" in ch01.takeaway_prose(_ev(_numbers()))
    partial = ch01.takeaway_prose(_ev(_numbers(class_ratio=1.0)))
    assert "not (or only in part) for which words play the same part" in partial and "already hold" not in partial
    none = ch01.takeaway_prose(_ev(_numbers(noun_ratio=1.0, phi=100.0, class_ratio=1.0)))
    assert "hold for none of the maps" in none


@given(st.floats(1, 500), st.floats(1, 500))
@settings(max_examples=200, deadline=None)
def test_context_sentence_never_contradicts_its_ranks(phi, b):
    import types

    n = _numbers(phi=phi, b_over_phi=b / phi)
    text = ch01.context_prose(types.SimpleNamespace(n_readable=600), n, _ev(n)).split("\n\n")[0]
    shown_phi, shown_b = (float(x) for x in re.findall(r"\*\*(\d+)\*\*", text)[:2])
    if shown_phi < shown_b:
        assert "higher in $\\Phi$ than in $B$" in text
    elif shown_phi > shown_b:
        assert "higher in $B$ than in $\\Phi$" in text
    else:
        assert "alike in both" in text


def test_corpus_prose_branches_on_the_policy(maps):
    n = _measured(maps)
    unk = ch01.corpus_prose(maps, _ev(n))
    assert "Under the **unk** policy" in unk and "**Holds.**" in unk
    drop = dataclasses.replace(maps, corpus=dataclasses.replace(maps.corpus, policy="drop"))
    text = ch01.corpus_prose(drop, _ev(dataclasses.replace(n, drop_kept_fraction=0.5)))
    assert "follows the paper's **drop** policy" in text and "**Does not hold.**" in text
    assert ch01.profile_prose(
        dataclasses.replace(CFG, corpus=dataclasses.replace(CFG.corpus, n_stories=None))
    ).startswith("All the stories")


def test_the_context_prose_without_pairs_reads_no_rank(maps):
    n = dataclasses.replace(_measured(maps), phi_pair_median_rank=None, b_pair_median_rank=None, n_context_pairs=0)
    text = ch01.context_prose(maps, n, _ev(n))
    assert text.startswith("None of these pairs has both its words") and "nan" not in text.lower()


def test_a_vocabulary_too_small_for_the_tables_is_refused_in_one_line(maps, monkeypatch):
    monkeypatch.setenv("MECHBOOK_TINYSTORIES", str(SAMPLE))
    need = max(len(maps.words_of(c)) for c in ("noun", "verb", "adjective")) + 1
    with pytest.raises(ValueError, match=rf"too small for chapter 1: .* need {need} words of each class") as info:
        chapter_maps(CFG.corpus, need)
    assert "\n" not in str(info.value) and "use a larger corpus" in str(info.value)


def test_the_mismatched_row_control_against_a_literal_count(maps):
    """Each pair's control is the median rank of its surrounding in the other entities' rows of Φ,
    recounted here from the matrix: readable tokens only, the row word itself left out."""
    from mechbook.leading_terms.associations import mismatched_pair_ranks, readable_exclusions

    tok, phi = maps.tokenizer, maps.stats.Phi
    banned = set(readable_exclusions(tok))
    table = mismatched_pair_ranks(phi, tok)
    assert len(table) > 0
    pairs = set(zip(table["row"], table["column"]))
    rows = list(dict.fromkeys(table["row"]))
    for a, b, got in table.itertuples(index=False):
        ranks = []
        for o in (o for o in rows if o not in (a, b) and (o, b) not in pairs):
            i = tok.token_to_id[o]
            scores = [(phi[i, j], j) for t, j in tok.token_to_id.items() if t not in banned and t != o]
            ordered = [j for _, j in sorted(scores, key=lambda x: (-x[0], x[1]))]
            ranks.append(ordered.index(tok.token_to_id[b]) + 1)
        assert got == float(np.median(ranks))


def test_recurring_words_are_the_words_of_two_rows_or_more():
    import pandas as pd

    from mechbook.leading_terms.associations import recurring_words

    table = pd.DataFrame(
        [["pond", "day", "time"], ["sky", "day", "time"], ["day", "nest", ""], ["time", "time", ""]],
        index=["fish", "bird", "tree", "x"],
        columns=["1", "2", "3"],
    )
    literal = {}
    for word in {w for w in table.to_numpy().ravel() if w}:
        n = sum(word in set(row) for _, row in table.iterrows())
        if n >= 2:
            literal[word] = n
    got = recurring_words(table)
    assert got == literal == {"day": 3, "time": 3}
    assert list(got) == ["day", "time"], "most rows first, ties in order of first appearance"
    text = ch01.context_recurring_prose(table)
    assert "**7 of the 10**" in text and "*day* (3 rows)" in text


def test_named_table_shows_every_partner_with_its_rank_and_the_bar():
    fish = next(a for a in FIGURE5 if a.key == "phi_fish")
    n = _with_fig5(_numbers(), "phi_fish", _named(fish, ranks=[1, None, 31], missing=["lake"]))
    table = ch01.named_table(n)
    assert len(table) == sum(len(a.partners) for a in FIGURE5)
    assert list(table.columns) == ["map", "word", "named partner", "rank in the row", f"top-{FIGURE5_TOP} bar"]
    rows = table[table["word"] == "fish"].set_index("named partner")
    assert rows.loc["pond", "top-30 bar"] == "within" and rows.loc["pond", "rank in the row"] == "1"
    assert rows.loc["lake", "top-30 bar"] == "lake not in |V|" and rows.loc["lake", "rank in the row"] == ""
    assert rows.loc["water", "top-30 bar"] == "outside" and rows.loc["water", "rank in the row"] == "31"


def test_figure3_prose_names_the_first_word_as_the_verdict_does():
    def prose(**fig3):
        n = dataclasses.replace(_numbers(), fig3_fish=fig3) if fig3 else _numbers()
        return ch01.figure3_prose(n, _ev(n))

    won = prose()
    assert "*pond* 2, *the* 1, so *pond* ranks first" in won and "**Reproduced.**" in won
    assert "(*contains* outside the vocabulary of 1000 tokens)" in won
    lost = prose(scores={"the": 5e-6, "pond": 3e-6}, missing=["contains"], pond_rank=2)
    assert "*the* 5e-06, *pond* 3e-06, so *the* ranks first" in lost and "**Not reproduced.**" in lost
    none = prose(scores={}, missing=["fish"], pond_rank=None)
    assert "scores none of its words" in none and "**Untested here.**" in none
    assert "ranks first" not in prose(scores={"pond": 1.0}, missing=["the", "contains"], pond_rank=None)


def test_paper_figures_prose_counts_the_verdicts():
    n = _numbers()
    assert "this profile tests 8: 8 reproduced." in ch01.paper_figures_prose(n, _ev(n))
    birds = next(a for a in FIGURE5 if a.key == "phi_birds")
    flower = next(a for a in FIGURE5 if a.key == "phi_flower")
    n = _with_fig5(n, "phi_birds", _named(birds, ranks=[93, 9]))
    n = _with_fig5(n, "phi_flower", _named(flower, missing=["flower"]))
    n = dataclasses.replace(n, fig3_fish={**n.fig3_fish, "pond_rank": 2})
    text = ch01.paper_figures_prose(n, _ev(n))
    assert "this profile tests 7: 5 reproduced, 1 partly, 1 not reproduced; 1 name a word outside" in text
    assert text.count("\n- ") == 8


def test_figure5_ranks_on_the_smoke_maps_are_the_rows_of_top_k(maps):
    """The recorded ranks against the chapter's ranked tables: each partner stands at its rank in
    top_k's list of the row, read with the same exclusions."""
    from mechbook.leading_terms.associations import top_k

    n = _measured(maps)
    checked = 0
    for a in FIGURE5:
        r = n.fig5[a.key]
        if a.row in r["missing"]:
            continue
        matrix, exclude, self_out = map_row(maps, a.map)
        listed = top_k(
            matrix, maps.tokenizer, k=maps.tokenizer.vocab_size, rows=[a.row], exclude=exclude, exclude_self=self_out
        )["token"].tolist()
        for partner, rank in r["ranks"].items():
            if partner not in r["missing"]:
                assert listed[rank - 1] == partner
                checked += 1
    assert checked >= 8
