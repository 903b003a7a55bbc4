"""Chapter 1's reading of the three maps: the corpus, its tokenizer and statistics, and the numbers
that say what the maps hold (computed here, presented by :mod:`mechbook.chapters.ch01_corpus_maps`).

:func:`build_maps` reads the stories, fits the tokenizer, cuts the sequences and computes B, Φ and
Σ_B (cached); :func:`maps_numbers` measures them: the rank of *upon* after *once* in B, the share
of lexicon nouns among the adjectives' strongest successors (and its chance level), the median
rank of known (entity, surrounding) pairs in Φ and in B, the word-class purity of Σ̃_B's
nearest neighbours (and its chance level), and the paper's own named associations: the ranks of
Figure 5's named words in their row's top 30 (:data:`FIGURE5`, :func:`named_reading`) and Figure 3's
sentence read through Φ (:func:`figure3_reading`), each rank from :func:`target_ranks`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from mechbook.leading_terms.associations import (
    CONTEXT_PAIRS,
    WORD_CLASSES,
    class_purity,
    cosine_normalise,
    labelled_words,
    mismatched_pair_ranks,
    pair_ranks,
    rank_of,
    readable_exclusions,
    top_k,
)
from mechbook.leading_terms.corpus import CorpusConfig, corpus_stories, load_corpus
from mechbook.leading_terms.stats import CorpusStats, cached_corpus_stats
from mechbook.leading_terms.tokenize import UNK, SequenceSet, Tokenizer, is_word, policy_survivors


@dataclass
class CorpusMaps:
    """A corpus and its three maps: ``n_read`` stories read, the fitted tokenizer, the training
    sequences, how many stories each vocabulary policy keeps (``survivors``) and the statistics
    (B, Φ, Σ_B ...)."""

    corpus: CorpusConfig
    n_read: int
    tokenizer: Tokenizer
    sequences: SequenceSet
    survivors: dict[str, int]
    stats: CorpusStats

    @cached_property
    def readable(self) -> list[str]:
        """Tokens left out of the readable tables (punctuation, function words, ``<unk>``)."""
        return readable_exclusions(self.tokenizer)

    @cached_property
    def lexicon(self) -> pd.DataFrame:
        """The hand-labelled lexicon words in the vocabulary (columns word, class)."""
        return labelled_words(self.tokenizer)

    def words_of(self, cls: str) -> list[str]:
        """The lexicon's words of class ``cls`` (noun, verb, adjective) in the vocabulary."""
        return self.lexicon.loc[self.lexicon["class"] == cls, "word"].tolist()

    @cached_property
    def entities(self) -> list[str]:
        """The entities of :data:`CONTEXT_PAIRS` in the vocabulary, in order, each once."""
        return list(dict.fromkeys(a for a, _ in CONTEXT_PAIRS if a in self.tokenizer.token_to_id))

    @cached_property
    def sigma_cos(self) -> np.ndarray:
        """Σ̃_B: the cosine of B's columns, Σ_B[c, c'] / √(Σ_B[c, c] Σ_B[c', c'])."""
        return cosine_normalise(self.stats.Sigma_B)

    @property
    def n_readable(self) -> int:
        """Tokens of the vocabulary outside :attr:`readable`."""
        return self.tokenizer.vocab_size - len(self.readable)


def build_maps(corpus: CorpusConfig) -> CorpusMaps:
    """Read the stories, fit the tokenizer, cut the sequences and compute the maps (cached)."""
    stories = corpus_stories(corpus)
    tokenizer, sequences = load_corpus(corpus)
    survivors = policy_survivors(stories, tokenizer, corpus.context)
    stats = cached_corpus_stats(sequences.tokens, tokenizer.vocab_size)
    return CorpusMaps(corpus, len(stories), tokenizer, sequences, survivors, stats)


def chapter_maps(corpus: CorpusConfig, per_class: int) -> CorpusMaps:
    """Chapter 1's corpus and its three maps (:func:`build_maps`, cached); refused, in one line,
    when its vocabulary holds fewer than ``per_class`` lexicon words of a class (the chapter's
    tables need that many) or no entity of a scene pair."""
    m = build_maps(corpus)
    have = {c: len(m.words_of(c)) for c in ("noun", "verb", "adjective")}
    short = {c: k for c, k in have.items() if k < per_class}
    if short or not m.entities:
        lacking = [f"{k} {c}s" for c, k in short.items()] + ([] if m.entities else ["no entity of a scene pair"])
        raise ValueError(
            f"the corpus is too small for chapter 1: its {m.tokenizer.vocab_size}-token vocabulary holds only "
            f"{' and '.join(lacking)} of the chapter's lexicon, where its tables need {per_class} words of "
            "each class and the scene pairs' entities: use a larger corpus (the 5,000-story sample has them)"
        )
    return m


def in_model_vocabulary(m: CorpusMaps, model: Tokenizer) -> dict[str, Any]:
    """Which of chapter 1's words the vocabulary of the models of chapters 2-5 (``model``, smaller
    than chapter 1's) holds: of the lexicon words in ``m``'s vocabulary (``lexicon_kept`` of
    ``lexicon``) and of the scene pairs with both words there (``pairs_kept`` of ``pairs``), with the
    lexicon words the models see only as ``<unk>`` (``lexicon_lost``). Chapter 1 says with it how
    far its tables are the maps a trained weight of those chapters can hold."""
    words = m.lexicon["word"].tolist()
    pairs = [(a, b) for a, b in CONTEXT_PAIRS if a in m.tokenizer.token_to_id and b in m.tokenizer.token_to_id]
    lost = [w for w in words if w not in model.token_to_id]
    return {
        "model_vocab_size": model.vocab_size,
        "lexicon": len(words),
        "lexicon_kept": len(words) - len(lost),
        "lexicon_lost": lost,
        "pairs": len(pairs),
        "pairs_kept": sum(a in model.token_to_id and b in model.token_to_id for a, b in pairs),
    }


def pair_rank_table(m: CorpusMaps) -> pd.DataFrame:
    """Rank of each (entity, surrounding) pair's surrounding in the entity's row of Φ and of B."""
    return pair_ranks({"rank in Φ": m.stats.Phi, "rank in B": m.stats.B}, m.tokenizer)


def target_ranks(
    matrix: np.ndarray,
    tokenizer: Tokenizer,
    row: str,
    targets: Sequence[str],
    exclude: Iterable[str] = (UNK,),
    exclude_self: bool = False,
) -> tuple[int, ...]:
    """Rank (1 = strongest) of each of ``targets`` in the row of ``row``: one plus the number of
    candidate columns with a larger entry, plus those with an equal entry and a smaller token id
    (the order of :func:`~mechbook.leading_terms.associations.top_k`). The candidates are every
    column but those named in ``exclude`` and, with ``exclude_self``, ``row`` itself. A row or
    target outside the vocabulary, or a target that is not a candidate, is an error naming it."""
    matrix = np.asarray(matrix)
    V = tokenizer.vocab_size
    if matrix.shape != (V, V):
        raise ValueError(f"matrix has shape {matrix.shape} but the tokenizer has |V| = {V}; expected ({V}, {V})")
    outside = [t for t in (row, *targets) if t not in tokenizer.token_to_id]
    if outside:
        raise ValueError(f"target_ranks: token(s) {outside} are not in the vocabulary of {tokenizer}")
    a, ids = tokenizer.token_to_id[row], [tokenizer.token_to_id[t] for t in targets]
    allowed = np.ones(V, dtype=bool)
    allowed[[tokenizer.token_to_id[t] for t in exclude if t in tokenizer.token_to_id]] = False
    if exclude_self:
        allowed[a] = False
    barred = [t for t, c in zip(targets, ids) if not allowed[c]]
    if barred:
        raise ValueError(f"target(s) {barred} are excluded from the ranking of {row!r}; they have no rank there")
    score = matrix[a].astype(np.float64)[allowed]
    cols = np.flatnonzero(allowed)
    return tuple(
        int(1 + (score > score_c).sum() + ((score == score_c) & (cols < c)).sum())
        for c, score_c in ((c, float(matrix[a, c])) for c in ids)
    )


def word_exclusions(tokenizer: Tokenizer) -> list[str]:
    """Vocabulary tokens that are not words: punctuation, numbers and ``<unk>`` (function words
    stay, unlike :func:`~mechbook.leading_terms.associations.readable_exclusions`)."""
    return [t for t in tokenizer.id_to_token if not is_word(t)]


FIGURE5_TOP = 30
"""Figure 5 of the paper shows the 30 strongest associations of each map."""

ARROWS = {"B": "→", "Φ": "→", "Σ_B": "∼"}


@dataclass(frozen=True)
class NamedAssociation:
    """One group of the paper's Figure 5: in the map ``map`` (``"B"``, ``"Φ"`` or ``"Σ_B"``), the
    row of ``row`` holds its named ``partners`` among its top 30; ``key`` names the record and the
    claim (``ch01.fig5_<key>``), ``note`` what the paper adds ("among common objects")."""

    key: str
    map: str
    row: str
    partners: tuple[str, ...]
    note: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        """The row word, then its partners."""
        return (self.row, *self.partners)

    @property
    def paper(self) -> str:
        """The paper's words: ``"Figure 5, Φ: fish → pond, lake, water"``."""
        note = f", {self.note}" if self.note else ""
        return f"Figure 5, {self.map}: {self.row} {ARROWS[self.map]} {', '.join(self.partners)}{note}"


FIGURE5: tuple[NamedAssociation, ...] = (
    NamedAssociation("b_red", "B", "red", ("truck",), note="among common objects"),
    NamedAssociation("sigma_they", "Σ_B", "they", ("she", "he", "it")),
    NamedAssociation("sigma_happy", "Σ_B", "happy", ("sad", "excited")),
    NamedAssociation("sigma_wanted", "Σ_B", "wanted", ("saw", "had")),
    NamedAssociation("phi_fish", "Φ", "fish", ("pond", "lake", "water")),
    NamedAssociation("phi_flower", "Φ", "flower", ("garden",)),
    NamedAssociation("phi_birds", "Φ", "birds", ("nest", "sky")),
)
"""Every association the paper's Figure 5 names, one group per row word."""


def map_row(m: CorpusMaps, name: str) -> tuple[np.ndarray, list[str], bool]:
    """How chapter 1 reads a row of the map ``name``: ``(matrix, excluded columns, exclude_self)``.
    B: the current token's row of B (successors), readable tokens, as the chapter's B table. Φ: the
    *next* token's row (the entity's), its context words among readable tokens, the row's own token
    left out, as the scene pairs' ranks. Σ_B: its cosine Σ̃_B (the chapter's reading: raw entries
    grow with frequency), the word itself left out (its cosine is 1), among every word, function
    words included: the frequency that makes function words top the raw rows of B and Φ is divided
    out of Σ̃_B, and the paper's Σ_B groups are function words (*they* ∼ *she*, *he*, *it*)."""
    if name == "B":
        return m.stats.B, m.readable, False
    if name == "Φ":
        return m.stats.Phi, m.readable, True
    if name == "Σ_B":
        return m.sigma_cos, word_exclusions(m.tokenizer), True
    raise ValueError(f"map must be one of {', '.join(ARROWS)}, got {name!r}")


@dataclass(frozen=True)
class NamedReading:
    """One Figure 5 group read on a corpus: ``ranks`` of its partners in the row (None for a
    partner the ranking cannot hold: it, or the row word, is outside the vocabulary), ``missing``
    the group's words outside the vocabulary of ``vocab_size`` tokens, ``top`` the figure's 30."""

    association: NamedAssociation
    ranks: tuple[int | None, ...]
    missing: tuple[str, ...]
    vocab_size: int
    top: int = FIGURE5_TOP

    @property
    def share(self) -> float | None:
        """Share of the partners ranked within :attr:`top`; None where a word is missing."""
        if self.missing:
            return None
        return sum(r <= self.top for r in self.ranks) / len(self.ranks)

    def record(self) -> dict[str, Any]:
        """The reading as a JSON-like record: partner ranks, missing words, share."""
        return {
            "ranks": dict(zip(self.association.partners, self.ranks)),
            "missing": list(self.missing),
            "share": self.share,
        }


def named_reading(m: CorpusMaps, association: NamedAssociation, top: int = FIGURE5_TOP) -> NamedReading:
    """The ranks of ``association``'s partners in its row, read as :func:`map_row` reads the map."""
    tok = m.tokenizer
    missing = tuple(w for w in association.words if w not in tok.token_to_id)
    if association.row in missing:
        ranks: tuple[int | None, ...] = (None,) * len(association.partners)
    else:
        matrix, exclude, self_out = map_row(m, association.map)
        present = [p for p in association.partners if p not in missing]
        got = dict(zip(present, target_ranks(matrix, tok, association.row, present, exclude, self_out)))
        ranks = tuple(got.get(p) for p in association.partners)
    return NamedReading(association, ranks, missing, tok.vocab_size, top)


FIGURE3_SENTENCE: tuple[str, ...] = ("the", "pond", "contains", "fish")
"""The sentence of the paper's Figure 3, whose Φ scores show *pond* as *fish*'s context."""


def figure3_reading(m: CorpusMaps) -> dict[str, Any]:
    """Figure 3 on this corpus: the raw entries Φ[fish, w] of *fish*'s row (fish as the next
    token) for each word w of :data:`FIGURE3_SENTENCE` before *fish* that the vocabulary holds
    (function words included: the figure scores every word of the sentence), as ``scores`` {w:
    entry}; ``missing`` the sentence's words outside the vocabulary; ``pond_rank`` the rank of
    *pond* among the scored words (:func:`target_ranks` with every other column excluded), None
    where *fish* or *pond* is missing or *pond* is the only word scored."""
    tok = m.tokenizer
    *context, row = FIGURE3_SENTENCE
    missing = [w for w in FIGURE3_SENTENCE if w not in tok.token_to_id]
    scored = [w for w in context if w not in missing] if row not in missing else []
    scores = {w: float(m.stats.Phi[tok.token_to_id[row], tok.token_to_id[w]]) for w in scored}
    rank = None
    if "pond" in scores and len(scores) > 1:
        others = [t for t in tok.id_to_token if t not in scores]
        (rank,) = target_ranks(m.stats.Phi, tok, row, ["pond"], exclude=others)
    return {"scores": scores, "missing": missing, "pond_rank": rank}


def maps_numbers(m: CorpusMaps, successors_k: int = 3, purity_k: int = 3) -> dict[str, Any]:
    """What the maps hold, in numbers: corpus sizes, the ``<unk>`` share and what the drop policy
    keeps; the rank of *upon* after *once* in B; the share of lexicon nouns among the
    ``successors_k`` strongest readable successors of the lexicon's adjectives (and its chance
    level, the nouns' share of the readable tokens); the median pair rank in Φ and in B (None when no
    pair has both words in the vocabulary) and in Φ's rows of the other entities (the
    mismatched-row control, :func:`~mechbook.leading_terms.associations.mismatched_pair_ranks`); the rank
    of *pond* for *fish* in Φ (None when either word is outside the vocabulary); the share of
    Σ̃_B's (and raw Σ_B's) ``purity_k`` nearest lexicon neighbours of a word's own class, with its
    chance level; ``fig5_<key>`` for each group of :data:`FIGURE5` (:meth:`NamedReading.record`) and
    ``fig3_fish`` (:func:`figure3_reading`). Chapter 1 records these and decides its claims on them."""
    tok, s = m.tokenizer, m.survivors
    successors = top_k(m.stats.B, tok, k=successors_k, rows=m.words_of("adjective"), exclude=m.readable, positive=True)
    ranks = pair_rank_table(m)
    mismatched = mismatched_pair_ranks(m.stats.Phi, tok)
    purity, chance = class_purity(m.sigma_cos, tok, k=purity_k)
    purity_raw, _ = class_purity(m.stats.Sigma_B, tok, k=purity_k)
    fish_pond = "fish" in tok.token_to_id and "pond" in tok.token_to_id
    return {
        "n_stories": m.n_read,
        "n_sequences": m.sequences.n_kept,
        "vocab_size": tok.vocab_size,
        "context": m.sequences.context,
        "unk_fraction": m.sequences.unk_fraction,
        "drop_kept": s["in_vocabulary"],
        "drop_kept_fraction": s["in_vocabulary"] / s["stories"],
        "b_rank_upon_after_once": rank_of(m.stats.B, tok, "once", "upon"),
        "b_adj_noun_share": float(successors["token"].isin(WORD_CLASSES["noun"]).mean()),
        "b_adj_noun_chance": len(m.words_of("noun")) / m.n_readable,
        "phi_pair_median_rank": float(ranks["rank in Φ"].median()) if len(ranks) else None,
        "b_pair_median_rank": float(ranks["rank in B"].median()) if len(ranks) else None,
        "n_context_pairs": len(ranks),
        "phi_pair_mismatched_median_rank": float(mismatched["rank in other rows"].median())
        if len(mismatched)
        else None,
        "phi_rank_pond_for_fish": (
            rank_of(m.stats.Phi, tok, "fish", "pond", exclude=m.readable, exclude_self=True) if fish_pond else None
        ),
        "sigma_class_purity": purity,
        "sigma_class_purity_raw": purity_raw,
        "sigma_class_chance": chance,
        **{f"fig5_{a.key}": named_reading(m, a).record() for a in FIGURE5},
        "fig3_fish": figure3_reading(m),
    }
