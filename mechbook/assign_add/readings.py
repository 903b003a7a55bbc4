"""What Part II's chapters read off the task and their runs, built once in the notebook's visible
cell and presented by :mod:`mechbook.chapters` (the claims are :mod:`mechbook.assign_add.claims`).
Cheap and uncached, kept apart from the modules whose code keys cached computations
(``mechbook.cache.keyed_modules()``): editing it retrains nothing.

- chapter 7: :func:`read_task` (a :class:`~mechbook.assign_add.claims.TaskReadings`) and
  :func:`task_numbers`, its recorded numbers;
- chapter 9: :func:`frequency_controls`, what the random frequency sets say about one run's key
  frequencies (its readings are :mod:`mechbook.assign_add.circuit_readings`);
- chapter 10: :func:`gradient_form` and :func:`gradient_identity`, its claims' rules read on one
  run, and :func:`composition_numbers`, its recorded numbers (its readings are
  :class:`~mechbook.assign_add.theory.GradientReading`);
- chapter 11: :func:`sweep_numbers`, its recorded numbers, and :func:`last_run_reading`, one
  largest-r run read by its claim's rule (its readings are
  :class:`~mechbook.assign_add.sweeps.Sweeps`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from mechbook.assign_add.claims import CH09_CLAIMS, CH10_CLAIMS, CH11_CLAIMS, TaskReadings, holding
from mechbook.assign_add.fourier import Ablation
from mechbook.assign_add.pools import chance, constant_answer_accuracy, label_errors, variable_configurations
from mechbook.assign_add.sweeps import Sweeps, lowest_final_pool
from mechbook.assign_add.task import POOL_NAMES, TWO_VAR, Task, TaskConfig
from mechbook.assign_add.theory import GradientReading
from mechbook.claims import Rule


def read_task(cfg: TaskConfig, n_per_pool: int, seed: int) -> TaskReadings:
    """Chapter 7's :class:`~mechbook.assign_add.claims.TaskReadings`: the task built from ``cfg``
    and its nine evaluation pools, ``n_per_pool`` sequences each drawn with ``seed``."""
    task = Task(cfg)
    return TaskReadings(task, task.eval_pools(n_per_pool, seed=seed))


def task_numbers(readings: TaskReadings) -> dict[str, Any]:
    """Chapter 7's recorded numbers (``book/thresholds/07_task.yml``): the split's pair counts, the
    allowed 2-var variable pairs, the training rows and the 2-var share of them, each pool's size,
    the misplaced-both configurations, the labels that disagree with the literal reading, chance
    and the best constant answer over the pools."""
    task, pools = readings.task, readings.pools
    if pools is None:
        raise ValueError("task_numbers needs the evaluation pools: build the readings with read_task")
    rows = list(task.kind_counts().values())
    return {
        "heldout_pairs": int(task.heldout_pairs.sum()),
        "train_pairs": int(task.train_pairs.sum()),
        "allowed_two_var_pairs": int(task.allowed_two_var.sum()),
        "train_rows": int(sum(rows)),
        "two_var_share": float(rows[TWO_VAR] / sum(rows)),
        "pool_sizes": {name: len(pools[name][1]) for name in POOL_NAMES},
        "misplaced_both_configurations": variable_configurations(task)["2var_misplaced_both"],
        "label_errors": int(label_errors(task, pools)),
        "chance": chance(task.cfg),
        "max_constant_answer": float(max(constant_answer_accuracy(pools[name][1]) for name in POOL_NAMES)),
    }


@dataclass(frozen=True)
class FrequencyControls:
    """What chapter 9's random frequency sets say about one run's key frequencies, by the rules of
    the claims that read them over the runs: ``random``, no random set of as many frequencies
    comes near the key ones' restricted loss (``ch09.random_frequencies_fail``); ``nonkey``, no
    set without key frequencies does (``ch09.nonkey_frequencies_fail``; None: no frequency is
    left outside the key ones)."""

    random: bool
    nonkey: bool | None


def frequency_controls(ab: Ablation) -> FrequencyControls:
    """:class:`FrequencyControls` of one run's Fourier ablation ``ab``, each by its claim's rule."""
    rules = {c.id: c.rule for c in CH09_CLAIMS}
    nonkey = bool(rules["ch09.nonkey_frequencies_fail"].holds(ab.nonkey_lowest)) if ab.nonkey_restricted else None
    return FrequencyControls(bool(rules["ch09.random_frequencies_fail"].holds(ab.random_lowest)), nonkey)


def _ch10_rule(claim_id: str) -> Rule:
    return next(c.rule for c in CH10_CLAIMS if c.id == claim_id)


@dataclass(frozen=True)
class FormReading:
    """Chapter 10's gradient-form claim (``ch10.gradient_form``) read by its rule on one value of
    the gradient block's correlation with (UUᵀ)²: whether the rule ``holds`` there, and whether
    its looser ``partly`` threshold does."""

    holds: bool
    partly: bool


def gradient_form(similarity: float) -> FormReading:
    """:class:`FormReading` of one run's correlation ``similarity``."""
    rule = _ch10_rule("ch10.gradient_form")
    return FormReading(bool(rule.holds(similarity)), bool(rule.partly_holds(similarity)))


def gradient_identity(ratio: float) -> bool:
    """Whether one run's gradient block has the identity shape, by the rule of
    ``ch10.gradient_identity`` on its diagonal-to-off-diagonal ``ratio``."""
    return bool(_ch10_rule("ch10.gradient_identity").holds(ratio))


def composition_numbers(
    rebuild: GradientReading,
    released: GradientReading,
    seeds: dict[int, GradientReading],
    over: pd.DataFrame,
    first_identity: int | None,
) -> dict[str, Any]:
    """Chapter 10's recorded numbers (``book/thresholds/10_why_it_composes.yml``): the dissected
    run's, the gradient block over training (``over``, its last checkpoint's ratio and the first
    step with the identity shape), how many of the chapter's claims hold on the rebuild and on the
    released run (``release_*``), and over the ``seeds`` that bound (``seeds_*``) how many have the
    predicted form and the range of their correlations and the largest block ratio."""
    form = [r.form for r in seeds.values()]
    over_seeds = (
        {
            "seeds_predicted_form_holding": sum(gradient_form(v).holds for v in form),
            "seeds_gradient_vs_predicted_min": min(form),
            "seeds_gradient_vs_predicted_max": max(form),
            "seeds_gradient_block_ratio_max": max(r.ratio for r in seeds.values()),
        }
        if seeds
        else {}
    )
    return {
        **rebuild.numbers(),
        "gradient_block_ratio_last_checkpoint": float(over["ratio"].iloc[-1]),
        "gradient_identity_first_step": first_identity,
        "theory_claims_holding": holding(CH10_CLAIMS, rebuild),
        **{f"release_{n}": v for n, v in released.numbers().items()},
        "release_theory_claims_holding": holding(CH10_CLAIMS, released),
        **over_seeds,
    }


def _or_none(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def sweep_numbers(sw: Sweeps) -> dict[str, Any]:
    """Chapter 11's recorded numbers (``book/thresholds/11_how_much_data.yml``): each sweep's
    threshold (None: not reached), by seed and by step budget, its scores, the best r score, the
    runs and seeds trained, the largest final training loss, the unconverged runs and chance."""
    runs = sw.runs
    return {
        "f_threshold": _or_none(sw.f.threshold),
        "r_threshold": _or_none(sw.r.threshold),
        "r_heldout_threshold": _or_none(sw.r_heldout.threshold),
        "f_thresholds_by_seed": {str(s): _or_none(t) for s, t in sw.f.thresholds},
        "r_thresholds_by_seed": {str(s): _or_none(t) for s, t in sw.r.thresholds},
        "f_thresholds_by_budget": {str(b.steps): _or_none(b.reading.threshold) for b in sw.f_budgets},
        "r_thresholds_by_budget": {str(b.steps): _or_none(b.reading.threshold) for b in sw.r_budgets},
        "f_scores": list(sw.f.scores),
        "r_scores": list(sw.r.scores),
        "r_best_score": max(sw.r.scores),
        "n_runs": len(runs),
        "n_seeds": len(sw.f.seeds),
        "max_final_train_loss": float(runs["train_loss"].max()),
        "unconverged_runs": int((~runs["converged"]).sum()),
        "chance": sw.f.chance,
    }


@dataclass(frozen=True)
class LastRunReading:
    """One largest-r sweep run read by the rule of ``ch11.largest_r_all_pools``: its lowest
    ``pool`` at the last step and that pool's ``accuracy``, whether the rule ``holds`` there,
    and the rule's ``threshold``."""

    pool: str
    accuracy: float
    holds: bool
    threshold: float


def last_run_reading(history: pd.DataFrame) -> LastRunReading:
    """:class:`LastRunReading` of one largest-r run's ``history``
    (:func:`~mechbook.assign_add.sweeps.lowest_final_pool`)."""
    pool, acc = lowest_final_pool(history)
    rule = next(c.rule for c in CH11_CLAIMS if c.id == "ch11.largest_r_all_pools")
    return LastRunReading(pool, acc, bool(rule.holds(acc)), rule.threshold)
