"""Chapter 6's claims (Part I), one entry each with its ``read`` (:class:`mechbook.claims.Claim`):
the paper's Pythia findings (section 5.2, Figures 6-8), each under both measures and read over the
paper's window (:mod:`mechbook.pythia.findings`); the book's own readings per measure and mapping
of real Pythia and of the miniature over all their checkpoints (whichever the page did not read is
untested), among them whether the features fade by the last checkpoint; and the offset caveat.

:data:`TABLES` holds them by notebook stem (the ledger reads it); the page gets its verdicts with
``mechbook.claims.evidence(TABLES["06_pythia"], read_pythia(result))``
(:class:`~mechbook.pythia.readings.StudyReadings`).
"""

from __future__ import annotations

from collections.abc import Callable

from mechbook.claims import Claim, Measured, Rule
from mechbook.pythia.analysis import MAPPINGS
from mechbook.pythia.readings import FINDINGS, MAPPING_LABELS, StudyReadings
from mechbook.pythia.similarity import MEASURE_LABELS, MEASURES
from mechbook.pythia.study import fade_share

CH06 = "06_pythia"
SUBJECTS = {"pythia": ("book", "Pythia"), "miniature": ("book", "Pythia in miniature")}
"""Whose checkpoints the book's readings are about: real Pythia or the miniature. Both are the
book's: they read the peak and the last checkpoint over every checkpoint read, not the paper's
window, so the paper's findings are the claims of :data:`FINDING_CLAIMS`."""
_STATEMENTS = {
    "embedding": "{who}'s token geometry after each layer (resid_post) carries (BΦ)ᵀ beyond every negative control",
    "no_mlp": "{who}'s layer output without its MLP (resid_pre + attn_out) carries (BΦ)ᵀ beyond every negative control",
    "attention": "The attention scores {who} computes (from the LayerNorm output) carry Q beyond every negative control",
    "attention_resid_pre": "{who}'s attention scores read from resid_pre, as the paper's pipeline reads them, carry Q "
    "beyond every negative control",
}
WINDOW = (
    "over the paper's window (the log-spaced checkpoints: Pythia's steps 1-512, or the same positions of the "
    "miniature's scaled schedule), on the top-k tokens (the book's budget)"
)
"""The setting every finding is read in."""
BASELINE = (
    "a layer's baseline is its strongest negative control (random initialisation, shuffled-token feature, offset)"
)
FINDING_TEXT: dict[str, tuple[str, str, str, Rule, str]] = {
    # finding: (the paper's words, the statement, what the value is, the rule, its format)
    "embedding_all_layers": (
        "early in training a very strong agreement: the embedding mapping matches at all layers (section 5.2, "
        "Figure 6)",
        "Early in training the embedding (resid_post) carries (BΦ)ᵀ at every layer, beyond every negative control",
        f"smallest, over layers, of a layer's best embedding similarity in the window minus its baseline; {BASELINE}",
        Rule(">", 0.0),
        ".3f",
    ),
    "attention_but_first": (
        "the attention matches at all layers but the first (section 5.2, Figure 6)",
        "The attention scores carry Q at every layer but the first, and not at the first",
        "smaller of the later layers' smallest margin (best attention similarity in the window minus the layer's "
        f"baseline, scores from resid_pre as the paper's pipeline takes them) and the first layer's margin negated; "
        f"{BASELINE}",
        Rule(">", 0.0),
        ".3f",
    ),
    "earlier_drift_first": (
        "with training the weights drift, starting with the earlier layers (section 5.2, Figure 6)",
        "The drift starts with the earlier layers: by the window's end the first layer has fallen further from its "
        "best embedding similarity than the last layer",
        "first layer's drop (best embedding similarity in the window minus its value at the window's last checkpoint) "
        "minus the last layer's",
        Rule(">", 0.0),
        ".3f",
    ),
    "features_kept": (
        'the weights keep the features "to a large extent" for relatively long (section 5.2, Figure 6)',
        "Every layer keeps at least half of its embedding's margin over its baseline to the window's end (half is "
        "the book's reading of 'to a large extent')",
        f"smallest, over layers, share of the best margin in the window still held at its last checkpoint; {BASELINE}; "
        "0 for a layer never above it",
        Rule(">=", 0.5),
        ".2f",
    ),
    "no_mlp_but_first": (
        "without the MLP the embedding correlations are similar, except at the first layer (section 5.2)",
        "The layer output without its MLP differs from the embedding most at the first layer",
        "first layer's mean gap over the window between the no-MLP (resid_pre + attn_out) and the embedding "
        "similarity, minus the largest such gap of a later layer",
        Rule(">", 0.0),
        ".3f",
    ),
    "earlier_heads_slower": (
        "per head (layers 2, 13 and 24, Figure 7), earlier layers learn the features more slowly, layer 2 most",
        "The heads of the earliest layer compared (layer 2 of Pythia-1.4B; the miniature's first) learn Q more "
        "slowly than those of every later one compared",
        "smallest, over the later layers compared, of the mean gain over the window of the head-mean attention "
        "similarity since the first checkpoint (the initialisation), minus the early layer's",
        Rule(">", 0.0),
        ".4f",
    ),
    "middle_heads_fastest": (
        "layer 13 specialises its heads fastest (Figure 7)",
        "Layer 13's heads part from one another faster than those of layers 2 and 24",
        "layer 13's mean gain over the window of the spread across heads of the attention similarity since the first "
        "checkpoint, minus the larger of layers 2 and 24's",
        Rule(">", 0.0),
        ".4f",
    ),
    "fineweb_similar": (
        'FineWeb gives "very similar results" (Figure 8)',
        "Features from FineWeb give the same similarities as from OpenWebText, within 0.05 (the book's reading of "
        "'very similar')",
        "largest difference, over mappings, layers and window checkpoints, between the similarities with features "
        "from FineWeb and from OpenWebText",
        Rule("<=", 0.05),
        ".3f",
    ),
}
"""Each finding's words, statement, value and rule."""
FADE = 0.1
"""Share of its margin over the controls a curve must lose after an early peak to count as fading."""


MINIATURE_SETTING = (
    "read on real Pythia-1.4B where the Hugging Face Hub can be reached; offline on the book's miniature, a "
    "GPT-NeoX of a few layers trained on TinyStories on Pythia's checkpoint schedule, not the paper's 24-layer "
    "model trained on the Pile"
)
"""Where chapter 6's paper claims are decided: the page says which source it read."""


def finding_id(finding: str, measure: str) -> str:
    """The id of the paper's ``finding`` (:data:`mechbook.pythia.readings.FINDINGS`) under ``measure``."""
    return f"ch06.{finding}_{measure}"


def _on_finding(finding: str, measure: str) -> Callable[[StudyReadings], Measured]:
    def read(r: StudyReadings) -> Measured:
        if finding in r.findings.untested:
            return Measured(untested=r.findings.untested[finding])
        return Measured(r.findings.values[finding, measure])

    return read


def _finding_claims() -> tuple[Claim, ...]:
    out = []
    for finding in FINDINGS:
        paper, statement, measure_text, rule, spec = FINDING_TEXT[finding]
        for measure in MEASURES:
            out.append(
                Claim(
                    finding_id(finding, measure),
                    CH06,
                    "paper",
                    f"{statement}, under the {MEASURE_LABELS[measure]}",
                    f"{measure_text}, {WINDOW}",
                    rule,
                    paper=paper,
                    section="ch06-findings",
                    spec=spec,
                    read=_on_finding(finding, measure),
                    setting=MINIATURE_SETTING,
                )
            )
    return tuple(out)


FINDING_CLAIMS: tuple[Claim, ...] = _finding_claims()
"""The paper's Pythia findings, each under both measures, read over the paper's window."""


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


CH06_CLAIMS: tuple[Claim, ...] = FINDING_CLAIMS + _claims()
"""Chapter 6's claims: the paper's findings over its window, then the book's readings per measure
and mapping of Pythia and of the miniature (whichever the page did not read is untested), and the
offset caveat."""

TABLES: dict[str, tuple[Claim, ...]] = {CH06: CH06_CLAIMS}
"""Part I's Pythia chapter's claims, by notebook stem."""
