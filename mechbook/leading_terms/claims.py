"""The claims of the introduction and of chapters 1-5 (Part I), one table per chapter, each claim
one entry with its ``read`` (:class:`mechbook.claims.Claim`).

:data:`TABLES` holds them by notebook stem (the ledger reads it); a chapter's page gets its
verdicts with ``mechbook.claims.evidence(TABLES[stem], readings)``, where ``readings`` is what its
claims read:

- ``intro``: the :class:`~mechbook.leading_terms.overview.CorpusOverview`;
- ``01_corpus_maps``: :class:`~mechbook.leading_terms.readings.MapsReadings`;
- ``02_leading_terms``: :class:`~mechbook.leading_terms.readings.CheckReadings`;
- ``03_training``: :class:`~mechbook.leading_terms.readings.TrainingReadings`;
- ``04_associations``: :class:`~mechbook.leading_terms.readings.AssociationReadings`;
- ``05_cooperation``: :class:`~mechbook.leading_terms.readings.CooperationReadings` (:data:`CH05_PATHS` reads
  its path means alone).

The claims of chapters 4 and 5 are decided on the run of chapter 3 that has trained
(:func:`~mechbook.leading_terms.check.decisive_run`), and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mechbook.claims import Claim, Measured, Rule
from mechbook.leading_terms.associations import TRAINED_TERMS
from mechbook.leading_terms.check import (
    LEARNED_NATS,
    TRAINED_NATS,
    decisive_run,
    departure_steps,
    is_trained,
    loss_drop,
    run_label,
)
from mechbook.leading_terms.leading import KINDS
from mechbook.leading_terms.maps import FIGURE3_SENTENCE, FIGURE5, FIGURE5_TOP, NamedAssociation
from mechbook.leading_terms.overview import PAPER_VOCAB, reuse_gap, token_coverage
from mechbook.leading_terms.readings import (
    BREAK_COSINE,
    EXPONENTS,
    AssociationReadings,
    CheckReadings,
    CooperationReadings,
    MapsReadings,
    TrainingReadings,
    attention_first,
)
from mechbook.leading_terms.tables import (
    FIGURE4,
    TABLE1,
    TABLE2,
    TABLE3,
    TABLE3_UNIFORM,
    TABLE_EPOCHS,
    TABLE_KINDS,
    WHOLE,
    final_cosines,
    final_loss,
    table3_deltas,
)

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


def _pairs(r: MapsReadings, value: Any) -> Measured:
    """Chapter 1's ``value``, untested where there is none because no scene pair is in the
    vocabulary (its Φ median rank is None)."""
    if value is None and r.phi_pair_median_rank is None:
        return Measured(
            untested=f"no scene pair of the chapter has both its words in this vocabulary of {r.vocab_size} "
            "tokens (a larger corpus or vocabulary has them)"
        )
    return Measured(value)


def _over_phi(r: MapsReadings, rank: float | None) -> float | None:
    """The median rank ``rank`` over the pairs' median rank in Φ (None where either is None)."""
    phi = r.phi_pair_median_rank
    return None if phi is None or rank is None else rank / phi


def _outside(words: list[str], vocab_size: Any) -> str:
    """Why a claim naming ``words`` is untested: they are outside the vocabulary."""
    named = ", ".join(f"*{w}*" for w in words)
    verb = "is" if len(words) == 1 else "are"
    return f"{named} {verb} not in this profile's vocabulary of |V| = {vocab_size} tokens"


def _named(a: NamedAssociation) -> Callable[[MapsReadings], Measured]:
    """Reads the share of ``a``'s partners in their row's top 30 (``fig5[a.key]``), untested with
    the words a vocabulary lacks."""

    def read(n: MapsReadings) -> Measured:
        r = n.fig5[a.key]
        if r["missing"]:
            return Measured(untested=_outside(r["missing"], n.vocab_size))
        return Measured(r["share"])

    return read


def _words(words: tuple[str, ...]) -> str:
    marked = [f"*{w}*" for w in words]
    return marked[0] if len(marked) == 1 else ", ".join(marked[:-1]) + f" and {marked[-1]}"


_MAP_ROWS = {
    "B": "the {top} strongest readable successors of {row} in B ({row}'s row: the next words)",
    "Φ": "the {top} strongest readable context words in {row}'s row of Φ ({row} as the next token; {row} itself left out)",
    "Σ_B": (
        "the {top} words nearest {row} under Σ̃_B (the cosine of B's columns; function words included; "
        "punctuation, numbers, `<unk>` and {row} itself left out)"
    ),
}


def _figure5_claim(a: NamedAssociation) -> Claim:
    """The claim of one Figure 5 group: all its named words in the row's top 30. The figure lists
    them there, so the rule asks for every one (share 1); half of them counts as partly, fewer as
    not reproduced. Read as chapter 1 reads each map (:func:`~mechbook.leading_terms.maps.map_row`)."""
    row, partners = f"*{a.row}*", _words(a.partners)
    shown = {"Σ_B": "Σ̃_B"}.get(a.map, a.map)
    return Claim(
        f"ch01.fig5_{a.key}",
        CH01,
        "paper",
        f"{partners} {'is' if len(a.partners) == 1 else 'are'} in the top {FIGURE5_TOP} of {row}'s row of {shown}",
        f"share of {partners} within {_MAP_ROWS[a.map].format(top=FIGURE5_TOP, row=row)}",
        Rule(">=", 1.0, partly=0.5),
        paper=a.paper,
        section="ch01-paper-figures",
        spec=".0%",
        read=_named(a),
    )


def _figure3(n: MapsReadings) -> Measured:
    """*pond*'s rank among the sentence's scored words in *fish*'s row of Φ; untested where *fish*
    or *pond* is outside the vocabulary or no other word of the sentence is in it."""
    r = n.fig3_fish
    if r["pond_rank"] is not None:
        return Measured(r["pond_rank"])
    lacking = [w for w in ("fish", "pond") if w in r["missing"]]
    if lacking:
        return Measured(untested=_outside(lacking, n.vocab_size))
    return Measured(
        untested=f"no other word of the sentence is in this profile's vocabulary of |V| = {n.vocab_size} tokens"
    )


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
        read=lambda n: _pairs(n, n.drop_kept_fraction),
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
        read=lambda n: _pairs(n, n.b_rank_upon_after_once),
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
        read=lambda n: _pairs(n, n.b_adj_noun_share / n.b_adj_noun_chance),
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
        read=lambda n: _pairs(n, n.phi_pair_median_rank),
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
        read=lambda n: _pairs(n, _over_phi(n, n.b_pair_median_rank)),
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
        read=lambda n: _pairs(n, _over_phi(n, n.phi_pair_mismatched_median_rank)),
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
        read=lambda n: _pairs(n, n.sigma_class_purity / n.sigma_class_chance),
    ),
    *(_figure5_claim(a) for a in FIGURE5),
    Claim(
        "ch01.fig3_pond_for_fish",
        CH01,
        "paper",
        f"Of the words of “{' '.join(FIGURE3_SENTENCE)}”, Φ associates *pond* most with *fish*",
        "rank of *pond* among the sentence's words before *fish* that the vocabulary holds, by their raw entry "
        "in *fish*'s row of Φ (fish as the next token, function words included)",
        Rule("==", 1),
        paper=f"Figure 3: Φ's scores for “{' '.join(FIGURE3_SENTENCE)}”, pond the strongest for fish",
        section="ch01-paper-figures",
        spec="d",
        read=_figure3,
    ),
)
"""Chapter 1's claims: the paper's three readings of the maps (its examples as its numbers), every
association its Figure 5 names and Figure 3's example, and the book's own readings that a sentence
of the page asserts."""


def _attention_leaves_first(r: CheckReadings) -> Measured:
    """The share of the sweep's rates at which some term leaves where W and P leave first; untested
    where no term leaves."""
    order = departure_steps(r.sweep, BREAK_COSINE).dropna(how="all")
    if not len(order):
        return Measured(untested=f"no matrix fell below cosine {BREAK_COSINE} up to η·s = {r.sweep['eta_s'].max():.3g}")
    return Measured(float(attention_first(order).mean()))


CH02 = "02_leading_terms"
_THEOREM = (
    "Theorems D.10 and 4.1: for sη ≤ min(1/(12L), 5/(8√T)), T ≥ 60, |V| ≥ 500, L ≤ √T/4: ‖W_O − sηB‖ ≤ 3s²η², "
    "‖V − C(s,2)η²(BΦ)ᵀ‖ ≤ 12s³η³, ‖W − c₄η⁴Q‖ and ‖P − c₄η⁴Δ‖ ≤ 13s⁵η⁵T (Frobenius)"
)


def _inside(init: str, name: str) -> Callable[[CheckReadings], Measured]:
    """A chapter 2 claim's ``read`` of ``numbers[name]``, untested where the ``init`` start's run
    leaves a condition of the theorem unmet."""

    def read(r: CheckReadings) -> Measured:
        if r.unmet[init]:
            return Measured(
                untested="this profile's run is outside the theorem's conditions: " + ", ".join(r.unmet[init])
            )
        if name not in r.numbers:
            return Measured(untested="no logged step of the run is inside the theorem's window")
        return Measured(r.numbers[name])

    return read


_PAPER_FORMS = "W_O ∼ ηsB, V ∼ ½η²s(s−1)(BΦ)ᵀ, W ∼ c₄Q and P ∼ c₄𝒫 while η·s is small"
_CHECK_SETTING = (
    "the derivation's setting, not the TinyStories run's: full-batch gradient descent from zero in float64 at "
    "rates 0.01 to 0.1 for 20 steps, at a |V| below the theorem's 500 (256 in the cpu profile), so the early steps are checked to 1e-3 "
    "(the theorem's conditions are checked by its own runs below)"
)
CH02_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch02.closed_form_direction",
        CH02,
        "paper",
        "Trained from zero, every matrix points along its leading term while η·s is small",
        "lowest cosine with the closed form over every matrix, layer and step of the smallest learning rate",
        Rule(">=", 0.999),
        paper=_PAPER_FORMS,
        setting=_CHECK_SETTING,
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
        setting=_CHECK_SETTING,
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
    Claim(
        "ch02.theorem_bounds",
        CH02,
        "paper",
        "From zero, inside the theorem's window every matrix of every layer is within its bound (eqs. 5-8)",
        "largest ‖M − term‖_F / bound over every matrix, layer and step s ≥ 1 of the window, zero start",
        Rule("<=", 1.0),
        paper=_THEOREM,
        section="ch02-theorem",
        spec=".2e",
        read=_inside("zero", "theorem_ratio_zero"),
    ),
    Claim(
        "ch02.theorem_bounds_gaussian",
        CH02,
        "paper",
        "From Theorem 4.1's small Gaussian start (D.13) at η = 1/T, inside the window every matrix is within the "
        "same bounds",
        "largest ‖M − term‖_F / bound over every matrix, layer and step s ≥ 1 of the window, Gaussian start",
        Rule("<=", 1.0),
        paper=_THEOREM + "; D.13: every parameter from N(0, v²/|V|^(2+2ξ)), v ≤ η²/T², ξ ≥ 0, η ≥ 1/T, T ≤ |V|",
        section="ch02-theorem",
        spec=".3g",
        read=_inside("gaussian", "theorem_ratio_gaussian"),
    ),
    Claim(
        "ch02.attention_bounds_loose",
        CH02,
        "book",
        "Inside the window the bounds on W and P (eqs. 7-8) are larger than the attention terms themselves, so "
        "they bound the attention's size but not its direction",
        "smallest bound / ‖term‖_F over W and P, every layer and step of the zero start's window",
        Rule(">", 1.0),
        section="ch02-theorem",
        spec=".3g",
        read=_inside("zero", "theorem_attention_bound_over_term"),
    ),
)
"""Chapter 2's claims: the paper's closed forms (direction and size) and the book's readings that a
sentence of the page asserts."""


def _paper_lr_drop(r: TrainingReadings) -> Measured:
    return Measured(loss_drop(final_loss(r.small), r.small.model_cfg.d_vocab))


def _most_fragile(r: TrainingReadings) -> Measured:
    cos = final_cosines(r.large)
    return Measured(min(cos, key=cos.get) in ("W", "P"))


CH03 = "03_training"
TABLE_BAR = {"table1": 0.998, "table2": 0.997}
"""Each table's rule: its smallest entry (Table 1: 0.998486; Table 2: 0.997891) to three decimals,
rounded down; partly from the paper's headline "cosine > 0.99"."""
HEADLINE = 0.99
"""The paper's headline: the matrices keep cosine > 0.99 with their leading terms."""
_TERMS = "with the leading terms of the run's first batch, as the paper computes them"


def _table_claim(table: str, name: str, kind: str) -> Claim:
    """The claim of one entry of Table 1 or Table 2."""
    paper = TABLE1 if table == "table1" else TABLE2
    epochs = TABLE_EPOCHS[table]
    run = "lr 0.005, natural tokenizer" if table == "table1" else "lr 0.005, the paper's cased BPE"
    number = "Table 1" if table == "table1" else "Table 2 (App. B)"
    return Claim(
        f"ch03.{table}_{name}",
        CH03,
        "paper",
        f"Over every one of the first {epochs} epochs ({run}), the {name} matrix of every layer keeps cosine at least "
        f"{TABLE_BAR[table]} with its leading term",
        f"lowest cosine of {kind} with its leading term over the layers and the ends of epochs 1-{epochs}, {_TERMS}",
        Rule(">=", TABLE_BAR[table], partly=HEADLINE),
        paper=f"{number}: minimum over the first {epochs} epochs, {name} {paper[kind]}",
        section="ch03-tables",
        spec=".4f",
        read=lambda r: Measured((r.table1() if table == "table1" else r.table2())[kind]),
    )


CH03_CLAIMS: tuple[Claim, ...] = (
    *(_table_claim("table1", name, kind) for name, kind in TABLE_KINDS.items()),
    *(_table_claim("table2", name, kind) for name, kind in TABLE_KINDS.items()),
    Claim(
        "ch03.figure4_30_epochs",
        CH03,
        "paper",
        f"At the larger rate 0.05, every weight keeps cosine at least {FIGURE4.floor_30} with its leading term after "
        f"{FIGURE4.epochs_30} epochs",
        f"lowest cosine of W_O, V and W over the layers after {FIGURE4.epochs_30} epochs at lr 0.05, {_TERMS}",
        Rule(">=", FIGURE4.floor_30),
        paper=f"Figure 4: all weights ≥ {FIGURE4.floor_30} after {FIGURE4.epochs_30} epochs (lr 0.05)",
        section="ch03-figure4",
        spec=".3f",
        read=lambda r: Measured(r.figure4(FIGURE4.epochs_30)),
    ),
    Claim(
        "ch03.figure4_100_epochs",
        CH03,
        "paper",
        f"At the larger rate 0.05, every weight keeps cosine above {FIGURE4.floor_100} with its leading term after "
        f"{FIGURE4.epochs_100} epochs",
        f"lowest cosine of W_O, V and W over the layers after {FIGURE4.epochs_100} epochs at lr 0.05, {_TERMS}",
        Rule(">", FIGURE4.floor_100),
        paper=f"Figure 4: all weights > {FIGURE4.floor_100} after {FIGURE4.epochs_100} epochs (lr 0.05)",
        section="ch03-figure4",
        spec=".3f",
        read=lambda r: Measured(r.figure4(FIGURE4.epochs_100)),
    ),
    Claim(
        "ch03.figure4_loss",
        CH03,
        "paper",
        "By then the larger rate's loss has fallen at least as far as the paper's, to at most 0.7 of the uniform loss",
        "final batch loss of the lr-0.05 run over log |V| (the zero model's loss)",
        Rule("<=", 0.7, partly=0.85),
        paper=f"Figure 4: the loss fell from {FIGURE4.loss_start:.2f} (log 3000) to {FIGURE4.loss_end} after "
        f"{FIGURE4.epochs_100} epochs, {FIGURE4.loss_ratio:.3f} of the uniform loss",
        section="ch03-figure4",
        spec=".3f",
        read=lambda r: Measured(r.loss_ratio()),
    ),
    Claim(
        "ch03.whole_set_terms_hold",
        CH03,
        "book",
        f"With the whole training set's leading terms, every W, V and W_O of Table 1's and Table 2's runs stays "
        f"above cosine {HEADLINE} over all their epochs",
        "lowest of Table 1's and Table 2's entries with the leading terms of the whole training set",
        Rule(">", HEADLINE),
        section="ch03-tables",
        spec=".4f",
        read=lambda r: Measured(min(*r.table1(WHOLE).values(), *r.table2(WHOLE).values())),
    ),
    Claim(
        "ch03.first_batch_bounds_the_paper_measure",
        CH03,
        "book",
        f"At this scale the first batch caps the paper's measure: its leading terms are at cosine below Table 1's "
        f"{TABLE_BAR['table1']} with the whole set's, so a matrix that follows the whole set's terms exactly reads "
        "below the paper's bar",
        "highest cosine, over W_O, V and W, between the lr-0.005 run's first-batch leading term and the whole set's",
        Rule("<", TABLE_BAR["table1"]),
        section="ch03-tables",
        spec=".4f",
        read=lambda r: Measured(max(r.ceiling[k] for k in TABLE_KINDS.values())),
    ),
    Claim(
        "ch03.paper_lr_learned",
        CH03,
        "book",
        f"At the paper's learning rate 0.005 the run has learned: its loss falls at least {LEARNED_NATS} nats "
        "below log |V| in the 100 epochs",
        "log |V| minus the final batch loss of the lr-0.005 run (nats)",
        Rule(">=", LEARNED_NATS),
        section="ch03-cosines",
        spec=".3f",
        read=_paper_lr_drop,
    ),
    Claim(
        "ch03.large_lr_drifts",
        CH03,
        "book",
        f"At the larger rate the matrices acquire components the leading terms do not contain: some kind ends below "
        f"cosine {HEADLINE}",
        "lowest final cosine of any kind of matrix over the layers at lr 0.05 (the whole set's terms)",
        Rule("<", HEADLINE),
        section="ch03-cosines",
        spec=".4f",
        read=lambda r: Measured(min(final_cosines(r.large).values())),
    ),
    Claim(
        "ch03.attention_most_fragile",
        CH03,
        "book",
        "At the larger rate the attention terms (W, P) end furthest from their leading terms",
        "whether the kind with the lowest final cosine at lr 0.05 is W or P (the whole set's terms)",
        Rule("==", True),
        section="ch03-cosines",
        read=_most_fragile,
    ),
)
"""Chapter 3's claims: Table 1, Table 2 and Figure 4 as the paper states them, decided in the
paper's regime (its two rates, 100 epochs at its batch-to-data ratio, zero start, a number as one
token), and the book's readings that a sentence of the page asserts."""


def _untrained(drops: dict[float, float]) -> str:
    """Why chapters 4 and 5 leave their claims untested where neither of chapter 3's runs has trained."""
    return (
        f"neither of chapter 3's runs has trained: their losses fell {' and '.join(f'{d:.3f}' for d in drops.values())} "
        f"nats, under {TRAINED_NATS}"
    )


def _on_trained(value: Callable[[Any, float], Any]) -> Callable[[Any], Measured]:
    """The read of a chapter 4 or 5 claim: ``value(readings, lr)`` on the run that has trained
    (:func:`~mechbook.leading_terms.check.decisive_run` of ``readings.drops``), named as the run it
    was decided on; untested, with the drops, when neither run has trained."""

    def read(r: Any) -> Measured:
        lr = decisive_run(r.drops)
        if lr is None:
            return Measured(untested=_untrained(r.drops))
        return Measured(value(r, lr), run=run_label(lr, r.drops[lr]))

    return read


def _overlap(trained: str, centred: bool) -> Callable[[Any], Measured]:
    """The read of a chapter 4 claim on the trained map ``trained``: the overlap's excess over the
    harder baseline (``centred``: of the row-centred maps over another word's row)."""

    def value(r: AssociationReadings, lr: float) -> float:
        o = r.overlaps[lr][trained]
        return o.centred - o.centred_mismatched if centred else o.excess

    return _on_trained(value)


def _overlap_claim(name: str, trained: str, statement: str, paper: str) -> Claim:
    term = TRAINED_TERMS[trained]
    return Claim(
        f"ch04.{name}",
        CH04,
        "paper",
        statement,
        f"overlap@10 of {term} and {trained} over the content words minus the harder baseline (the larger of "
        "chance and the overlap with another word's row), on the run of chapter 3 that has trained",
        Rule(">=", 0.5, partly=0.25),
        paper=paper,
        section="ch04-overlap",
        spec=".2f",
        read=_overlap(trained, centred=False),
    )


def _centred_claim(name: str, trained: str) -> Claim:
    term = TRAINED_TERMS[trained]
    return Claim(
        f"ch04.{name}",
        CH04,
        "book",
        f"With the profile every row shares taken out, each word's row of {trained} still ranks what its row of "
        f"{term} ranks",
        f"overlap@10 of the row-centred {term} and {trained} minus the same overlap with another word's row, on "
        "the run of chapter 3 that has trained",
        Rule(">=", 0.3, partly=0.1),
        section="ch04-overlap",
        spec=".2f",
        read=_overlap(trained, centred=True),
    )


CH04 = "04_associations"
CH04_CLAIMS: tuple[Claim, ...] = (
    _overlap_claim(
        "w_o_ranks_b",
        "W_O",
        "The trained output matrix W_O lists each word's bigram successors, as B does",
        "W_O ≈ ηs B: its rows list B's successors (the association tables)",
    ),
    _overlap_claim(
        "vw_o_ranks_g",
        "V W_O",
        "The trained value-output path V W_O lists, for each context word, the next words G lists",
        "V W_O ∝ G = ΦᵀΣ_B: context → words interchangeable with its usual successors",
    ),
    _overlap_claim(
        "w_ranks_q",
        "W",
        "The trained key-query matrix W lists, for each query word, the keys Q lists",
        "W ∝ Q: which earlier tokens a token attends to",
    ),
    _centred_claim("w_o_ranks_b_centred", "W_O"),
    _centred_claim("vw_o_ranks_g_centred", "V W_O"),
    _centred_claim("w_ranks_q_centred", "W"),
)
"""Chapter 4's claims: the paper's reading of each trained map as its leading term, judged against
the mismatched-row baseline, and the book's row-centred reading of the same maps."""

CH04_CLAIM_OF = {
    "W_O": ("ch04.w_o_ranks_b", "ch04.w_o_ranks_b_centred"),
    "V W_O": ("ch04.vw_o_ranks_g", "ch04.vw_o_ranks_g_centred"),
    "W": ("ch04.w_ranks_q", "ch04.w_ranks_q_centred"),
}
"""The (raw, row-centred) claim ids of each trained map of chapter 4."""


def _path_gap(r: CooperationReadings, lr: float) -> float:
    p = r.exps[lr].paths.set_index("removal")["delta_loss"]
    return float(p["without the residual path"] - p["without every attention path"])


CH05 = "05_cooperation"
CH05_PATHS: tuple[Claim, ...] = (
    Claim(
        "ch05.residual_leads",
        CH05,
        "paper",
        "Once the model has trained, the residual (bigram) path carries more of the right token's logit than the "
        "attention paths together",
        "attention paths' share a/(|a|+|r|) of the right token's mean centred logit, on the run of chapter 3 that has trained",
        Rule("<", 0.5),
        paper="logits ≈ ηs B[x_t] + (η³s³/2) Σ_l (A x)ᵀ ΦᵀΣ_B: the bigram path is first order, attention third",
        section="ch05-paths",
        read=_on_trained(lambda r, lr: float(r.means.loc[lr, "attention share"])),
    ),
)
"""Chapter 5's claim on the paths' mean contributions (it reads ``CooperationReadings.means``)."""


def _table3(r: CooperationReadings) -> dict[str, float]:
    """Table 3's loss increases on the lr-0.05 run (the paper's Table 3 model)."""
    return table3_deltas(r.table3)


def _table3_output_over_uniform(r: CooperationReadings) -> float:
    """The lr-0.05 run's loss with W_O's leading component removed, minus the zero model's log |V|."""
    rows = r.table3.set_index("ablation")["loss"]
    return float(rows["remove leading term of W_O"] - rows["zero model"])


def _on_large(value: Callable[[CooperationReadings], Any]) -> Callable[[CooperationReadings], Measured]:
    """The read of a Table 3 claim: ``value`` on the larger-rate run (the paper's Table 3 model),
    named as the run it was decided on; untested where that run has not trained."""

    def read(r: CooperationReadings) -> Measured:
        lr = max(r.drops)
        if not is_trained(r.drops[lr]):
            return Measured(
                untested=f"the η = {lr:g} run has not trained: its loss fell {r.drops[lr]:.3f} nats, under {TRAINED_NATS}"
            )
        return Measured(value(r), run=run_label(lr, r.drops[lr]))

    return read


def _layers_of(deltas: dict[str, float], kind: str) -> list[float]:
    return [v for name, v in deltas.items() if name.endswith(f".attn.{kind}")]


_TABLE3_ON = "on the lr-0.05 run, with the leading terms of its first batch, as the paper's"


def _losses(kind: str) -> str:
    return "/".join(f"{TABLE3[f'blocks.{layer}.attn.{kind}']:.3f}" for layer in range(3))


_TABLE3_PAPER = (
    f"Table 3 (lr 0.05): full {TABLE3['full model']:.3f}; without the attention terms {_losses('W')}, the value "
    f"terms {_losses('V')}, the output term {TABLE3['W_O']:.3f} (uniform {TABLE3_UNIFORM:.3f})"
)
CH05_TABLE3: tuple[Claim, ...] = (
    Claim(
        "ch05.table3_output_above_uniform",
        CH05,
        "paper",
        "Without its output leading term the model does worse than predicting uniformly",
        f"loss with W_O's leading component removed minus log |V| (nats), {_TABLE3_ON}",
        Rule(">", 0.0),
        paper=_TABLE3_PAPER,
        section="ch05-table3",
        spec=".3f",
        read=_on_large(_table3_output_over_uniform),
    ),
    Claim(
        "ch05.table3_output_most",
        CH05,
        "paper",
        "Of Table 3's removals, the output leading term's costs most",
        f"the matrix among W_O and each layer's V and W whose leading-term removal raises the loss most, {_TABLE3_ON}",
        Rule("==", "W_O"),
        paper=_TABLE3_PAPER,
        section="ch05-table3",
        read=_on_large(lambda r: max((d := _table3(r)), key=d.get)),
    ),
    Claim(
        "ch05.table3_value_over_attention",
        CH05,
        "paper",
        "Every value leading term costs more than every attention one",
        f"smallest loss increase from a V removal minus the largest from a W removal (nats), {_TABLE3_ON}",
        Rule(">", 0.0),
        paper=_TABLE3_PAPER,
        section="ch05-table3",
        spec=".3f",
        read=_on_large(lambda r: min(_layers_of(d := _table3(r), "V")) - max(_layers_of(d, "W"))),
    ),
    Claim(
        "ch05.table3_attention_small",
        CH05,
        "paper",
        "Removing an attention leading term barely moves the loss (the paper: at most 0.012 nats of 5.349)",
        f"largest loss increase from a W removal over the full model's loss, {_TABLE3_ON}",
        Rule("<=", 0.01, partly=0.05),
        paper=_TABLE3_PAPER,
        section="ch05-table3",
        spec=".2%",
        read=_on_large(
            lambda r: max(_layers_of(_table3(r), "W")) / float(r.table3.set_index("ablation")["loss"]["full model"])
        ),
    ),
)
"""Chapter 5's claims of the paper's Table 3, on the lr-0.05 run as the paper's."""

CH05_ABLATIONS: tuple[Claim, ...] = (
    Claim(
        "ch05.w_o_costliest",
        CH05,
        "book",
        "The bigram term of W_O carries most of what the model has learned: its removal costs more than any other "
        "single leading term's",
        "the matrix whose leading-term removal raises the loss most, on the run of chapter 3 that has trained",
        Rule("==", "W_O"),
        section="ch05-ablation",
        read=_on_trained(lambda r, lr: r.exps[lr].costliest[0]),
    ),
    Claim(
        "ch05.w_p_least",
        CH05,
        "book",
        "Removing a key-query or position leading term moves the loss less than removing any output or value one "
        "(they only reshape attention, a fourth-order effect)",
        "largest loss increase from a W or P removal minus the smallest from a W_O or V removal (nats), on the run of chapter 3 that has trained",
        Rule("<", 0.0),
        section="ch05-ablation",
        read=_on_trained(lambda r, lr: r.exps[lr].attention_shaping_gap),
    ),
    Claim(
        "ch05.leading_terms_hold_the_skill",
        CH05,
        "book",
        "The leading terms hold the model's skill: removing every leading component at once takes the model back to "
        "the zero model",
        "share of the way from the full model's loss back to the zero model's with every leading component removed"
        ", on the run of chapter 3 that has trained",
        Rule(">=", 0.9, partly=0.5),
        section="ch05-ablation",
        spec=".0%",
        read=_on_trained(lambda r, lr: r.exps[lr].way_back),
    ),
    Claim(
        "ch05.residual_path_costs_most",
        CH05,
        "book",
        "Dropping the residual path costs more than dropping every attention path",
        "loss increase without the residual path minus that without every attention path (nats), on the run of chapter 3 that has trained",
        Rule(">", 0.0),
        section="ch05-path-ablation",
        read=_on_trained(_path_gap),
    ),
    Claim(
        "ch05.remainder_pushes_down",
        CH05,
        "book",
        "Alone, what is left of W_O after its B part pushes the right next token down, which is how removing the B "
        "part can cost more than the zero model",
        "mean centred logit of the right next token from W_O's remainder alone (nats), on the run of chapter 3 that has trained",
        Rule("<", 0.0),
        section="ch05-remainder",
        read=_on_trained(lambda r, lr: r.exps[lr].split.right_remainder),
    ),
    Claim(
        "ch05.remainder_corrects_b",
        CH05,
        "book",
        "W_O's remainder corrects its B part: the logits the two write point in opposite directions",
        "cosine between the centred logits of W_O's B part and of its remainder, on the run of chapter 3 that has trained",
        Rule("<", 0.0),
        section="ch05-remainder",
        read=_on_trained(lambda r, lr: r.exps[lr].split.logit_cosine),
    ),
    Claim(
        "ch05.w_zero_idle",
        CH05,
        "book",
        "Attention stays near uniform, so the key-query matrices hold none of the skill: W := 0 leaves the loss where "
        "it is",
        "share of the full model's gain over the zero model lost with every W := 0, on the run of chapter 3 that has trained",
        Rule("<", 0.01),
        section="ch05-w-zero",
        spec=".2%",
        read=_on_trained(lambda r, lr: r.exps[lr].idle_share),
    ),
)
"""Chapter 5's claims on its ablation experiments (they read ``CooperationReadings.exps``)."""

CH05_CLAIMS: tuple[Claim, ...] = CH05_PATHS + CH05_TABLE3 + CH05_ABLATIONS
"""Chapter 5's claims: the paper's ordering of the paths, its Table 3, and the book's readings of
the ablations (with P among them, which Table 3 leaves out) and their controls."""


TABLES: dict[str, tuple[Claim, ...]] = {
    "intro": INTRO,
    CH01: CH01_CLAIMS,
    CH02: CH02_CLAIMS,
    CH03: CH03_CLAIMS,
    CH04: CH04_CLAIMS,
    CH05: CH05_CLAIMS,
}
"""Every Part I chapter's claims, by notebook stem."""
