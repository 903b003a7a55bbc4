"""A check gives each call of the reader's function (and of the reference) its own deep copy of
the inputs (mechbook/exercises/core.py): a function that changes its input in place fails with a
line naming that input, and the module-level edge cases that several checks share stay as they
were for every later check."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from mechbook.exercises import EXERCISES, Case, Exercise, part1, run
from mechbook.exercises.core import IN_PLACE

TOKEN_EDGES = copy.deepcopy(part1.TOKEN_EDGES)
PROJECTION_EDGES = copy.deepcopy(part1.REMOVE_PROJECTION_EDGES)


def _same_cases(cases, snapshot):
    """Whether ``cases`` hold the values of ``snapshot``, their deep copy taken at import."""
    for case, kept in zip(cases, snapshot, strict=True):
        for arg, saved in zip(case.args, kept.args, strict=True):
            if isinstance(arg, (np.ndarray, torch.Tensor)):
                if type(arg) is not type(saved) or tuple(arg.shape) != tuple(saved.shape) or not (arg == saved).all():
                    return False
            elif arg != saved:
                return False
    return True


def _bigram_then_zero(tokens, vocab_size):
    """The right map, then the caller's tokens overwritten (an in-place slip after the fact)."""
    answer = part1.bigram_map(tokens, vocab_size)
    tokens[:] = 0
    return answer


def _bigram_of_folded_ids(tokens, vocab_size):
    """Token ids folded in place (tokens %= 2): the map of other tokens, and a corrupted input."""
    tokens %= 2
    return part1.bigram_map(tokens, vocab_size)


def _remove_in_place(m, t):
    """The right M', written into M itself, as `m -= ...` does."""
    m -= (m * t).sum() / (t * t).sum() * t
    return m


def _overlap_sorting_rows(theory, trained, rows, k):
    rows.sort(reverse=True)
    return part1.ranking_overlap(theory, trained, rows, k)


def _patched_then_zeroed(model, clean, source, positions):
    answer = EXERCISES["patched_logits"].reference(model, clean, source, positions)
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()
    return answer


@pytest.mark.parametrize(
    ("name", "fn", "names"),
    [
        ("bigram_map", _bigram_then_zero, "`tokens`"),
        ("bigram_map", _bigram_of_folded_ids, "`tokens`"),
        ("context_map", _bigram_then_zero, "`tokens`"),
        ("w_o_after_one_step", lambda tokens, v, eta: _bigram_then_zero(tokens, v) * eta, "`tokens`"),
        ("remove_projection", _remove_in_place, "`m`"),
        ("remove_projection", lambda *args: _remove_in_place(*args), "argument 1"),
        ("ranking_overlap", _overlap_sorting_rows, "`rows`"),
        ("patched_logits", _patched_then_zeroed, "`model`"),
    ],
)
def test_a_function_that_changes_its_input_fails_naming_it(name, fn, names):
    outcome = run(EXERCISES[name], fn, quiet=True)
    assert outcome.status == "changed input", outcome.line
    assert f"your function changed its input {names} in place: " in outcome.line, outcome.line
    assert outcome.hint == IN_PLACE and "\n" not in outcome.line


def test_shared_edge_cases_stay_pristine_for_every_later_check():
    """Before copies, the first mutating check rewrote TOKEN_EDGES for the rest of the kernel: the
    later checks then tried other inputs under the old labels."""
    for name in ("bigram_map", "context_map"):
        assert run(EXERCISES[name], _bigram_then_zero, quiet=True).status == "changed input"
    assert run(EXERCISES["remove_projection"], _remove_in_place, quiet=True).status == "changed input"
    assert _same_cases(part1.TOKEN_EDGES, TOKEN_EDGES)
    assert _same_cases(part1.REMOVE_PROJECTION_EDGES, PROJECTION_EDGES)
    for name in ("bigram_map", "context_map", "w_o_after_one_step", "remove_projection"):
        assert run(EXERCISES[name], EXERCISES[name].reference, quiet=True).passed
    first = EXERCISES["bigram_map"].cases()[0]
    assert first.args[0].tolist() == [[0, 2]], "the first edge case is still one sequence of 2 tokens"


def test_a_snapshot_that_no_longer_matches_is_seen():
    """The helper above can fail: a changed edge case is told from a pristine one."""
    changed = copy.deepcopy(TOKEN_EDGES)
    changed[0].args[0][0, 0] = 1
    assert not _same_cases(changed, TOKEN_EDGES) and _same_cases(copy.deepcopy(TOKEN_EDGES), TOKEN_EDGES)


def test_each_call_gets_its_own_copy_so_reading_its_input_is_not_a_change():
    """Inputs holding NaN are not called changed (NaN is not == NaN), and the reference and the
    reader never share an array."""
    seen = []

    def reference(x, scale=1.0):
        seen.append(x)
        return np.nansum(x) * scale

    exercise = Exercise(
        "probe",
        reference=reference,
        cases=lambda: [Case("a NaN", (np.array([np.nan, 1.0]),), {"scale": 2.0})],
        hint="h",
    )
    outcome = run(exercise, reference, quiet=True)
    assert outcome.status == "passed", outcome.line
    assert len(seen) == 2 and seen[0] is not seen[1]


def test_an_attribute_replaced_by_what_does_not_compare_is_a_change():
    """An attribute that held a number, replaced by an array: told as a change, not raised."""

    class Holder:
        def __init__(self):
            self.size = 3

    def replaces(holder):
        holder.size = np.arange(3)
        return 1.0

    exercise = Exercise("probe", reference=lambda holder: 1.0, cases=lambda: [Case("a holder", (Holder(),))], hint="h")
    outcome = run(exercise, replaces, quiet=True)
    assert outcome.status == "changed input" and "`holder`" in outcome.line, outcome.line
