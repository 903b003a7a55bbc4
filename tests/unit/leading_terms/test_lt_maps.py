"""Chapter 1's readings of the paper's named associations (mechbook.leading_terms.maps): the ranks of
named targets in a row of a map against a literal argsort, on a hand-built matrix, and the Figure 5
and Figure 3 readings on small maps whose answers are known."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.associations import rank_of
from mechbook.leading_terms.maps import (
    FIGURE5,
    FIGURE5_TOP,
    NamedAssociation,
    figure3_reading,
    map_row,
    named_reading,
    target_ranks,
    word_exclusions,
)
from mechbook.leading_terms.tokenize import UNK

WORDS = [UNK, ".", "the", "pond", "contains", "fish", "lake", "water", "red", "truck", "7", "they", "she"]


def _tok(words=WORDS):
    return SimpleNamespace(
        vocab_size=len(words), id_to_token=list(words), token_to_id={w: i for i, w in enumerate(words)}
    )


def _slow_ranks(matrix, tok, row, targets, exclude, exclude_self):
    """Reference: argsort the candidates of the row by (-entry, id) and read each target's place."""
    a = tok.token_to_id[row]
    banned = {tok.token_to_id[t] for t in exclude if t in tok.token_to_id} | ({a} if exclude_self else set())
    cands = np.array([c for c in range(tok.vocab_size) if c not in banned])
    order = cands[np.lexsort((cands, -matrix[a, cands]))]
    return tuple(int(np.flatnonzero(order == tok.token_to_id[t])[0]) + 1 for t in targets)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.booleans(), st.booleans(), st.sampled_from(["fish", "they", "."]))
def test_target_ranks_match_a_literal_argsort(seed, ties, exclude_self, row):
    tok = _tok()
    rng = np.random.default_rng(seed)
    V = tok.vocab_size
    matrix = rng.integers(0, 3, size=(V, V)).astype(float) if ties else rng.normal(size=(V, V))
    exclude = (UNK, ".", "the")
    targets = [t for t in ("pond", "water", "she", "7", "truck") if not (exclude_self and t == row)]
    got = target_ranks(matrix, tok, row, targets, exclude=exclude, exclude_self=exclude_self)
    assert got == _slow_ranks(matrix, tok, row, targets, exclude, exclude_self)
    for t, r in zip(targets, got):
        assert r == rank_of(matrix, tok, row, t, exclude=exclude, exclude_self=exclude_self)


def test_target_ranks_on_a_hand_built_row():
    tok = _tok(["a", "b", "c", "d", "e"])
    m = np.zeros((5, 5))
    m[0] = [9.0, 1.0, 5.0, 5.0, -2.0]  # row a: a (itself) 9, c and d tie at 5, b 1, e -2
    m[1] = [0.0, 0.0, 0.0, 0.0, 100.0]  # another row: must not count
    assert target_ranks(m, tok, "a", ["a", "c", "d", "b", "e"]) == (1, 2, 3, 4, 5)
    assert target_ranks(m, tok, "a", ["c", "d", "b", "e"], exclude_self=True) == (1, 2, 3, 4)
    assert target_ranks(m, tok, "a", ["d", "e"], exclude=["c"], exclude_self=True) == (1, 3)


def test_target_ranks_refuse_what_they_cannot_rank():
    tok = _tok(["a", "b", "c"])
    m = np.eye(3)
    with pytest.raises(ValueError, match=r"\['zebra'\] are not in the vocabulary"):
        target_ranks(m, tok, "a", ["zebra"])
    with pytest.raises(ValueError, match=r"\['b'\] are excluded from the ranking of 'a'"):
        target_ranks(m, tok, "a", ["b"], exclude=["b"])
    with pytest.raises(ValueError, match="excluded"):
        target_ranks(m, tok, "a", ["a"], exclude_self=True)
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        target_ranks(np.eye(2), tok, "a", ["b"])


def _maps(tok, B=None, Phi=None, sigma=None):
    V = tok.vocab_size
    zero = np.zeros((V, V))
    readable = [t for t in tok.id_to_token if t in (UNK, ".", "7", "the", "they", "she")]
    return SimpleNamespace(
        tokenizer=tok,
        stats=SimpleNamespace(B=zero if B is None else B, Phi=zero if Phi is None else Phi),
        sigma_cos=zero if sigma is None else sigma,
        readable=readable,
    )


def test_phi_is_read_in_the_entitys_row_and_sigma_keeps_function_words():
    tok = _tok()
    ids = tok.token_to_id
    phi = np.zeros((tok.vocab_size, tok.vocab_size))
    phi[ids["fish"], ids["pond"]] = 3.0  # fish's row: pond first
    phi[ids["water"], ids["fish"]] = 9.0  # fish in water's row: read by columns, water would rank first
    phi[ids["fish"], ids["the"]] = 10.0  # a function word: not a readable candidate of Φ
    phi[ids["fish"], ids["fish"]] = 20.0  # the row's own token: left out
    m = _maps(tok, Phi=phi)
    assoc = NamedAssociation("t", "Φ", "fish", ("pond",))
    assert named_reading(m, assoc).ranks == (1,)
    sigma = np.zeros_like(phi)
    sigma[ids["they"], ids["she"]] = 0.9
    sigma[ids["they"], ids["they"]] = 1.0
    sigma[ids["they"], ids["."]] = 5.0  # punctuation: never a word's neighbour
    m = _maps(tok, sigma=sigma)
    assert named_reading(m, NamedAssociation("t", "Σ_B", "they", ("she",))).ranks == (1,)
    assert set(word_exclusions(tok)) == {UNK, ".", "7"}
    matrix, exclude, self_out = map_row(m, "B")
    assert matrix is m.stats.B and exclude == m.readable and not self_out
    with pytest.raises(ValueError, match="map must be one of"):
        map_row(m, "G")


def test_a_named_reading_counts_its_top_and_names_the_words_it_lacks():
    tok = _tok()
    ids = tok.token_to_id
    phi = np.zeros((tok.vocab_size, tok.vocab_size))
    phi[ids["fish"], [ids["pond"], ids["lake"], ids["water"], ids["contains"]]] = [4.0, 1.0, 3.0, 2.0]
    m = _maps(tok, Phi=phi)
    assoc = NamedAssociation("t", "Φ", "fish", ("pond", "lake", "water"))
    reading = named_reading(m, assoc, top=2)  # pond 1, water 2, contains 3, lake 4
    assert reading.ranks == (1, 4, 2) and reading.missing == () and reading.share == pytest.approx(2 / 3)
    assert reading.record() == {"ranks": {"pond": 1, "lake": 4, "water": 2}, "missing": [], "share": reading.share}
    assert named_reading(m, assoc).share == 1.0 and named_reading(m, assoc).top == FIGURE5_TOP
    lacking = named_reading(m, NamedAssociation("t", "Φ", "fish", ("pond", "nest")))
    assert lacking.ranks == (1, None) and lacking.missing == ("nest",) and lacking.share is None
    no_row = named_reading(m, NamedAssociation("t", "Φ", "birds", ("pond", "sky")))
    assert no_row.ranks == (None, None) and no_row.missing == ("birds", "sky")


def test_figure5_is_the_papers_figure():
    assert [a.paper for a in FIGURE5] == [
        "Figure 5, B: red → truck, among common objects",
        "Figure 5, Σ_B: they ∼ she, he, it",
        "Figure 5, Σ_B: happy ∼ sad, excited",
        "Figure 5, Σ_B: wanted ∼ saw, had",
        "Figure 5, Φ: fish → pond, lake, water",
        "Figure 5, Φ: flower → garden",
        "Figure 5, Φ: birds → nest, sky",
    ]
    assert len({a.key for a in FIGURE5}) == len(FIGURE5) and FIGURE5_TOP == 30


def test_figure3_compares_the_sentences_words_in_fishs_row():
    tok = _tok()
    ids = tok.token_to_id
    phi = np.zeros((tok.vocab_size, tok.vocab_size))
    phi[ids["fish"], [ids["the"], ids["pond"], ids["contains"]]] = [2.0, 3.0, 1.0]
    phi[ids["fish"], ids["water"]] = 50.0  # not a word of the sentence: not compared
    got = figure3_reading(_maps(tok, Phi=phi))
    assert got == {"scores": {"the": 2.0, "pond": 3.0, "contains": 1.0}, "missing": [], "pond_rank": 1}
    phi[ids["fish"], ids["the"]] = 5.0  # a frequent word above pond: pond is second
    assert figure3_reading(_maps(tok, Phi=phi))["pond_rank"] == 2
    short = _tok([w for w in WORDS if w != "contains"])
    phi_short = np.zeros((short.vocab_size, short.vocab_size))
    phi_short[short.token_to_id["fish"], short.token_to_id["the"]] = -1.0
    got = figure3_reading(_maps(short, Phi=phi_short))
    assert got["missing"] == ["contains"] and set(got["scores"]) == {"the", "pond"} and got["pond_rank"] == 1
    no_fish = _tok([w for w in WORDS if w != "fish"])
    got = figure3_reading(_maps(no_fish))
    assert got == {"scores": {}, "missing": ["fish"], "pond_rank": None}
    only_pond = _tok([UNK, "pond", "fish"])
    assert figure3_reading(_maps(only_pond))["pond_rank"] is None


def test_the_models_vocabulary_counts_the_chapters_words_it_keeps():
    """in_model_vocabulary against a literal count: lexicon words and scene pairs of chapter 1's
    vocabulary that a smaller vocabulary keeps, and the words it loses to <unk>."""
    from types import SimpleNamespace

    import pandas as pd

    from mechbook.leading_terms.associations import CONTEXT_PAIRS
    from mechbook.leading_terms.maps import in_model_vocabulary

    big = [w for pair in CONTEXT_PAIRS for w in pair] + ["red", "happy", "ran"]
    small = ["fish", "pond", "water", "red"]
    lexicon = pd.DataFrame(
        {"word": ["red", "happy", "ran", "fish"], "class": ["adjective", "adjective", "verb", "noun"]}
    )
    maps = SimpleNamespace(tokenizer=SimpleNamespace(token_to_id={w: i for i, w in enumerate(big)}), lexicon=lexicon)
    model = SimpleNamespace(token_to_id={w: i for i, w in enumerate(small)}, vocab_size=len(small))
    got = in_model_vocabulary(maps, model)
    pairs_kept = sum(a in small and b in small for a, b in CONTEXT_PAIRS)
    assert got == {
        "model_vocab_size": 4,
        "lexicon": 4,
        "lexicon_kept": 2,
        "lexicon_lost": ["happy", "ran"],
        "pairs": len(CONTEXT_PAIRS),
        "pairs_kept": pairs_kept,
    }
    assert pairs_kept == 2, "fish-pond and fish-water"
