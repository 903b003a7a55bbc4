"""Chapter 6's claims (Part I), one entry each with its ``read`` (:class:`mechbook.claims.Claim`):
per measure and mapping, the paper's claim about Pythia and the book's reading of the miniature
(whichever the page did not read is untested), and the offset caveat.

:data:`TABLES` holds them by notebook stem (the ledger reads it); the page gets its verdicts with
``mechbook.claims.evidence(TABLES["06_pythia"], study_readings(result))``
(:class:`~mechbook.pythia.readings.StudyReadings`).
"""

from __future__ import annotations

from collections.abc import Callable

from mechbook.claims import Claim, Measured, Rule
from mechbook.pythia.analysis import MAPPINGS
from mechbook.pythia.readings import MAPPING_LABELS, StudyReadings
from mechbook.pythia.similarity import MEASURE_LABELS, MEASURES
from mechbook.pythia.study import fade_share

CH06 = "06_pythia"
SUBJECTS = {"pythia": ("paper", "Pythia"), "miniature": ("book", "Pythia in miniature")}
"""Whose checkpoints a claim is about: real Pythia (the paper's claims) or the miniature (the
book's readings of its stand-in)."""
_STATEMENTS = {
    "embedding": "{who}'s token geometry after each layer (resid_post) carries (BΦ)ᵀ beyond every negative control",
    "no_mlp": "{who}'s layer output without its MLP (resid_pre + attn_out) carries (BΦ)ᵀ beyond every negative control",
    "attention": "The attention scores {who} computes (from the LayerNorm output) carry Q beyond every negative control",
    "attention_resid_pre": "{who}'s attention scores read from resid_pre, as the paper's pipeline reads them, carry Q "
    "beyond every negative control",
}
PAPER = (
    "Pythia-1.4B's token geometry carries (BΦ)ᵀ and its attention scores Q, most clearly at the earliest checkpoints "
    "(layer x checkpoint heatmaps)"
)
FADE = 0.1
"""Share of its margin over the controls a curve must lose after an early peak to count as fading."""


def claim_id(subject: str, what: str, measure: str) -> str:
    """The id of chapter 6's claim about ``subject`` ("pythia" or "miniature"), ``what`` (a mapping
    or ``"fades"``) under ``measure``."""
    return f"ch06.{subject}_{what}_{measure}"


def _on_subject(subject: str, value: Callable[[StudyReadings], float]) -> Callable[[StudyReadings], Measured]:
    """The read of a claim about ``subject``: ``value`` where the page read that subject; untested,
    saying why, where it read the other."""

    def read(r: StudyReadings) -> Measured:
        if subject == r.kind:
            return Measured(value(r))
        if subject == "pythia":
            return Measured(
                untested=f"needs the network (real Pythia checkpoints from the Hugging Face Hub): {r.reason}"
            )
        return Measured(untested="this page read real Pythia, not the miniature")

    return read


def _margin(measure: str, mapping: str) -> Callable[[StudyReadings], float]:
    return lambda r: r.controls[measure, mapping].margin


def _fade(measure: str) -> Callable[[StudyReadings], float]:
    return lambda r: max(fade_share(r.controls[measure, m], r.last_step) for m in MAPPINGS)


def _claims() -> tuple[Claim, ...]:
    out = []
    for subject, (source, who) in SUBJECTS.items():
        paper = PAPER if source == "paper" else None
        for measure in MEASURES:
            for mapping in MAPPINGS:
                out.append(
                    Claim(
                        claim_id(subject, mapping, measure),
                        CH06,
                        source,
                        _STATEMENTS[mapping].format(who=who) + f", under the {MEASURE_LABELS[measure]}",
                        f"peak layer-mean similarity minus the strongest negative control (random initialisation, "
                        f"shuffled-token feature, random + shared offset), {MAPPING_LABELS[mapping]}",
                        Rule(">", 0.0),
                        paper=paper,
                        section="ch06-reading",
                        spec=".3f",
                        read=_on_subject(subject, _margin(measure, mapping)),
                    )
                )
            out.append(
                Claim(
                    claim_id(subject, "fades", measure),
                    CH06,
                    source,
                    f"{who}'s features are clearest early and fade: an early peak above the controls loses at least a "
                    f"tenth of its margin by the last checkpoint, under the {MEASURE_LABELS[measure]}",
                    "largest share, over the four mappings, of the margin over the controls lost between a peak in the "
                    "first half of training and the last checkpoint",
                    Rule(">=", FADE),
                    paper=paper,
                    section="ch06-reading",
                    spec=".2f",
                    read=_on_subject(subject, _fade(measure)),
                )
            )
    out.append(
        Claim(
            "ch06.offset_fools_paper_measure",
            CH06,
            "book",
            "The paper's row-centred measure rates a random representation with one shared offset as similar to (BΦ)ᵀ, "
            "so a high value under it is weak evidence",
            "similarity of the random + shared offset control to (BΦ)ᵀ under the paper's row-centred covariance",
            Rule(">=", 0.5),
            section="ch06-controls",
            spec=".3f",
            read=lambda r: Measured(r.controls["paper", "embedding"].controls["offset"]),
        )
    )
    return tuple(out)


CH06_CLAIMS: tuple[Claim, ...] = _claims()
"""Chapter 6's claims: per measure and mapping, the paper's claim about Pythia and the book's
reading of the miniature (whichever the page did not read is untested), and the offset caveat."""

TABLES: dict[str, tuple[Claim, ...]] = {CH06: CH06_CLAIMS}
"""Part I's Pythia chapter's claims, by notebook stem."""
