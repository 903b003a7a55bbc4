"""What Part II's chapters read off the task and their runs, built once in the notebook's visible
cell and presented by :mod:`mechbook.chapters` (the claims are :mod:`mechbook.assign_add.claims`).
Cheap and uncached, kept apart from the modules whose code keys cached computations
(``mechbook.cache.keyed_modules()``): editing it retrains nothing.

- chapter 7: :func:`read_task` (a :class:`~mechbook.assign_add.claims.TaskReadings`) and
  :func:`task_numbers`, its recorded numbers;
- chapter 9: :class:`Circuits`, the library's readings of one model
  (:mod:`mechbook.assign_add.circuit_readings`) with the book's own: the frequency
  :class:`Restriction` that keeps each pair's own part of the logits and the positional chance line
  (:func:`read_book_circuits`, :func:`read_seed_circuits`);
- chapter 10: :func:`gradient_form` and :func:`gradient_identity`, its claims' rules read on one
  run, and :func:`composition_numbers`, its recorded numbers (its readings are
  :class:`~mechbook.assign_add.theory.GradientReading`);
- chapter 11: :func:`sweep_numbers`, its recorded numbers, and :func:`last_run_reading`, one
  largest-r run read by its claim's rule (its readings are
  :class:`~mechbook.assign_add.sweeps.Sweeps`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import fourier, theory
from mechbook.assign_add.baselines import best_constant, chance
from mechbook.assign_add.circuit_readings import (
    POOL_SEED,
    RANDOM_DRAWS,
    CircuitReadings,
    read_circuits,
    read_seed_runs,
)
from mechbook.assign_add.claims import CH10_CLAIMS, CH11_CLAIMS, GradientRuns, TaskReadings, holding
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.pools import label_errors, variable_configurations
from mechbook.assign_add.probes import ProbeConfig
from mechbook.assign_add.release import load_release
from mechbook.assign_add.seeds import Dissected, SeedRuns, dissect, of_bound_seeds
from mechbook.assign_add.sweeps import Sweeps, lowest_final_pool
from mechbook.assign_add.task import POOL_NAMES, TWO_VAR, Task, TaskConfig
from mechbook.assign_add.theory import GradientReading
from mechbook.claims import Rule, Runs


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
        "chance": chance(task.cfg.modulus),
        "max_constant_answer": float(max(best_constant(pools[name][1]) for name in POOL_NAMES)),
    }


def positional_chance(context_len: int) -> float:
    """The share of context query positions 1 .. ``context_len`` - 1 whose highest positional score
    would be the previous position if the scores were in random order: the mean of 1/(p + 1), a
    query at p having p + 1 keys (the chance line of :attr:`CircuitReadings.prev_share`)."""
    return float(np.mean([1 / (p + 1) for p in range(1, context_len)]))


def keep_frequencies(logits: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """``logits`` (N², N; rows the pairs (n, m) in row-major order) with every frequency of n + m
    outside ``ks`` removed: each residue's logit column minus its projection on cos and
    sin(2 pi k (n + m) / N) for each other k. What is no function of n + m (each pair's own part)
    and the grid mean stay, so no pair's logits are averaged with another's."""
    logits = np.asarray(logits, dtype=np.float64)
    _, every = fourier.fourier_basis(logits.shape[1])
    others = [int(k) for k in every if k not in set(ks)]
    if not others:
        return logits
    basis = fourier.sum_frequency_basis(logits.shape[1], others)
    return logits - basis @ (basis.T @ logits)


def direct_answers(logits: np.ndarray) -> tuple[float, float]:
    """Accuracy and mean cross-entropy (nats) of ``logits`` (N², N) at the answers (n + m) mod N."""
    logits = np.asarray(logits, dtype=np.float64)
    modulus = logits.shape[1]
    n, m = np.divmod(np.arange(modulus * modulus), modulus)
    answer = (n + m) % modulus
    z = logits - logits.max(axis=1, keepdims=True)
    log_p = z[np.arange(len(z)), answer] - np.log(np.exp(z).sum(axis=1))
    return float((z.argmax(axis=1) == answer).mean()), float(-log_p.mean())


@dataclass(frozen=True)
class Restriction:
    """Chapter 9's frequency restriction of one model's logits on the N² direct queries, each pair
    keeping its own part (:func:`keep_frequencies`): the accuracy and loss in ``full``, keeping the
    key frequencies (``kept``), and the accuracy keeping as many frequencies drawn at random from all
    of them (``random``, one per set of ``random_sets``) and from the non-key ones (``nonkey``)."""

    keys: tuple[int, ...]
    full: float
    full_loss: float
    kept: float
    kept_loss: float
    random: tuple[float, ...]
    random_sets: tuple[tuple[int, ...], ...]
    nonkey: tuple[float, ...]

    @property
    def random_best(self) -> float:
        """The highest accuracy over the random sets."""
        return max(self.random)

    @property
    def random_best_overlap(self) -> int:
        """How many key frequencies the random set with the highest accuracy holds."""
        return len(set(self.random_sets[int(np.argmax(self.random))]) & set(self.keys))

    @property
    def nonkey_best(self) -> float | None:
        """The highest accuracy over the non-key sets (None: no frequency is left outside the keys)."""
        return max(self.nonkey) if self.nonkey else None


def restriction(logits: np.ndarray, keys: Sequence[int], draws: int = RANDOM_DRAWS) -> Restriction | None:
    """:class:`Restriction` of ``logits`` (N², N) on the key frequencies ``keys`` and on the same
    random sets as the Fourier ablation's controls (:func:`~mechbook.assign_add.fourier.ablation`,
    ``draws`` each); None without key frequencies."""
    if not len(keys):
        return None
    modulus = logits.shape[1]
    sets = fourier.random_frequency_sets(modulus, len(keys), draws)
    nonkey = fourier.random_frequency_sets(modulus, len(keys), draws, exclude=keys)
    accuracy = lambda ks: direct_answers(keep_frequencies(logits, ks))[0]  # noqa: E731
    full, full_loss = direct_answers(logits)
    kept, kept_loss = direct_answers(keep_frequencies(logits, keys))
    return Restriction(
        keys=tuple(int(k) for k in keys),
        full=full,
        full_loss=full_loss,
        kept=kept,
        kept_loss=kept_loss,
        random=tuple(accuracy(s) for s in sets),
        random_sets=tuple(tuple(s) for s in sets),
        nonkey=tuple(accuracy(s) for s in nonkey),
    )


@dataclass(frozen=True)
class Circuits(CircuitReadings):
    """Chapter 9's reading of one model: the library's :class:`CircuitReadings`, the frequency
    :class:`Restriction` of its logits (None: no key frequency) and the chance line of its
    positional reading (:func:`positional_chance`)."""

    restriction: Restriction | None
    positional_chance: float

    @property
    def positions_over_chance(self) -> float:
        """The share of context rows whose top positional score is the previous position, minus chance."""
        return self.prev_share - self.positional_chance

    def numbers(self) -> dict[str, object]:
        """The library's headline numbers, the restriction's accuracies and the positional chance line."""
        r = self.restriction
        return {
            **super().numbers(),
            "positional_chance": self.positional_chance,
            "kept_key_frequencies_accuracy": None if r is None else r.kept,
            "kept_random_frequencies_accuracy_best": None if r is None else r.random_best,
            "kept_nonkey_frequencies_accuracy_best": None if r is None else r.nonkey_best,
        }


def with_book_readings(readings: CircuitReadings, model: torch.nn.Module, task_cfg: TaskConfig) -> Circuits:
    """``readings`` of ``model`` (:func:`read_circuits`) with the book's own: its frequency
    restriction and the positional chance line."""
    base = {f.name: getattr(readings, f.name) for f in fields(CircuitReadings)}
    logits = fourier.direct_logits(model, task_cfg)
    return Circuits(
        **base,
        restriction=restriction(logits, readings.fourier.keys),
        positional_chance=positional_chance(task_cfg.context_len),
    )


def read_book_circuits(
    model: torch.nn.Module,
    task: Task,
    pools: dict[str, tuple[np.ndarray, np.ndarray]],
    probe: ProbeConfig,
    n_patch: int,
) -> Circuits:
    """Chapter 9's :class:`Circuits` of ``model``: :func:`read_circuits` with the book's readings."""
    return with_book_readings(read_circuits(model, task, pools, probe, n_patch), model, task.cfg)


def read_seed_circuits(
    results: Sequence[TrainResult],
    task: Task,
    pools: dict[str, tuple[np.ndarray, np.ndarray]],
    probe: ProbeConfig,
    n_patch: int,
    known: dict[int, Circuits],
) -> dict[int, Circuits]:
    """:class:`Circuits` of the final model of every seed run, by seed (:func:`read_seed_runs`;
    readings in ``known`` reused)."""
    read = read_seed_runs(results, task, pools, probe, n_patch, dict(known))
    return {
        run.config.seed: known.get(run.config.seed)
        or with_book_readings(read[run.config.seed], load_model(run), task.cfg)
        for run in results
    }


@dataclass(frozen=True)
class CircuitsChapter:
    """Everything chapter 9 reads: the seed stack (``dissected``), the opened run's ``model`` and
    ``task``, the evaluation ``pools``, the :class:`Circuits` of the opened run (``rebuild``), of
    every seed (``seeds``), of the seeds that bound (``bound``: what the claims read) and of the
    authors' released model (``released``)."""

    dissected: Dissected
    model: torch.nn.Module
    task: Task
    pools: dict[str, tuple[np.ndarray, np.ndarray]]
    rebuild: Circuits
    seeds: dict[int, Circuits]
    bound: dict[int, Circuits]
    released: Circuits

    @property
    def runs(self) -> Runs:
        """The claims' readings: the bound seeds' and the released run's."""
        return Runs(self.bound, self.released)


def read_circuits_chapter(runs: SeedRuns, per_pool: int, probe: ProbeConfig, n_patch: int) -> CircuitsChapter:
    """Chapter 9's readings: the seed stack trained or loaded (:func:`~mechbook.assign_add.seeds.dissect`),
    each seed's final model and the released model read on ``per_pool`` sequences per pool."""
    dissected = dissect(runs)
    model = load_model(dissected.run)
    task = Task(dissected.run.config.task)
    pools = task.eval_pools(per_pool, seed=POOL_SEED)
    rebuild = read_book_circuits(model, task, pools, probe, n_patch)
    seeds = read_seed_circuits(dissected.results, task, pools, probe, n_patch, {dissected.run.config.seed: rebuild})
    released = read_book_circuits(load_release(), task, pools, probe, n_patch)
    bound = of_bound_seeds(seeds, dissected.summary)
    return CircuitsChapter(dissected, model, task, pools, rebuild, seeds, bound, released)


@dataclass(frozen=True)
class CompositionChapter:
    """Everything chapter 10 reads: the seed stack (``dissected``), the opened run's ``task``, the
    training ``batch`` the gradients average over (and its 0-var part, ``zero_batch``), the
    :class:`~mechbook.assign_add.theory.GradientReading` of every seed (``seeds``), of the opened run
    (``rebuild``), of the seeds that bound (``bound``) and of the released run (``released``)."""

    dissected: Dissected
    task: Task
    batch: tuple[torch.Tensor, torch.Tensor]
    zero_batch: tuple[torch.Tensor, torch.Tensor]
    seeds: dict[int, GradientReading]
    rebuild: GradientReading
    bound: dict[int, GradientReading]
    released: GradientReading

    @property
    def runs(self) -> GradientRuns:
        """The claims' readings: the bound seeds', the released run's and the unbound seeds'."""
        return GradientRuns.of(self.seeds, self.bound, self.released)


def read_composition_chapter(
    runs: SeedRuns, per_pool: int, pool_seed: int, release_steps: Sequence[int] | None, release_per_pool: int
) -> CompositionChapter:
    """Chapter 10's readings: the seed stack trained or loaded, each seed's gradient reading
    (:func:`~mechbook.assign_add.theory.read_run`) on ``per_pool`` training sequences per pool drawn
    with ``pool_seed``, and the released run's at its checkpoints ``release_steps``."""
    dissected = dissect(runs)
    result = dissected.run
    task = Task(result.config.task)
    pools = task.eval_pools(per_pool, seed=pool_seed)
    batch, zero_batch = theory.pool_batch(pools), theory.pool_batch(pools, ["0var_train"])
    seeds = {run.config.seed: theory.read_run(run, batch, zero_batch, runs.rules) for run in dissected.results}
    rebuild = seeds.get(result.config.seed) or theory.read_run(result, batch, zero_batch, runs.rules)
    released = theory.read_release(release_steps, release_per_pool, task.cfg, batch, zero_batch, runs.rules)
    bound = of_bound_seeds(seeds, dissected.summary)
    return CompositionChapter(dissected, task, batch, zero_batch, seeds, rebuild, bound, released)


def _ch10_rule(claim_id: str) -> Rule:
    return next(c.rule for c in CH10_CLAIMS if c.id == claim_id)


def gradient_form(similarity: float) -> bool:
    """Whether one run's gradient block has the predicted form, by the rule of
    ``ch10.gradient_form`` on its correlation ``similarity`` with (UUᵀ)²."""
    return bool(_ch10_rule("ch10.gradient_form").holds(similarity))


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
            "seeds_predicted_form_holding": sum(gradient_form(v) for v in form),
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
        "theory_claims_holding": holding(CH10_CLAIMS, rebuild)[0],
        **{f"release_{n}": v for n, v in released.numbers().items()},
        "release_theory_claims_holding": holding(CH10_CLAIMS, released)[0],
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
