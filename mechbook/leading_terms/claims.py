"""The claims of the introduction and of chapters 1-5 (Part I), one table per chapter, each claim
one entry with its ``read`` (:class:`mechbook.claims.Claim`).

:data:`TABLES` holds them by notebook stem (the ledger reads it); a chapter's page gets its
verdicts with ``mechbook.claims.evidence(TABLES[stem], readings)``, where ``readings`` is what its
claims read:

- ``intro``: the :class:`~mechbook.leading_terms.overview.CorpusOverview`.
"""

from __future__ import annotations

from mechbook.claims import Claim, Measured, Rule
from mechbook.leading_terms.overview import PAPER_VOCAB, reuse_gap, token_coverage

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

TABLES: dict[str, tuple[Claim, ...]] = {
    "intro": INTRO,
}
"""Every Part I chapter's claims, by notebook stem."""
