"""Benchmark: streaming corpus statistics against the literal formulas at the paper's scale.

``python -m mechbook bench leading-terms [--quick] [--source sample|zipf] [--literal-n 1 2]``

Times :func:`~mechbook.leading_terms.stats.corpus_stats` on N sequences (paper: |V| = 3000,
T = 200, N = 512) and :func:`~mechbook.leading_terms.stats.literal_stats` on small subsets of
them: the literal form builds dense one-hots and a T x T x T Jacobian tensor, so at full N it would
take minutes to hours. Its time is a + b n (a: the work shared by every n, above all the
products giving Sigma_B, (B Phi)^T and G, dense |V|^3 ones in the literal form; b: per sequence), fitted on two subset sizes and extrapolated to N (each time the best of ``repeats``
rounds in which the four timed runs take turns); the fast form's a and b come from
N/4 and N. The speed-up is reported in all (at N) and per sequence (b_literal / b_fast: the
speed-up as N grows, where the shared products no longer matter). Peak memory is measured with
``tracemalloc`` in separate runs (it slows allocation). Fast and literal must agree on the
largest subset. The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from mechbook.leading_terms.stats import CorpusStats, corpus_stats, literal_stats
from mechbook.validation import POSITIVE, SEED, at_least, check_fields, one_of

FIELDS = ("B", "Phi", "Sigma_B", "BPhi_T", "G", "Q", "P")


@dataclass(frozen=True)
class BenchConfig:
    """Sizes of one benchmark run."""

    vocab_size: int = 3000
    context: int = 200
    n_sequences: int = 512
    literal_n: tuple[int, int] = (2, 16)  # 14 sequences apart: their cost outweighs the noise in the shared seconds
    repeats: int = 2
    source: str = "sample"
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(
            self,
            vocab_size=at_least(2),
            context=POSITIVE,
            n_sequences=POSITIVE,
            literal_n=POSITIVE,
            repeats=POSITIVE,
            source=one_of(("sample", "zipf")),
            seed=SEED,
        )


QUICK = BenchConfig(vocab_size=300, context=48, n_sequences=128, literal_n=(4, 32))


def zipf_tokens(cfg: BenchConfig) -> np.ndarray:
    """(N, T+1) tokens drawn i.i.d. from a Zipf law p(k) ~ 1/(k+1) over the vocabulary."""
    p = 1.0 / np.arange(1, cfg.vocab_size + 1)
    rng = np.random.default_rng(cfg.seed)
    return rng.choice(cfg.vocab_size, size=(cfg.n_sequences, cfg.context + 1), p=p / p.sum())


def sample_tokens(cfg: BenchConfig) -> np.ndarray | None:
    """The first N sequences of the TinyStories text (natural tokenizer, <unk> policy), or None
    when there is no text or it has fewer than N sequences of T+1 tokens."""
    from mechbook.data import load_stories
    from mechbook.leading_terms.tokenize import NaturalTokenizer, make_sequences

    try:
        stories = load_stories()
    except (OSError, RuntimeError):
        return None
    tok = NaturalTokenizer.fit(stories, cfg.vocab_size, unk=True)
    tokens = make_sequences(stories, tok, cfg.context, "unk").tokens
    return tokens[: cfg.n_sequences] if len(tokens) >= cfg.n_sequences else None


def _best_times(repeats: int, calls: list[tuple[Callable[..., CorpusStats], tuple]]) -> tuple[list[float], CorpusStats]:
    """The fastest wall time of each call over ``repeats`` rounds, and the last call's result.

    Within a round the calls take turns, so that load from other processes on a shared machine
    falls on all of them alike; the fastest time is the least disturbed one."""
    best = [float("inf")] * len(calls)
    for _ in range(repeats):
        for k, (fn, args) in enumerate(calls):
            start = time.perf_counter()
            out = fn(*args)
            best[k] = min(best[k], time.perf_counter() - start)
    return best, out


def _peak_mib(fn, *args, **kwargs) -> float:
    tracemalloc.start()
    try:
        fn(*args, **kwargs)
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def max_rel_error(a: CorpusStats, b: CorpusStats) -> float:
    """max over fields of max |a - b| / max |b|."""
    return max(float(np.abs(getattr(a, f) - getattr(b, f)).max() / np.abs(getattr(b, f)).max()) for f in FIELDS)


def run(cfg: BenchConfig) -> dict:
    """Time and measure both forms; return the measurements as a JSON-ready dict."""
    tokens = sample_tokens(cfg) if cfg.source == "sample" else None
    source = "tinystories-natural-unk" if tokens is not None else "zipf"
    if tokens is None:
        tokens = zipf_tokens(cfg)
    V, N = cfg.vocab_size, cfg.n_sequences
    corpus_stats(tokens[:1], V)  # warm-up: lazy imports and BLAS threads
    literal_stats(tokens[:1], V)
    n1, n2 = cfg.literal_n
    calls = [
        (corpus_stats, (tokens[: max(N // 4, 1)], V)),
        (corpus_stats, (tokens, V)),
        (literal_stats, (tokens[:n1], V)),
        (literal_stats, (tokens[:n2], V)),
    ]
    (fast_quarter, fast_s, t1, t2), lit2 = _best_times(cfg.repeats, calls)
    fast_peak = _peak_mib(corpus_stats, tokens, V)
    lit_peak = _peak_mib(literal_stats, tokens[:n2], V)
    fast_shared, fast_per_seq = _line(max(N // 4, 1), fast_quarter, N, fast_s)
    lit_shared, lit_per_seq = _line(n1, t1, n2, t2)
    literal_s = lit_shared + lit_per_seq * N
    agree = max_rel_error(corpus_stats(tokens[:n2], V), lit2)
    return {
        "benchmark": "leading-terms",
        "config": asdict(cfg),
        "data": source,
        "n_sequences": N,
        "fast_seconds": round(fast_s, 3),
        "fast_peak_mib": round(fast_peak, 1),
        "literal_seconds_measured": {str(n1): round(t1, 3), str(n2): round(t2, 3)},
        "literal_seconds_extrapolated": round(literal_s, 3),
        "literal_extrapolation": f"linear in N from subsets of {n1} and {n2} sequences: a + b N",
        "literal_peak_mib_at_subset": round(lit_peak, 1),
        "literal_jacobian_tensor_mib": round(cfg.context**3 * 8 / 2**20, 1),
        "literal_one_hots_mib_at_N": round(2 * N * cfg.context * V * 8 / 2**20, 1),
        "speedup": round(literal_s / fast_s, 1),
        "shared_seconds": {"fast": round(fast_shared, 3), "literal": round(lit_shared, 3)},
        "ms_per_sequence": {"fast": round(1e3 * fast_per_seq, 3), "literal": round(1e3 * lit_per_seq, 3)},
        "speedup_per_sequence": round(lit_per_seq / fast_per_seq, 1) if fast_per_seq > 0 else None,
        "max_rel_error_fast_vs_literal": agree,
        "agree": agree < 1e-10,
    }


def _line(n1: int, t1: float, n2: int, t2: float) -> tuple[float, float]:
    """(a, b) of the line t = a + b n through two timings, clipped at zero (timing noise)."""
    b = max((t2 - t1) / (n2 - n1), 0.0) if n2 > n1 else 0.0
    return max(t2 - b * n2, 0.0), b


def main(argv: list[str]) -> int:
    """Command line entry: prints a summary, then one JSON line; exit 1 if the forms disagree."""
    parser = argparse.ArgumentParser(
        prog="python -m mechbook bench leading-terms", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"small sizes (|V|={QUICK.vocab_size}, T={QUICK.context}, N={QUICK.n_sequences})",
    )
    parser.add_argument(
        "--source",
        choices=("sample", "zipf"),
        default="sample",
        help="TinyStories text (falls back to zipf) or Zipfian tokens",
    )
    parser.add_argument(
        "--literal-n", type=int, nargs=2, metavar=("N1", "N2"), help="subset sizes for the literal timing"
    )
    parser.add_argument("--repeats", type=int, help="runs per timing, the fastest is kept (default 2)")
    args = parser.parse_args(argv)
    cfg = QUICK if args.quick else BenchConfig()
    cfg = BenchConfig(
        **{
            **asdict(cfg),
            "source": args.source,
            "literal_n": tuple(args.literal_n or cfg.literal_n),
            "repeats": cfg.repeats if args.repeats is None else args.repeats,
        }
    )
    if cfg.repeats < 1:
        parser.error("--repeats must be >= 1")
    if not 0 < cfg.literal_n[0] < cfg.literal_n[1] <= cfg.n_sequences:
        parser.error(f"--literal-n needs 0 < N1 < N2 <= {cfg.n_sequences}")
    result = run(cfg)
    print(
        f"|V|={cfg.vocab_size} T={cfg.context} N={cfg.n_sequences} ({result['data']}): fast {result['fast_seconds']} s, "
        f"peak {result['fast_peak_mib']} MiB; literal ~{result['literal_seconds_extrapolated']} s extrapolated "
        f"({result['literal_extrapolation']}), peak {result['literal_peak_mib_at_subset']} MiB at {cfg.literal_n[1]} "
        f"sequences ({result['literal_one_hots_mib_at_N']} MiB of one-hots at N); speed-up {result['speedup']}x in all, {result['speedup_per_sequence'] or 'n/a '}x per sequence "
        f"(ms/sequence {result['ms_per_sequence']}, shared work (maps and products) s {result['shared_seconds']}); "
        f"max relative difference {result['max_rel_error_fast_vs_literal']:.1e}"
    )
    print(json.dumps(result))
    return 0 if result["agree"] else 1
