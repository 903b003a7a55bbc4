"""Tokenizers and training sequences of Part I."""

from __future__ import annotations

import pickle
import random
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.leading_terms.tokenize import (
    UNK,
    BPETokenizer,
    CasedBPETokenizer,
    NaturalTokenizer,
    join_natural,
    make_sequences,
    natural_tokens,
    policy_survivors,
)

STORIES = [
    'Once upon a time, there was a little girl named Lily. She had a red ball.\nLily said, "I love my ball!"',
    "One day, Tom saw a big dog in the park. The dog ran to Tom and Tom was happy.",
    "The fish swam in the pond. The duck swam in the pond too. They were friends.",
    "Sue had 2 cats. Sue's cats liked to play with a ball. It was a sunny day.",
]

TEXT = st.text(alphabet=st.sampled_from(list("abcXYZ éß .,!?'\"-()12\n")), max_size=60)


def test_natural_tokens_keep_words_and_numbers_whole_and_split_the_rest():
    assert natural_tokens('Lily\'s dog ran, 12 times!\n"Wow"') == [
        "lily",
        "'",
        "s",
        "dog",
        "ran",
        ",",
        "12",
        "times",
        "!",
        '"',
        "wow",
        '"',
    ]


def test_join_natural_is_readable():
    text = 'Lily said, "I can\'t go!" Then she ran (fast) to the ice-cream shop at 12.'
    assert (
        join_natural(natural_tokens(text))
        == 'lily said, "i can\'t go!" then she ran (fast) to the ice-cream shop at 12.'
    )


@settings(max_examples=200, deadline=None)
@given(TEXT)
def test_join_natural_gives_the_same_tokens_back(text):
    tokens = natural_tokens(text)
    assert natural_tokens(join_natural(tokens)) == tokens


def test_fit_keeps_the_most_frequent_tokens_in_frequency_order():
    counts = Counter(t for s in STORIES for t in natural_tokens(s))
    tok = NaturalTokenizer.fit(STORIES, vocab_size=11, unk=True)
    real = tok.id_to_token[:-1]
    assert tok.vocab_size == 11 and tok.id_to_token[-1] == UNK and tok.unk_id == 10
    freqs = [counts[t] for t in real]
    assert freqs == sorted(freqs, reverse=True)
    assert min(freqs) >= max(c for t, c in counts.items() if t not in real)
    assert tok.counts[:-1].tolist() == freqs and tok.counts[-1] == sum(counts.values()) - sum(freqs)


def test_fit_is_deterministic_whatever_the_story_order():
    shuffled = STORIES[:]
    random.Random(0).shuffle(shuffled)
    for V in (5, 17, 40):
        assert NaturalTokenizer.fit(STORIES, V).id_to_token == NaturalTokenizer.fit(shuffled, V).id_to_token


def test_encode_decode_round_trip_without_oov():
    n_distinct = len({t for s in STORIES for t in natural_tokens(s)})
    tok = NaturalTokenizer.fit(STORIES, n_distinct, unk=False)
    for story in STORIES:
        ids = tok.encode(story)
        assert natural_tokens(tok.decode(ids)) == natural_tokens(story)
        assert tok.decode(ids) == join_natural(natural_tokens(story))


def test_oov_becomes_unk_or_a_clear_error():
    tok = NaturalTokenizer.fit(STORIES, 6, unk=True)
    ids = tok.encode("the zebra.")
    assert ids == [tok.token_to_id["the"], tok.unk_id, tok.token_to_id["."]]
    assert tok.decode(ids) == "the <unk>."
    strict = NaturalTokenizer.fit(STORIES, 5, unk=False)
    assert strict.lookup("the zebra").tolist() == [strict.token_to_id["the"], -1]
    with pytest.raises(ValueError, match=r"zebra.*unk=True"):
        strict.encode("the zebra")


def test_fit_errors_are_clear():
    n_distinct = len({t for s in STORIES for t in natural_tokens(s)})
    with pytest.raises(ValueError, match=f"only {n_distinct} distinct"):
        NaturalTokenizer.fit(STORIES, n_distinct + 2, unk=True)
    with pytest.raises(ValueError, match="corpus is empty"):
        NaturalTokenizer.fit([], 10)
    with pytest.raises(ValueError, match="corpus is empty"):
        NaturalTokenizer.fit(["  ", "\n"], 10)
    with pytest.raises(TypeError, match="list of stories"):
        NaturalTokenizer.fit("one story", 10)
    with pytest.raises(ValueError, match="no room"):
        NaturalTokenizer.fit(STORIES, 1, unk=True)


@pytest.fixture(scope="module")
def bpe() -> BPETokenizer:
    return BPETokenizer.fit(STORIES * 3, vocab_size=300)


def test_bpe_round_trip_is_exact(bpe):
    assert bpe.vocab_size == 300 and bpe.unk_id is None
    for story in STORIES:
        assert bpe.decode(bpe.encode(story)) == story.lower()
    assert len(bpe.encode(STORIES[0])) < len(STORIES[0].encode())  # merges were learned


@settings(max_examples=50, deadline=None)
@given(TEXT)
def test_bpe_spells_any_text(bpe, text):
    assert bpe.decode(bpe.encode(text)) == text.lower()


def test_bpe_survives_pickling(bpe):
    import pickle

    again = pickle.loads(pickle.dumps(bpe))
    assert again.encode(STORIES[1]) == bpe.encode(STORIES[1]) and again.id_to_token == bpe.id_to_token


def test_bpe_errors_are_clear():
    with pytest.raises(ValueError, match="vocab_size >= 256"):
        BPETokenizer.fit(STORIES, 100)
    with pytest.raises(ValueError, match="no <unk>"):
        BPETokenizer.fit(STORIES, 300, unk=True)
    with pytest.raises(ValueError, match="BPE stopped at"):
        BPETokenizer.fit(["ab ab"], 400)


def _reference_sequences(stories, tok, T, policy):
    """Slow reference: tokens of each story in Python lists, the policy applied by hand."""
    rows = []
    for s in stories:
        toks = natural_tokens(s)
        if len(toks) < T + 1:
            continue
        if policy == "drop" and any(t not in tok.token_to_id for t in toks):
            continue
        rows.append([tok.token_to_id.get(t, tok.unk_id) for t in toks[: T + 1]])
    return rows


@pytest.mark.parametrize("policy", ["unk", "drop"])
def test_make_sequences_applies_the_policy(policy):
    stories = STORIES + ["The duck and the fish were friends in the pond."]
    tok = NaturalTokenizer.fit(stories, 40, unk=policy == "unk")
    T = 10
    seq = make_sequences(stories, tok, T, policy)
    ref = _reference_sequences(stories, tok, T, policy)
    assert seq.tokens.dtype == np.int64 and seq.tokens.shape == (len(ref), T + 1) and seq.context == T
    assert seq.tokens.tolist() == ref
    assert (seq.n_stories, seq.n_kept, seq.policy) == (len(stories), len(ref), policy)
    assert seq.n_long_enough == sum(len(natural_tokens(s)) >= T + 1 for s in stories)
    n_unk = sum(r.count(tok.unk_id) for r in ref) if tok.unk_id is not None else 0
    assert seq.unk_fraction == pytest.approx(n_unk / (len(ref) * (T + 1)))
    if policy == "unk":
        assert seq.unk_fraction > 0


def test_drop_keeps_only_stories_fully_in_the_vocabulary():
    short_vocab = NaturalTokenizer.fit(STORIES, 30, unk=False)
    with pytest.raises(ValueError, match="nothing left after policy 'drop' with \\|V\\|=30, T=5"):
        make_sequences(STORIES, short_vocab, 5, "drop")
    in_vocab = [" ".join(["the", "pond", "."] * 3)]
    seq = make_sequences(STORIES + in_vocab, short_vocab, 5, "drop")
    assert seq.n_kept == 1 and seq.tokens[0].tolist() == short_vocab.encode(in_vocab[0])[:6]


def test_make_sequences_errors_are_clear():
    tok = NaturalTokenizer.fit(STORIES, 20, unk=True)
    longest = max(len(natural_tokens(s)) for s in STORIES)
    with pytest.raises(ValueError, match=f"longest of the 4 stories has {longest}"):
        make_sequences(STORIES, tok, longest, "unk")
    with pytest.raises(ValueError, match="corpus is empty"):
        make_sequences([], tok, 4)
    with pytest.raises(ValueError, match="policy must be one of"):
        make_sequences(STORIES, tok, 4, "truncate")
    with pytest.raises(ValueError, match="context T must be >= 1"):
        make_sequences(STORIES, tok, 0)
    strict = NaturalTokenizer.fit(STORIES, 20, unk=False)
    with pytest.raises(ValueError, match="no <unk>"):
        make_sequences(STORIES, strict, 4, "unk")


def test_policy_survivors_count_what_each_policy_keeps():
    stories = STORIES + [" ".join(["the", "pond", "."] * 4), "the pond."]
    strict = NaturalTokenizer.fit(stories, 30, unk=False)
    with_unk = NaturalTokenizer.fit(stories, 31, unk=True)
    T = 5
    for tok in (strict, with_unk):
        counts = policy_survivors(stories, tok, T)
        assert counts["stories"] == len(stories)
        assert counts["long_enough"] == sum(len(natural_tokens(s)) >= T + 1 for s in stories)
        assert counts["in_vocabulary"] == make_sequences(stories, strict, T, "drop").n_kept == 1
    assert make_sequences(stories, with_unk, T, "unk").n_kept == policy_survivors(stories, with_unk, T)["long_enough"]


def test_cased_bpe_keeps_case_splits_at_spaces_and_marks_unseen_characters():
    tok = CasedBPETokenizer.fit(STORIES * 3, vocab_size=120)
    assert tok.vocab_size == 120 and tok.id_to_token[tok.unk_id] == "[UNK]"
    assert all(" " not in t for t in tok.id_to_token)
    text = STORIES[0]
    pieces = [tok.id_to_token[i] for i in tok.encode(text)]
    assert "".join(pieces) == "".join(text.split())  # pre-split on whitespace, case kept, nothing lost
    assert any(p != p.lower() for p in pieces)
    assert tok.lookup("Ω")[0] == tok.unk_id
    assert tok.counts(STORIES).sum() == sum(len(tok.encode(s)) for s in STORIES)
    again = pickle.loads(pickle.dumps(tok))
    assert again.encode(text) == tok.encode(text)


def test_cased_bpe_size_errors_say_what_to_do():
    alphabet = len({ch for s in STORIES for ch in s if not ch.isspace()})
    with pytest.raises(ValueError, match=f"at least {alphabet + 1}"):
        CasedBPETokenizer.fit(STORIES, alphabet)
    with pytest.raises(ValueError, match="no more pairs to merge"):
        CasedBPETokenizer.fit(["ab ab"], 50)
