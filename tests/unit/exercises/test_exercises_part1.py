"""Part I's checks (mechbook/exercises/part1.py): each passes the library's solution and an
independent one written as a reader would, and fails each typical mistake with the hint that
names it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mechbook.exercises import EXERCISES, part1, run
from mechbook.exercises.core import TRANSPOSED, WRONG_SHAPE, Case


def _hint(name: str, index: int) -> str:
    """The hint of diagnosis ``index`` of exercise ``name`` (-1: the general hint)."""
    ex = EXERCISES[name]
    return ex.hint if index < 0 else ex.diagnoses[index].hint


def _joint(tokens: np.ndarray, vocab_size: int) -> np.ndarray:
    """p(x = a, y = c), counted directly."""
    joint = np.zeros((vocab_size, vocab_size))
    np.add.at(joint, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1.0)
    return joint / tokens[:, :-1].size


def _context(tokens: np.ndarray, vocab_size: int, centred: bool = True) -> np.ndarray:
    """Phi from the equation (r_t, or e_{y_t} when not ``centred``), by a loop over positions."""
    n, t_len = tokens.shape[0], tokens.shape[1] - 1
    out = np.zeros((vocab_size, vocab_size))
    for seq in tokens:
        for t in range(t_len):
            target = np.eye(vocab_size)[seq[t + 1]] - (1.0 / vocab_size if centred else 0.0)
            prefix = np.bincount(seq[: t + 1], minlength=vocab_size) / (t + 1)
            out += np.outer(target, prefix)
    return out / (n * t_len)


def _autograd_step(tokens: np.ndarray, vocab_size: int, eta: float, reduction: str = "mean") -> np.ndarray:
    """One SGD step of W_O from zero through torch's cross-entropy (the reader's way)."""
    x, y = torch.as_tensor(tokens[:, :-1].copy()), torch.as_tensor(tokens[:, 1:].copy())
    w_o = torch.zeros(vocab_size, vocab_size, dtype=torch.float64, requires_grad=True)
    logits = F.one_hot(x, vocab_size).double() @ w_o
    F.cross_entropy(logits.reshape(-1, vocab_size), y.reshape(-1), reduction=reduction).backward()
    return (w_o - eta * w_o.grad).detach().numpy()


def _gram(x: np.ndarray, axis: int, normalise: bool) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if normalise:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
    xc = x - x.mean(axis=axis, keepdims=True)
    return xc @ xc.T


def _similarity(axis_of, normalise_r: bool = False, normalise_f: bool = True):
    def sim(representation, feature, measure):
        axis = axis_of(measure)
        a, b = _gram(representation, axis, normalise_r), _gram(feature, axis, normalise_f)
        return float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b)))

    return sim


def _overlap(theory, trained, rows, k, largest=True, divide=True, mean=True):
    sign = -1 if largest else 1
    shares = [
        len(set(np.argsort(sign * theory[a])[:k]) & set(np.argsort(sign * trained[a])[:k])) / (k if divide else 1)
        for a in rows
    ]
    return float(np.mean(shares) if mean else np.sum(shares))


ref = {name: ex.reference for name, ex in EXERCISES.items()}
PAPER = {"paper": 1, "cka": 0}.__getitem__

# A reader's correct solution, written without the library.
SOLUTIONS = {
    "bigram_map": lambda t, v: _joint(t, v) - _joint(t, v).sum(1, keepdims=True) / v,
    "context_map": _context,
    "w_o_after_one_step": _autograd_step,
    "attention_coefficient": lambda eta, s: sum(eta**4 * k**2 * (k - 1) / 2 for k in range(s)),
    "cosine": lambda a, b: float((a * b).sum() / n) if (n := np.linalg.norm(a) * np.linalg.norm(b)) else float("nan"),
    "ranking_overlap": _overlap,
    "remove_projection": lambda m, t: m - (m * t).sum() / (t * t).sum() * t,
    "token_similarity": _similarity(PAPER),
}

# (exercise, a typical mistake, the index of the diagnosis that must name it; -1: the general hint)
MISTAKES = [
    ("bigram_map", lambda t, v: ref["bigram_map"](t, v).T, 0),
    ("bigram_map", lambda t, v: SOLUTIONS["bigram_map"](np.ascontiguousarray(t[:, ::-1]), v), 1),
    ("bigram_map", _joint, 2),
    ("bigram_map", lambda t, v: SOLUTIONS["bigram_map"](t, v) * t[:, 1:].size, 3),
    ("bigram_map", lambda t, v: SOLUTIONS["bigram_map"](t, v)[:, 1:], 4),
    ("bigram_map", lambda t, v: np.zeros((v, v)) + 0.1, -1),
    ("context_map", lambda t, v: _context(t, v).T, 0),
    ("context_map", lambda t, v: _context(t, v, centred=False), 1),
    ("context_map", lambda t, v: _context(t, v) * t[:, 1:].size, 2),
    ("context_map", lambda t, v: _context(t, v)[None], 3),
    ("w_o_after_one_step", lambda t, v, eta: -_autograd_step(t, v, eta), 0),
    ("w_o_after_one_step", lambda t, v, eta: _autograd_step(t, v, eta).T, 1),
    ("w_o_after_one_step", lambda t, v, eta: _autograd_step(t[:, ::-1], v, eta), 2),
    ("w_o_after_one_step", lambda t, v, eta: _autograd_step(t, v, eta, reduction="sum"), 3),
    ("w_o_after_one_step", lambda t, v, eta: _autograd_step(t, v, 1.0), 4),
    ("w_o_after_one_step", lambda t, v, eta: _autograd_step(t, v, eta).ravel(), 5),
    ("attention_coefficient", lambda eta, s: SOLUTIONS["attention_coefficient"](eta, s + 1), 0),
    ("attention_coefficient", lambda eta, s: eta**4 * s**4 / 8, 1),
    ("attention_coefficient", lambda eta, s: sum(eta**4 * k**2 * (k - 1) for k in range(s)), 2),
    ("attention_coefficient", lambda eta, s: eta**3 * s**3, -1),
    ("cosine", lambda a, b: SOLUTIONS["cosine"](a, b) if a.any() and b.any() else 0.0, 0),
    ("cosine", lambda a, b: float((a * b).sum()), 1),
    ("cosine", lambda a, b: float(np.trace(a @ b) / np.linalg.norm(a) / np.linalg.norm(b)), 2),
    ("ranking_overlap", lambda *args: _overlap(*args, largest=False), 0),
    ("ranking_overlap", lambda *args: _overlap(*args, divide=False), 1),
    ("ranking_overlap", lambda *args: _overlap(*args, mean=False), 2),
    ("remove_projection", lambda m, t: (m * t).sum() / (t * t).sum() * t, 0),
    ("remove_projection", lambda m, t: m + (m * t).sum() / (t * t).sum() * t, 1),
    ("remove_projection", lambda m, t: m - (m * t).sum() * t, 2),
    ("remove_projection", lambda m, t: m - (m * t).sum() / t.norm() * t, 3),
    ("remove_projection", lambda m, t: (m - (m * t).sum() / (t * t).sum() * t).reshape(-1), 4),
    ("token_similarity", _similarity(lambda measure: 1 - PAPER(measure)), 0),
    ("token_similarity", _similarity(PAPER, normalise_f=False), 1),
    ("token_similarity", _similarity(PAPER, normalise_r=True), 2),
]


def test_part1_lists_its_exercises_in_page_order():
    assert [ex.name for ex in part1.EXERCISES] == list(SOLUTIONS)
    assert all(EXERCISES[name] is ex for name, ex in ((e.name, e) for e in part1.EXERCISES))


@pytest.mark.parametrize("name", list(SOLUTIONS))
def test_the_library_and_a_readers_solution_pass(name, capsys):
    assert run(EXERCISES[name], ref[name]).status == "passed"
    assert run(EXERCISES[name], SOLUTIONS[name]).status == "passed"
    assert capsys.readouterr().out.startswith(f"✓ check_{name}: passed on all")


@pytest.mark.parametrize(("name", "wrong", "diagnosis"), MISTAKES, ids=lambda x: x if isinstance(x, str) else "")
def test_a_typical_mistake_fails_with_its_hint(name, wrong, diagnosis):
    outcome = run(EXERCISES[name], wrong, quiet=True)
    assert outcome.status == "differs", outcome.line
    assert outcome.hint == _hint(name, diagnosis), outcome.line
    assert outcome.line.startswith(f"✗ check_{name}: on {outcome.case}, yours is ")


def test_every_diagnosis_is_exercised_and_the_shared_ones_are_where_they_belong():
    named = {(name, d) for name, _, d in MISTAKES}
    assert named >= {(ex.name, i) for ex in part1.EXERCISES for i in range(len(ex.diagnoses))}
    for ex in part1.EXERCISES:
        if WRONG_SHAPE in ex.diagnoses:
            assert ex.diagnoses[-1] is WRONG_SHAPE, f"{ex.name}: the broad WRONG_SHAPE must come last"
        if TRANSPOSED in ex.diagnoses:
            assert ex.diagnoses.index(TRANSPOSED) < len(ex.diagnoses) - 1


def test_a_stub_says_not_written_and_a_crash_is_reported(capsys):
    def stub(*args, **kwargs):
        raise NotImplementedError("bigram_map: write it, then run the check below")

    assert run(EXERCISES["bigram_map"], stub).status == "not written"
    crashed = run(EXERCISES["cosine"], lambda a, b: a.norm(), quiet=True)
    assert crashed.status == "raised" and "your function raised AttributeError" in crashed.line
    assert "not written yet" in capsys.readouterr().out


def test_the_checks_need_no_network_model_or_cache(monkeypatch, tmp_path):
    """Chapter 6's check runs on random matrices: it passes with no cache and no Pythia."""
    monkeypatch.setenv("MECHBOOK_CACHE", str(tmp_path / "none"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for ex in part1.EXERCISES:
        assert run(ex, ex.reference, quiet=True).passed
    assert not (tmp_path / "none").exists()


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 4).flatmap(
        lambda n: st.integers(2, 6).flatmap(
            lambda t: st.integers(2, 6).flatmap(
                lambda v: st.tuples(
                    st.lists(st.lists(st.integers(0, v - 1), min_size=t, max_size=t), min_size=n, max_size=n),
                    st.just(v),
                )
            )
        )
    ),
    st.floats(0.01, 3.0),
)
def test_one_autograd_step_is_eta_b_and_its_mistakes_are_named_on_any_corpus(corpus, eta):
    """W_O(1) = eta B exactly, whatever the corpus; and on a corpus whose B is not symmetric, a
    sign flip and a transpose of the step are each diagnosed as such."""
    tokens, vocab = np.array(corpus[0]), corpus[1]
    step = _autograd_step(tokens, vocab, eta)
    expected = ref["w_o_after_one_step"](tokens, vocab, eta)
    np.testing.assert_allclose(step, expected, atol=1e-12)
    assume(not np.allclose(expected, expected.T) and not np.allclose(-expected, expected.T))
    one = dataclasses.replace(EXERCISES["w_o_after_one_step"], cases=lambda: [Case("corpus", (tokens, vocab, eta))])
    assert run(one, lambda *a: -_autograd_step(*a), quiet=True).hint == _hint("w_o_after_one_step", 0)
    assert run(one, lambda *a: _autograd_step(*a).T, quiet=True).hint == TRANSPOSED.hint
