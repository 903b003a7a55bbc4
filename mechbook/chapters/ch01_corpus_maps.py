"""Chapter 1, "The corpus as three maps" (book/part1/01_corpus_maps.ipynb).

The chapter tokenises TinyStories with the paper's natural tokenizer, computes the bigram map B,
the context map Φ and the interchangeability map Σ_B = BᵀB on the whole training set, and reads
them: ranked tables for a few adjectives, entities and lexicon words, the rank of known (entity,
surrounding) pairs in Φ and in B, the word-class purity of Σ_B's nearest neighbours, and a heatmap
explorer of a readable block of each map. Its corpus (:data:`CONFIGS`) has larger vocabularies than
chapters 2-5 so that the tables are readable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

from mechbook.leading_terms.associations import (
    CONTEXT_PAIRS,
    WORD_CLASSES,
    class_purity,
    cosine_normalise,
    labelled_words,
    matrix_frame,
    pair_ranks,
    rank_of,
    ranked_words,
    readable_exclusions,
    top_k,
)
from mechbook.leading_terms.corpus import MAPS_PROFILES, CorpusConfig, corpus_stories, load_corpus
from mechbook.leading_terms.stats import CorpusStats, cached_corpus_stats
from mechbook.leading_terms.tokenize import SequenceSet, Tokenizer, policy_survivors
from mechbook.viz.fmt import escape_markdown


def _positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"CorpusMapsConfig.{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class CorpusMapsConfig:
    """Chapter 1: the ``corpus`` (tokenizer, :math:`|V|`, T, vocabulary policy, stories) and how much of
    each map the tables show: ``table_k`` tokens per row, ``n_adjectives`` rows of the B table,
    ``n_per_class`` lexicon words per class in the Σ_B table and ``block_per_class`` in the heatmap's
    Σ_B block, ``successors_k`` strongest successors counted per adjective, ``purity_k`` neighbours
    per word in the class purity."""

    corpus: CorpusConfig
    table_k: int = 6
    n_adjectives: int = 8
    n_per_class: int = 4
    block_per_class: int = 6
    successors_k: int = 3
    purity_k: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.corpus, CorpusConfig):
            raise TypeError(f"CorpusMapsConfig.corpus must be a CorpusConfig, got {type(self.corpus).__name__}")
        for name in ("table_k", "n_adjectives", "n_per_class", "block_per_class", "successors_k", "purity_k"):
            _positive(name, getattr(self, name))


#: The chapter's config per profile, one per corpus of ``MAPS_PROFILES`` (larger vocabularies than
#: chapters 2-5 use).
CONFIGS: dict[str, CorpusMapsConfig] = {profile: CorpusMapsConfig(corpus) for profile, corpus in MAPS_PROFILES.items()}


@dataclass
class CorpusMaps:
    """The chapter's corpus and its three maps: ``n_read`` stories read, the fitted tokenizer, the
    training sequences, how many stories each vocabulary policy keeps (``survivors``) and the
    statistics (B, Φ, Σ_B ...)."""

    cfg: CorpusMapsConfig
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
        return self.tokenizer.vocab_size - len(self.readable)


def build(cfg: CorpusMapsConfig) -> CorpusMaps:
    """Read the stories, fit the tokenizer, cut the sequences and compute the maps (cached)."""
    stories = corpus_stories(cfg.corpus)
    tokenizer, sequences = load_corpus(cfg.corpus)
    survivors = policy_survivors(stories, tokenizer, cfg.corpus.context)
    stats = cached_corpus_stats(sequences.tokens, tokenizer.vocab_size)
    return CorpusMaps(cfg, len(stories), tokenizer, sequences, survivors, stats)


def profile_note(cfg: CorpusMapsConfig) -> str:
    """One sentence on the corpus the profile uses."""
    c = cfg.corpus
    which = f"the first {c.n_stories:,}" if c.n_stories else "all the"
    return (
        f"{which[0].upper()}{which[1:]} stories, a vocabulary of $|V| = {c.vocab_size}$ tokens, sequences of "
        f"$T = {c.context}$ predicted positions, vocabulary policy **{c.policy}**."
    )


def corpus_prose(m: CorpusMaps) -> str:
    """How many stories are long enough, how many sequences the policy keeps, the share of
    ``<unk>``, and what the other policy would keep."""
    T, s = m.cfg.corpus.context, m.survivors
    n_real = m.tokenizer.vocab_size - (m.tokenizer.unk_id is not None)
    kept_share = s["in_vocabulary"] / s["stories"]
    opening = f"Of the **{m.n_read:,} stories**, {s['long_enough']:,} have at least $T+1 = {T + 1}$ tokens. "
    if m.cfg.corpus.policy == "unk":
        return opening + (
            f"Under the **unk** policy this profile uses, the training set is **{m.sequences.n_kept:,} sequences** "
            f"of {T + 1} tokens, and **{m.sequences.unk_fraction:.1%}** of their tokens are `<unk>`. The "
            f"paper's drop policy, with the same vocabulary, would keep only **{s['in_vocabulary']:,} stories "
            f"({kept_share:.1%})**: those whose every token is among the {n_real:,} most frequent."
        )
    return opening + (
        f"This profile follows the paper's **drop** policy: only the **{s['in_vocabulary']:,} stories "
        f"({kept_share:.1%})** whose every token is among the {n_real:,} most frequent are kept, "
        f"giving **{m.sequences.n_kept:,} sequences** of {T + 1} tokens with no `<unk>`."
    )


def sample_sentence(m: CorpusMaps, index: int = 0) -> str:
    """Training sequence ``index`` decoded to text, as a Markdown quote in which ``<unk>`` and any
    other markup-like text of the corpus is shown literally."""
    return "> " + escape_markdown(m.tokenizer.decode(m.sequences.tokens[index]))


def _bigram_top(m: CorpusMaps) -> pd.DataFrame:
    rows = m.words_of("adjective")[: m.cfg.n_adjectives]
    return top_k(m.stats.B, m.tokenizer, k=m.cfg.table_k, rows=rows, exclude=m.readable, positive=True)


def bigram_table(m: CorpusMaps) -> pd.DataFrame:
    """The strongest readable successors (B above the uniform baseline) of the first adjectives,
    one line per adjective (blank: no further positive entry)."""
    return ranked_words(_bigram_top(m))


def context_table(m: CorpusMaps) -> pd.DataFrame:
    """The strongest readable context words of each entity in Φ (the entity itself left out)."""
    return ranked_words(
        top_k(
            m.stats.Phi,
            m.tokenizer,
            k=m.cfg.table_k,
            rows=m.entities,
            exclude=m.readable,
            exclude_self=True,
            positive=True,
        )
    )


def pair_rank_table(m: CorpusMaps) -> pd.DataFrame:
    """Rank of each (entity, surrounding) pair's surrounding in the entity's row of Φ and of B."""
    return pair_ranks({"rank in Φ": m.stats.Phi, "rank in B": m.stats.B}, m.tokenizer)


def sigma_table(m: CorpusMaps) -> pd.DataFrame:
    """The nearest readable words under Σ̃_B of a few nouns, verbs and adjectives of the lexicon."""
    n = m.cfg.n_per_class
    rows = m.words_of("noun")[:n] + m.words_of("verb")[:n] + m.words_of("adjective")[:n]
    return ranked_words(
        top_k(m.sigma_cos, m.tokenizer, k=m.cfg.table_k, rows=rows, exclude=m.readable, exclude_self=True)
    )


def headline(m: CorpusMaps) -> dict[str, Any]:
    """The chapter's recorded numbers: corpus sizes, the rank of *upon* after *once* in B, the
    share of lexicon nouns among the adjectives' strongest successors (and its chance level), the
    median pair rank in Φ and in B, the rank of *pond* for *fish* in Φ (None when either word is
    outside the vocabulary), and Σ̃_B's (and raw Σ_B's) class purity with its chance level."""
    tok, s = m.tokenizer, m.survivors
    successors = top_k(
        m.stats.B, tok, k=m.cfg.successors_k, rows=m.words_of("adjective"), exclude=m.readable, positive=True
    )
    ranks = pair_rank_table(m)
    purity, chance = class_purity(m.sigma_cos, tok, k=m.cfg.purity_k)
    purity_raw, _ = class_purity(m.stats.Sigma_B, tok, k=m.cfg.purity_k)
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
        "phi_pair_median_rank": float(ranks["rank in Φ"].median()),
        "b_pair_median_rank": float(ranks["rank in B"].median()),
        "n_context_pairs": len(ranks),
        "phi_rank_pond_for_fish": (
            rank_of(m.stats.Phi, tok, "fish", "pond", exclude=m.readable, exclude_self=True) if fish_pond else None
        ),
        "sigma_class_purity": purity,
        "sigma_class_purity_raw": purity_raw,
        "sigma_class_chance": chance,
    }


def bigram_prose(m: CorpusMaps, n: dict[str, Any]) -> str:
    """The two checks of B: *upon* after *once*, and the adjectives' noun successors vs chance."""
    return (
        f"Two checks. Most TinyStories stories open with *once upon a time*: in the row of *once*, "
        f"*upon* ranks **{n['b_rank_upon_after_once']}** among all {m.tokenizer.vocab_size} tokens. And of the "
        f"{m.cfg.successors_k} strongest readable successors of each of the {len(m.words_of('adjective'))} adjectives "
        f"of the book's small hand-labelled lexicon (`WORD_CLASSES`), **{n['b_adj_noun_share']:.0%}** are nouns of "
        f"that lexicon, against {n['b_adj_noun_chance']:.0%} if they were drawn at random from the readable tokens: "
        f"the map was never told what a noun is."
    )


def context_prose(m: CorpusMaps, n: dict[str, Any]) -> str:
    """Median rank of the pairs in Φ and in B, and *pond*'s rank for *fish*."""
    text = (
        f"Over these {n['n_context_pairs']} pairs the median rank is **{n['phi_pair_median_rank']:.0f}** in $\\Phi$ "
        f"and **{n['b_pair_median_rank']:.0f}** in $B$, out of {m.n_readable} readable tokens."
    )
    if n["phi_rank_pond_for_fish"] is not None:
        text += f" For *fish*, *pond* ranks **{n['phi_rank_pond_for_fish']}** in $\\Phi$."
    return text


def sigma_prose(m: CorpusMaps, n: dict[str, Any]) -> str:
    """The class purity of Σ̃_B's nearest lexicon neighbours against chance."""
    counts = m.lexicon["class"].value_counts()
    return (
        f"A quantitative version: take the {len(m.lexicon)} words of the lexicon that are in the vocabulary "
        f"({', '.join(f'{c} {k}s' for k, c in counts.items())}) and, for each, its {m.cfg.purity_k} nearest other "
        f"lexicon words under $\\tilde\\Sigma_B$. **{n['sigma_class_purity']:.0%}** of them are of the word's own class "
        f"(raw $\\Sigma_B$: {n['sigma_class_purity_raw']:.0%}), against **{n['sigma_class_chance']:.0%}** for "
        f"neighbours drawn at random."
    )


def map_blocks(m: CorpusMaps) -> dict[str, tuple[np.ndarray, list[str], list[str]]]:
    """The heatmap's three blocks, ``{menu label: (matrix, rows, columns)}``: the B table's
    adjectives against their two strongest successors each, the entities against their
    surroundings in Φ, and lexicon nouns, verbs and adjectives against each other in Σ̃_B."""
    b_table = _bigram_top(m)
    surroundings = list(dict.fromkeys(b for a, b in CONTEXT_PAIRS if a in m.entities and b in m.tokenizer.token_to_id))
    successors = list(dict.fromkeys(b_table.loc[b_table["rank"] <= 2, "token"]))
    n = m.cfg.block_per_class
    lexicon_block = m.words_of("noun")[:n] + m.words_of("verb")[:n] + m.words_of("adjective")[:n]
    return {
        "B: adjective → next word": (m.stats.B, m.words_of("adjective")[: m.cfg.n_adjectives], successors),
        "Φ: next word ← context word": (m.stats.Phi, m.entities, surroundings),
        "Σ_B (cosine): interchangeable words": (m.sigma_cos, lexicon_block, lexicon_block),
    }


def heatmap(base: alt.Chart) -> alt.Chart:
    """One block of a map as a heatmap, each row divided by its largest entry (legend below)."""
    return (
        base.mark_rect()
        .encode(
            x=alt.X("column:N", sort=alt.EncodingSortField("column_order"), title="column token"),
            y=alt.Y("row:N", sort=alt.EncodingSortField("row_order"), title="row token"),
            color=alt.Color(
                "relative:Q",
                scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
                title="entry / row's largest",
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=[
                alt.Tooltip("row:N", title="row"),
                alt.Tooltip("column:N", title="column"),
                alt.Tooltip("value:Q", title="raw entry", format=".2e"),
                alt.Tooltip("relative:Q", title="relative", format=".2f"),
            ],
        )
        .properties(width=460, height=340)
    )


def maps_explorer(m: CorpusMaps) -> Any:
    """The explorer of the three blocks (:func:`map_blocks`), a menu picking the map."""
    import mechbook.viz

    blocks = map_blocks(m)

    def block(map: str) -> pd.DataFrame:
        matrix, rows, cols = blocks[map]
        return matrix_frame(matrix, m.tokenizer, rows, cols, name="value")

    return mechbook.viz.explore(
        block,
        heatmap,
        controls={"map": list(blocks)},
        title="Three maps of one corpus: phrases, scenes and word classes",
    )
