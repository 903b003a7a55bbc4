"""Chapter 1, "The corpus as three maps" (book/part1/01_corpus_maps.ipynb).

The chapter tokenises TinyStories with the paper's natural tokenizer (a word, a punctuation mark or
a number is one token), computes the bigram map B,
the context map Φ and the interchangeability map Σ_B = BᵀB on the whole training set
(:mod:`mechbook.leading_terms.maps` computes and measures them, its claims are
:data:`mechbook.leading_terms.claims.CH01_CLAIMS`), and presents them in page order:
the corpus, ranked tables for a few adjectives, entities and lexicon words, the rank of known
(entity, surrounding) pairs in Φ and in B, the word-class purity of Σ_B's nearest neighbours, a
heatmap explorer of a readable block of each map, the associations the paper's Figures 5 and 3 name
(their ranks and verdicts), and a take-away read from the claims. Its corpus
(:data:`CONFIGS`) has larger vocabularies than chapters 2-5 so that the tables are readable.
The notebook reads the maps once (:func:`mechbook.leading_terms.readings.read_maps`, a
:class:`~mechbook.leading_terms.readings.MapsReadings`) and computes the verdicts once; the
builders here present them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd

import mechbook
from mechbook import claims
from mechbook.chapters import common
from mechbook.leading_terms.associations import CONTEXT_PAIRS, matrix_frame, ranked_words, recurring_cells, top_k
from mechbook.leading_terms.corpus import CORPUS_PROFILES, MAPS_PROFILES, CorpusConfig, load_corpus
from mechbook.leading_terms.maps import FIGURE3_SENTENCE, FIGURE5, FIGURE5_TOP, CorpusMaps, in_model_vocabulary
from mechbook.leading_terms.readings import MapsReadings
from mechbook.validation import POSITIVE, check_fields
from mechbook.viz.fmt import escape_markdown

STEM = "01_corpus_maps"


@dataclass(frozen=True)
class ChapterConfig:
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
        check_fields(
            self,
            table_k=POSITIVE,
            n_adjectives=POSITIVE,
            n_per_class=POSITIVE,
            block_per_class=POSITIVE,
            successors_k=POSITIVE,
            purity_k=POSITIVE,
        )


#: The chapter's config per profile, one per corpus of ``MAPS_PROFILES`` (larger vocabularies than
#: chapters 2-5 use).
CONFIGS: dict[str, ChapterConfig] = {profile: ChapterConfig(corpus) for profile, corpus in MAPS_PROFILES.items()}


def resolve(
    profile: str,
    vocab_size: int | None = None,
    context: int | None = None,
    n_stories: int | None = None,
    policy: str | None = None,
) -> ChapterConfig:
    """The chapter's config for ``profile`` with the reader's knobs (None: from the profile)."""
    return mechbook.resolve_profile(
        CONFIGS,
        profile,
        corpus__vocab_size=vocab_size,
        corpus__context=context,
        corpus__n_stories=n_stories,
        corpus__policy=policy,
    )


def profile_prose(cfg: ChapterConfig) -> str:
    """One sentence on the corpus the profile uses."""
    c = cfg.corpus
    which = f"the first {c.n_stories:,}" if c.n_stories else "all the"
    return (
        f"{which[0].upper()}{which[1:]} stories, a vocabulary of $|V| = {c.vocab_size}$ tokens, sequences of "
        f"$T = {c.context}$ predicted positions, vocabulary policy **{c.policy}**."
    )


def model_vocabulary_prose(m: CorpusMaps, profile: str) -> str:
    """How many of the chapter's words and scene pairs the vocabulary of chapters 2-5's models
    holds in ``profile`` (:func:`~mechbook.leading_terms.maps.in_model_vocabulary`): the maps read
    here are larger than any trained weight of those chapters."""
    tokenizer, _ = load_corpus(CORPUS_PROFILES[profile])
    v = in_model_vocabulary(m, tokenizer)
    if v["model_vocab_size"] >= m.tokenizer.vocab_size:
        return ""
    lost = ", ".join(f"*{w}*" for w in v["lexicon_lost"][:8]) + (", ..." if len(v["lexicon_lost"]) > 8 else "")
    return (
        f"These maps are larger than the models'. Chapters 2-5 train on the {v['model_vocab_size']} most frequent "
        f"tokens (`<unk>` included): their models have a row of their own for {v['lexicon_kept']} of the "
        f"{v['lexicon']} lexicon words read below, and for both words of {v['pairs_kept']} of the {v['pairs']} "
        "scene pairs; every other word is `<unk>` to them"
        + (f" ({lost})." if lost else ".")
        + " The larger vocabulary is here so that the tables have readable words; chapter 4 reads the "
        "associations at the models' own size."
    )


def corpus_prose(m: CorpusMaps, ev: dict[str, claims.Evidence]) -> str:
    """How many stories are long enough, how many sequences the policy keeps, the share of
    ``<unk>``, what the other policy would keep, and the verdict on the drop policy's reading."""
    T, s = m.corpus.context, m.survivors
    n_real = m.tokenizer.vocab_size - (m.tokenizer.unk_id is not None)
    kept_share = s["in_vocabulary"] / s["stories"]
    opening = f"Of the **{m.n_read:,} stories**, {s['long_enough']:,} have at least $T+1 = {T + 1}$ tokens. "
    verdict = " " + ev["ch01.drop_keeps_little"].sentence()
    if m.corpus.policy == "unk":
        return (
            opening
            + (
                f"Under the **unk** policy this profile uses, the training set is **{m.sequences.n_kept:,} sequences** "
                f"of {T + 1} tokens, and **{m.sequences.unk_fraction:.1%}** of their tokens are `<unk>`. The "
                f"paper's drop policy, with the same vocabulary, would keep only **{s['in_vocabulary']:,} stories "
                f"({kept_share:.1%})**: those whose every token is among the {n_real:,} most frequent."
            )
            + verdict
        )
    return (
        opening
        + (
            f"This profile follows the paper's **drop** policy: only the **{s['in_vocabulary']:,} stories "
            f"({kept_share:.1%})** whose every token is among the {n_real:,} most frequent are kept, "
            f"giving **{m.sequences.n_kept:,} sequences** of {T + 1} tokens with no `<unk>`."
        )
        + verdict
    )


def sample_prose(m: CorpusMaps, index: int = 0) -> str:
    """Training sequence ``index`` decoded to text, as a Markdown quote in which ``<unk>`` and any
    other markup-like text of the corpus is shown literally."""
    return "> " + escape_markdown(m.tokenizer.decode(m.sequences.tokens[index]))


def _bigram_top(m: CorpusMaps, cfg: ChapterConfig) -> pd.DataFrame:
    rows = m.words_of("adjective")[: cfg.n_adjectives]
    return top_k(m.stats.B, m.tokenizer, k=cfg.table_k, rows=rows, exclude=m.readable, positive=True)


def bigram_table(m: CorpusMaps, cfg: ChapterConfig) -> pd.DataFrame:
    """The strongest readable successors (B above the uniform baseline) of the first adjectives,
    one line per adjective (blank: no further positive entry)."""
    return ranked_words(_bigram_top(m, cfg))


def bigram_prose(m: CorpusMaps, cfg: ChapterConfig, r: MapsReadings, ev: dict[str, claims.Evidence]) -> str:
    """The two checks of B: *upon* after *once*, and the adjectives' noun successors against chance,
    each with its claim's verdict."""
    return (
        f"Two checks. Most TinyStories stories open with *once upon a time*: in the row of *once*, "
        f"*upon* ranks **{r.b_rank_upon_after_once}** among all {m.tokenizer.vocab_size} tokens. And of the "
        f"{cfg.successors_k} strongest readable successors of each of the {len(m.words_of('adjective'))} adjectives "
        f"of the book's small hand-labelled lexicon (`WORD_CLASSES`), **{r.b_adj_noun_share:.0%}** are nouns of "
        f"that lexicon, against {r.b_adj_noun_chance:.0%} if they were drawn at random from the readable tokens "
        f"({claims.fmt(r.b_adj_noun_share / r.b_adj_noun_chance, '.2f')} times chance); the map was never "
        f"told what a noun is.\n\n"
        f"{ev['ch01.upon_after_once'].sentence()}\n\n{ev['ch01.adjective_nouns'].sentence()}"
    )


def context_table(m: CorpusMaps, cfg: ChapterConfig) -> pd.DataFrame:
    """The strongest readable context words of each entity in Φ (the entity itself left out)."""
    return ranked_words(
        top_k(
            m.stats.Phi,
            m.tokenizer,
            k=cfg.table_k,
            rows=m.entities,
            exclude=m.readable,
            exclude_self=True,
            positive=True,
        )
    )


def context_recurring_prose(table: pd.DataFrame) -> str:
    """Under the Φ table: how many of its cells are words that stand in several rows
    (:func:`~mechbook.leading_terms.associations.recurring_words`), which they are, and why a row of
    Φ holds them."""
    cells, filled, recurring = recurring_cells(table)
    if not recurring:
        return f"No word stands in two rows of the table: each of its {filled} cells belongs to its own entity."
    shown = ", ".join(f"*{w}* ({n} rows)" for w, n in list(recurring.items())[:6])
    return (
        f"Not every cell is a scene: **{cells} of the {filled}** hold a word that stands in two rows or more "
        f"({shown}). A row of $\\Phi$ holds whatever precedes the word anywhere in its story, frequent words "
        "and a story's opening words included, since $\\Phi$, like $B$, is not normalised for frequency. Which "
        "surroundings are an entity's own is what the ranks against the other entities' rows, below, decide."
    )


def context_prose(m: CorpusMaps, r: MapsReadings, ev: dict[str, claims.Evidence]) -> str:
    """Median rank of the pairs in Φ and in B, *pond*'s rank for *fish*, and the two claims' verdicts."""
    phi, b = r.phi_pair_median_rank, r.b_pair_median_rank
    verdicts = "".join(
        f"\n\n{ev[c].sentence()}" for c in ("ch01.scene_pairs", "ch01.pairs_not_frequency", "ch01.phi_not_b")
    )
    if phi is None:
        return f"None of these pairs has both its words among the {m.n_readable} readable tokens.{verdicts}"
    where = claims.compare(
        b, phi, ".0f", claims.Words("higher in $\\Phi$ than in $B$", "higher in $B$ than in $\\Phi$", "alike in both")
    )
    text = (
        f"Over these {r.n_context_pairs} pairs the median rank is **{phi:.0f}** in $\\Phi$ "
        f"and **{b:.0f}** in $B$, out of {m.n_readable} readable tokens: the pairs rank {where}."
    )
    other = r.phi_pair_mismatched_median_rank
    if other is not None:
        text += (
            f" In the other entities' rows of $\\Phi$ the same surroundings rank at a median of **{other:.0f}** "
            f"(a word drawn at random: {(m.n_readable + 1) / 2:.0f})."
        )
    if r.phi_rank_pond_for_fish is not None:
        text += f" For *fish*, *pond* ranks **{r.phi_rank_pond_for_fish}** in $\\Phi$."
    return text + verdicts


def sigma_table(m: CorpusMaps, cfg: ChapterConfig) -> pd.DataFrame:
    """The nearest readable words under Σ̃_B of a few nouns, verbs and adjectives of the lexicon."""
    k = cfg.n_per_class
    rows = m.words_of("noun")[:k] + m.words_of("verb")[:k] + m.words_of("adjective")[:k]
    return ranked_words(
        top_k(m.sigma_cos, m.tokenizer, k=cfg.table_k, rows=rows, exclude=m.readable, exclude_self=True)
    )


def sigma_prose(m: CorpusMaps, cfg: ChapterConfig, r: MapsReadings, ev: dict[str, claims.Evidence]) -> str:
    """The class purity of Σ̃_B's nearest lexicon neighbours against chance, and its claim's verdict."""
    counts = m.lexicon["class"].value_counts()
    return (
        f"A quantitative version: take the {len(m.lexicon)} words of the lexicon that are in the vocabulary "
        f"({', '.join(f'{c} {k}s' for k, c in counts.items())}) and, for each, its {cfg.purity_k} nearest other "
        f"lexicon words under $\\tilde\\Sigma_B$. **{r.sigma_class_purity:.0%}** of them are of the word's own class "
        f"(raw $\\Sigma_B$: {r.sigma_class_purity_raw:.0%}), against **{r.sigma_class_chance:.0%}** for "
        f"neighbours drawn at random.\n\n{ev['ch01.word_classes'].sentence()}"
    )


def map_blocks(m: CorpusMaps, cfg: ChapterConfig) -> dict[str, tuple[np.ndarray, list[str], list[str]]]:
    """The heatmap's three blocks, ``{menu label: (matrix, rows, columns)}``: the B table's
    adjectives against their two strongest successors each, the entities against their
    surroundings in Φ, and lexicon nouns, verbs and adjectives against each other in Σ̃_B."""
    b_table = _bigram_top(m, cfg)
    surroundings = list(dict.fromkeys(b for a, b in CONTEXT_PAIRS if a in m.entities and b in m.tokenizer.token_to_id))
    successors = list(dict.fromkeys(b_table.loc[b_table["rank"] <= 2, "token"]))
    k = cfg.block_per_class
    lexicon_block = m.words_of("noun")[:k] + m.words_of("verb")[:k] + m.words_of("adjective")[:k]
    return {
        "B: adjective → next word": (m.stats.B, m.words_of("adjective")[: cfg.n_adjectives], successors),
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


def maps_explorer(m: CorpusMaps, cfg: ChapterConfig) -> Any:
    """The explorer of the three blocks (:func:`map_blocks`), a menu picking the map."""
    import mechbook.viz

    blocks = map_blocks(m, cfg)

    def block(map: str) -> pd.DataFrame:
        matrix, rows, cols = blocks[map]
        return matrix_frame(matrix, m.tokenizer, rows, cols, name="value")

    return mechbook.viz.explore(
        block,
        heatmap,
        controls={"map": list(blocks)},
        title="Three maps of one corpus: phrases, scenes and word classes",
    )


def named_table(r: MapsReadings) -> pd.DataFrame:
    """The associations the paper's Figure 5 names, one line per named partner: the map, the row
    word, the partner, its rank in the row as chapter 1 reads that map
    (:func:`~mechbook.leading_terms.maps.map_row`; blank where a word is outside the vocabulary)
    and whether it clears the figure's top-30 bar."""
    rows = []
    for a in FIGURE5:
        group = r.fig5[a.key]
        for partner, rank in group["ranks"].items():
            lacking = [w for w in (a.row, partner) if w in group["missing"]]
            bar = f"{' and '.join(lacking)} not in |V|" if lacking else ("within" if rank <= FIGURE5_TOP else "outside")
            rows.append(
                {
                    "map": a.map,
                    "word": a.row,
                    "named partner": partner,
                    "rank in the row": "" if rank is None else str(rank),
                    f"top-{FIGURE5_TOP} bar": bar,
                }
            )
    return pd.DataFrame(rows)


def figure3_prose(r: MapsReadings, ev: dict[str, claims.Evidence]) -> str:
    """Figure 3's sentence read through Φ: each scored word's entry in *fish*'s row, which ranks
    first (where two or more are scored), the words left out, and the claim's verdict."""
    fish = r.fig3_fish
    row = FIGURE3_SENTENCE[-1]
    opening = f"The paper's Figure 3 reads “{' '.join(FIGURE3_SENTENCE)}” through $\\Phi$."
    verdict = ev["ch01.fig3_pond_for_fish"].sentence()
    outside = ", ".join(f"*{w}*" for w in fish["missing"])
    left = f" ({outside} outside the vocabulary of {r.vocab_size} tokens)" if fish["missing"] else ""
    if not fish["scores"]:
        return f"{opening} This vocabulary scores none of its words in the row of *{row}*{left}.\n\n{verdict}"
    scores = sorted(fish["scores"].items(), key=lambda item: -item[1])
    listed = ", ".join(f"*{w}* {claims.fmt(v, '.3g')}" for w, v in scores)
    first = f", so *{scores[0][0]}* ranks first among them" if len(scores) > 1 else ""
    return f"{opening} In the row of *{row}* the sentence's other words score{left}: {listed}{first}.\n\n{verdict}"


_FIGURE_IDS = tuple(f"ch01.fig5_{a.key}" for a in FIGURE5) + ("ch01.fig3_pond_for_fish",)


def paper_figures_prose(r: MapsReadings, ev: dict[str, claims.Evidence]) -> str:
    """How many of the paper's named associations (Figure 5's groups and Figure 3's example) this
    corpus reproduces, partly, not, or cannot test, then each verdict."""
    counts = {v: sum(ev[c].verdict == v for c in _FIGURE_IDS) for v in claims.VERDICTS}
    tested = len(_FIGURE_IDS) - counts["untested"]
    parts = [
        f"{counts[v]} {word}"
        for v, word in (("reproduced", "reproduced"), ("partly", "partly"), ("not reproduced", "not reproduced"))
        if counts[v]
    ]
    head = (
        f"Of the paper's {len(_FIGURE_IDS)} named associations ({len(FIGURE5)} groups of Figure 5 and Figure 3's "
        f"sentence), this profile tests {tested}"
        + (f": {', '.join(parts)}" if parts else "")
        + (
            f"; {counts['untested']} name a word outside its vocabulary of {r.vocab_size} tokens."
            if counts["untested"]
            else "."
        )
    )
    return head + "\n\n" + claims.section_prose(ev, "ch01-paper-figures")


_READS = {
    "ch01.adjective_nouns": "which noun an adjective announces ($B$)",
    "ch01.scene_pairs": "which scene a word belongs to ($\\Phi$)",
    "ch01.word_classes": "which words play the same part ($\\Sigma_B$)",
}


def takeaway_prose(ev: dict[str, claims.Evidence]) -> str:
    """The chapter's summary, read from the verdicts of the paper's three readings of the maps."""
    held = [text for cid, text in _READS.items() if ev[cid].verdict == "reproduced"]
    missed = [text for cid, text in _READS.items() if ev[cid].verdict != "reproduced"]
    if not missed:
        return (
            "Three matrices, each a few lines of counting, already hold recognisable pieces of language: "
            + ", ".join(held[:-1])
            + f" and {held[-1]}, as the paper reads them."
        )
    text = "Three matrices, each a few lines of counting. On this corpus the paper's readings "
    text += f"hold for {', '.join(held)}; " if held else "hold for none of the maps; "
    return text + f"not (or only in part) for {', '.join(missed)}: see the verdicts above."


def record_all(readings: MapsReadings, ev: dict[str, claims.Evidence]) -> dict[str, Any]:
    """Record the chapter's numbers (:meth:`~mechbook.leading_terms.readings.MapsReadings.numbers`,
    bounded by ``book/thresholds/01_corpus_maps.yml``) and its claims' verdicts; return the records."""
    records = common.record_all(readings.numbers())
    records.update(claims.record_claims(ev.values()))
    return records
