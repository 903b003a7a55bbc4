"""Chapter 1's reading of the three maps: the corpus, its tokenizer and statistics, and the numbers
that say what the maps hold (computed here, presented by :mod:`mechbook.chapters.ch01_corpus_maps`).

:func:`build_maps` reads the stories, fits the tokenizer, cuts the sequences and computes B, Φ and
Σ_B (cached); :func:`maps_numbers` measures them: the rank of *upon* after *once* in B, the share
of lexicon nouns among the adjectives' strongest successors (and its chance level), the median
rank of known (entity, surrounding) pairs in Φ and in B, and the word-class purity of Σ̃_B's
nearest neighbours (and its chance level).
"""

from __future__ import annotations

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
from mechbook.leading_terms.tokenize import SequenceSet, Tokenizer, policy_survivors


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


def maps_numbers(m: CorpusMaps, successors_k: int = 3, purity_k: int = 3) -> dict[str, Any]:
    """What the maps hold, in numbers: corpus sizes, the ``<unk>`` share and what the drop policy
    keeps; the rank of *upon* after *once* in B; the share of lexicon nouns among the
    ``successors_k`` strongest readable successors of the lexicon's adjectives (and its chance
    level, the nouns' share of the readable tokens); the median pair rank in Φ and in B (None when no
    pair has both words in the vocabulary) and in Φ's rows of the other entities (the
    mismatched-row control, :func:`~mechbook.leading_terms.associations.mismatched_pair_ranks`); the rank
    of *pond* for *fish* in Φ (None when either word is outside the vocabulary); and the share of
    Σ̃_B's (and raw Σ_B's) ``purity_k`` nearest lexicon neighbours of a word's own class, with its
    chance level. Chapter 1 records these and decides its claims on them."""
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
    }
