"""Part II's claims: one table per chapter (7-11), each claim one entry with the read that takes its
value from the chapter's readings, per seed and on the authors' released run.

A page reads its table with :func:`mechbook.claims.evidence` and shows a section's claims with
:func:`mechbook.claims.section_prose`; the ledger (``book/appendix/ledger``) and ``python -m
mechbook check`` read :data:`TABLES`. The readings each table takes: chapter 7
:class:`TaskReadings`; chapter 8 :class:`~mechbook.assign_add.dynamics.Dynamics`; chapters 9 and 10
:class:`~mechbook.claims.Runs` of :class:`~mechbook.assign_add.circuit_readings.CircuitReadings` and
:class:`~mechbook.assign_add.theory.GradientReading` (the seeds that bound, and the released
run); chapter 11 :class:`~mechbook.assign_add.sweeps.Sweeps`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from mechbook.assign_add import fourier
from mechbook.assign_add.binding_jump import BOUND_LEVEL, PROBE_LEVEL, JumpReading
from mechbook.assign_add.circuit_readings import RANDOM_DRAWS
from mechbook.assign_add.dynamics import Dynamics, RunReadings
from mechbook.assign_add.phases import PhaseRules, Phases
from mechbook.assign_add.plateau import PLATEAU_LAG
from mechbook.assign_add.pools import coverage, label_errors, variable_configurations
from mechbook.assign_add.runs import on_the_papers_dates
from mechbook.assign_add.sweeps import LOSS_BOUND, PAPER_THRESHOLDS, Budget, SweepReading, lowest_final_pool
from mechbook.assign_add.task import KIND_NAMES, TWO_VAR, Task, union_accuracy
from mechbook.assign_add.theory import GRADIENT, GradientReading
from mechbook.claims import Claim, Measured, Rule, Runs, evidence, per_run

CH07, CH08, CH09, CH10, CH11 = (
    "07_task",
    "08_training_dynamics",
    "09_circuits",
    "10_why_it_composes",
    "11_how_much_data",
)


# ------------------------------------------------------------------------------ chapter 7
@dataclass(frozen=True)
class TaskReadings:
    """What chapter 7's claims read: the task as built and, for the label check, the evaluation
    pools drawn from it (``{pool: (tokens, labels)}``; None: not drawn)."""

    task: Task
    pools: dict[str, tuple[np.ndarray, np.ndarray]] | None = None


def _of_task(value: Callable[[Task], int]) -> Callable[[TaskReadings], Measured]:
    return lambda r: Measured(value(r.task))


def two_var_share(task: Task) -> int:
    """2-var rows' share of the training rows, in whole percent (chapter 7)."""
    rows = task.kind_counts()
    return round(100 * rows[KIND_NAMES[TWO_VAR]] / sum(rows.values()))


def _label_errors(r: TaskReadings) -> Measured:
    if r.pools is None:
        return Measured(untested="no evaluation pools were drawn")
    return Measured(int(label_errors(r.task, r.pools)))


CH07_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch07.heldout_pairs",
        CH07,
        "paper",
        "A seeded 70% of the 3,481 ordered pairs are training pairs and the other 30%, 1,045, are held out",
        "held-out ordered pairs of the split",
        Rule("==", 1045),
        paper="1,045 of 3,481 held out",
        section="ch07-split",
        basis="specification",
        spec=",d",
        read=_of_task(lambda t: int(t.heldout_pairs.sum())),
    ),
    Claim(
        "ch07.sums_covered",
        CH07,
        "book",
        "The split holds pairs out, not sums: every residue is the sum of some training pair, and every "
        "number is a left and a right operand of one",
        "residues no training pair sums to, plus numbers never a left or never a right training operand",
        Rule("==", 0),
        section="ch07-split",
        basis="specification",
        spec=",d",
        read=_of_task(lambda t: sum(coverage(t).values())),
    ),
    Claim(
        "ch07.allowed_two_var_pairs",
        CH07,
        "paper",
        "With a and b never on the right and k and l never on the left, 92 ordered variable pairs remain "
        "for 2-var training queries",
        "ordered variable pairs allowed in 2-var training queries",
        Rule("==", 92),
        paper="92 allowed ordered pairs",
        section="ch07-positions",
        basis="specification",
        spec=",d",
        read=_of_task(lambda t: int(t.allowed_two_var.sum())),
    ),
    Claim(
        "ch07.two_var_share",
        CH07,
        "paper",
        "2-var rows are about 24% of the training rows",
        "2-var share of the training rows, in whole percent",
        Rule("==", 24),
        paper="about 24%",
        section="ch07-rows",
        basis="specification",
        spec=",d",
        read=_of_task(two_var_share),
    ),
    Claim(
        "ch07.misplaced_both_pairs",
        CH07,
        "paper",
        "The hard sequences put both variables in a slot they never filled in training (v1 in k, l and "
        "v2 in a, b): 4 ordered variable pairs",
        "ordered variable pairs of the both-misplaced pool",
        Rule("==", 4),
        paper="v1 ∈ {k, l}, v2 ∈ {a, b}",
        section="ch07-pools",
        basis="specification",
        spec=",d",
        read=_of_task(lambda t: variable_configurations(t)["2var_misplaced_both"]),
    ),
    Claim(
        "ch07.union_size",
        CH07,
        "paper",
        "The authors' r sweep scores the 2-var generalisation union enumerated exactly: every held-out pair with each "
        "allowed variable pair, and every training pair with each one-misplaced and each both-misplaced pair",
        "sequences in the enumerated union (held-out + one misplaced + both misplaced)",
        Rule("==", 193_580),
        paper="the exactly enumerated union of the authors' sweep script",
        section="ch07-pools",
        basis="specification",
        spec=",d",
        read=_of_task(lambda t: sum(t.union_counts().values())),
    ),
    Claim(
        "ch07.label_errors",
        CH07,
        "book",
        "Every label of every pool agrees with reading its sequence literally",
        "sequences whose label differs from the literal reading",
        Rule("==", 0),
        section="ch07-pools",
        basis="specification",
        spec=",d",
        read=_label_errors,
    ),
)
"""Chapter 7: the paper's claims about the task that the chapter checks, and the book's readings its
sentences assert."""


# ------------------------------------------------------------------------------ chapter 8
NOT_REACHED = "no run of this profile reached the event it is measured at"
"""Why a chapter 8 claim read against an event (the jump, the plateau) is untested without one."""


def outside(step: int | None, window: tuple[int, int]) -> int | None:
    """Steps from ``step`` to the closed ``window`` (0 inside it; None without a step)."""
    if step is None:
        return None
    lo, hi = window
    return max(lo - step, step - hi, 0)


def dated(step: int | None, last: int) -> int:
    """A phase's step, or ``last`` (the run's last step) for a phase the run has not reached: that
    phase comes after ``last``, so its distance to a window before ``last`` is at least the one
    from ``last``, and it comes after every phase the run did reach (chapter 8's timing claims)."""
    return last if step is None else step


def _before_after(phases: Phases, last: int) -> bool:
    """Phase 1 came, and before phase 2 (a phase 2 not reached by ``last`` comes after it)."""
    return phases.phase1 is not None and phases.phase1 < dated(phases.phase2, last)


PHASE2_WINDOW = PhaseRules().jump_window
"""Steps after the binding jump's date over which its top is read (the phase-2 rule's window)."""


def jump_top(history: pd.DataFrame, phases: Phases, window: int = PHASE2_WINDOW) -> float | None:
    """The highest ``1var_train`` accuracy from the binding jump's date to ``window`` steps after it
    (None without a jump): where the jump takes the run."""
    if phases.phase2 is None:
        return None
    part = history[(history.pool == "1var_train") & history.step.between(phases.phase2, phases.phase2 + window)]
    return float(part.accuracy.max())


def _phases_of(d: Dynamics, seed: int) -> Phases:
    return next(r.phases for r in d.seeds if r.seed == seed)


PAPER_WINDOWS = {"phase2": (5300, 5400), "phase3": (14500, 16000)}
"""The paper's step windows of the binding jump and of the refinement (its released run)."""


def _last(d: Dynamics) -> int:
    return d.rebuild.run.config.steps


def _timing(d: Dynamics, f: Callable[[Phases], object]) -> dict[int, object] | None:
    """``f`` of each seed's phases where the rebuild trains the paper's configuration for at most its
    steps (:func:`~mechbook.assign_add.runs.on_the_papers_dates`; otherwise None: the released run
    alone decides the paper's dates)."""
    if not on_the_papers_dates(d.rebuild.run.config):
        return None
    return {r.seed: f(r.phases) for r in d.seeds}


def _window(phase: str) -> Callable[[Dynamics], Measured]:
    def read(d: Dynamics) -> Measured:
        window = PAPER_WINDOWS[phase]
        rebuild = _timing(d, lambda p: outside(dated(getattr(p, phase), _last(d)), window))
        return Measured(rebuild, outside(getattr(d.release.phases, phase), window))

    return read


def _jumped(d: Dynamics, f: Callable[[RunReadings], object]) -> dict[int, object]:
    """``f`` over the seeds that reach the binding jump: a reading taken against the jump does not
    apply to a seed without one (that seed counts against ``binding_jump_rise`` instead)."""
    return {r.seed: f(r) for r in d.seeds if r.jump is not None}


def _at(reading: JumpReading | None, where: str, measure: str) -> float | None:
    if reading is None:
        return None
    return float((reading.at_before if where == "before" else reading.at_after)[measure])


def _at_jump(where: str, measure: str) -> Callable[[Dynamics], Measured]:
    return lambda d: Measured(_jumped(d, lambda r: _at(r.jump, where, measure)), _at(d.release.jump, where, measure))


def _final(d: Dynamics, column: str) -> dict[int, float]:
    summary = d.dissected.summary.set_index("seed")
    return {int(s): float(v) for s, v in summary[column].items()}


def _release_last(d: Dynamics, pool: str) -> float:
    return float(d.release.run.accuracy().iloc[-1][pool])


def _release_heldout(d: Dynamics) -> float:
    if d.release_exact is not None:
        return float(d.release_exact["0var_heldout_all"])
    return _release_last(d, "0var_heldout")


def release_union(d: Dynamics) -> float:
    """The released run's final accuracy on the 2-var union, parts weighted by their sizes (enumerated
    where scored; chapter 8)."""
    if d.release_exact is not None:
        return float(d.release_exact["2var_union_paper"])
    last = d.release.run.accuracy().iloc[-1].to_dict()
    return union_accuracy(last, Task(d.release.run.config.task), "paper")


def _heldout_gap(d: Dynamics) -> Measured:
    train, heldout = _final(d, "final_0var_train"), _final(d, "final_0var_heldout")
    return Measured(
        {s: a - b for (s, a), b in zip(train.items(), heldout.values())},
        _release_last(d, "0var_train") - _release_heldout(d),
    )


CH08_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch08.phase1_step",
        CH08,
        "paper",
        "Modular addition on constants is learned by about step 500 (0-var training accuracy reaches 0.9)",
        "step of phase 1 (first evaluation with 0var_train ≥ 0.9; a run without one: its last step)",
        Rule("<=", 600),
        paper="~500",
        section="ch08-release",
        spec=",d",
        unmeasured="the rebuild trains another configuration and the released run has no phase 1 here",
        read=lambda d: Measured(_timing(d, lambda p: dated(p.phase1, _last(d))), d.release.phases.phase1),
    ),
    Claim(
        "ch08.phase2_window",
        CH08,
        "paper",
        "Variable binding comes in a sharp jump between steps 5,300 and 5,400",
        "steps from the binding jump (phase-2 rule) to the window 5,300-5,400 (0 inside it; a run that has not "
        "bound: from its last step, the least it can be)",
        Rule("<=", 100),
        paper="5,300-5,400",
        section="ch08-release",
        spec=",d",
        unmeasured="the rebuild trains another configuration and the released run has no binding jump here",
        read=_window("phase2"),
    ),
    Claim(
        "ch08.phase3_window",
        CH08,
        "paper",
        "A refinement lifts the misplaced pools off their plateau between steps 14,500 and 16,000",
        "steps from phase 3 (refinement rule) to the window 14,500-16,000 (0 inside it; a run without it: from "
        "its last step, the least it can be)",
        Rule("<=", 100),
        paper="14,500-16,000",
        section="ch08-release",
        spec=",d",
        unmeasured="the rebuild trains another configuration and no refinement was detected in the released run",
        read=_window("phase3"),
    ),
    Claim(
        "ch08.addition_first",
        CH08,
        "paper",
        "Modular addition is learned before variable binding",
        "phase 1 detected before phase 2 (a phase 2 not reached comes after the run's last step)",
        Rule("==", True),
        paper="addition first, then binding",
        section="ch08-phases",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(
            {r.seed: _before_after(r.phases, _last(d)) for r in d.seeds},
            _before_after(d.release.phases, d.release.run.config.steps),
        ),
    ),
    Claim(
        "ch08.binding_jump_rise",
        CH08,
        "paper",
        "Binding comes in a sharp jump of 1-var training accuracy",
        "largest rise of 1var_train accuracy within 500 steps",
        Rule(">=", 0.2),
        paper="0.76 → 0.99",
        section="ch08-phases",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured({r.seed: r.phases.phase2_jump or 0.0 for r in d.seeds}, d.release.phases.phase2_jump),
    ),
    Claim(
        "ch08.binding_jump_completes",
        CH08,
        "paper",
        "The binding jump takes 1-var training accuracy to about 0.99",
        f"highest 1var_train accuracy within the phase-2 rule's window ({PHASE2_WINDOW} steps) after the jump's date",
        Rule(">=", 0.99),
        paper="0.76 → 0.99 within 100 steps",
        section="ch08-phases",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(
            {r.config.seed: jump_top(r.history, _phases_of(d, r.config.seed)) for r in d.dissected.results},
            jump_top(d.release.run.history, d.release.phases),
        ),
    ),
    Claim(
        "ch08.l1_top2_before",
        CH08,
        "paper",
        "Before the binding jump, layer 1 at '=' rarely puts its top-2 weights on the operand positions",
        "share of sequences whose two most-attended layer-1 keys from '=' are positions 13, 14, last checkpoint before the jump",
        Rule("<=", 0.3),
        paper="0.12",
        section="ch08-measures",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=_at_jump("before", "l1_operands_top2"),
    ),
    Claim(
        "ch08.l1_top2_after",
        CH08,
        "paper",
        "After the binding jump, layer 1 at '=' puts its top-2 weights on the operand positions",
        f"the same share at the first checkpoint where 1var_train accuracy reaches {BOUND_LEVEL}",
        Rule(">=", 0.9),
        paper="0.95",
        section="ch08-measures",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=_at_jump("after", "l1_operands_top2"),
    ),
    Claim(
        "ch08.adder_before_jump",
        CH08,
        "paper",
        "The adder (MLP₂ on OV₂ eₙ + OV₂ eₘ) is complete before the binding jump",
        "share of all pairs the adder alone gets right, last checkpoint before the jump",
        Rule(">=", 0.9),
        paper="~100% by ~3,600, jump at ~5,300",
        section="ch08-measures",
        spec=".3f",
        unmeasured=NOT_REACHED,
        read=_at_jump("before", "adder"),
    ),
    Claim(
        "ch08.prev_token_before_jump",
        CH08,
        "book",
        "Layer 1's previous-token head (each value attending to its variable) is in place before the binding jump",
        "mean layer-1 attention from a value to its variable, last checkpoint before the jump",
        Rule(">=", 0.5),
        section="ch08-measures",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=_at_jump("before", "prev_token"),
    ),
    Claim(
        "ch08.plateau_one_slot",
        CH08,
        "paper",
        "The phase-3 plateau comes from one variable in one slot training never showed it in (in the paper's run, "
        "b as the right operand)",
        f"(variable, never-seen slot) cases below {PLATEAU_LAG} over each run's plateau, where one variable is misplaced",
        Rule("==", 1),
        paper="released run: b as right operand only",
        section="ch08-plateau",
        spec=",d",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(
            {s: p.n_lagging_slots for s, p in d.seed_plateaus.items()}, d.release.plateau.n_lagging_slots
        ),
    ),
    Claim(
        "ch08.readable_before_jump",
        CH08,
        "book",
        "The variable can be read after layer 1 before the binding jump",
        f"steps from the first checkpoint where the probe reads the variable after layer 1 with {PROBE_LEVEL:.0%} "
        "accuracy to the binding jump (positive: before it)",
        Rule(">", 0),
        section="ch08-probe",
        spec=",d",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(_jumped(d, lambda r: r.probe.lead if r.probe else None), d.release.probe.lead),
    ),
    Claim(
        "ch08.three_phases_most_seeds",
        CH08,
        "paper",
        "Most seeds show all three phases",
        "share of the stack's seeds in which the rules find all three phases (phase 3: a misplaced pool lifted "
        "from its plateau to near 1)",
        Rule(">", 0.5),
        paper="most seeds",
        section="ch08-seeds",
        spec=".2f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(float(d.dissected.summary["three_phases"].mean())),
    ),
    Claim(
        "ch08.final_heldout",
        CH08,
        "paper",
        "The final model adds pairs it never trained on",
        "final 0-var accuracy on held-out pairs (released run: every held-out pair, where enumerated)",
        Rule(">=", 0.99),
        paper="99.4%",
        section="ch08-release",
        spec=".3f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(_final(d, "final_0var_heldout"), _release_heldout(d)),
    ),
    Claim(
        "ch08.final_misplaced",
        CH08,
        "paper",
        "The final model answers 1-var questions with the variable in a slot training never showed it in",
        "final 1var_misplaced accuracy",
        Rule(">=", 0.99),
        paper="~100%",
        section="ch08-release",
        spec=".3f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(_final(d, "final_1var_misplaced"), _release_last(d, "1var_misplaced")),
    ),
    Claim(
        "ch08.final_union",
        CH08,
        "paper",
        "The final model generalises on 2-var questions (the 2-var generalisation union)",
        "final accuracy on the 2-var union, parts weighted by their sizes (released run: enumerated, where scored)",
        Rule(">=", 0.975),
        paper="0.98",
        section="ch08-release",
        spec=".3f",
        unmeasured=NOT_REACHED,
        read=lambda d: Measured(_final(d, "final_2var_union"), release_union(d)),
    ),
    Claim(
        "ch08.heldout_follows",
        CH08,
        "book",
        "Held-out pairs end as well learned as training pairs: what is learned is a rule, not a table",
        "final 0var_train accuracy minus final 0var_heldout accuracy",
        Rule("<=", 0.02),
        section="ch08-final",
        spec=".3f",
        unmeasured=NOT_REACHED,
        read=_heldout_gap,
    ),
)
"""Chapter 8: every claim of the paper the chapter tests and every reading of the book its sentences assert."""


# ------------------------------------------------------------------------------ chapter 9
FOURIER_TOP = 10
"""How many of the best layer-2 neurons the Fourier claim reads: the paper's claim is about the
layer's best neurons (its released model has 54 at FVE >= 0.9), so one neuron must not carry it."""

LOG_N = math.log(59)
"""The loss of a uniform guess over the 59 residues (nats)."""

PAPER_FREQUENCY = 11
"""The released model's most common key frequency, as the paper reports it."""

ADDS = 0.99
"""The accuracy on the N² direct queries at which chapter 9 says logits still add (the adder-alone
claim's rule): the key frequencies kept must reach it, and no random set of as many may."""

NO_KEY_FREQUENCIES = "no neuron has a key frequency in these runs, so there is nothing to restrict to"
NO_VALUE = "no value in this profile"


def leads(found: fourier.FourierNeurons, k: int) -> bool | None:
    """Whether frequency ``k`` is the best frequency of more Fourier neurons than any other
    frequency (a tie is not a lead; None without a Fourier neuron). Chapter 9."""
    counts = dict(zip(found.frequencies["k"].astype(int), found.frequencies["neurons"].astype(int)))
    if not counts:
        return None
    mine = counts.get(k, 0)
    return mine > 0 and all(mine > n for other, n in counts.items() if other != k)


CH09_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch09.value_reads_variable",
        CH09,
        "paper",
        "Layer 1 is a previous-token head for values: a value attends to its variable",
        "mean layer-1 attention from each context value to its variable",
        Rule(">=", 0.9),
        paper="a value attends to its variable",
        section="ch09-patterns",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.roles["value_to_variable"]),
    ),
    Claim(
        "ch09.previous_token_positional",
        CH09,
        "paper",
        "Layer 1's query-key form that makes the previous-token head is positional",
        "share of the previous key's score margin (over the other allowed keys) carried by the position-position "
        "part P QK₁ Pᵀ (over the sum of the four parts' sizes)",
        Rule(">=", 0.9),
        paper="purely positional QK",
        section="ch09-qk1",
        read=per_run(lambda r: r.qk1_split["positional_share"]),
    ),
    Claim(
        "ch09.positions_pick_previous",
        CH09,
        "book",
        "From positions alone, layer 1 ranks the previous position first in more context rows than chance",
        "share of the context query positions whose highest position-position score P QK₁ Pᵀ is the previous "
        "position, minus chance (the mean of 1/(p + 1) over those positions: a query at p has p + 1 keys)",
        Rule(">", 0.0),
        section="ch09-qk1",
        spec=".3f",
        read=per_run(lambda r: r.positions_over_chance),
    ),
    Claim(
        "ch09.eq_reads_needed",
        CH09,
        "paper",
        "Layer-2 '=' puts its top two keys on the positions of the numbers it needs",
        "share of sequences whose two largest layer-2 weights from '=' sit on the needed positions",
        Rule(">=", 0.9),
        paper="layer-2 '=' top-2 keys = the positions of the values it needs",
        section="ch09-patterns",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.needed_top2),
    ),
    Claim(
        "ch09.qk2_identity",
        CH09,
        "paper",
        "Layer 2's query-key form on the variable directions is identity-like",
        "share of the rows of U QK₂ Uᵀ whose maximum is on the diagonal",
        Rule(">=", 0.9),
        paper="fraction of rows whose max is on the diagonal → 1.0",
        section="ch09-qk2",
        read=per_run(lambda r: r.diag["rows_diag_max"]),
    ),
    Claim(
        "ch09.one_adder_residual",
        CH09,
        "paper",
        "The residual stream at '=' before MLP₂ is nearly the same for a sum asked directly and through variables",
        "mean cosine between the two routes' residuals for the same sum (matched)",
        Rule(">=", 0.9),
        paper="cosine ~0.97 matched",
        section="ch09-one-adder",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: float(r.comp["matched"].mean())),
    ),
    Claim(
        "ch09.one_adder_specific",
        CH09,
        "paper",
        "The residual stream at '=' before MLP₂ differs for different sums (the matched cosine is not shared by all)",
        "mean cosine between the two routes' residuals for different sums (mismatched)",
        Rule("<=", 0.3),
        paper="cosine ~0.14 mismatched",
        section="ch09-one-adder",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: float(r.comp["mismatched"].mean())),
    ),
    Claim(
        "ch09.ov2_attention_output",
        CH09,
        "paper",
        "The layer-2 attention output matches OV₂(e_n) + OV₂(e_m)",
        "mean cosine with OV₂(e_n) + OV₂(e_m) minus the paper's shuffled control OV₂(e_n) + OV₂(e_m′)",
        Rule(">=", 0.3),
        paper="cosine ~0.99 vs ~0.54 shuffled (gap ~0.45)",
        section="ch09-one-adder",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: float(r.ov2["matched"].mean() - r.ov2["shuffled"].mean())),
    ),
    Claim(
        "ch09.adder_alone",
        CH09,
        "paper",
        "MLP₂ applied to OV₂(e_n) + OV₂(e_m) alone gets the sum right",
        "share of the 59² pairs with argmax MLP₂(h) W_U = (n + m) mod 59",
        Rule(">=", 0.99),
        paper="~100%",
        section="ch09-one-adder",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.adder),
    ),
    Claim(
        "ch09.fourier_neurons",
        CH09,
        "paper",
        "The best layer-2 neurons explain at least 0.90 of their variance with one frequency",
        f"the variance explained by one frequency of the {FOURIER_TOP}th best live layer-2 neuron (the layer's best "
        f"{FOURIER_TOP}, not one neuron)",
        Rule(">=", 0.9),
        paper="0.90-0.96",
        section="ch09-fourier",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.fourier.ranked_fve(FOURIER_TOP)),
    ),
    Claim(
        "ch09.most_common_frequency",
        CH09,
        "paper",
        f"k = {PAPER_FREQUENCY} is the most common key frequency of the layer-2 Fourier neurons",
        f"whether k = {PAPER_FREQUENCY} is the best frequency of more Fourier neurons than any other frequency",
        Rule("==", True),
        paper=f"k = {PAPER_FREQUENCY}",
        section="ch09-fourier",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: leads(r.fourier, PAPER_FREQUENCY)),
    ),
    Claim(
        "ch09.key_frequencies_suffice",
        CH09,
        "book",
        "Keeping only the key frequencies of n + m in the logits, the model still adds",
        "accuracy on the N² direct queries with every other frequency of n + m removed from the logits (each pair "
        "keeps its own part, the part of its logits that is no function of n + m)",
        Rule(">=", ADDS),
        section="ch09-ablation",
        unmeasured=NO_KEY_FREQUENCIES,
        spec=".3f",
        read=per_run(lambda r: None if r.restriction is None else r.restriction.kept),
    ),
    Claim(
        "ch09.random_frequencies_fail",
        CH09,
        "book",
        "Keeping as many frequencies drawn at random from all of them instead, the model no longer adds",
        f"highest accuracy over {RANDOM_DRAWS} random sets of as many frequencies, each kept the same way",
        Rule("<", ADDS),
        section="ch09-ablation",
        unmeasured=NO_KEY_FREQUENCIES,
        spec=".3f",
        read=per_run(lambda r: None if r.restriction is None else r.restriction.random_best),
    ),
    Claim(
        "ch09.nonkey_frequencies_fail",
        CH09,
        "book",
        "Keeping as many frequencies drawn at random from the non-key ones instead, the model no longer adds",
        f"highest accuracy over {RANDOM_DRAWS} random sets of as many non-key frequencies, each kept the same way",
        Rule("<", ADDS),
        section="ch09-ablation",
        unmeasured=NO_KEY_FREQUENCIES,
        spec=".3f",
        read=per_run(lambda r: None if r.restriction is None else r.restriction.nonkey_best),
    ),
    Claim(
        "ch09.key_frequencies_necessary",
        CH09,
        "book",
        "Removing the key frequencies leaves the model no better than a uniform guess",
        f"excluded loss (nats; a uniform guess has log 59 = {LOG_N:.4f})",
        Rule(">=", round(LOG_N, 2)),
        section="ch09-ablation",
        unmeasured=NO_KEY_FREQUENCIES,
        read=per_run(lambda r: r.ablation.excluded),
    ),
    Claim(
        "ch09.one_circle",
        CH09,
        "book",
        "The number embeddings sit on one circle",
        "variance share of the top two principal components of W_E[0..58]",
        Rule(">=", fourier.ONE_CIRCLE_PC2),
        section="ch09-embeddings",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.embedding.top2),
    ),
    Claim(
        "ch09.probe_variable_identity",
        CH09,
        "paper",
        "Variable identity is linearly decodable at value positions after layer 1",
        "held-out probe accuracy after layer 1 (chance 1/12)",
        Rule(">=", 0.9),
        paper="decodable",
        section="ch09-probes",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.numbers()["probe_variable_identity_after_layer1"]),
    ),
    Claim(
        "ch09.operand_value_not_moved",
        CH09,
        "paper",
        "The value of a variable is not moved to the operand position: '=' fetches it directly",
        "held-out probe accuracy of the operand's value at the operand after layer 2 (chance 1/59)",
        Rule("<=", 0.1),
        paper="not decodable there",
        section="ch09-probes",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.numbers()["probe_operand_value_after_layer2"]),
    ),
    Claim(
        "ch09.probe_answer",
        CH09,
        "paper",
        "The answer is linearly decodable at '=' as well as the model's own unembedding reads it",
        "held-out probe accuracy of the answer after layer 2 minus the model's own accuracy on the same pools",
        Rule(">=", -0.01),
        paper="~99.7%",
        section="ch09-probes",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.numbers()["probe_answer_at_eq"] - r.answer_accuracy),
    ),
    Claim(
        "ch09.patching_moves_answer",
        CH09,
        "book",
        "Patching the queried value position moves the answer to the twin's sum",
        "share of patched runs answering the twin's sum",
        Rule(">=", 0.9),
        section="ch09-patching",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.effect["patched_to_source"]),
    ),
    Claim(
        "ch09.patching_control",
        CH09,
        "book",
        "Patching a distractor's value position leaves the answer unchanged",
        "share of control-patched runs whose answer is unchanged",
        Rule(">=", 0.9),
        section="ch09-patching",
        unmeasured=NO_VALUE,
        read=per_run(lambda r: r.effect["control_unchanged"]),
    ),
)
"""Chapter 9: the paper's circuit claims, read on the final models of the seeds that bound and on the
released final model."""


# ------------------------------------------------------------------------------ chapter 10
ARGUMENT = "the reconstructed argument: -dL/dM ≈ c Σ_v u_v u_vᵀ at uniform attention"
"""The paper's side of chapter 10's claims: the argument the chapter reconstructs."""


@dataclass(frozen=True)
class GradientRuns(Runs[GradientReading]):
    """What chapter 10's claims read: the gradient reading of each seed that bound (at its last
    checkpoint before its jump) and of the released run (:class:`~mechbook.claims.Runs`), and of
    each seed that never bound, at its last step (``unbound``, by seed)."""

    unbound: Mapping[int, GradientReading] = field(default_factory=dict)

    @classmethod
    def of(
        cls, seeds: Mapping[int, GradientReading], bound: Mapping[int, GradientReading], release: GradientReading | None
    ) -> GradientRuns:
        """The readings of every seed of the stack (``seeds``) split into those that ``bound`` and the others."""
        return cls(bound, release, {s: r for s, r in seeds.items() if s not in bound})


CH10_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch10.gradient_form",
        CH10,
        "paper",
        "Just before the binding jump the gradient block has the predicted form (U Uᵀ)²",
        "correlation of -U(∂L/∂M)Uᵀ at M = 0 with (U Uᵀ)²",
        Rule(">=", 0.9),
        paper=ARGUMENT,
        section="ch10-blocks",
        read=per_run(lambda r: r.form),
    ),
    Claim(
        "ch10.gradient_identity",
        CH10,
        "paper",
        "Just before the binding jump the gradient block is identity-like",
        "diagonal mean over mean |off-diagonal| of -U(∂L/∂M)Uᵀ",
        Rule(">=", 5.0),
        paper="an associative-memory (identity) block on the variable subspace",
        section="ch10-blocks",
        read=per_run(lambda r: r.ratio),
    ),
    Claim(
        "ch10.identity_rows_before_jump",
        CH10,
        "book",
        "Just before the binding jump most rows of the gradient block have their maximum on the diagonal",
        "share of the rows of -U(∂L/∂M)Uᵀ at M = 0 whose maximum is on the diagonal",
        Rule(">", 0.5),
        section="ch10-blocks",
        read=per_run(lambda r: float(r.stats.loc[GRADIENT, "rows_diag_max"])),
    ),
    Claim(
        "ch10.gradient_resembles_learned",
        CH10,
        "book",
        "The gradient block before the jump resembles the block learned by the end",
        "correlation of the gradient block with the final U QK₂ Uᵀ",
        Rule(">=", 0.9),
        section="ch10-blocks",
        read=per_run(lambda r: r.learned),
    ),
    Claim(
        "ch10.zero_var_weaker",
        CH10,
        "book",
        "0-var sequences carry less identity structure than 1-/2-var ones",
        "diag / |off-diag| of the gradient from 1-/2-var sequences minus that from 0-var sequences",
        Rule(">", 0.0),
        section="ch10-data",
        read=per_run(lambda r: r.ratio - r.zero_ratio),
    ),
    Claim(
        "ch10.context_identity",
        CH10,
        "book",
        "The context keys' part of the gradient is identity-like",
        "diag / |off-diag| of the context keys' part",
        Rule(">=", 5.0),
        section="ch10-keys",
        read=per_run(lambda r: float(r.split_stats.loc["context", "ratio"])),
    ),
    Claim(
        "ch10.query_keys_push_down",
        CH10,
        "book",
        "The query keys' part pushes the diagonal down",
        "diagonal mean of the query keys' part (its sign decides: negative pushes the diagonal down, positive up)",
        Rule("<", 0.0),
        section="ch10-keys",
        spec=".2g",
        read=per_run(lambda r: float(r.split_stats.loc["query", "diag_mean"])),
    ),
    Claim(
        "ch10.directions_distinct_late",
        CH10,
        "book",
        "Layer 1 makes the variable directions more distinct after the jump than before it",
        "mean |cos(u_v, u_w)| at the checkpoint minus at the end (a drop of at least 0.02: a run whose "
        "checkpoint is its end differs by round-off alone)",
        Rule(">=", 0.02),
        section="ch10-premise",
        read=per_run(lambda r: r.spread_checkpoint["mean_abs_cos"] - r.spread_final["mean_abs_cos"]),
    ),
    Claim(
        "ch10.unbound_against_identity",
        CH10,
        "book",
        "On the seeds that never bind, the gradient at uniform attention pushes the variable block's diagonal down, "
        "against the identity block (a candidate reason why they never bind)",
        "diag mean over mean |off-diagonal| of -U(∂L/∂M)Uᵀ at M = 0, at the last step of each seed that never bound "
        "(negative: the diagonal is pushed down)",
        Rule("<", 0.0),
        section="ch10-seeds",
        unmeasured="every seed of the stack bound",
        read=lambda runs: Measured({s: r.ratio for s, r in runs.unbound.items()}),
    ),
)
"""Chapter 10: the reconstructed gradient argument's claims, read at each run's checkpoint before its
jump."""


def holding(table: tuple[Claim, ...], reading: object) -> tuple[int, int]:
    """How many claims of a per-run ``table`` (chapter 10) hold on one run's ``reading``, and of how
    many that one run decides (a claim read on the seeds that never bound is untested there)."""
    verdicts = [e.verdict for e in evidence(table, GradientRuns({0: reading})).values()]
    return verdicts.count("reproduced"), len(verdicts) - verdicts.count("untested")


# ------------------------------------------------------------------------------ chapter 11
MOVES = 0.05
"""How far (in f or r) a threshold must shift between the earliest step budget and the end for
chapter 11 to say it still moves with training length: half the 0.1 the threshold claims allow
from the paper's value, so a shift that could change those verdicts counts."""
LEVEL = 0.9
"""The accuracy a sweep's score must reach to define its threshold (``SweepsConfig.level`` in
every profile; chapter 11's rules are stated at it)."""


def _distance(reading: SweepReading, star: float) -> float:
    """A threshold's distance from the paper's (the lower bound when not reached)."""
    paper = PAPER_THRESHOLDS[reading.knob]
    return abs(star - paper) if not math.isnan(star) else reading.values[-1] - paper


TWO_VAR_FIT = 0.99
"""The final 2-var training accuracy an r-sweep run must reach to count as having fit its data. The
r knob sets how many 2-var rows a run trains on, so a run says how much 2-var data generalisation
needs only once it has learned the 2-var rows it was given; its training loss cannot tell, since
the 2-var rows are about a quarter of the training rows, so a run can end below the loss bound
with a fifth of them wrong. 0.99: at most 2 errors in the 256 sequences a pool is scored on."""


def fits(runs: pd.DataFrame) -> pd.Series:
    """Per run of a sweep's runs frame, whether it fit its training data by its last step: final
    training loss at most :data:`~mechbook.assign_add.sweeps.LOSS_BOUND` and, for an r run, final
    2-var training accuracy at least :data:`TWO_VAR_FIT`. Chapter 11."""
    loss = runs["train_loss"] <= LOSS_BOUND
    two_var = (runs["knob"] != "r") | (runs["2var_train"] >= TWO_VAR_FIT)
    return loss & two_var


def resting(reading: SweepReading, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs (rows of ``runs``) each seed's threshold rests on: those at the values up to the first
    that reaches the level (every value where the seed never reaches it)."""
    stars = dict(reading.thresholds)
    last = {
        seed: max(reading.values) if math.isnan(star) else min(v for v in reading.values if v >= star)
        for seed, star in stars.items()
    }
    return runs[[value <= last[seed] for value, seed in zip(runs["value"], runs["seed"])]]


def _threshold(reading: SweepReading, runs: pd.DataFrame) -> Measured:
    """The paper's threshold claim of ``reading``'s sweep (``runs``, its runs frame): confounded when a
    run the threshold rests on (:func:`resting`) did not fit its training data (:func:`fits`): a score
    below the level there may be the unfit run's and not the data's."""
    distances = {seed: _distance(reading, star) for seed, star in reading.thresholds}
    rest = resting(reading, runs)
    unfit = rest[~fits(rest)]
    if len(unfit):
        listed = ", ".join(f"{reading.knob} = {v:g} (seed {int(s)})" for v, s in zip(unfit["value"], unfit["seed"]))
        return Measured(
            distances,
            confounded=f"{len(unfit)} of the {len(rest)} runs the thresholds rest on did not fit their training data "
            f"by their last step ({_fit_rule(reading.knob)}), so a score below {LEVEL} there may be the unfit run's "
            f"and not the data's: {listed}",
        )
    return Measured(distances)


def _worst(runs: pd.DataFrame, column: str, worst: str) -> Measured:
    """Per seed, ``column``'s worst value (``worst``: ``"max"`` or ``"min"``) over that seed's runs."""
    return Measured({int(seed): float(group[column].agg(worst)) for seed, group in runs.groupby("seed", sort=False)})


def _fit_rule(knob: str) -> str:
    """:func:`fits`'s rule for a run of the ``knob`` sweep, in words."""
    loss = f"final training loss ≤ {LOSS_BOUND}"
    return f"{loss} and 2-var training accuracy ≥ {TWO_VAR_FIT}" if knob == "r" else loss


def shift(early: SweepReading, end: SweepReading) -> dict[int, float | None]:
    """Per seed, how far the threshold moved from the earlier reading to the end (a lower bound,
    the largest value tried minus the end's threshold, where the seed had not reached the level
    early; None where it had not reached it by the end either). Chapter 11."""
    ends = dict(end.thresholds)
    out: dict[int, float | None] = {}
    for seed, before in early.thresholds:
        after = ends[seed]
        if math.isnan(after):
            out[seed] = None
        else:
            out[seed] = (early.values[-1] if math.isnan(before) else before) - after
    return out


def _moves(budgets: tuple[Budget, ...]) -> Measured:
    """Whether a sweep's threshold moves between its earliest step budget and its end: untested
    with a single budget, or when no seed reached the level by the end."""
    if len(budgets) < 2:
        return Measured(untested="the runs were read at one step budget only (SweepsConfig.budgets)")
    moved = shift(budgets[0].reading, budgets[-1].reading)
    if all(v is None for v in moved.values()):
        return Measured(untested=f"no seed reaches {LEVEL} by the runs' end, so there is no threshold to move")
    return Measured(moved)


CH11_CLAIMS: tuple[Claim, ...] = (
    Claim(
        "ch11.f_threshold",
        CH11,
        "paper",
        f"Generalisation to unseen pairs needs f ≥ about {PAPER_THRESHOLDS['f']}: the f threshold lies near "
        f"{PAPER_THRESHOLDS['f']}",
        f"distance of the f threshold (the first crossing of accuracy {LEVEL}, interpolated, per seed) from the "
        f"paper's {PAPER_THRESHOLDS['f']}; where a seed never reaches {LEVEL}, the largest f tried minus "
        f"{PAPER_THRESHOLDS['f']}, a lower bound",
        Rule("<=", 0.1),
        paper=f"f ≥ ~{PAPER_THRESHOLDS['f']}",
        section="ch11-thresholds",
        spec=".2f",
        read=lambda sw: _threshold(sw.f, sw.f_runs),
    ),
    Claim(
        "ch11.r_threshold",
        CH11,
        "paper",
        f"2-var generalisation needs r ≥ about {PAPER_THRESHOLDS['r']}: the r threshold lies near "
        f"{PAPER_THRESHOLDS['r']}",
        f"distance of the r threshold (the first crossing of accuracy {LEVEL}, interpolated, per seed) from the "
        f"paper's {PAPER_THRESHOLDS['r']}; where a seed never reaches {LEVEL}, the largest r tried minus "
        f"{PAPER_THRESHOLDS['r']}, a lower bound",
        Rule("<=", 0.1),
        paper=f"r ≥ ~{PAPER_THRESHOLDS['r']}",
        section="ch11-thresholds",
        spec=".2f",
        read=lambda sw: _threshold(sw.r, sw.r_runs),
    ),
    Claim(
        "ch11.f_threshold_moves",
        CH11,
        "book",
        f"The f threshold still moves with training length: read from the same runs at an earlier step budget, it "
        f"lies at least {MOVES} higher than at their end",
        f"the f threshold at the earliest step budget minus at the runs' end, per seed; where a seed has not reached "
        f"{LEVEL} by the earlier budget, the largest f tried minus the end's threshold, a lower bound",
        Rule(">=", MOVES),
        section="ch11-budgets",
        spec=".2f",
        read=lambda sw: _moves(sw.f_budgets),
    ),
    Claim(
        "ch11.r_threshold_moves",
        CH11,
        "book",
        f"The r threshold still moves with training length: read from the same runs at an earlier step budget, it "
        f"lies at least {MOVES} higher than at their end",
        f"the r threshold at the earliest step budget minus at the runs' end, per seed; where a seed has not reached "
        f"{LEVEL} by the earlier budget, the largest r tried minus the end's threshold, a lower bound",
        Rule(">=", MOVES),
        section="ch11-budgets",
        spec=".2f",
        read=lambda sw: _moves(sw.r_budgets),
    ),
    Claim(
        "ch11.sweeps_converged",
        CH11,
        "book",
        f"Every run of both sweeps ends at a final training loss ≤ {LOSS_BOUND}",
        "largest final training cross-entropy over the runs of both sweeps (nats)",
        Rule("<=", LOSS_BOUND),
        section="ch11-thresholds",
        spec=".3g",
        read=lambda sw: _worst(sw.runs, "train_loss", "max"),
    ),
    Claim(
        "ch11.r_runs_fit",
        CH11,
        "book",
        f"Every run of the r sweep learns its 2-var training rows by its last step (2-var training accuracy ≥ "
        f"{TWO_VAR_FIT})",
        "lowest final 2-var training accuracy over the runs of the r sweep",
        Rule(">=", TWO_VAR_FIT),
        section="ch11-thresholds",
        spec=".3f",
        read=lambda sw: _worst(sw.r_runs, "2var_train", "min"),
    ),
    Claim(
        "ch11.largest_r_all_pools",
        CH11,
        "book",
        f"The run with the largest r ends with every pool at accuracy {LEVEL} or above: all three phases arrive "
        "within its steps",
        "lowest final accuracy over the nine pools of the largest-r run",
        Rule(">=", LEVEL),
        section="ch11-reach",
        spec=".2f",
        read=lambda sw: Measured({seed: lowest_final_pool(history)[1] for seed, history in sw.r_last}),
    ),
)
"""Chapter 11: the paper's sweep thresholds and the book's readings of the sweeps."""

TABLES: dict[str, tuple[Claim, ...]] = {
    CH07: CH07_CLAIMS,
    CH08: CH08_CLAIMS,
    CH09: CH09_CLAIMS,
    CH10: CH10_CLAIMS,
    CH11: CH11_CLAIMS,
}
"""Part II's claim tables by notebook stem: what the ledger and ``check`` read."""
