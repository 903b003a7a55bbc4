"""Helpers every chapter module may use: recording a chapter's headline numbers in one call."""

from __future__ import annotations

from typing import Any, Mapping


def record_all(numbers: Mapping[str, Any]) -> dict[str, Any]:
    """``mechbook.record`` every ``name: value`` of ``numbers`` (hidden outputs the tests and
    ``python -m mechbook check`` read back); returns the recorded values."""
    from mechbook import record

    return {name: record(name, value) for name, value in numbers.items()}
