"""mechbook.book.run's lanes: chapters dealt to lanes by their expected cost; a chapter that opens
another's runs stays after it in its process, and the lanes' work is balanced (longest group
first, to the least loaded lane)."""

from __future__ import annotations

import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mechbook.book.run import chains, schedule

BOOK = [Path(f"book/p/{stem}.ipynb") for stem in ("01_a", "02_b", "03_c", "04_d", "05_e", "06_f")]
OPENS = {"04_d": ["03_c"], "05_e": ["03_c"], "06_f": ["05_e"]}


def test_a_chapter_that_opens_another_joins_its_group_after_it():
    groups = chains(BOOK, OPENS)
    assert [[p.stem for p in g] for g in groups] == [["01_a"], ["02_b"], ["03_c", "04_d", "05_e", "06_f"]]
    alone = chains(BOOK[3:], OPENS)  # chapter 3 not chosen: chapter 4 trains what it needs itself
    assert [[p.stem for p in g] for g in alone] == [["04_d", "05_e", "06_f"]]


def test_the_book_today_deals_chapter_11_beside_part_one():
    """The shipped cpu costs (seconds, AMD EPYC Zen 3): Part II's chapter 8 group alone outweighs
    Part I, so chapter 11 goes to Part I's lane."""
    cost = {"07": 12.7, "08": 3655.7, "09": 74.2, "10": 99.1, "11": 1037.0, "01": 16.1, "02": 553.6, "03": 1727.1}
    cost |= {"04": 16.1, "05": 71.1, "06": 476.7}
    book = [Path(f"{s}.ipynb") for s in sorted(cost)]
    opens = {"04": ["03"], "05": ["03"], "09": ["08"], "10": ["08"]}
    lanes = schedule(chains(book, opens), cost, 2)
    stems = [[p.stem for p in lane] for lane in lanes]
    assert [s for s in stems[0] if s in ("08", "09", "10")] == ["08", "09", "10"]
    assert "11" in stems[1] and "03" in stems[1]
    totals = [sum(cost[s] for s in lane) for lane in stems]
    assert max(totals) < 0.85 * max(sum(cost[s] for s in ("07", "08", "09", "10", "11")), sum(cost.values()) / 2 + 1)


@settings(max_examples=60, deadline=None)
@given(
    costs=st.lists(st.floats(0, 1000), min_size=1, max_size=6),
    lanes=st.integers(1, 4),
)
def test_schedule_keeps_every_chapter_once_in_book_order_within_the_lpt_bound(costs, lanes):
    book = [Path(f"{i:02d}.ipynb") for i in range(len(costs))]
    seconds = {p.stem: c for p, c in zip(book, costs)}
    dealt = schedule([[p] for p in book], seconds, lanes)
    assert sorted(itertools.chain(*dealt)) == book and len(dealt) <= lanes
    assert all(lane == sorted(lane) for lane in dealt)
    best = min(  # the best split, by brute force over every assignment
        max(sum(c for c, lane in zip(costs, assignment) if lane == i) for i in range(lanes))
        for assignment in itertools.product(range(lanes), repeat=len(costs))
    )
    worst = max(sum(seconds[p.stem] for p in lane) for lane in dealt)
    assert worst <= (4 / 3 - 1 / (3 * lanes)) * best + 1e-6  # Graham's bound for longest-first
