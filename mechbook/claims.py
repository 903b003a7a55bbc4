"""The book's claims as data: each is decided once, by one rule, and every sentence that asserts it
is generated from that one entry.

A :class:`Claim` is either one of the papers' claims (``source="paper"``, with the paper's number
as text) or one of the book's own readings that a sentence asserts (``source="book"``). It names the
measure it rests on, one :class:`Rule` (a threshold and a direction) and ``read``, which takes the
value from the chapter's readings. Each part's library declares its claims in one table per
chapter (``mechbook.leading_terms.claims``, ``mechbook.pythia.claims``,
``mechbook.assign_add.claims``: ``TABLES``, by notebook stem); :func:`evidence` reads every claim
of a table from the chapter's readings into :class:`Evidence`: the values on the rebuild (one per
seed, where seeded) and on the authors' released run (where one exists), or why the claim is
untested in this profile; :func:`section_prose` shows a section's. :meth:`Evidence.verdict` applies the rule;
:meth:`Evidence.sentence` is the one sentence that states it; :func:`record_claims` stores every
piece as a ``claim.<id>`` record, which the ledger page (``book/appendix/ledger``) and
``python -m mechbook check`` read back from the executed chapters.

The word helpers (:func:`compare`, :func:`change`, :func:`order`, :func:`difference`) derive
"higher", "falls" or "before" from the numbers as they are printed (the printed digits, not the
values behind them), so a sentence can never contradict the numbers it prints. Used by every
chapter module.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Generic, Literal, TypeVar

Verdict = Literal["reproduced", "partly", "released run only", "not reproduced", "confounded", "untested"]
VERDICTS: tuple[Verdict, ...] = (
    "reproduced",
    "partly",
    "released run only",
    "not reproduced",
    "confounded",
    "untested",
)
"""Every verdict, in the order the ledger counts them. ``released run only``: the claim fails on every
seed of the rebuild and holds on the authors' released run; ``confounded``: a value was measured but
the profile's budget confounds it (the reason says how), so it decides nothing."""
OPS = (">=", ">", "<=", "<", "==")
RECORD_PREFIX = "claim."
_PRECISION = re.compile(r"^(.*\.)(\d+)([eEfFgG%]?)$")
R = TypeVar("R")


def _plain(value: Any) -> Any:
    """A numpy or torch scalar as the Python number it holds (so rules and formats treat a
    ``np.float32`` as the float it is); anything else unchanged."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def fmt(value: Any, spec: str = ".3g") -> str:
    """``value`` as the book prints it: ``format(value, spec)`` for numbers (``",d"`` rounds first,
    so a float step prints as an integer), ``"yes"``/``"no"`` for booleans, ``"none"`` for None."""
    value = _plain(value)
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if _is_number(value):
        if spec.endswith("d"):
            return format(round(value), spec) if math.isfinite(value) else str(value)
        return format(value, spec)
    return str(value)


def printed(value: float, spec: str = ".3g") -> Decimal:
    """The number a reader sees when ``value`` prints with ``spec`` (``fmt``), exactly: ``"1,234"``
    is 1234, ``"45.0%"`` is 0.45, ``"-0.000"`` is 0. The word helpers compare these."""
    text = fmt(value, spec).strip().replace(",", "").replace("_", "")
    scale = Decimal(1)
    if text.endswith("%"):
        text, scale = text[:-1], Decimal("0.01")
    try:
        number = Decimal(text) * scale
    except InvalidOperation:
        number = Decimal("nan")
    if number.is_nan():
        raise ValueError(f"{value!r} does not print as a number with spec {spec!r}; a comparison needs two numbers")
    return number


def finer(spec: str, digits: int = 6) -> Iterator[str]:
    """``spec``, then the same format with 1 to ``digits`` more digits (``".2f"``, ``".3f"``, ...);
    only ``spec`` when it has no precision (``",d"``)."""
    yield spec
    match = _PRECISION.match(spec)
    if match:
        head, precision, kind = match.groups()
        for extra in range(1, digits + 1):
            yield f"{head}{int(precision) + extra}{kind}"


def id_prefix(chapter: str) -> str:
    """What every claim id of ``chapter`` (a notebook stem) starts with: ``"ch08."`` for
    ``08_training_dynamics``, ``"intro."`` for ``intro``."""
    return f"ch{chapter[:2]}." if chapter[:2].isdigit() else f"{chapter}."


@dataclass(frozen=True)
class Rule:
    """When a claim holds: ``value <op> threshold``. ``op`` is one of ``>=``, ``>``, ``<=``, ``<``
    (numbers) or ``==`` (booleans, integers, strings). ``partly`` is an optional second threshold on
    the same side as the first, past which a value that misses ``threshold`` still counts as partly
    holding (for example ``>= 0.99``, partly from ``0.9``)."""

    op: str
    threshold: Any
    partly: float | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"op must be one of {', '.join(OPS)}, got {self.op!r}")
        if self.op != "==" and (not isinstance(self.threshold, (int, float)) or isinstance(self.threshold, bool)):
            raise TypeError(f"op {self.op!r} needs a numeric threshold, got {self.threshold!r}")
        if self.partly is not None:
            if self.op == "==":
                raise ValueError("a partly threshold needs an ordering op (>=, >, <=, <)")
            loose = self.partly <= self.threshold if self.op in (">=", ">") else self.partly >= self.threshold
            if not loose:
                raise ValueError(f"partly ({self.partly}) must be looser than the threshold ({self.threshold})")

    def _test(self, value: Any, threshold: Any) -> bool:
        if self.op == "==":
            return value == threshold
        if not _is_number(value) or math.isnan(value):
            return False
        return {
            ">=": value >= threshold,
            ">": value > threshold,
            "<=": value <= threshold,
            "<": value < threshold,
        }[self.op]

    def holds(self, value: Any) -> bool | None:
        """Whether ``value`` meets the rule; None when there is no value."""
        if value is None:
            return None
        return self._test(_plain(value), self.threshold)

    def partly_holds(self, value: Any) -> bool | None:
        """Whether ``value`` meets the looser ``partly`` threshold (False without one)."""
        if value is None:
            return None
        return self.partly is not None and self._test(_plain(value), self.partly)

    def shown(self, value: Any, spec: str = ".3g") -> str:
        """``value`` printed with ``spec``, or with as many more digits as it takes for the printed
        number to fall on the same side of the threshold (and of ``partly``) as the value (all of
        them, ``repr``, past six more): 0.8996 against ``≥ 0.9`` prints ``0.8996``, not ``0.90``,
        so the digits never contradict the verdict beside them."""
        value = _plain(value)
        if self.op == "==" or not _is_number(value) or not math.isfinite(value):
            return fmt(value, spec)
        for each in finer(spec):
            seen = float(printed(value, each))
            if self.holds(seen) == self.holds(value) and self.partly_holds(seen) == self.partly_holds(value):
                return fmt(value, each)
        return repr(float(value))

    def text(self, spec: str = ".3g") -> str:
        """The rule in words: ``"≥ 0.99"``, ``"= yes"``; a threshold prints with more digits than
        ``spec`` where ``spec`` would round it (0.995 with ``".2f"`` is ``0.995``)."""
        sym = {">=": "≥", ">": ">", "<=": "≤", "<": "<", "==": "="}[self.op]
        out = f"{sym} {self._exact(self.threshold, spec)}"
        if self.partly is not None:
            out += f" (partly from {self._exact(self.partly, spec)})"
        return out

    @staticmethod
    def _exact(threshold: Any, spec: str) -> str:
        if not _is_number(threshold) or not math.isfinite(threshold):
            return fmt(threshold, spec)
        for each in finer(spec):
            if printed(threshold, each) == Decimal(repr(threshold)):
                return fmt(threshold, each)
        return repr(threshold)


@dataclass(frozen=True)
class Claim:
    """One claim of a paper or of the book, decided by one rule.

    ``id`` is unique in the book (``"<chapter>.<name>"``, letters, digits, ``_`` and ``.``);
    ``chapter`` the notebook stem that shows it; ``statement`` the claim in words, as a
    declarative sentence ("The binding jump comes near step 5,300"); ``measure`` what its value is,
    with units ("step of the binding jump (chapter 8's rule)"); ``paper`` the paper's number as the
    paper gives it (None for the book's own readings); ``section`` the MyST label of the section
    that shows it (the ledger links there; prefix labels ``chNN-``); ``spec`` the format its
    values print with (:func:`fmt`); ``basis`` ``"specification"`` for a check that the task as
    built is the paper's specification (chapter 7's), not a result, which the ledger counts apart;
    ``read`` takes the claim's :class:`Measured` values from the chapter's readings (the object the
    part's library gathers for the page; :func:`evidence`, :func:`per_run`); ``unmeasured`` why
    the claim is untested where ``read`` gives no value at all (None: a seed without a value
    counts against the claim, as always); ``setting`` where a paper's claim is decided in a
    setting other than the paper's own, what differs and why (None: the paper's setting, with at
    most its sizes, the vocabulary, the context and the data, scaled as the profile states; a
    book's reading has none)."""

    id: str
    chapter: str
    source: Literal["paper", "book"]
    statement: str
    measure: str
    rule: Rule
    paper: str | None = None
    section: str | None = None
    spec: str = ".3g"
    basis: Literal["result", "specification"] = "result"
    read: Callable[[Any], Measured] | None = field(default=None, compare=False, repr=False)
    unmeasured: str | None = None
    setting: str | None = None

    def __post_init__(self) -> None:
        if not self.id or not self.id.replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"claim id {self.id!r} must be letters, digits, '_' or '.'")
        if self.source not in ("paper", "book"):
            raise ValueError(f"source must be 'paper' or 'book', got {self.source!r}")
        if self.basis not in ("result", "specification"):
            raise ValueError(f"claim {self.id}: basis must be 'result' or 'specification', got {self.basis!r}")
        if self.source == "paper" and not self.paper:
            raise ValueError(f"claim {self.id}: a paper's claim needs the paper's number or words (paper=...)")
        if self.source == "book" and self.setting is not None:
            raise ValueError(
                f"claim {self.id}: setting= says how a paper's claim departs from the paper's setting; a book's reading has none"
            )
        prefix = id_prefix(self.chapter)
        if not self.id.startswith(prefix) or self.id == prefix:
            raise ValueError(f"claim id {self.id!r} must start with {prefix!r} (chapter {self.chapter!r})")

    def evidence(
        self,
        rebuild: Mapping[int | None, Any] | Sequence[Any] | Any = None,
        release: Any = None,
        untested: str | None = None,
        run: str | None = None,
        confounded: str | None = None,
    ) -> Evidence:
        """This claim's :class:`Evidence`: ``rebuild`` is ``{seed: value}`` (or a pandas Series
        indexed by seed), a sequence of values (seeds unknown; a list, tuple or 1-D array) or one
        value (None: no rebuild); ``release`` the released run's value
        (None: no released run); ``untested`` why no value could be measured in this profile
        (then both must be None); ``confounded`` why the values measured decide nothing here (the
        profile's budget confounds them): they are shown, and the verdict is ``confounded``.

        A None *inside* ``rebuild`` is a seed that gave no value (the event never came, say): it
        counts as a seed on which the claim does not hold, never as a seed left out."""
        if hasattr(rebuild, "to_dict"):  # a pandas Series indexed by seed
            rebuild = rebuild.to_dict()
        elif hasattr(rebuild, "tolist") and getattr(rebuild, "ndim", 0) == 1:  # a numpy array
            rebuild = rebuild.tolist()
        if isinstance(rebuild, Mapping):
            pairs = tuple((s, _plain(v)) for s, v in rebuild.items())
        elif isinstance(rebuild, (list, tuple)):
            pairs = tuple((None, _plain(v)) for v in rebuild)
        elif rebuild is None:
            pairs = ()
        else:
            pairs = ((None, _plain(rebuild)),)
        release = _plain(release)
        if untested is not None and (pairs or release is not None):
            raise ValueError(f"claim {self.id}: untested= says no value was measured, but values were given")
        return Evidence(self, pairs, release, untested, run, confounded)


@dataclass(frozen=True)
class Evidence:
    """A claim's values in one executed chapter and the verdict they give.

    ``rebuild`` holds ``(seed, value)`` pairs (seed None where the run is not seeded; value None
    where that seed gave none, which counts against the claim); ``release`` the released run's
    value (None where there is none); ``untested`` why the claim could not be measured here; ``run``
    which of the rebuild's runs the value was read on, in words, where a chapter has several and
    decides on one (chapters 3-5: the run that has trained); ``confounded`` why the values decide
    nothing in this profile (None: they decide)."""

    claim: Claim
    rebuild: tuple[tuple[int | None, Any], ...] = ()
    release: Any = None
    untested: str | None = None
    run: str | None = None
    confounded: str | None = None

    @property
    def values(self) -> list[Any]:
        """The rebuild's values (None where a seed gave none), in seed order as given."""
        return [v for _, v in self.rebuild]

    def _all(self) -> list[Any]:
        return self.values + ([self.release] if self.release is not None else [])

    @property
    def verdict(self) -> Verdict:
        """``reproduced`` when the rule holds for every value (each seed of the rebuild and the
        released run); ``partly`` when it holds for some values but not all, with at least one of
        the rebuild's (or, for a claim decided on one value alone, when that value meets the looser
        ``partly`` threshold); ``released run only`` when it fails on every seed of the rebuild and
        holds on the released run; ``not reproduced`` otherwise; ``confounded`` when the values
        decide nothing here; ``untested`` when there is no value. A seed without a value does not
        hold. A claim that fails on every seed never reads ``partly``."""
        values = self._all()
        if not values:
            return "untested"
        if self.confounded is not None:
            return "confounded"
        rule = self.claim.rule
        held = [bool(rule.holds(v)) for v in values]
        if all(held):
            return "reproduced"
        rebuild_held = [bool(rule.holds(v)) for v in self.values]
        if any(rebuild_held):
            return "partly"
        if self.values and self.release is not None and rule.holds(self.release):
            return "released run only"
        if len(values) == 1 and rule.partly_holds(values[0]):
            return "partly"
        return "not reproduced"

    def summary(self) -> str:
        """The rebuild's value in words: one value, or the median and range over seeds (and how
        many seeds gave no value), each printed on the side of the rule it falls on
        (:meth:`Rule.shown`)."""
        spec = self.claim.spec
        show = self.claim.rule.shown
        values = self.values
        if not values:
            return "not measured"
        if len(values) == 1:
            return show(values[0], spec)
        given = [v for v in values if v is not None]
        missing = len(values) - len(given)
        if not given:
            return f"no value on any of {len(values)} seeds"
        if all(_is_number(v) for v in given):
            if len(given) == 1:
                return f"{show(given[0], spec)} on 1 of {len(values)} seeds (no value on {missing})"
            med = statistics.median(given)
            span = f"{show(min(given), spec)} to {show(max(given), spec)}"
            if missing:
                return (
                    f"median {show(med, spec)} ({span} over {len(given)} of {len(values)} seeds; no value on {missing})"
                )
            return f"median {show(med, spec)} ({span} over {len(values)} seeds)"
        held = sum(bool(self.claim.rule.holds(v)) for v in values)
        return f"holds for {held} of {len(values)} seeds"

    def sentence(self) -> str:
        """The one Markdown sentence that states this claim's verdict with its numbers."""
        c = self.claim
        verdict = self.verdict
        parts = []
        if self.values:
            parts.append(f"this rebuild {self.summary()}")
        if self.release is not None:
            parts.append(f"the released run {c.rule.shown(self.release, c.spec)}")
        measured = "; ".join(parts)
        who = f"The paper ({c.paper})" if c.source == "paper" else "The book's reading"
        statement = c.statement.rstrip(". ")
        if verdict == "untested":
            why = (self.untested or "no value was measured in this profile").rstrip(". ")
            return f"**Untested here.** {who}: {statement}. Not measured: {why}."
        if verdict == "confounded":
            why = (self.confounded or "").rstrip(". ")
            return (
                f"**Untested here (confounded).** {who}: {statement}. {c.measure[:1].upper() + c.measure[1:]}: "
                f"{measured} (rule {c.rule.text(c.spec)}), but it decides nothing here: {why}."
            )
        word = self.word()
        word = word[:1].upper() + word[1:]
        counted = any(v is not None and not _is_number(v) for v in self.values)  # the summary counts the seeds
        where = f" {self.where()}" if verdict == "partly" and not counted else ""
        on = f" Decided on {self.run}." if self.run else ""
        return (
            f"**{word}.** {who}: {statement}. {c.measure[:1].upper() + c.measure[1:]}: {measured} "
            f"(rule {c.rule.text(c.spec)}).{where}{on}"
        )

    def word(self) -> str:
        """The verdict in the words of the claim's source, lower case: "reproduced", "partly
        reproduced", "not reproduced by the rebuild; holds on the released run", "not reproduced"
        for the paper's claims, "holds", "holds in part", "does not hold in the rebuild; holds on
        the released run", "does not hold" for the book's readings, "untested (confounded)",
        "untested"."""
        if self.verdict in ("untested", "confounded"):
            return {"untested": "untested", "confounded": "untested (confounded)"}[self.verdict]
        if self.claim.source == "book":
            return {
                "reproduced": "holds",
                "partly": "holds in part",
                "released run only": "does not hold in the rebuild; holds on the released run",
                "not reproduced": "does not hold",
            }[self.verdict]
        return {
            "reproduced": "reproduced",
            "partly": "partly reproduced",
            "released run only": "not reproduced by the rebuild; holds on the released run",
            "not reproduced": "not reproduced",
        }[self.verdict]

    def where(self) -> str:
        """Where the rule holds, per side: on how many of the rebuild's seeds (a seed without a
        value fails) and on the released run. Said after a ``partly`` verdict, so that it never
        hides a side on which the claim fails everywhere."""
        sides = []
        if self.values:
            n = len(self.values)
            k = sum(bool(self.claim.rule.holds(v)) for v in self.values if v is not None)
            if n == 1:
                sides.append("holds on this rebuild" if k else "fails on this rebuild")
            else:
                sides.append(
                    "holds on every seed of this rebuild"
                    if k == n
                    else "fails on every seed of this rebuild"
                    if k == 0
                    else f"holds on {k} of {n} seeds of this rebuild"
                )
        if self.release is not None:
            sides.append(
                "holds on the released run" if self.claim.rule.holds(self.release) else "fails on the released run"
            )
        if sides and not any(side.startswith("holds") for side in sides):
            values = [v for v in self._all() if v is not None]
            near = sum(bool(self.claim.rule.partly_holds(v)) for v in values)
            everywhere = " and ".join(side.removeprefix("fails ") for side in sides)
            if len(values) == 1:
                reach = "its value reaches" if near else "its value misses"
                return f"It fails {everywhere}; {reach} the partly threshold."
            return f"It fails {everywhere}; {near} of the {len(values)} values reach its partly threshold."
        return f"It {' and '.join(sides)}." if sides else ""

    def as_record(self) -> dict[str, Any]:
        """JSON-ready: everything the ledger needs, read back by :func:`read_claims`."""
        c = self.claim
        return {
            "id": c.id,
            "chapter": c.chapter,
            "source": c.source,
            "statement": c.statement,
            "measure": c.measure,
            "rule": c.rule.text(c.spec),
            "paper": c.paper,
            "section": c.section,
            "seeds": [s for s, _ in self.rebuild],
            "values": self.values,
            "release": self.release,
            "summary": self.summary(),
            "release_text": None if self.release is None else c.rule.shown(self.release, c.spec),
            "untested": self.untested,
            "confounded": self.confounded,
            "verdict": self.verdict,
            "basis": c.basis,
            "setting": c.setting,
            "run": self.run,
            "where": "" if self.verdict in ("untested", "confounded") else self.where(),
        }


@dataclass(frozen=True)
class Measured:
    """What a claim's ``read`` takes from a chapter's readings: ``rebuild`` as
    :meth:`Claim.evidence` takes it (``{seed: value}``, values, one value or None), ``release`` the
    released run's value (None: none), ``run`` which run decided it, in words (chapters 3-5), and
    ``untested`` why nothing could be measured (then no value), ``confounded`` why the values
    measured decide nothing in this profile (the verdict is then ``confounded``)."""

    rebuild: Any = None
    release: Any = None
    run: str | None = None
    untested: str | None = None
    confounded: str | None = None


@dataclass(frozen=True)
class Runs(Generic[R]):
    """One reading per run: ``seeds`` the rebuild's, by seed, and ``release`` the authors' released
    run's (None: none). What :func:`per_run` claims read (chapters 8-10)."""

    seeds: Mapping[int, R]
    release: R | None = None


def per_run(value: Callable[[Any], Any], release: bool = True, rebuild: bool = True) -> Callable[[Runs], Measured]:
    """A claim's ``read`` that takes ``value(reading)`` of each seed's reading and of the released
    run's (:class:`Runs`); ``release=False`` or ``rebuild=False`` leaves that side out."""

    def read(runs: Runs) -> Measured:
        seeds = {s: value(r) for s, r in runs.seeds.items()} if rebuild else {}
        return Measured(seeds, value(runs.release) if release and runs.release is not None else None)

    return read


def _has_value(m: Measured) -> bool:
    rebuild = m.rebuild
    if isinstance(rebuild, Mapping):
        rebuild = list(rebuild.values())
    if isinstance(rebuild, (list, tuple)):
        return m.release is not None or any(v is not None for v in rebuild)
    return m.release is not None or rebuild is not None


def evidence(table: Iterable[Claim], readings: Any) -> dict[str, Evidence]:
    """Every claim of ``table`` read from ``readings`` (each claim's ``read``) into its
    :class:`Evidence`, by id, in the table's order. A claim whose ``read`` gives no value at all
    is untested with its ``unmeasured`` reason, where it has one. The one evidence function of
    every chapter."""
    out: dict[str, Evidence] = {}
    for claim in table:
        if claim.read is None:
            raise ValueError(f"claim {claim.id} has no read: give it one in its part's claims table")
        m = claim.read(readings)
        if not isinstance(m, Measured):
            raise TypeError(f"claim {claim.id}: read must return Measured, got {type(m).__name__}")
        if m.untested is None and claim.unmeasured is not None and not _has_value(m):
            m = Measured(untested=claim.unmeasured)
        out[claim.id] = claim.evidence(m.rebuild, m.release, untested=m.untested, run=m.run, confounded=m.confounded)
    return out


def section_prose(ev: Mapping[str, Evidence], section: str) -> str:
    """The verdict sentences of the claims of ``ev`` shown in ``section`` (a MyST label, say
    ``"ch08-release"``), one bullet each, in the table's order. The one way a page shows its
    claims."""
    shown = [e.sentence() for e in ev.values() if e.claim.section == section]
    if not shown:
        raise KeyError(f"no claim of these is shown in section {section!r}: give the claims that section")
    return "\n".join(f"- {sentence}" for sentence in shown)


def by_id(table: Iterable[Claim]) -> dict[str, Claim]:
    """``table``'s claims by id (ids must be unique)."""
    out: dict[str, Claim] = {}
    for claim in table:
        if claim.id in out:
            raise ValueError(f"claim {claim.id} declared twice")
        out[claim.id] = claim
    return out


def record_claims(evidences: Iterable[Evidence]) -> dict[str, dict[str, Any]]:
    """``mechbook.record`` each evidence as ``claim.<id>`` (hidden outputs the ledger page and
    ``check`` read); returns the records. Ids must be unique."""
    from mechbook import record

    out: dict[str, dict[str, Any]] = {}
    for ev in evidences:
        name = RECORD_PREFIX + ev.claim.id
        if name in out:
            raise ValueError(f"claim {ev.claim.id} recorded twice")
        out[name] = record(name, ev.as_record())
    return out


def read_claims(records: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``claim.<id>`` records of a chapter's records, by id."""
    return {name[len(RECORD_PREFIX) :]: value for name, value in records.items() if name.startswith(RECORD_PREFIX)}


@dataclass(frozen=True)
class Words:
    """The words a comparison chooses between: ``more`` when the first value prints larger, ``less``
    when smaller, ``same`` when both print alike."""

    more: str = "higher than"
    less: str = "lower than"
    same: str = "the same as"


def _printed_pair(a: float, b: float, spec: str) -> tuple[Decimal, Decimal]:
    """Both numbers as printed (:func:`printed`) for the word helpers; one that is not a number
    (NaN, infinite) is a ``ValueError`` naming it, the other, and the usual cause."""
    try:
        return printed(a, spec), printed(b, spec)
    except ValueError:
        shown = [str(_plain(v)) for v in (a, b)]
        bad = [t for t, v in zip(shown, (a, b)) if not (_is_number(_plain(v)) and math.isfinite(_plain(v)))]
        raise ValueError(
            f"a sentence compares {shown[0]} with {shown[1]}, and {' and '.join(bad)} "
            f"{'is' if len(bad) == 1 else 'are'} not a number; a comparison needs two numbers. Usually a reading "
            "over no data (an empty pool, a corpus or run too small for the sizes asked): the failing line "
            "above names the prose, and its inputs need more data or the profile's sizes"
        ) from None


def compare(a: float, b: float, spec: str = ".3g", words: Words | None = None) -> str:
    """The word for ``a`` against ``b`` as both print with ``spec``: "higher than", "lower than" or
    "the same as" (or the given ``words``), decided on the printed numbers (:func:`printed`), so
    values that print alike (``0.000`` and ``-0.000`` included) are the same and the word never
    disagrees with the digits beside it."""
    words = words or Words()
    pa, pb = _printed_pair(a, b, spec)
    if pa == pb:
        return words.same
    return words.more if pa > pb else words.less


def change(
    before: float, after: float, spec: str = ".3g", up: str = "rises", down: str = "falls", flat: str = "stays"
) -> str:
    """The verb for a value going from ``before`` to ``after``, judged at print precision."""
    return compare(after, before, spec, Words(up, down, flat))


def order(
    step_a: int, step_b: int, before: str = "before", after: str = "after", same: str = "at the same step as"
) -> str:
    """Where ``step_a`` falls against ``step_b``: "before", "after" or "at the same step as"."""
    return compare(step_b, step_a, ",d", Words(before, after, same))


def difference(
    a: float, b: float, spec: str = ".3f", more: str = "higher", less: str = "lower", same: str = "no different"
) -> str:
    """``a`` against ``b`` as "0.003 higher", "0.002 lower" or "no different": the gap is printed
    ``a`` minus printed ``b`` (exact, :func:`printed`), printed with ``spec`` (without a ``+``
    sign), so the word and the gap agree with the digits beside them."""
    pa, pb = _printed_pair(a, b, spec)
    gap = pa - pb
    if gap == 0:
        return same
    return f"{fmt(float(abs(gap)), spec.removeprefix('+'))} {more if gap > 0 else less}"
