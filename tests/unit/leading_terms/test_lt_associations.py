"""Ranked association tables and heatmap frames of Part I."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.associations import (
    FUNCTION_WORDS,
    class_purity,
    content_words,
    cosine_normalise,
    labelled_words,
    matrix_frame,
    pair_ranks,
    rank_of,
    ranked_words,
    readable_exclusions,
    top_k,
)
from mechbook.leading_terms.tokenize import UNK, NaturalTokenizer, is_word

STORIES = [
    "The dog ran to the park. The dog saw a red ball and a big tree.",
    "The cat sat on the mat. The cat saw the dog. The bird sang in the tree.",
    "A duck swam in the pond with a fish. The fish was happy, the duck was happy too!",
]


@pytest.fixture(scope="module")
def tok() -> NaturalTokenizer:
    return NaturalTokenizer.fit(STORIES, 24, unk=True)


def _slow_top_k(matrix, tok, k, row, exclude, exclude_self):
    """Reference: sort (-score, id) pairs in Python."""
    a = tok.token_to_id[row]
    banned = {tok.token_to_id[t] for t in exclude if t in tok.token_to_id} | ({a} if exclude_self else set())
    cands = sorted((-matrix[a, c], c) for c in range(tok.vocab_size) if c not in banned)
    return [tok.id_to_token[c] for _, c in cands[:k]], [-s for s, _ in cands[:k]]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 30), st.booleans(), st.booleans())
def test_top_k_matches_a_slow_sort(tok, seed, k, exclude_self, ties):
    rng = np.random.default_rng(seed)
    V = tok.vocab_size
    matrix = rng.integers(0, 3, size=(V, V)).astype(float) if ties else rng.normal(size=(V, V))
    rows = ["dog", "the", "."]
    table = top_k(matrix, tok, k=k, rows=rows, exclude=(UNK, "a"), exclude_self=exclude_self)
    assert list(table.columns) == ["row", "rank", "token", "score"]
    for row in rows:
        got = table[table["row"] == row]
        tokens, scores = _slow_top_k(matrix, tok, k, row, (UNK, "a"), exclude_self)
        assert got["token"].tolist() == tokens
        assert got["score"].tolist() == scores
        assert got["rank"].tolist() == list(range(1, len(tokens) + 1))


def test_positive_keeps_only_scores_above_zero(tok):
    matrix = np.full((tok.vocab_size, tok.vocab_size), -1.0)
    matrix[tok.token_to_id["dog"], [tok.token_to_id["ran"], tok.token_to_id["saw"]]] = [0.5, 0.25]
    table = top_k(matrix, tok, k=10, rows=["dog", "cat"], positive=True)
    assert table["token"].tolist() == ["ran", "saw"] and table["row"].tolist() == ["dog", "dog"]


def test_rank_of_agrees_with_top_k(tok):
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(tok.vocab_size, tok.vocab_size))
    table = top_k(matrix, tok, k=tok.vocab_size, rows=["cat"])
    for _, line in table.iterrows():
        assert rank_of(matrix, tok, "cat", line["token"]) == line["rank"]
    with pytest.raises(ValueError, match="excluded"):
        rank_of(matrix, tok, "cat", UNK)


def test_content_words_are_frequent_non_function_words(tok):
    words = content_words(tok, n=5)
    assert len(words) == 5
    assert all(is_word(w) and w not in FUNCTION_WORDS for w in words)
    counts = [tok.counts[tok.token_to_id[w]] for w in words]
    assert counts == sorted(counts, reverse=True)
    skipped = [w for w in tok.id_to_token if is_word(w) and w not in FUNCTION_WORDS and w not in words]
    assert all(tok.counts[tok.token_to_id[w]] <= counts[-1] for w in skipped)


def test_top_k_defaults_to_content_words(tok):
    matrix = np.eye(tok.vocab_size)
    table = top_k(matrix, tok, k=1)
    assert table["row"].tolist() == content_words(tok)
    assert (table["row"] == table["token"]).all()


def test_matrix_frame_holds_the_entries(tok):
    rng = np.random.default_rng(1)
    matrix = rng.normal(size=(tok.vocab_size, tok.vocab_size))
    rows, cols = ["dog", "cat"], ["tree", "park", "dog"]
    frame = matrix_frame(matrix, tok, rows, cols, name="B")
    assert len(frame) == 6
    for _, line in frame.iterrows():
        assert line["B"] == matrix[tok.token_to_id[line["row"]], tok.token_to_id[line["column"]]]
    assert frame["row"].tolist() == ["dog"] * 3 + ["cat"] * 3 and frame["column"].tolist() == cols * 2
    for _, group in frame.groupby("row"):
        values = group["B"].to_numpy()
        peak = values.max() if values.max() > 0 else np.abs(values).max()
        assert np.allclose(group["relative"], np.clip(values / peak, -1, 1))
    negative = matrix_frame(-np.abs(matrix), tok, rows, cols)
    assert (negative["relative"] < 0).all() and np.isclose(negative["relative"].min(), -1.0)
    zero = matrix_frame(np.zeros_like(matrix), tok, rows, cols)
    assert (zero["relative"] == 0).all()
    assert frame["row_order"].tolist() == [0, 0, 0, 1, 1, 1] and frame["column_order"].tolist() == [0, 1, 2] * 2


def test_ranked_words_is_the_table_by_rank(tok):
    rng = np.random.default_rng(8)
    matrix = rng.normal(size=(tok.vocab_size, tok.vocab_size))
    matrix[tok.token_to_id["cat"]] = -1.0
    matrix[tok.token_to_id["cat"], tok.token_to_id["dog"]] = 1.0
    table = top_k(matrix, tok, k=3, rows=["the", "cat"], positive=True)
    wide = ranked_words(table)
    assert wide.index.tolist() == ["the", "cat"] and wide.columns.tolist() == ["1", "2", "3"]
    assert wide.loc["the"].tolist() == table.loc[table["row"] == "the", "token"].tolist()
    assert wide.loc["cat"].tolist() == ["dog", "", ""]


def test_bad_input_is_a_clear_error(tok):
    V = tok.vocab_size
    with pytest.raises(ValueError, match=f"expected \\({V}, {V}\\)"):
        top_k(np.zeros((V, V + 1)), tok)
    with pytest.raises(ValueError, match=r"'zebra'.*not in the vocabulary"):
        top_k(np.zeros((V, V)), tok, rows=["zebra"])
    with pytest.raises(ValueError, match="k must be >= 1"):
        top_k(np.zeros((V, V)), tok, k=0)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        matrix_frame(np.zeros((V, V)), tok, ["dog"], ["unicorn"])


CLASSES = {
    "animal": ("dog", "cat", "bird", "fish", "duck"),
    "place": ("park", "tree", "pond", "mat"),
    "verb": ("ran", "sat", "swam", "saw"),
}


def test_class_purity_against_a_slow_count(tok):
    rng = np.random.default_rng(5)
    sim = rng.normal(size=(tok.vocab_size, tok.vocab_size))
    words = labelled_words(tok, CLASSES)
    assert set(words["word"]) <= set(tok.id_to_token) and len(words) >= 8
    purity, chance = class_purity(sim, tok, k=2, classes=CLASSES)
    same, n = 0, len(words)
    for _, w in words.iterrows():
        a = tok.token_to_id[w["word"]]
        others = sorted(
            (-sim[a, tok.token_to_id[o["word"]]], j, o["class"]) for j, o in words.iterrows() if o["word"] != w["word"]
        )
        same += sum(c == w["class"] for _, _, c in others[:2])
    assert purity == pytest.approx(same / (2 * n))
    counts = words["class"].value_counts()
    assert chance == pytest.approx(sum(counts[c] * (counts[c] - 1) for c in counts.index) / (n * (n - 1)))


def test_class_purity_is_one_for_a_block_similarity(tok):
    words = labelled_words(tok, CLASSES)
    sim = np.zeros((tok.vocab_size, tok.vocab_size))
    for c in CLASSES:
        ids = [tok.token_to_id[w] for w in words.loc[words["class"] == c, "word"]]
        sim[np.ix_(ids, ids)] = 1.0
    sizes = words["class"].map(words["class"].value_counts())
    best = float(np.mean(np.minimum(sizes - 1, 2) / 2))  # a class of n words offers n - 1 neighbours
    assert class_purity(sim, tok, k=2, classes=CLASSES)[0] == pytest.approx(best)
    assert class_purity(-sim, tok, k=2, classes=CLASSES)[0] == 0.0
    with pytest.raises(ValueError, match="labelled words"):
        class_purity(sim, tok, classes={"animal": ("dog", "cat")})


def test_cosine_normalise_is_the_cosine_of_columns():
    rng = np.random.default_rng(6)
    B = rng.normal(size=(7, 5))
    B[:, 2] = 0.0
    cos = cosine_normalise(B.T @ B)
    for a in range(5):
        for b in range(5):
            na, nb = np.linalg.norm(B[:, a]), np.linalg.norm(B[:, b])
            expected = B[:, a] @ B[:, b] / (na * nb) if na > 0 and nb > 0 else 0.0
            assert cos[a, b] == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="square"):
        cosine_normalise(np.zeros((2, 3)))


def test_pair_ranks_are_readable_ranks(tok):
    rng = np.random.default_rng(7)
    maps = {
        "X": rng.normal(size=(tok.vocab_size, tok.vocab_size)),
        "Y": rng.normal(size=(tok.vocab_size, tok.vocab_size)),
    }
    pairs = [("dog", "park"), ("fish", "pond"), ("dog", "zebra")]
    ranks = pair_ranks(maps, tok, pairs)
    assert ranks[["row", "column"]].values.tolist() == [["dog", "park"], ["fish", "pond"]]
    excl = readable_exclusions(tok)
    assert "the" in excl and "." in excl and UNK in excl and "dog" not in excl
    for _, line in ranks.iterrows():
        for name, m in maps.items():
            assert line[name] == rank_of(m, tok, line["row"], line["column"], exclude=excl, exclude_self=True)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 5), st.booleans())
def test_pair_overlaps_matched_is_ranking_overlap_and_mismatched_a_literal_mean(seed, k, positive):
    from mechbook.leading_terms.associations import pair_overlaps
    from mechbook.leading_terms.leading import ranking_overlap

    rng = np.random.default_rng(seed)
    theory, trained = rng.standard_normal((7, 9)), rng.standard_normal((7, 9))
    theory[:, 0] = 1.0  # every row has a positive entry
    rows, exclude = [0, 2, 3, 5], [4]
    matched, mismatched = pair_overlaps(theory, trained, rows, k, exclude, positive)
    assert matched == pytest.approx(ranking_overlap(theory, trained, rows, k, exclude, positive))
    keep = [c for c in range(9) if c not in exclude]

    def top(row, n):
        return set(sorted(keep, key=lambda c: (-row[c], c))[:n])

    shares = []
    for a in rows:
        n = min(k, sum(theory[a, c] > 0 for c in keep)) if positive else k
        shares += [len(top(theory[a], n) & top(trained[b], n)) / n for b in rows if b != a]
    assert mismatched == pytest.approx(np.mean(shares))


def test_a_shared_row_profile_overlaps_as_much_with_any_row_and_centring_removes_it():
    from mechbook.leading_terms.associations import overlap_reading, row_centred

    rng = np.random.default_rng(0)
    profile = np.linspace(5.0, 0.0, 30)
    theory = profile + 0.01 * rng.standard_normal((8, 30))
    reading = overlap_reading(theory, theory + 0.001 * rng.standard_normal((8, 30)), list(range(8)), k=5)
    assert reading.matched == pytest.approx(1.0) and reading.mismatched == pytest.approx(1.0)
    assert reading.excess == pytest.approx(0.0) and reading.chance == pytest.approx(5 / 30)
    assert reading.centred > reading.centred_mismatched + 0.3
    assert np.allclose(row_centred(theory).mean(axis=0), 0.0)
    with pytest.raises(ValueError, match="at least two rows"):
        overlap_reading(theory, theory, [0], k=5)
