"""Every chapter of _toc.yml executes under papermill in the smoke profile (through the executor,
shared with the site tests) and its records meet book/thresholds/<stem>.yml, whose smoke bounds
admit every value measured over seeds (book/thresholds/<stem>.spread.yml)."""

from __future__ import annotations

import pytest

from mechbook.book.checks import check_spread, check_thresholds, load_spread, load_thresholds
from mechbook.book.toc import toc_notebooks
from mechbook.records import read_records

pytestmark = pytest.mark.book


def test_every_chapter_has_smoke_thresholds(root):
    for nb in toc_notebooks(root):
        smoke = load_thresholds(nb.stem, root).get("smoke")
        assert smoke, f"book/thresholds/{nb.stem}.yml needs at least one smoke bound"


def test_every_smoke_bound_admits_every_measured_seed(root):
    problems = []
    for nb in toc_notebooks(root):
        measured = load_spread(nb.stem, root).get("smoke")
        if measured:
            bounds = load_thresholds(nb.stem, root).get("smoke", {})
            problems += [f"{nb.stem}: {p}" for p in check_spread(bounds, measured)]
    assert not problems, "bounds inside the seed spread (`python -m mechbook spread`):\n" + "\n".join(problems)


def test_chapters_execute_and_meet_smoke_thresholds(smoke_book, root):
    _, results = smoke_book
    failed = [f"{r.source}: {r.failure}" for r in results if r.failure]
    assert not failed, "chapters failed:\n" + "\n".join(failed)
    problems = []
    for r in results:
        bounds = load_thresholds(r.source.stem, root)["smoke"]
        problems += [f"{r.source.stem}: {p}" for p in check_thresholds(read_records(r.output), bounds)]
    assert not problems, "\n".join(problems)
