"""When a claim's verdict over seeds moves as a draw, not as a regression.

A claim decided over seeds holds on ``k`` of its ``n`` seeds. Another machine (other kernels) or
another set of seeds trains other bits, so every seed is a new draw and ``k`` moves with it; a
verdict that needs every seed to hold (``reproduced``) or none (``not reproduced``) can then change
although no code did. ``python -m mechbook check`` and the ledger page (``book/appendix/ledger``)
use this module to tell that apart from a broken chapter:

- ``book/thresholds/claims.yml`` stores, beside each such verdict, its count when it was recorded
  (:class:`Stored`: ``{verdict: partly, holds: 4, of: 6, release: true}``);
- a recorded verdict that differs from the stored one is a **draw** when the released run (whose
  bits do not move) still holds or fails as stored and the new count, ``j`` of ``m`` seeds, is
  inside the central 95% of what a fresh draw of ``m`` seeds gives, given ``k`` of ``n`` measured
  (:func:`predictive_tails`, the beta-binomial predictive of a uniform prior on the chance that a
  seed holds). ``m`` may differ from ``n``: a claim read over the seeds that bound counts as many
  seeds as bound, and how many bind is itself a draw (4 of 6 on one CPU, 5 of 6 on another). 6 of 6 recorded admits 3 to 6 of 6; 0 of 6 recorded fails on 4 or more: six
  seeds measure a seed's chance of holding only roughly.

Claims over fewer than two seeds, or over values that are not seeds (learning rates, tokenizers),
have no draw: their verdict must be as stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mechbook.claims import Claim

#: Each tail of the predictive distribution outside which a new count is no draw (so 95% in all).
DRAW_TAIL = 0.025


@dataclass(frozen=True)
class Tally:
    """A claim's count over seeds: its rule ``holds`` on that many of ``of`` seeds; ``release``
    whether it holds on the released run (None: no released run)."""

    holds: int
    of: int
    release: bool | None = None

    def text(self) -> str:
        """``"4 of 6 seeds"`` (and ``", the released run holds"`` where there is one)."""
        side = "" if self.release is None else f", the released run {'holds' if self.release else 'fails'}"
        return f"{self.holds} of {self.of} seeds{side}"


@dataclass(frozen=True)
class Stored:
    """One entry of a profile's section of ``claims.yml``: the verdict, and its :class:`Tally`
    where the claim is decided over seeds (None for the plain ``claim_id: verdict`` form)."""

    verdict: str
    tally: Tally | None = None

    @classmethod
    def parse(cls, entry: Any) -> Stored:
        """``"partly"`` or ``{verdict: partly, holds: 4, of: 6, release: true}``."""
        if isinstance(entry, Mapping):
            tally = None
            if "holds" in entry and "of" in entry:
                tally = Tally(int(entry["holds"]), int(entry["of"]), entry.get("release"))
            return cls(str(entry.get("verdict")), tally)
        return cls(str(entry))

    def as_yaml(self) -> str | dict[str, Any]:
        """The entry as written to ``claims.yml`` (the plain verdict where there is no tally)."""
        if self.tally is None:
            return self.verdict
        out: dict[str, Any] = {"verdict": self.verdict, "holds": self.tally.holds, "of": self.tally.of}
        if self.tally.release is not None:
            out["release"] = self.tally.release
        return out


def tally(claim: Claim, seeds: Sequence[Any], values: Sequence[Any], release: Any = None) -> Tally | None:
    """On how many of the seeds ``claim``'s rule holds (a seed without a value fails), for a claim
    over at least two seeds, each value keyed by an integer seed; None for any other claim."""
    if len(values) < 2 or len(seeds) != len(values) or not all(isinstance(s, int) for s in seeds):
        return None
    held = sum(bool(claim.rule.holds(v)) for v in values if v is not None)
    return Tally(held, len(values), None if release is None else bool(claim.rule.holds(release)))


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def predictive(k: int, n: int, m: int) -> list[float]:
    """P(K = j), j = 0..m: the chance that the rule holds on j of m fresh seeds when it held on
    ``k`` of ``n`` measured ones (beta-binomial with a = k + 1, b = n - k + 1)."""
    if not 0 <= k <= n or m < 0:
        raise ValueError(f"a count needs 0 <= holds <= of and m >= 0, got {k} of {n}, m = {m}")
    a, b = k + 1, n - k + 1
    return [
        math.exp(
            math.lgamma(m + 1)
            - math.lgamma(j + 1)
            - math.lgamma(m - j + 1)
            + _log_beta(j + a, m - j + b)
            - _log_beta(a, b)
        )
        for j in range(m + 1)
    ]


def predictive_tails(k: int, n: int, j: int, m: int | None = None) -> tuple[float, float]:
    """``(P(K <= j), P(K >= j))`` for K, the count on ``m`` fresh seeds (default ``n``), given ``k`` of ``n``."""
    p = predictive(k, n, n if m is None else m)
    return sum(p[: j + 1]), sum(p[j:])


def is_draw(stored: Stored, now: Tally | None) -> bool:
    """Whether a verdict that differs from ``stored`` is within the draw that ``stored``'s count
    measured (the rule in this module's docstring)."""
    before = stored.tally
    if before is None or now is None or now.release != before.release:
        return False
    low, high = predictive_tails(before.holds, before.of, now.holds, now.of)
    return min(low, high) >= DRAW_TAIL
