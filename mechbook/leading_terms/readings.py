"""What Part I's chapters read off their runs for their records and their claims (the readings
objects :mod:`mechbook.leading_terms.claims` reads). Cheap and uncached; kept apart from the
modules of the cached computations (:mod:`.check`, :mod:`.train`, ...), whose code is part of
their cache keys.

- chapter 1: :func:`read_maps`, :class:`MapsReadings`;
- chapter 2: :func:`check_numbers`, :func:`theorem_numbers`, :func:`attention_first`, :class:`CheckReadings`;
- chapter 3: :func:`training_readings`, :func:`training_numbers`, :class:`TrainingReadings`;
- chapter 4: :func:`read_associations`, :func:`association_numbers`, :class:`AssociationReadings`;
- chapter 5: :func:`read_cooperation`, :func:`cooperation_numbers`, :class:`CooperationReadings`.

The introduction's claims read its :class:`~mechbook.leading_terms.overview.CorpusOverview`
(:func:`~mechbook.leading_terms.overview.load_overview`) as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from mechbook.leading_terms.ablation import Cooperation, EvalRuns
from mechbook.leading_terms.associations import TRAINED_TERMS, OverlapReading, RunMaps, overlap_readings
from mechbook.leading_terms.check import CheckRuns, check_summary, first_departure, loss_drop, run_drops, slopes
from mechbook.leading_terms.corpus import load_corpus
from mechbook.leading_terms.labels import run_labels
from mechbook.leading_terms.leading import KINDS, bases, cosine
from mechbook.leading_terms.logit_paths import mean_paths
from mechbook.leading_terms.maps import FIGURE5, CorpusMaps, maps_numbers
from mechbook.leading_terms.tables import (
    FIGURE4,
    FIRST,
    TABLE_EPOCHS,
    TABLE_KINDS,
    WHOLE,
    cosines_at,
    epoch_minima,
    final_cosines,
    final_loss,
    first_batch_stats,
    table3_ablation,
)
from mechbook.leading_terms.theorem import TheoremRuns, window_eta_s
from mechbook.leading_terms.train import RunConfig, Runs, TrainResult


@dataclass(frozen=True)
class MapsReadings:
    """What chapter 1's claims read and its records hold: what the three maps of its corpus give
    in numbers (:func:`~mechbook.leading_terms.maps.maps_numbers` measures them; a rank or median
    is None where the vocabulary lacks its words), the Figure 5 groups by key (``fig5``, each a
    :meth:`~mechbook.leading_terms.maps.NamedReading.record`) and Figure 3's reading
    (``fig3_fish``, :func:`~mechbook.leading_terms.maps.figure3_reading`)."""

    n_stories: int
    n_sequences: int
    vocab_size: int
    context: int
    unk_fraction: float
    drop_kept: int
    drop_kept_fraction: float
    b_rank_upon_after_once: int
    b_adj_noun_share: float
    b_adj_noun_chance: float
    phi_pair_median_rank: float | None
    b_pair_median_rank: float | None
    n_context_pairs: int
    phi_pair_mismatched_median_rank: float | None
    phi_rank_pond_for_fish: int | None
    sigma_class_purity: float
    sigma_class_purity_raw: float
    sigma_class_chance: float
    fig5: dict[str, dict[str, Any]]
    fig3_fish: dict[str, Any]

    @classmethod
    def of(cls, numbers: dict[str, Any]) -> MapsReadings:
        """The readings of :func:`~mechbook.leading_terms.maps.maps_numbers`' ``numbers`` (its
        ``fig5_<key>`` entries gathered in :attr:`fig5`)."""
        plain = {k: v for k, v in numbers.items() if not k.startswith("fig5_")}
        return cls(**plain, fig5={a.key: numbers[f"fig5_{a.key}"] for a in FIGURE5})

    def numbers(self) -> dict[str, Any]:
        """The chapter's records, named as :func:`~mechbook.leading_terms.maps.maps_numbers` names
        them (``book/thresholds/01_corpus_maps.yml`` bounds them)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("fig5", "fig3_fish")}
        return out | {f"fig5_{key}": record for key, record in self.fig5.items()} | {"fig3_fish": self.fig3_fish}


def read_maps(m: CorpusMaps, successors_k: int, purity_k: int) -> MapsReadings:
    """Chapter 1's :class:`MapsReadings` of its maps ``m``: ``successors_k`` strongest successors
    per adjective, ``purity_k`` nearest neighbours per word in the class purity."""
    return MapsReadings.of(maps_numbers(m, successors_k=successors_k, purity_k=purity_k))


BREAK_COSINE = 0.99
"""Chapter 2's line: a matrix has left its leading form once its lowest cosine over the layers is
below it."""
EXPONENTS = {"W_O": 1, "V": 2, "W": 4, "P": 4}
"""The order in η (and, for large s, in s) of each kind's leading term (chapter 2 fits them)."""


def attention_first(order: pd.DataFrame) -> pd.Series:
    """Per learning rate of ``order`` (:func:`~mechbook.leading_terms.check.departure_steps`):
    whether both W and P leave before both W_O and V, a term that never leaves counting as last
    (chapter 2)."""
    steps = order.fillna(np.inf)
    return steps[["W", "P"]].max(axis=1) < steps[["W_O", "V"]].min(axis=1)


def check_numbers(data: CheckRuns, s_last: int) -> dict[str, float]:
    """Chapter 2's numbers (``book/thresholds/02_leading_terms.yml`` bounds them): the check's
    lowest cosine and largest ratio error, the slopes in s (fitted up to ``s_last``) and η per
    kind, the first η·s below :data:`BREAK_COSINE` (the sweep's largest η·s when none falls below)
    and how far the loss had fallen from log :math:`|V|` there."""
    min_cos, max_err = check_summary(data.check)
    table = slopes(data.check, s_last)
    out = {"check_min_cosine": min_cos, "check_max_ratio_error": max_err}
    for kind in KINDS:
        out[f"slope_s_{kind}"] = float(table.iloc[:, 0][kind])
        out[f"slope_eta_{kind}"] = float(table.iloc[:, 1][kind])
    first = first_departure(data.sweep, BREAK_COSINE)
    out["breakdown_eta_s"] = first.eta_s if first else float(data.sweep["eta_s"].max())
    if first:
        out["breakdown_loss_drop"] = loss_drop(first.loss, data.vocab_size)
    return out


def theorem_numbers(theorem: TheoremRuns, data: CheckRuns, n_layers: int) -> dict[str, float]:
    """Chapter 2's numbers of the theorem as stated: per start (``zero``, ``gaussian``) the largest
    distance / bound inside the window (``theorem_ratio_*``); the smallest bound / ‖term‖ of W and P
    inside the zero start's window (``theorem_attention_bound_over_term``: above 1, the bound is
    larger than the term it bounds); the lowest cosine over the layers of W, P and V with their
    terms at the Gaussian start's last step in its window, and there the largest ‖term‖ of W and P
    over the norm the same matrix started from (``theorem_gaussian_term_over_start``); and where the sweep's cosines break
    against the window's η·s at the check's corpus (``breakdown_over_window``). A window that holds no logged step gives none of its numbers."""
    frame = theorem.frame[theorem.frame["in_window"]]
    out: dict[str, float] = {}
    for init, g in frame.groupby("init"):
        out[f"theorem_ratio_{init}"] = float(g["ratio"].max())
    zero = frame[(frame["init"] == "zero") & frame["kind"].isin(["W", "P"]) & (frame["predicted_norm"] > 0)]
    if len(zero):
        out["theorem_attention_bound_over_term"] = float((zero["bound"] / zero["predicted_norm"]).min())
    gauss = frame[frame["init"] == "gaussian"]
    last = gauss[gauss["step"] == gauss["step"].max()]
    for kind in ("W", "P", "V") if len(gauss) else ():
        out[f"theorem_gaussian_cos_{kind}"] = float(last.loc[last["kind"] == kind, "cosine"].min())
    if len(gauss):
        start = theorem.frame[(theorem.frame["init"] == "gaussian") & (theorem.frame["step"] == 0)]
        start_norm = start.set_index("matrix")["norm"]
        attention = last[last["kind"].isin(["W", "P"])].set_index("matrix")
        out["theorem_gaussian_term_over_start"] = float(
            (attention["predicted_norm"] / start_norm[attention.index]).max()
        )
    window = window_eta_s(n_layers, data.tokens.shape[1] - 1)
    first = first_departure(data.sweep, BREAK_COSINE)
    out["breakdown_over_window"] = (first.eta_s if first else float(data.sweep["eta_s"].max())) / window
    return out


@dataclass(frozen=True)
class CheckReadings:
    """What chapter 2's claims read: its ``numbers`` (:func:`check_numbers` and
    :func:`theorem_numbers`), the validity ``sweep``, and per start of the theorem's runs the
    conditions it leaves unmet (``unmet``; empty when the run is inside them)."""

    numbers: dict[str, float]
    sweep: pd.DataFrame
    unmet: dict[str, list[str]]


def check_readings(data: CheckRuns, theorem: TheoremRuns, s_last: int) -> CheckReadings:
    """Chapter 2's :class:`CheckReadings` of its runs, the check's slopes fitted up to ``s_last``."""
    numbers = check_numbers(data, s_last) | theorem_numbers(theorem, data, theorem.n_layers)
    return CheckReadings(numbers, data.sweep, theorem.unmet)


@dataclass(frozen=True)
class TrainingReadings:
    """What chapter 3's claims read: the shared ``runs`` (the paper's two rates, 0.005 and 0.05)
    and the ``bpe`` run (Table 2), with the steps of an epoch of each (``per_epoch``,
    ``bpe_per_epoch``), and per kind the cosine between the lr-0.005 run's first-batch leading
    term and the whole set's (``ceiling``: what the paper's measure reads on a matrix that follows
    the whole set's term exactly)."""

    runs: Runs
    per_epoch: int
    bpe: TrainResult
    bpe_per_epoch: int
    ceiling: dict[str, float]

    @property
    def small(self) -> TrainResult:
        """The run at the paper's lr 0.005 (Table 1's)."""
        return self.runs.results[min(self.runs.results)]

    @property
    def large(self) -> TrainResult:
        """The run at the paper's larger lr 0.05 (Figure 4's and Table 3's)."""
        return self.runs.results[max(self.runs.results)]

    def table1(self, column: str = FIRST) -> dict[str, float]:
        """Table 1's entries on this run: the lowest cosine of W, V and W_O over the layers and the
        first 100 epochs, at lr 0.005."""
        return epoch_minima(self.small, self.per_epoch, TABLE_EPOCHS["table1"], column)

    def table2(self, column: str = FIRST) -> dict[str, float]:
        """Table 2's entries on the BPE run: the same minimum over its 10 epochs."""
        return epoch_minima(self.bpe, self.bpe_per_epoch, TABLE_EPOCHS["table2"], column)

    def figure4(self, epochs: int, column: str = FIRST) -> float:
        """The lowest cosine of W_O, V and W over the layers of the lr-0.05 run after ``epochs``."""
        cos = cosines_at(self.large, epochs * self.per_epoch, column)
        return min(cos[k] for k in TABLE_KINDS.values())

    def loss_ratio(self, result: TrainResult | None = None) -> float:
        """A run's final loss as a share of log |V|, the loss of the zero model (the lr-0.05 run's
        by default: Figure 4's 5.35 of 8.006)."""
        result = result or self.large
        return final_loss(result) / float(np.log(result.model_cfg.d_vocab))


def first_batch_ceiling(runs: Runs, result: TrainResult) -> dict[str, float]:
    """Per kind, the cosine between the leading term of ``result``'s first batch and that of the
    whole training set of ``runs``."""
    whole = bases(runs.stats)
    first = bases(first_batch_stats(runs.sequences.tokens, runs.stats, result))
    return {kind: cosine(first[kind], whole[kind]) for kind in KINDS}


def training_readings(runs: Runs, bpe: TrainResult, bpe_run: RunConfig) -> TrainingReadings:
    """Chapter 3's :class:`TrainingReadings` of its shared ``runs`` and the ``bpe`` run trained by
    ``bpe_run``, each epoch N // batch steps of its own corpus."""
    batch = next(iter(runs.results.values())).train_cfg.batch_size or runs.sequences.n_kept
    kept = load_corpus(bpe_run.corpus)[1].n_kept
    small = runs.results[min(runs.results)]
    return TrainingReadings(
        runs,
        runs.sequences.n_kept // batch,
        bpe,
        kept // (bpe.train_cfg.batch_size or kept),
        first_batch_ceiling(runs, small),
    )


def training_numbers(r: TrainingReadings) -> dict[str, float]:
    """Chapter 3's numbers (``book/thresholds/03_training.yml`` bounds them): per shared run
    (``paper_lr``, ``large_lr``) the lowest final cosine of each kind with the whole set's terms
    and with the first batch's, and the final loss; Table 1's and Table 2's entries with both sets
    of terms; Figure 4's lowest cosines after 30 and 100 epochs and its loss ratio; the first
    batch's ceiling per kind."""
    out: dict[str, float] = {}
    for tag, result in (("paper_lr", r.small), ("large_lr", r.large)):
        for column, terms in ((WHOLE, "whole"), (FIRST, "first")):
            for kind, value in final_cosines(result, column).items():
                out[f"min_cos_{kind}_{tag}_{terms}"] = value
        out[f"final_loss_{tag}"] = final_loss(result)
    for column, terms in ((WHOLE, "whole"), (FIRST, "first")):
        for table, values in (("table1", r.table1(column)), ("table2", r.table2(column))):
            for kind, value in values.items():
                out[f"{table}_{kind}_{terms}"] = value
        for epochs in (FIGURE4.epochs_30, FIGURE4.epochs_100):
            out[f"figure4_{epochs}_epochs_{terms}"] = r.figure4(epochs, column)
    out["figure4_loss_ratio"] = r.loss_ratio()
    for kind, value in r.ceiling.items():
        out[f"first_batch_ceiling_{kind}"] = value
    out["final_loss_bpe"] = final_loss(r.bpe)
    return out


def association_numbers(overlaps: dict[float, dict[str, OverlapReading]]) -> dict[str, float]:
    """Chapter 4's recorded overlaps per run: ``overlap_<term>_<map>_<run>`` (e.g.
    ``overlap_G_VW_O_paper_lr``), ``mismatched_...`` (another word's row), ``excess_...`` (over
    the harder baseline) and ``centred_excess_...`` (row-centred maps)."""
    labels = run_labels(tuple(overlaps))
    out: dict[str, float] = {}
    for lr, per_map in overlaps.items():
        for name, r in per_map.items():
            key = f"{TRAINED_TERMS[name]}_{name.replace(' ', '')}_{labels[lr]}"
            out[f"overlap_{key}"] = r.matched
            out[f"mismatched_{key}"] = r.mismatched
            out[f"excess_{key}"] = r.excess
            out[f"centred_excess_{key}"] = r.centred - r.centred_mismatched
    return out


@dataclass(frozen=True)
class AssociationReadings:
    """What chapter 4's claims read: the ``overlaps`` of both runs
    (:func:`~mechbook.leading_terms.associations.overlap_readings`) and how far each run's loss
    fell (``drops``, :func:`~mechbook.leading_terms.check.run_drops`), which decide the run the
    claims are read on."""

    overlaps: dict[float, dict[str, OverlapReading]]
    drops: dict[float, float]


def read_associations(rm: RunMaps, k: int) -> AssociationReadings:
    """Chapter 4's :class:`AssociationReadings` of the trained maps ``rm``: the overlap@``k`` of
    both runs and how far each run's loss fell."""
    return AssociationReadings(overlap_readings(rm, k), run_drops(rm.runs))


FULL, EVERY, ZERO = "full model", "remove every leading term", "zero model"
"""The reference rows of :func:`mechbook.leading_terms.ablation.ablation_table` (chapter 5)."""


def cooperation_numbers(exps: dict[float, Cooperation], means: pd.DataFrame) -> dict[str, Any]:
    r"""Chapter 5's recorded numbers per run (``*_paper_lr``, ``*_large_lr``) of its experiments
    ``exps`` and path ``means`` (:func:`~mechbook.leading_terms.logit_paths.mean_paths`): mean
    residual and attention contributions; loss of the full model, with every leading term removed
    and with W_O's removed, the largest single-removal increase and its matrix, the single
    removals' sum and the joint increase, the path removals, the W_O split and the W := 0 loss;
    and the zero model's loss (:math:`\log |V|`)."""
    lrs = tuple(exps)
    numbers: dict[str, Any] = {}
    for lr, name in run_labels(lrs).items():
        e = exps[lr]
        rows = e.matrices.set_index("ablation")
        paths = e.paths.set_index("removal")["delta_loss"]
        numbers[f"mean_residual_{name}"] = float(means.loc[lr, "residual"])
        numbers[f"mean_attention_{name}"] = float(means.loc[lr, "attention"])
        numbers[f"loss_full_{name}"] = float(rows.loc[FULL, "loss"])
        numbers[f"loss_no_leading_{name}"] = float(rows.loc[EVERY, "loss"])
        numbers[f"loss_no_W_O_term_{name}"] = float(rows.loc["remove leading term of W_O", "loss"])
        numbers[f"worst_single_{name}"], numbers[f"max_single_delta_{name}"] = e.costliest
        numbers[f"sum_single_delta_{name}"], numbers[f"joint_delta_{name}"] = e.matrix_additivity
        numbers[f"delta_no_residual_path_{name}"] = float(paths["without the residual path"])
        numbers[f"delta_no_attention_paths_{name}"] = float(paths["without every attention path"])
        numbers[f"loss_W_O_b_part_{name}"] = e.split.loss_b_part
        numbers[f"loss_W_O_remainder_{name}"] = e.split.loss_remainder
        numbers[f"loss_W_zero_{name}"] = e.loss_w_zero
    numbers["loss_zero"] = float(exps[lrs[0]].matrices.set_index("ablation").loc[ZERO, "loss"])
    return numbers


@dataclass(frozen=True)
class CooperationReadings:
    """What chapter 5's claims read: how far each run's loss fell (``drops``, which decide the run
    the claims are read on), the mean path contributions (``means``;
    :data:`~mechbook.leading_terms.claims.CH05_PATHS` reads them) and the ablation experiments
    (``exps``; :data:`~mechbook.leading_terms.claims.CH05_ABLATIONS`), and Table 3's ablation of
    the lr-0.05 run with its first batch's leading terms (``table3``, an
    :func:`~mechbook.leading_terms.ablation.ablation_table`;
    :data:`~mechbook.leading_terms.claims.CH05_TABLE3`). The page reads every part at once
    (:func:`read_cooperation`); a part left None leaves the claims that read it unreadable, for a
    reading of one part alone."""

    drops: dict[float, float]
    means: pd.DataFrame | None = None
    exps: dict[float, Cooperation] | None = None
    table3: pd.DataFrame | None = None


def read_cooperation(coop: EvalRuns) -> CooperationReadings:
    """Chapter 5's :class:`CooperationReadings` with every part: the runs' loss drops, the mean
    path contributions over ``coop``'s evaluation sequences, the ablation experiments of both runs
    (cached) and Table 3's ablation of the lr-0.05 run."""
    return CooperationReadings(
        run_drops(coop.runs),
        mean_paths(coop.models, coop.evaluation),
        coop.experiments(),
        table3_ablation(coop),
    )
