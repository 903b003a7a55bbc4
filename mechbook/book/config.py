"""What the executor is asked to do (:class:`ExecuteConfig`) and what one chapter gave
(:class:`ChapterResult`); shared by :mod:`~mechbook.book.run`, :mod:`~mechbook.book.site` and
:mod:`~mechbook.book.checks`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from mechbook.book.toc import ROOT
from mechbook.profiles import PROFILES
from mechbook.validation import at_least, check_fields

#: Names the harness sets itself, refused as knobs (``--knob profile=cpu`` would run one profile
#: while the console, the executed notebook, its cost and ``check`` file it under another), each
#: with the option that sets it.
HARNESS_NAMES: dict[str, str] = {
    "profile": "--profile P",
    "only": "--only STEM",
    "force": "--force",
    "lanes": "--lanes N",
    "lane": "--lanes N",
    "cell_timeout": "--cell-timeout SECONDS",
    "seeds": "spread --seeds N",
    "debug": "--debug (or MECHBOOK_DEBUG=1)",
}


@dataclasses.dataclass(frozen=True)
class ExecuteConfig:
    """What to execute: a profile, optionally only some chapters (by notebook stem), and knobs
    injected into every chosen chapter's parameters cell (``(name, value)`` pairs). Executed
    notebooks go to ``_build/<out_subdir>/<profile>/`` (the seed spread keeps its runs apart).
    With ``lanes`` > 1 the chapters are dealt to that many processes by their expected cost
    (:func:`mechbook.book.run.lanes_of`); ``lane`` names the lane such a process runs. ``cell_timeout`` is no
    limit by default (a long training cell runs as long as it needs; a dead kernel ends the
    chapter by its death, not by a clock); ``--cell-timeout SECONDS`` sets one."""

    profile: str = "cpu"
    only: tuple[str, ...] = ()
    root: Path = ROOT
    force: bool = False
    cell_timeout: int | None = None
    knobs: tuple[tuple[str, Any], ...] = ()
    out_subdir: str = "executed"
    lanes: int = 1
    lane: str | None = None

    def __post_init__(self):
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}: choose one of {', '.join(PROFILES)}")
        if isinstance(self.lanes, bool) or not isinstance(self.lanes, int) or self.lanes < 1:
            raise ValueError(f"lanes (--lanes N) must be a whole number of at least 1, got {self.lanes!r}")
        check_fields(self, cell_timeout=at_least(1, "seconds; leave it out for no limit"))
        for name, _ in self.knobs:
            if name in HARNESS_NAMES:
                raise ValueError(
                    f"--knob {name}=... is refused: {name} is set by the command line, not by a knob; "
                    f"use {HARNESS_NAMES[name]}"
                )

    def parameters(self) -> dict[str, Any]:
        """What papermill injects: ``profile`` and the knobs."""
        return {"profile": self.profile, **dict(self.knobs)}

    @property
    def out_dir(self) -> Path:
        """Where executed notebooks and the staged site sources go."""
        return self.root / "_build" / self.out_subdir / self.profile

    @property
    def running_dir(self) -> Path:
        """Where papermill writes a chapter while it runs (moved into :attr:`out_dir` at the end,
        so an interrupted run never leaves a half-written notebook among the executed ones)."""
        return self.root / "_build" / "running" / self.out_subdir / self.profile


@dataclasses.dataclass(frozen=True)
class ChapterResult:
    """The outcome of one chapter: ``executed``, ``cached`` or ``failed`` (with the cell);
    ``computed`` when its kernel computed some cache entry (a cold run: it trained or analysed),
    False when everything it read came from the model cache."""

    source: Path
    output: Path
    status: str
    seconds: float
    failure: str | None = None
    computed: bool = False
