"""Part I's exercises (chapters 1-6): one :class:`~mechbook.exercises.core.Exercise` each.

Each reference is the library function the chapter uses (:mod:`mechbook.leading_terms`,
:mod:`mechbook.pythia.similarity`), through a thin adapter where its signature is not a good
exercise signature: the corpus maps come from :func:`~mechbook.leading_terms.stats.corpus_stats`
of the case's tokens, the first step of :math:`W_O` from its closed form
:func:`~mechbook.leading_terms.leading.leading_term`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np
import torch

from mechbook.exercises.core import (
    TRANSPOSED,
    WRONG_SHAPE,
    Case,
    Diagnosis,
    Exercise,
    allclose,
    as_array,
    rng_cases,
    shape_of,
)
from mechbook.leading_terms import ablation, leading
from mechbook.leading_terms.stats import CorpusStats, corpus_stats
from mechbook.progress import PROGRESS_ENV
from mechbook.pythia import similarity


@contextmanager
def _quietly() -> Iterator[None]:
    """No progress bars while a check computes the corpus maps of its small inputs."""
    with mock.patch.dict(os.environ, {"MECHBOOK_QUIET": "1"}):
        os.environ.pop(PROGRESS_ENV, None)
        yield


def _stats(tokens: np.ndarray, vocab_size: int) -> CorpusStats:
    with _quietly():
        return corpus_stats(tokens, vocab_size)


def _gives(wrong: Callable[[Any, Case], Any]) -> Callable[[Any, Any, Case], bool]:
    """A diagnosis predicate: the reader's answer is ``wrong(expected, case)``, where that differs
    from the expected answer."""

    def matches(yours: Any, expected: Any, case: Case) -> bool:
        mistaken = wrong(expected, case)
        return allclose(yours, mistaken) and not allclose(mistaken, expected)

    return matches


def _uncentred(axis: int) -> Callable[[Any, Any, Case], bool]:
    """A diagnosis predicate: the answer is the expected (centred) map plus a constant along ``axis``,
    i.e. the map before its mean over ``axis`` was taken out."""

    def matches(yours: Any, expected: Any, case: Case) -> bool:
        if shape_of(yours) != shape_of(expected):
            return False
        y = as_array(yours)
        return allclose(y - y.mean(axis=axis, keepdims=True), expected) and not allclose(y, expected)

    return matches


def _tokens_case(rng: np.random.Generator) -> Case:
    n, t, v = int(rng.integers(1, 6)), int(rng.integers(1, 8)), int(rng.integers(2, 9))
    tokens = rng.integers(0, v, size=(n, t + 1))
    return Case(f"{n} sequences of {t + 1} tokens, vocabulary {v}", (tokens, v))


TOKEN_EDGES = (
    Case("one sequence of 2 tokens, vocabulary 3", (np.array([[0, 2]]), 3)),
    Case("a vocabulary of 1", (np.zeros((2, 4), dtype=np.int64), 1)),
    Case("one token repeated, vocabulary 4", (np.full((3, 5), 2), 4)),
    Case("tokens 2 and 3 never seen, vocabulary 4", (np.array([[0, 1, 0, 1, 1], [1, 0, 0, 0, 1]]), 4)),
)


def _reversed(case: Case) -> tuple[np.ndarray, ...]:
    """The case's arguments with each sequence read backwards: current and next token swap roles."""
    tokens, *rest = case.args
    return (tokens[:, ::-1], *rest)


def _positions(case: Case) -> int:
    """N T, the number of (sequence, position) pairs a map averages over."""
    return case.args[0].shape[0] * (case.args[0].shape[1] - 1)


SUMMED = Diagnosis(
    _gives(lambda expected, case: expected * _positions(case)),
    "you have sums: divide by N T, the number of (sequence, position) pairs",
)
"""A corpus map summed over the (sequence, position) pairs instead of averaged (chapters 1, 2)."""


# chapter 1 -------------------------------------------------------------------------------------


def bigram_map(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """B = (1/NT) sum_{n,t} e_{x_t} r_t^T (chapter 1), from the library's corpus statistics."""
    return _stats(tokens, vocab_size).B


def _map_exercise(name: str, reference: Callable[..., Any], seed: int, hint: str, *diagnoses: Diagnosis) -> Exercise:
    """A chapter-1 corpus map as an exercise: the shared token edge cases and 8 random corpora;
    ``diagnoses`` between the transpose and the sum-not-mean (then wrong-shape) ones."""
    return Exercise(
        name=name,
        reference=reference,
        cases=rng_cases(_tokens_case, 8, seed=seed, edges=TOKEN_EDGES),
        hint=hint,
        diagnoses=(TRANSPOSED, *diagnoses, SUMMED, WRONG_SHAPE),
    )


BIGRAM_MAP = _map_exercise(
    "bigram_map",
    bigram_map,
    1,
    "B[a, c] = p(x = a, y = c) - p(x = a)/|V|: count each (current, next) pair, divide by N T, "
    "then subtract p(x = a)/|V| from row a",
    Diagnosis(
        _gives(lambda expected, case: bigram_map(*_reversed(case))),
        "the current token is tokens[:, :-1] and the next one tokens[:, 1:]: you swapped them",
    ),
    Diagnosis(
        _uncentred(1),
        "you have p(x = a, y = c): subtract the uniform guess p(x = a)/|V| from each row (r_t = e_y - 1/|V|)",
    ),
)


def context_map(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """Phi = (1/NT) sum_{n,t} r_t (sum_{j<=t} e_{x_j}/(t+1))^T (chapter 1), from the library."""
    return _stats(tokens, vocab_size).Phi


CONTEXT_MAP = _map_exercise(
    "context_map",
    context_map,
    2,
    "for each position t: the next token's r_t = e_{y_t} - 1/|V| (a row index) times the mean one-hot of "
    "x_0..x_t, the current token included (weight 1/(t+1) each); average over all N T positions",
    Diagnosis(
        _uncentred(0),
        "you used e_{y_t} for the next token: use r_t = e_{y_t} - 1/|V|, so that each column sums to zero",
    ),
)


# chapter 2 -------------------------------------------------------------------------------------


def w_o_after_one_step(tokens: np.ndarray, vocab_size: int, eta: float) -> np.ndarray:
    """W_O after one full-batch SGD step from zero: its closed form eta B (chapter 2)."""
    return leading.leading_term(_stats(tokens, vocab_size), "W_O", eta, 1)


def _step_case(rng: np.random.Generator) -> Case:
    tokens_case = _tokens_case(rng)
    eta = float(np.round(rng.uniform(0.05, 2.0), 3))
    return Case(f"{tokens_case.label}, eta {eta}", (*tokens_case.args, eta))


W_O_AFTER_ONE_STEP = Exercise(
    name="w_o_after_one_step",
    reference=w_o_after_one_step,
    cases=rng_cases(
        _step_case, 6, seed=3, edges=tuple(Case(f"{c.label}, eta 0.5", (*c.args, 0.5)) for c in TOKEN_EDGES)
    ),
    hint="at zero the residual stream is the one-hot of x_t, so logits = one_hot(x) @ W_O; take the mean "
    "cross-entropy against the next tokens, loss.backward(), and return W_O - eta * W_O.grad",
    diagnoses=(
        Diagnosis(_gives(lambda expected, case: -expected), "SGD subtracts the gradient: W_O - eta * grad, not +"),
        TRANSPOSED,
        Diagnosis(
            _gives(lambda expected, case: w_o_after_one_step(*_reversed(case))),
            "the inputs are tokens[:, :-1] and the targets tokens[:, 1:]: you swapped them",
        ),
        Diagnosis(
            _gives(lambda expected, case: expected * _positions(case)),
            "the loss is the mean cross-entropy over all N T positions, not their sum",
        ),
        Diagnosis(
            _gives(lambda expected, case: expected / case.args[2]),
            "you returned minus the gradient: multiply it by the learning rate eta",
        ),
        WRONG_SHAPE,
    ),
)


def attention_coefficient(eta: float, s: int) -> float:
    """c(eta, s) = (eta^4/2) sum_{k<s} k^2 (k-1), the coefficient of Q in W(s) (chapter 2)."""
    return leading.coefficient("W", eta, s)


def _coefficient_case(rng: np.random.Generator) -> Case:
    eta, s = float(np.round(rng.uniform(0.01, 1.0), 3)), int(rng.integers(3, 300))
    return Case(f"eta {eta}, s {s}", (eta, s))


ATTENTION_COEFFICIENT = Exercise(
    name="attention_coefficient",
    reference=attention_coefficient,
    cases=rng_cases(
        _coefficient_case,
        8,
        seed=4,
        edges=(*(Case(f"eta 0.5, s {s}", (0.5, s)) for s in (0, 1, 2, 3, 4)), Case("eta 1, s 10", (1.0, 10))),
    ),
    hint="W's gradient at step k is -(eta^3 k^2 (k-1)/2) Q, and SGD adds eta times minus it at each step "
    "k = 0, ..., s-1: sum eta^4 k^2 (k-1)/2 over those k",
    diagnoses=(
        Diagnosis(
            _gives(lambda expected, case: attention_coefficient(case.args[0], case.args[1] + 1)),
            "off by one step: the steps before step s are k = 0, ..., s-1 (range(s)), not up to s",
        ),
        Diagnosis(
            _gives(lambda expected, case: case.args[0] ** 4 * case.args[1] ** 4 / 8),
            "eta^4 s^4 / 8 is only the large-s limit: sum (eta^4/2) k^2 (k-1) exactly over k = 0, ..., s-1",
        ),
        Diagnosis(
            _gives(lambda expected, case: 2 * expected),
            "V(k) W_O(k) = eta^3 k^2 (k-1)/2 G: keep the factor 1/2 from V's sum",
        ),
    ),
)


# chapter 3 -------------------------------------------------------------------------------------


def _pair_case(rng: np.random.Generator) -> Case:
    shape = (int(rng.integers(1, 7)), int(rng.integers(1, 7)))
    a = rng.normal(size=shape)
    b = 0.5 * a + rng.normal(size=shape) * rng.uniform(0.1, 2.0)
    return Case(f"two {shape[0]} x {shape[1]} matrices", (a, b))


_M = np.arange(12.0).reshape(3, 4) - 5
_SQUARE = np.array([[1.0, 2.0, 0.0], [-1.0, 0.5, 3.0], [2.0, 0.0, 1.0]])

COSINE_EDGES = (
    Case("two 3 x 3 matrices", (_SQUARE, _SQUARE @ _SQUARE + np.eye(3))),
    Case("a matrix and 3 times itself", (_M, 3 * _M)),
    Case("a matrix and minus itself", (_M, -_M)),
    Case("a zero matrix", (np.zeros((3, 4)), _M)),
    Case("two vectors (a position bias)", (np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -1.0]))),
)

COSINE = Exercise(
    name="cosine",
    reference=leading.cosine,
    cases=rng_cases(_pair_case, 8, seed=5, edges=COSINE_EDGES),
    hint="cos(A, B) = tr(A^T B) / (||A||_F ||B||_F): the sum of A * B entry by entry over the product of "
    "the two Frobenius norms; NaN when either matrix is zero",
    diagnoses=(
        Diagnosis(
            lambda yours, expected, case: bool(np.isnan(expected)) and allclose(yours, 0.0),
            "a zero matrix has no direction: return float('nan') when either norm is 0",
        ),
        Diagnosis(
            _gives(lambda expected, case: float(np.sum(case.args[0] * case.args[1]))),
            "divide the inner product by both Frobenius norms",
        ),
        Diagnosis(
            lambda yours, expected, case: (
                case.args[0].shape == case.args[1].shape[::-1]
                and _gives(
                    lambda e, c: np.trace(c.args[0] @ c.args[1]) / np.linalg.norm(c.args[0]) / np.linalg.norm(c.args[1])
                )(yours, expected, case)
            ),
            "tr(A B) is not the inner product: use tr(A^T B), the sum of the entry-by-entry product",
        ),
    ),
)


# chapter 4 -------------------------------------------------------------------------------------


def ranking_overlap(theory: np.ndarray, trained: np.ndarray, rows: list[int], k: int) -> float:
    """Mean over ``rows`` of |top-k(theory[a]) ∩ top-k(trained[a])| / k (chapter 4), from the library."""
    return leading.ranking_overlap(theory, trained, rows, k)


def _ranking_case(rng: np.random.Generator) -> Case:
    v = int(rng.integers(3, 12))
    theory = rng.normal(size=(v, v))
    trained = theory + rng.normal(size=(v, v)) * rng.uniform(0.3, 2.0)
    rows = sorted(rng.choice(v, size=int(rng.integers(1, v + 1)), replace=False).tolist())
    k = int(rng.integers(1, v))
    return Case(f"{v} x {v} maps, {len(rows)} rows, k {k}", (theory, trained, rows, k))


_T = np.array([[3.0, 1.0, 2.0, 0.0], [0.0, 2.0, 1.0, 3.0], [1.0, 0.0, 3.0, 2.0]])

RANKING_OVERLAP_EDGES = (
    Case("one row, k 2", (_T, _T[:, ::-1], [0], 2)),
    Case("the same map, k 1", (_T, _T, [0, 1, 2], 1)),
    Case("k = every column", (_T, -_T, [0, 2], 4)),
    Case("opposite maps, k 2", (_T, -_T, [0, 1, 2], 2)),
)

RANKING_OVERLAP = Exercise(
    name="ranking_overlap",
    reference=ranking_overlap,
    cases=rng_cases(_ranking_case, 8, seed=6, edges=RANKING_OVERLAP_EDGES),
    hint="for each row a in rows: the k columns with the largest theory[a] and the k with the largest "
    "trained[a]; count the shared ones, divide by k, and average over the rows",
    diagnoses=(
        Diagnosis(
            _gives(lambda expected, case: ranking_overlap(-case.args[0], -case.args[1], *case.args[2:])),
            "you took the k smallest entries: rank by largest first (np.argsort(-row) or the end of np.argsort(row))",
        ),
        Diagnosis(
            _gives(lambda expected, case: expected * case.args[3]),
            "divide each row's count of shared tokens by k",
        ),
        Diagnosis(
            _gives(lambda expected, case: expected * len(case.args[2])),
            "average the rows' overlaps (divide by the number of rows), do not sum them",
        ),
    ),
)


# chapter 5 -------------------------------------------------------------------------------------


def _projection_case(rng: np.random.Generator) -> Case:
    shape = (int(rng.integers(2, 6)), int(rng.integers(2, 6)))
    term = torch.as_tensor(rng.normal(size=shape))
    weight = torch.as_tensor(rng.uniform(-2, 2) * term.numpy() + rng.normal(size=shape))
    return Case(f"a {shape[0]} x {shape[1]} matrix and term", (weight, term))


_W = torch.tensor([[1.0, 2.0], [0.0, -1.0]], dtype=torch.float64)
_TERM = torch.tensor([[0.5, 0.0], [1.0, 0.5]], dtype=torch.float64)

REMOVE_PROJECTION_EDGES = (
    Case("a 2 x 2 matrix and term", (_W, _TERM)),
    Case("a matrix that is 3 times its term", (3 * _TERM, _TERM)),
    Case(
        "a matrix orthogonal to its term",
        (torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=torch.float64), _TERM),
    ),
    Case(
        "vectors (a position bias)",
        (
            torch.tensor([1.0, 2.0, -1.0], dtype=torch.float64),
            torch.tensor([0.0, 1.0, 1.0], dtype=torch.float64),
        ),
    ),
)

REMOVE_PROJECTION = Exercise(
    name="remove_projection",
    reference=ablation.remove_projection,
    cases=rng_cases(_projection_case, 8, seed=7, edges=REMOVE_PROJECTION_EDGES),
    hint="M' = M - (<M, T> / <T, T>) T with <M, T> = (M * T).sum(): the part of M along T is removed, "
    "whatever T's scale",
    diagnoses=(
        Diagnosis(
            _gives(lambda expected, case: case.args[0] - expected),
            "you returned the projection (<M, T>/<T, T>) T: M' is what is left, M minus it",
        ),
        Diagnosis(
            _gives(lambda expected, case: 2 * case.args[0] - expected),
            "subtract the projection from M, do not add it",
        ),
        Diagnosis(
            _gives(lambda expected, case: case.args[0] - (case.args[0] * case.args[1]).sum() * case.args[1]),
            "divide <M, T> by <T, T> = ||T||_F^2: T is not a unit matrix",
        ),
        Diagnosis(
            _gives(
                lambda expected, case: (
                    case.args[0] - (case.args[0] * case.args[1]).sum() / case.args[1].norm() * case.args[1]
                )
            ),
            "divide by ||T||_F squared, not by ||T||_F",
        ),
        WRONG_SHAPE,
    ),
)


# chapter 6 -------------------------------------------------------------------------------------


def _similarity_case(rng: np.random.Generator) -> Case:
    k, d, m = int(rng.integers(2, 8)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    feature = rng.normal(size=(k, m)) * rng.uniform(0.2, 3.0, size=(k, 1))
    rep = feature @ rng.normal(size=(m, d)) + rng.normal(size=(k, d)) + rng.normal(size=(1, d))
    measure = str(rng.choice(similarity.MEASURES))
    return Case(f"{k} tokens, R {k} x {d}, F {k} x {m}, measure {measure!r}", (rep, feature), {"measure": measure})


_F = np.array([[2.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 3.0], [0.5, 2.0, 0.0]])
_R = np.array([[1.0, 0.5], [-1.0, 2.0], [0.0, 1.0], [3.0, -1.0]])


def _edge_similarity_cases() -> tuple[Case, ...]:
    cases = []
    for measure in similarity.MEASURES:
        cases += [
            Case(f"4 tokens, measure {measure!r}", (_R, _F), {"measure": measure}),
            Case(f"R with a shared offset, measure {measure!r}", (_R + 10.0, _F), {"measure": measure}),
            Case(f"R = F W, measure {measure!r}", (_F @ _F.T[:, :2], _F), {"measure": measure}),
            Case(f"2 tokens, measure {measure!r}", (_R[:2], _F[:2]), {"measure": measure}),
        ]
    return tuple(cases)


def _other_measure(expected: float, case: Case) -> float:
    other = next(m for m in similarity.MEASURES if m != case.kwargs["measure"])
    return similarity.covariance_similarity(*case.args, measure=other)


def _gram_cosine(normalise_r: bool, normalise_f: bool) -> Callable[[float, Case], float]:
    def wrong(expected: float, case: Case) -> float:
        rep, feature = case.args
        measure = case.kwargs["measure"]
        grams = [
            similarity.feature_gram(x, measure) if norm else similarity.centred_gram(x, measure)
            for x, norm in ((rep, normalise_r), (feature, normalise_f))
        ]
        return similarity.matrix_cosine(*grams)

    return wrong


TOKEN_SIMILARITY = Exercise(
    name="token_similarity",
    reference=similarity.covariance_similarity,
    cases=rng_cases(_similarity_case, 8, seed=8, edges=_edge_similarity_cases()),
    hint="divide each row of F by its norm; centre R and F_hat (measure 'paper': each row over its own entries; "
    "'cka': each column over the tokens); form the k x k Grams X_c X_c^T and return their cosine",
    diagnoses=(
        Diagnosis(
            _gives(_other_measure),
            "the centring is on the wrong axis: 'paper' takes each row's mean (axis=1), 'cka' each column's (axis=0)",
        ),
        Diagnosis(_gives(_gram_cosine(False, False)), "divide each row of F by its norm (F_hat) before its Gram"),
        Diagnosis(_gives(_gram_cosine(True, True)), "only F is row-normalised: leave the representation R as it is"),
    ),
)


EXERCISES: tuple[Exercise, ...] = (
    BIGRAM_MAP,
    CONTEXT_MAP,
    W_O_AFTER_ONE_STEP,
    ATTENTION_COEFFICIENT,
    COSINE,
    RANKING_OVERLAP,
    REMOVE_PROJECTION,
    TOKEN_SIMILARITY,
)
"""Every exercise of the part, in page order; ``mechbook.exercises`` exports a ``check_<name>`` for each."""
