"""The claims of the introduction and of chapters 1-5 (Part I), one table per chapter, each claim
one entry with its ``read`` (:class:`mechbook.claims.Claim`).

:data:`TABLES` holds them by notebook stem (the ledger reads it); a chapter's page gets its
verdicts with ``mechbook.claims.evidence(TABLES[stem], readings)``, where ``readings`` is what its
claims read:

- ``intro``: the :class:`~mechbook.leading_terms.overview.CorpusOverview`;
- ``01_corpus_maps``: chapter 1's numbers (:func:`~mechbook.leading_terms.maps.maps_numbers`);
- ``02_leading_terms``: :class:`~mechbook.leading_terms.readings.CheckReadings`.
"""

from __future__ import annotations

from typing import Any

from mechbook.claims import Claim, Measured, Rule
from mechbook.leading_terms.check import departure_steps
from mechbook.leading_terms.leading import KINDS
from mechbook.leading_terms.overview import PAPER_VOCAB, reuse_gap, token_coverage
from mechbook.leading_terms.readings import BREAK_COSINE, EXPONENTS, CheckReadings, attention_first

INTRO: tuple[Claim, ...] = (
    Claim(
        "intro.longer_stories_reuse_words",
        "intro",
        "book",
        "A longer story mostly reuses the words it already has: the share of distinct words falls with length",
        "median share of distinct words in the longest quarter of the stories minus that in the shortest quarter",
        Rule("<", 0.0),
        section="intro-corpus",
        spec=".2f",
        read=lambda ov: Measured(reuse_gap(ov)),
    ),
    Claim(
        "intro.small_vocabulary_keeps_the_text",
        "intro",
        "book",
        f"A small vocabulary keeps almost all of TinyStories: the {PAPER_VOCAB:,} most frequent words cover at least "
        "95% of the word occurrences",
        f"share of all word occurrences among the {PAPER_VOCAB:,} most frequent words",
        Rule(">=", 0.95, partly=0.8),
        section="intro-vocabulary",
        spec=".1%",
        read=lambda ov: Measured(token_coverage(ov, PAPER_VOCAB)),
    ),
)
"""The introduction's claims: the book's two readings of the corpus that its sentences assert."""


def _pairs(n: dict[str, Any], value: Any) -> Measured:
    """Chapter 1's ``value``, untested where there is none because no scene pair is in the
    vocabulary (its Φ median rank is None)."""
    if value is None and n["phi_pair_median_rank"] is None:
        return Measured(
            untested=f"no scene pair of the chapter has both its words in this vocabulary of {n['vocab_size']} "
            "tokens (a larger corpus or vocabulary has them)"
        )
    return Measured(value)


def _over_phi(n: dict[str, Any], rank: str) -> float | None:
    """The median rank ``n[rank]`` over the pairs' median rank in Φ (None where either is None)."""
    phi = n["phi_pair_median_rank"]
    return None if phi is None or n[rank] is None else n[rank] / phi


CH01 = "01_corpus_maps"
CH01_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch01.drop_keeps_little",
        CH01,
        "book",
        "On a corpus this size the paper's drop policy keeps almost nothing",
        "share of the stories whose every token is in the vocabulary",
        Rule("<=", 0.05, partly=0.2),
        section="ch01-sequences",
        spec=".1%",
        read=lambda n: _pairs(n, n["drop_kept_fraction"]),
    ),
    Claim(
        "ch01.upon_after_once",
        CH01,
        "book",
        "In the row of *once*, B ranks *upon* first",
        "rank of *upon* among all tokens in the row of *once* of B",
        Rule("==", 1),
        section="ch01-bigram",
        spec="d",
        read=lambda n: _pairs(n, n["b_rank_upon_after_once"]),
    ),
    Claim(
        "ch01.adjective_nouns",
        CH01,
        "paper",
        "B links adjectives to the nouns they modify",
        "share of lexicon nouns among the adjectives' strongest readable successors, over its chance level",
        Rule(">=", 2, partly=1.2),
        paper="red → truck",
        section="ch01-bigram",
        spec=".2f",
        read=lambda n: _pairs(n, n["b_adj_noun_share"] / n["b_adj_noun_chance"]),
    ),
    Claim(
        "ch01.scene_pairs",
        CH01,
        "paper",
        "Φ links an entity to its usual surroundings",
        "median rank of the surrounding in the entity's row of Φ, over the known pairs (readable tokens)",
        Rule("<=", 10, partly=30),
        paper="fish → pond",
        section="ch01-context",
        spec=".0f",
        read=lambda n: _pairs(n, n["phi_pair_median_rank"]),
    ),
    Claim(
        "ch01.phi_not_b",
        CH01,
        "book",
        "The bigram map cannot give these pairs: B ranks them far below Φ",
        "median rank of the pairs in B over their median rank in Φ",
        Rule(">=", 3, partly=1.5),
        section="ch01-context",
        spec=".1f",
        read=lambda n: _pairs(n, _over_phi(n, "b_pair_median_rank")),
    ),
    Claim(
        "ch01.pairs_not_frequency",
        CH01,
        "book",
        "The pairs' ranks in Φ are the pairs' own: in the other entities' rows the same surroundings rank far "
        "lower, so their frequency alone does not put them at the top",
        "median rank of the surroundings in the other entities' rows of Φ (the mismatched-row control) over "
        "their median rank in their own entity's row",
        Rule(">=", 3, partly=1.5),
        section="ch01-context",
        spec=".1f",
        read=lambda n: _pairs(n, _over_phi(n, "phi_pair_mismatched_median_rank")),
    ),
    Claim(
        "ch01.word_classes",
        CH01,
        "paper",
        "Σ_B groups interchangeable words",
        "share of Σ̃_B's nearest lexicon neighbours of a word's own class, over its chance level",
        Rule(">=", 2, partly=1.2),
        paper="car ∼ truck",
        section="ch01-sigma",
        spec=".2f",
        read=lambda n: _pairs(n, n["sigma_class_purity"] / n["sigma_class_chance"]),
    ),
)
"""Chapter 1's claims: the paper's three readings of the maps (its examples as its numbers) and the
book's own readings that a sentence of the page asserts."""


def _attention_leaves_first(r: CheckReadings) -> Measured:
    """The share of the sweep's rates at which some term leaves where W and P leave first; untested
    where no term leaves."""
    order = departure_steps(r.sweep, BREAK_COSINE).dropna(how="all")
    if not len(order):
        return Measured(untested=f"no matrix fell below cosine {BREAK_COSINE} up to η·s = {r.sweep['eta_s'].max():.3g}")
    return Measured(float(attention_first(order).mean()))


CH02 = "02_leading_terms"
_PAPER_FORMS = "W_O ∼ ηsB, V ∼ ½η²s(s−1)(BΦ)ᵀ, W ∼ c₄Q and P ∼ c₄𝒫 while η·s is small"
CH02_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch02.closed_form_direction",
        CH02,
        "paper",
        "Trained from zero, every matrix points along its leading term while η·s is small",
        "lowest cosine with the closed form over every matrix, layer and step of the smallest learning rate",
        Rule(">=", 0.999),
        paper=_PAPER_FORMS,
        section="ch02-check",
        spec=".7f",
        read=lambda r: Measured(r.numbers["check_min_cosine"]),
    ),
    Claim(
        "ch02.closed_form_size",
        CH02,
        "paper",
        "The leading terms give each matrix's size too, with the exact coefficients",
        "largest |norm / predicted norm − 1| over the same matrices and steps",
        Rule("<=", 0.02),
        paper=_PAPER_FORMS,
        section="ch02-check",
        spec=".2%",
        read=lambda r: Measured(r.numbers["check_max_ratio_error"]),
    ),
    Claim(
        "ch02.eta_exponents",
        CH02,
        "book",
        "At fixed s the norms grow as η¹, η², η⁴, η⁴ (W_O, V, W, P)",
        "largest distance of a fitted exponent in η from 1, 2, 4, 4",
        Rule("<=", 0.01, partly=0.05),
        section="ch02-slopes",
        spec=".4f",
        read=lambda r: Measured(max(abs(r.numbers[f"slope_eta_{k}"] - EXPONENTS[k]) for k in KINDS)),
    ),
    Claim(
        "ch02.s_slopes_above",
        CH02,
        "book",
        "The slopes in s of V, W and P sit above their integer exponents 2, 4, 4 at small s",
        "smallest fitted slope in s minus its integer exponent, over V, W and P",
        Rule(">", 0),
        section="ch02-slopes",
        spec=".3f",
        read=lambda r: Measured(min(r.numbers[f"slope_s_{k}"] - EXPONENTS[k] for k in ("V", "W", "P"))),
    ),
    Claim(
        "ch02.attention_leaves_first",
        CH02,
        "book",
        "The attention terms (W, P), fourth order in η·s, leave their leading forms before the output and value "
        "terms (W_O, V)",
        "share of the sweep's learning rates at which some term leaves (lowest cosine over the layers below 0.99) "
        "where both W and P leave before both W_O and V (a term that never leaves counts as leaving last)",
        Rule(">=", 1.0, partly=0.5),
        section="ch02-validity",
        read=_attention_leaves_first,
    ),
)
"""Chapter 2's claims: the paper's closed forms (direction and size) and the book's readings that a
sentence of the page asserts."""

TABLES: dict[str, tuple[Claim, ...]] = {
    "intro": INTRO,
    CH01: CH01_CLAIMS,
    CH02: CH02_CLAIMS,
}
"""Every Part I chapter's claims, by notebook stem."""
