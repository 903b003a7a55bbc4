"""Part II's exercises (chapters 7-11): one :class:`~mechbook.exercises.core.Exercise` each."""

from __future__ import annotations

from mechbook.exercises.core import Exercise

EXERCISES: tuple[Exercise, ...] = ()
"""Every exercise of the part, in page order; ``mechbook.exercises`` exports a ``check_<name>`` for each."""
