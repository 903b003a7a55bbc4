"""The command line: ``python -m mechbook execute|build|check|claims|spread|exercises|bench|hashes|cache|sweep``
(see README.md).

- ``execute --profile P [--only STEM ...] [--force] [--lanes N] [--cell-timeout SECONDS]``: run
  chapters with papermill (the book's parts side by side in N processes; default one per core;
  no cell time limit unless given).
- ``build --profile P [--only STEM ...]``: execute, then build the site into ``_build/html``.
- ``check --profile P [--only STEM ...]``: executed chapters' records vs book/thresholds, those
  bounds vs the measured seed spreads, and claim verdicts vs book/thresholds/claims.yml.
- ``claims --profile P [--only STEM ...] [--write]``: each executed chapter's claims and
  verdicts against book/thresholds/claims.yml; ``--write`` stores the verdicts there.
- ``spread --profile P --seeds N [--only STEM ...]``: each chapter once per seed, the records'
  spread written to ``book/thresholds/<stem>.spread.yml``.
- ``exercises [--out DIR]``: the exercise form of every chapter notebook (solutions replaced by
  stubs, checks kept), written to ``DIR/<part>/<stem>.ipynb`` (default ``_build/exercises``).
- ``bench NAME [args]``: run ``mechbook.benchmarks.<NAME>``.
- ``hashes [--write] [--trace]``: a few short runs' weight hashes against those committed for this
  CPU model, and which other CPU models agree; ``--trace`` names the first operation whose bits
  differ from another CPU's committed trace (:mod:`mechbook.hashes`).
- ``cache export PATH [--profile P]`` / ``cache import PATH``: bundle or install trained models.
- ``sweep --profile P --chapter 8|11 --seeds N --executor slurm|local [--partition P --gpus-per-job G
  --max-parallel N --timeout-min M --folder DIR --dry-run]``: chapter 8's or 11's runs as submitit
  jobs writing into the shared cache (:mod:`mechbook.assign_add.jobs`).

A failure ends in one line on stderr that says what is wrong and what to do, and a non-zero exit
(1; 130 when interrupted, with the one "interrupted at ..." line); ``--debug`` (anywhere on the
line) or ``MECHBOOK_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from mechbook.profiles import PROFILES


def _knob(text: str) -> tuple[str, object]:
    """``NAME=VALUE`` with VALUE read by :func:`mechbook.arguments.knob_value` (``10`` an int,
    ``0.5`` a float, ``[1, 2]`` a list, ``merge`` a string)."""
    from mechbook.arguments import knob_value

    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r}: write a knob as NAME=VALUE, e.g. steps=100")
    try:
        return name, knob_value(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"--knob {name}: {error}") from None


def _seconds(text: str) -> int:
    """A ``--cell-timeout`` value: a whole number of seconds of at least 1."""
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a whole number of seconds of at least 1 (leave --cell-timeout out for no limit)"
        )
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mechbook", description="Build, check and benchmark the book.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks (also MECHBOOK_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("execute", "run the chapters with papermill into _build/executed/<profile>"),
        ("build", "execute the chapters, then build the HTML site into _build/html"),
        ("check", "compare the executed chapters' records and claim verdicts with book/thresholds"),
        ("spread", "execute each chapter once per seed and write book/thresholds/<stem>.spread.yml"),
        ("claims", "list the executed chapters' claims and verdicts against book/thresholds/claims.yml"),
    ):
        cmd = sub.add_parser(name, help=text, description=text)
        cmd.add_argument("--profile", choices=PROFILES, default="cpu")
        cmd.add_argument(
            "--only",
            nargs="+",
            action="extend",
            default=[],
            metavar="STEM",
            help="only these chapters (notebook stems); may be repeated",
        )
        if name == "claims":
            cmd.add_argument(
                "--write",
                action="store_true",
                help="store the executed chapters' verdicts in book/thresholds/claims.yml (what check compares with)",
            )
            cmd.add_argument("--root", default=None, help=argparse.SUPPRESS)
        if name == "spread":
            cmd.add_argument("--seeds", type=int, default=5, metavar="N", help="seeds 0..N-1 (default 5)")
        if name in ("execute", "build"):
            cmd.add_argument(
                "--lanes",
                type=int,
                default=None,
                metavar="N",
                help="run the book's parts side by side in up to N processes (default: one per core; 1: in order)",
            )
            cmd.add_argument(
                "--cell-timeout",
                type=_seconds,
                default=None,
                metavar="SECONDS",
                help="stop a chapter whose cell runs longer than this (default: no limit)",
            )
            cmd.add_argument("--lane", default=None, help=argparse.SUPPRESS)
            cmd.add_argument("--results", default=None, help=argparse.SUPPRESS)
            cmd.add_argument("--root", default=None, help=argparse.SUPPRESS)
        if name not in ("check", "claims"):
            cmd.add_argument("--force", action="store_true", help="re-execute even when the cached run is valid")
            cmd.add_argument(
                "--knob",
                action="append",
                default=[],
                type=_knob,
                metavar="NAME=VALUE",
                help="inject a knob into every chosen chapter's parameters cell (VALUE: a number, a list, true/false or a word)",
            )
    exercises = sub.add_parser(
        "exercises",
        help="write every chapter's exercise form (solutions replaced by stubs) into _build/exercises",
        description="Write the exercise form of every chapter notebook: each ### BEGIN SOLUTION ... "
        "### END SOLUTION region replaced by a NotImplementedError stub, the checks kept, outputs cleared.",
    )
    exercises.add_argument("--out", default=None, metavar="DIR", help="where to write (default _build/exercises)")
    sub.add_parser("pdf", help="print the built site (_build/html) into one PDF, _build/html/_downloads/mechbook.pdf")
    hashes = sub.add_parser("hashes", help="short runs' weight hashes against those committed (same bits on this CPU?)")
    hashes.add_argument(
        "--write", action="store_true", help="store this CPU model's hashes in mechbook/book/weight_hashes.json"
    )
    hashes.add_argument(
        "--trace",
        action="store_true",
        help="also trace every op of the first steps and name the first one whose bits differ from each committed trace",
    )
    bench = sub.add_parser("bench", help="run a benchmark: mechbook/benchmarks/<NAME>.py")
    bench.add_argument("name")
    bench.add_argument("args", nargs=argparse.REMAINDER)
    cache = sub.add_parser(
        "cache", help="export PATH [--profile P] | import PATH: bundle the trained models and statistics"
    )
    cache.add_argument("args", nargs=argparse.REMAINDER)
    sweep = sub.add_parser(
        "sweep",
        help="train chapter 8's seeds or chapter 11's sweep points as jobs (Slurm or local) into the shared cache",
        description="Plan, submit and follow the runs of a chapter as submitit jobs; each writes its run into "
        "$MECHBOOK_CACHE, where the chapter finds it.",
    )
    sweep.add_argument("--profile", choices=PROFILES, default="paper")
    sweep.add_argument("--chapter", type=int, choices=(8, 11), required=True)
    sweep.add_argument("--seeds", type=int, default=1, metavar="N", help="seeds per run, the chapter's own first")
    sweep.add_argument("--executor", choices=("slurm", "local"), required=True)
    sweep.add_argument("--partition", default=None, help="Slurm partition")
    sweep.add_argument("--gpus-per-job", type=int, default=0, metavar="G", help="0: CPU jobs (default)")
    sweep.add_argument("--max-parallel", type=int, default=8, metavar="N", help="jobs running at once")
    sweep.add_argument("--timeout-min", type=int, default=60, metavar="M", help="a job's time limit (minutes)")
    sweep.add_argument("--folder", default=None, help="submitit's folder: scripts, pickles, logs (shared on a cluster)")
    sweep.add_argument("--dry-run", action="store_true", help="print the jobs and the submission script only")
    return parser


DEBUG_ENV = "MECHBOOK_DEBUG"
INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit status is non-zero when a chapter, a check or a build fails.
    Errors are one line each (:data:`DEBUG_ENV` or ``--debug``: the traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    if debug:
        os.environ[DEBUG_ENV] = "1"  # lanes and kernels started from here inherit it
    try:
        return _run(argv)
    except SystemExit as exc:
        if not isinstance(exc.code, str):  # argparse's usage errors (2) and plain exits
            raise
        print(f"error: {exc.code}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt as exc:
        if not debug:
            # the interrupted kernel's pending cell task is collected at exit, and asyncio logs its
            # DeadKernelError with a traceback ("Task exception was never retrieved"): the line
            # below already says where the run stopped
            logging.getLogger("asyncio").disabled = True
        text = str(exc).strip("'\"")
        print(text if "interrupted" in text else f"interrupted ({text or 'Ctrl-C'})", file=sys.stderr, flush=True)
        return INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        print(f"error: {one_line(exc)} (--debug shows the traceback)", file=sys.stderr, flush=True)
        return 1


def one_line(exc: BaseException) -> str:
    """``exc`` as one line: its message's first line, prefixed by its type unless the message is
    one of the book's sentences (:class:`ValueError`, :class:`TypeError`, :class:`OSError`
    subclasses with a message name what to fix)."""
    lines = str(exc).strip().splitlines()
    text = lines[0] if lines else ""
    if isinstance(exc, (ValueError, TypeError, OSError)) and text:
        return text
    return f"{type(exc).__name__}: {text}".rstrip(": ")


def _pdf(args: argparse.Namespace) -> int:
    """``pdf``: the built site printed into one PDF."""
    from mechbook.book.pdf import main as pdf_main

    return pdf_main()


def _hashes(args: argparse.Namespace) -> int:
    """``hashes``: short runs' weight hashes against those committed for this CPU model."""
    from mechbook.hashes import main as hashes_main

    return hashes_main(write=args.write, trace_ops=args.trace)


def _bench(args: argparse.Namespace) -> int:
    """``bench NAME``: one benchmark of mechbook/benchmarks."""
    from mechbook.benchmarks import run

    return run(args.name, args.args)


def _exercises(args: argparse.Namespace) -> int:
    """``exercises``: every chapter's exercise form, keeping a notebook the reader changed."""
    from pathlib import Path

    from mechbook.book.toc import ROOT, toc_files
    from mechbook.exercises.notebooks import write_exercises

    notebooks = [p for p in toc_files(ROOT) if p.suffix == ".ipynb"]
    out = Path(args.out) if args.out else ROOT / "_build" / "exercises"
    try:
        written = write_exercises(notebooks, ROOT, out)
    except OSError as exc:
        where = exc.filename or out
        print(
            f"error: cannot write the exercises to {where} ({exc.strerror or exc}): give a folder you can write to "
            "with --out DIR (no file there was left half written, and none you edited was replaced)",
            file=sys.stderr,
        )
        return 1
    for path, what in written:
        if what == "kept":
            fresh = path.with_suffix(".fresh.ipynb")
            print(f"kept {path}: it changed since the last run wrote it (your edits?); the fresh form is {fresh}")
        else:
            print(f"wrote {path}")
    return 0


def _cache(args: argparse.Namespace) -> int:
    """``cache export|import``: bundles of the trained models and statistics."""
    from mechbook.cache_bundle import main as cache_main

    return cache_main(args.args)


def _sweep(args: argparse.Namespace) -> int:
    """``sweep``: chapter 8's seeds or chapter 11's sweep points as jobs."""
    from pathlib import Path

    from mechbook.assign_add.jobs import Resources, sweep_command

    try:
        res = Resources(args.partition, args.gpus_per_job, args.max_parallel, args.timeout_min)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    folder = Path(args.folder) if args.folder else None
    return sweep_command(args.profile, args.chapter, args.seeds, args.executor, res, args.dry_run, folder)


def _execute_config(args: argparse.Namespace):
    """The :class:`~mechbook.book.config.ExecuteConfig` of an ``execute``, ``build``, ``check``,
    ``claims`` or ``spread`` command line."""
    from pathlib import Path

    from mechbook.arguments import knob_pairs
    from mechbook.book.config import ExecuteConfig
    from mechbook.device import available_cores

    lanes = getattr(args, "lanes", None)
    return ExecuteConfig(
        profile=args.profile,
        only=tuple(args.only),
        force=getattr(args, "force", False),
        cell_timeout=getattr(args, "cell_timeout", None),
        knobs=knob_pairs(getattr(args, "knob", [])),
        lanes=available_cores() if lanes is None else lanes,
        lane=getattr(args, "lane", None),
        **({"root": Path(args.root)} if getattr(args, "root", None) else {}),
    )


def _check(args: argparse.Namespace) -> int:
    """``check``: the executed chapters' records and verdicts against book/thresholds."""
    from mechbook.book import checks

    problems = checks.check_book(_execute_config(args))
    for line in problems:
        print(f"FAIL {line}")
    print("all records within thresholds, every claim as recorded" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def _claims(args: argparse.Namespace) -> int:
    """``claims``: the executed chapters' verdicts against claims.yml (``--write`` stores them)."""
    from mechbook.book.ledger import claims_command

    return claims_command(_execute_config(args), write=args.write)


def _spread(args: argparse.Namespace) -> int:
    """``spread``: each chapter once per seed, its records' spread written beside its bounds."""
    from mechbook.book.spread import spread_book

    _, failed = spread_book(_execute_config(args), args.seeds)
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


def _execute(args: argparse.Namespace) -> int:
    """``execute`` (and ``build``, which then builds the site): run the chapters with papermill."""
    from pathlib import Path

    from mechbook.book import run, site

    cfg = _execute_config(args)
    results = run.execute_book(cfg)
    if getattr(args, "results", None):
        run.write_results(Path(args.results), results)
    failed = run.failures(results)
    if args.command == "build":
        html = site.build_site(cfg)
        print(f"site: {html / 'index.html'} (serve it with: python -m http.server -d {html})")
    for line in failed:
        print(f"FAILED {line}", file=sys.stderr)
    return 1 if failed else 0


COMMANDS = {
    "execute": _execute,
    "build": _execute,
    "check": _check,
    "claims": _claims,
    "spread": _spread,
    "exercises": _exercises,
    "pdf": _pdf,
    "hashes": _hashes,
    "bench": _bench,
    "cache": _cache,
    "sweep": _sweep,
}
"""One function per subcommand of ``python -m mechbook``."""
NEEDS_ENVIRONMENT = ("execute", "build", "spread", "cache")
"""The subcommands that read the book's environment variables, checked before they start."""


def _run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command in NEEDS_ENVIRONMENT:
        from mechbook.book.environment import check_environment

        problems = check_environment()
        for line in problems:
            print(f"error: {line}", file=sys.stderr, flush=True)
        if problems:
            return 1
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
