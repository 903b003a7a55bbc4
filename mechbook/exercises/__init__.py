"""Exercises: ``check_<name>(fn)`` for every exercise of the book (see :mod:`.core`).

Each part's exercises live in their own module (:mod:`.part1`, :mod:`.part2`), a tuple
``EXERCISES`` of :class:`~mechbook.exercises.core.Exercise`; this package exports a
``check_<name>`` for each, so a notebook writes ``from mechbook.exercises import check_bigram_map``.
"""

from mechbook.exercises import part1, part2
from mechbook.exercises.core import Case, Diagnosis, Exercise, Outcome, checker, run

EXERCISES: dict[str, Exercise] = {ex.name: ex for ex in (*part1.EXERCISES, *part2.EXERCISES)}
"""Every exercise of the book by name."""

globals().update({f"check_{name}": checker(ex) for name, ex in EXERCISES.items()})


def __getattr__(name: str):
    raise AttributeError(
        f"mechbook.exercises has no {name!r}; the checks are: {', '.join(f'check_{n}' for n in EXERCISES)}"
    )


__all__ = [
    "EXERCISES",
    "Case",
    "Diagnosis",
    "Exercise",
    "Outcome",
    "checker",
    "run",
    *(f"check_{n}" for n in EXERCISES),
]
