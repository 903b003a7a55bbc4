"""mechbook.book.draws: the beta-binomial predictive against a literal integral, and the draw rule
on stored counts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.book.draws import Stored, Tally, is_draw, predictive, predictive_tails, tally
from mechbook.claims import Claim, Rule


def literal_predictive(k: int, n: int, m: int, grid: int = 20_000) -> list[float]:
    """P(j of m | k of n) by the midpoint rule: the binomial averaged over p ~ Beta(k+1, n-k+1)."""
    ps = [(i + 0.5) / grid for i in range(grid)]
    weight = [p**k * (1 - p) ** (n - k) for p in ps]
    total = sum(weight)
    return [
        sum(w * math.comb(m, j) * p**j * (1 - p) ** (m - j) for p, w in zip(ps, weight)) / total for j in range(m + 1)
    ]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n), st.integers(0, 8))))
def test_the_predictive_is_the_binomial_averaged_over_the_posterior(case):
    k, n, m = case
    got = predictive(k, n, m)
    assert sum(got) == pytest.approx(1, abs=1e-12)
    assert got == pytest.approx(literal_predictive(k, n, m), abs=1e-6)


def test_the_admitted_counts_are_those_the_module_states():
    """draws.py's docstring: 6 of 6 recorded admits 3 to 6; 0 of 6 fails on 4 or more."""

    def admitted(k: int) -> list[int]:
        return [j for j in range(7) if min(predictive_tails(k, 6, j)) >= 0.025]

    assert admitted(6) == [3, 4, 5, 6]
    assert admitted(0) == [0, 1, 2, 3]


def test_a_draw_needs_a_stored_count_and_the_same_released_run():
    stored = Stored("reproduced", Tally(6, 6, True))
    assert is_draw(stored, Tally(5, 6, True))
    assert not is_draw(stored, Tally(2, 6, True))
    assert not is_draw(stored, Tally(5, 6, False)), "the released run's bits do not move"
    assert not is_draw(Stored("reproduced"), Tally(5, 6, True)), "no stored count, nothing measured"
    assert not is_draw(stored, None)


def test_stored_entries_read_and_write_both_forms():
    assert Stored.parse("partly") == Stored("partly")
    entry = {"verdict": "partly", "holds": 4, "of": 6, "release": True}
    assert Stored.parse(entry) == Stored("partly", Tally(4, 6, True))
    assert Stored.parse(entry).as_yaml() == entry and Stored("partly").as_yaml() == "partly"


def test_a_tally_counts_seeds_only():
    claim = Claim("ch08.x", "08_x", "book", "s", "m", Rule(">=", 0.9))
    assert tally(claim, [0, 1, 2], [0.95, None, 0.2], release=0.91) == Tally(1, 3, True)
    assert tally(claim, [None, None], [0.95, 0.2]) is None, "values over conditions, not seeds"
    assert tally(claim, [0], [0.95]) is None, "one seed is no draw"


def test_a_claim_over_the_seeds_that_bound_is_judged_for_as_many_as_bound_now():
    """How many seeds bind is a draw too (4 of 6 on a Zen 3, 5 of 6 on a Zen 4's AVX-512 path):
    4 of 4 recorded admits 4 of 5 (P(K <= 4 of 5) = 1/2), not 1 of 5, and the tails are the
    predictive for 5 fresh seeds."""
    stored = Stored("reproduced", Tally(4, 4, True))
    assert is_draw(stored, Tally(4, 5, True)) and is_draw(
        Stored("not reproduced", Tally(0, 4, False)), Tally(0, 5, False)
    )
    assert not is_draw(stored, Tally(1, 5, True))
    low, high = predictive_tails(4, 4, 4, 5)
    assert low == pytest.approx(sum(literal_predictive(4, 4, 5)[:5]), abs=1e-6) and high == pytest.approx(
        sum(literal_predictive(4, 4, 5)[4:]), abs=1e-6
    )
