"""Corpus statistics of Part I: the streaming form against the literal formulas, brute-force
counts, autograd, chunking and memory."""

from __future__ import annotations

import tracemalloc
from collections import Counter

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse
from tolerance import assert_close_scaled

from mechbook.leading_terms.stats import (
    _derived,
    _lag_offsets,
    _pair_sum,
    corpus_stats,
    literal_stats,
    softmax_jacobian_tensor,
    sparse_derived,
)

FIELDS = ("B", "Phi", "Sigma_B", "BPhi_T", "G", "Q", "P")


@st.composite
def corpora(draw):
    """(tokens, V): N in 1..4 sequences of T+1 tokens, T in 1..7, |V| in 2..6."""
    V = draw(st.integers(2, 6))
    T = draw(st.integers(1, 7))
    N = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**31 - 1))
    return np.random.default_rng(seed).integers(0, V, size=(N, T + 1)), V


def assert_rel_close(fast: np.ndarray, slow: np.ndarray, rel: float = 1e-10, atol: float = 1e-16) -> None:
    """max |fast - slow| <= rel * max |slow| + atol (atol covers statistics that are exactly zero,
    where both sides hold only float64 round-off)."""
    assert float(np.abs(fast - slow).max()) <= rel * float(np.abs(slow).max()) + atol, (fast, slow)


@settings(max_examples=60, deadline=None)
@given(corpora(), st.integers(1, 5))
def test_fast_equals_literal(corpus, chunk):
    tokens, V = corpus
    fast, slow = corpus_stats(tokens, V, chunk=chunk), literal_stats(tokens, V)
    for name in FIELDS:
        assert_rel_close(getattr(fast, name), getattr(slow, name))
    assert (fast.n_sequences, fast.context, fast.vocab_size) == (tokens.shape[0], tokens.shape[1] - 1, V)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.floats(0.0, 0.9), st.integers(0, 2**31 - 1))
def test_sparse_derived_equals_the_dense_products(V, density, seed):
    """Sigma_B, (B Phi)^T and G from a sparse C and alpha (B = C - alpha 1^T) equal the dense
    products of _derived, for any sparsity (empty rows and columns included). Entries are small
    multiples of 1/64 and Phi's columns sum to exactly zero (as the centring makes them), so the
    dense form holds no round-off of the dropped term alpha (1^T Phi) = 0."""
    rng = np.random.default_rng(seed)
    dense_C = np.where(rng.random((V, V)) < density, rng.integers(1, 64, (V, V)) / 64, 0.0)
    alpha = rng.integers(0, 64, V) / 64
    Phi = rng.integers(-8, 9, (V, V)) / 64
    Phi[-1] -= Phi.sum(0)
    Sigma_B, BPhi_T, G = sparse_derived(sparse.csr_array(dense_C), alpha, Phi)
    for fast, dense in zip((Sigma_B, BPhi_T, G), _derived(dense_C - alpha[:, None], Phi)):
        assert_rel_close(fast, dense, rel=1e-12, atol=0.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_lag_layout_lists_every_pair_once(T, n, seed):
    """_pair_sum writes left[t] + right[i] for every pair i <= t exactly once, lag d = t - i in
    segment d of _lag_offsets, i increasing within it."""
    rng = np.random.default_rng(seed)
    left, right = rng.integers(0, 1000, (n, T)) * 1000, rng.integers(0, 1000, (n, T))
    offsets = _lag_offsets(T)
    out = _pair_sum(left, right, offsets, np.empty((n, T * (T + 1) // 2), dtype=np.intp))
    for row in range(n):
        expected = [left[row, t] + right[row, t - d] for d in range(T) for t in range(d, T)]
        assert out[row].tolist() == expected
    assert offsets.tolist() == [sum(T - e for e in range(d)) for d in range(T + 1)]


def test_literal_matches_an_independent_loop_over_pairs():
    """Q and P by explicit Python loops over (n, t, i, j) with J_t[i, j] written out, not the J tensor."""
    rng = np.random.default_rng(3)
    V, T, N = 4, 5, 3
    tokens = rng.integers(0, V, size=(N, T + 1))
    s = literal_stats(tokens, V)
    G = s.G
    Q = np.zeros((V, V))
    P = np.zeros(T)
    for seq in tokens:
        for t in range(T):
            r = -np.full(V, 1.0 / V)
            r[seq[t + 1]] += 1.0
            for i in range(t + 1):
                total = 0.0
                for j in range(t + 1):
                    J = ((i == j) - 1.0 / (t + 1)) / (t + 1)
                    total += J * (G[seq[j]] @ r)
                Q[seq[t], seq[i]] += total
                P[t - i] += total
    assert_rel_close(s.Q, Q / (N * T))
    assert_rel_close(s.P, P / (N * T))


def test_B_and_Phi_match_brute_force_counts():
    rng = np.random.default_rng(0)
    V, T, N = 5, 6, 4
    tokens = rng.integers(0, V, size=(N, T + 1))
    pairs = Counter()
    current = Counter()
    ctx = np.zeros((V, V))
    for seq in tokens:
        for t in range(T):
            pairs[seq[t], seq[t + 1]] += 1
            current[seq[t]] += 1
            for j in range(t + 1):
                for c in range(V):
                    ctx[c, seq[j]] += ((seq[t + 1] == c) - 1.0 / V) / (t + 1)
    NT = N * T
    B = np.array([[pairs[a, c] / NT - current[a] / (NT * V) for c in range(V)] for a in range(V)])
    s = corpus_stats(tokens, V, chunk=3)
    assert_rel_close(s.B, B)
    assert_rel_close(s.Phi, ctx / NT)
    assert_rel_close(s.Sigma_B, B.T @ B)
    assert_rel_close(s.G, (B @ s.Phi).T @ B)


@settings(max_examples=30, deadline=None)
@given(corpora())
def test_invariants(corpus):
    """B's rows and Phi's columns sum to zero (the 1/|V| centring), so do Q's rows and P (the
    softmax Jacobian removes constants); Sigma_B is symmetric and G = Phi^T Sigma_B."""
    tokens, V = corpus
    s = corpus_stats(tokens, V)
    # Zero to rounding, and rounding of what: every statistic is a sum of frequencies (each at most
    # 1) accumulated over the N T (T+1) / 2 (position, earlier position) pairs, then centred and
    # summed over V (or T) entries. The allowance is c * (pairs + V) * eps64 (up to 2e-13 at N = 4,
    # T = 7); the largest sum measured over 600 corpora was 3.9e-16 (Phi), already 0.4 of the former
    # 1e-15, while a wrong centring leaves sums of the order of 1 / (N T |V|), 6e-3 or more here.
    N, T = tokens.shape[0], tokens.shape[1] - 1
    terms = N * T * (T + 1) // 2 + max(V, T)
    assert_close_scaled(s.B.sum(1), np.zeros(V), terms=terms, scale=1.0, msg="B's rows")
    assert_close_scaled(s.Phi.sum(0), np.zeros(V), terms=terms, scale=1.0, msg="Phi's columns")
    assert_close_scaled(s.Q.sum(1), np.zeros(V), terms=terms, scale=1.0, msg="Q's rows")
    assert_close_scaled(s.P.sum(), 0.0, terms=terms, scale=1.0, msg="P")
    # sparse products sum in another order per side: symmetric to rounding (V products of
    # frequencies per entry)
    assert_close_scaled(s.Sigma_B, s.Sigma_B.T, terms=V, scale=1.0, msg="Sigma_B")
    assert_rel_close(s.G, s.Phi.T @ s.Sigma_B, rel=1e-12)


def test_Q_and_P_are_minus_the_score_gradient_at_uniform_attention():
    """Autograd check of the key-query and position leading terms. One attention layer with W = 0,
    P = 0 (uniform causal attention) whose output path is V W_O = eps G: then
    -dL/dW = eps Q + O(eps^2) and -dL/dP = eps P + O(eps^2), L the mean cross-entropy."""
    rng = np.random.default_rng(1)
    V, T, N = 6, 8, 5
    tokens = rng.integers(0, V, size=(N, T + 1))
    s = corpus_stats(tokens, V)
    eps = 1e-6
    x = torch.tensor(tokens[:, :-1])
    y = torch.tensor(tokens[:, 1:])
    X = torch.nn.functional.one_hot(x, V).double()
    W = torch.zeros(V, V, dtype=torch.float64, requires_grad=True)
    P = torch.zeros(T, dtype=torch.float64, requires_grad=True)
    t_idx, j_idx = torch.meshgrid(torch.arange(T), torch.arange(T), indexing="ij")
    causal = j_idx <= t_idx
    scores = X @ W @ X.transpose(1, 2) + P[(t_idx - j_idx).clamp(min=0)]
    A = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1)
    logits = eps * (A @ X) @ torch.tensor(s.G)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    loss.backward()
    assert_rel_close(-W.grad.numpy() / eps, s.Q, rel=1e-4)
    assert_rel_close(-P.grad.numpy() / eps, s.P, rel=1e-4)


def test_streaming_is_independent_of_chunk_size():
    rng = np.random.default_rng(2)
    V, T, N = 7, 9, 11
    tokens = rng.integers(0, V, size=(N, T + 1))
    ref = corpus_stats(tokens, V, chunk=N)
    for chunk in (1, 2, 4, 100):
        other = corpus_stats(tokens, V, chunk=chunk)
        for name in FIELDS:
            assert_rel_close(getattr(other, name), getattr(ref, name), rel=1e-12)


def test_memory_does_not_grow_with_N():
    """Peak memory with 4x the sequences (same chunk) is about the same: nothing of size N is built."""
    rng = np.random.default_rng(4)
    V, T, chunk = 20, 48, 16
    small = rng.integers(0, V, size=(64, T + 1))
    large = rng.integers(0, V, size=(256, T + 1))
    corpus_stats(small, V, chunk=chunk)  # warm-up: lazy imports are not part of the computation
    peaks = []
    for tokens in (small, large):
        tracemalloc.start()
        corpus_stats(tokens, V, chunk=chunk)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.25 * peaks[0], peaks
    one_chunk_pairs = chunk * T * (T + 1) // 2 * 8
    assert peaks[1] < 20 * one_chunk_pairs, peaks


def test_jacobian_tensor_is_the_softmax_jacobian():
    """J[t] equals the autograd Jacobian of softmax at uniform scores over the first t+1 keys."""
    T = 5
    J = softmax_jacobian_tensor(T)
    for t in range(T):
        jac = torch.autograd.functional.jacobian(lambda z: torch.softmax(z, 0), torch.zeros(t + 1, dtype=torch.float64))
        assert np.allclose(J[t, : t + 1, : t + 1], jac.numpy(), atol=1e-15)
        assert not J[t, t + 1 :].any() and not J[t, :, t + 1 :].any()


@pytest.mark.parametrize(
    "tokens, V, message",
    [
        (np.zeros((3,), dtype=np.int64), 4, "(N, T+1) array"),
        (np.zeros((2, 1), dtype=np.int64), 4, "(N, T+1) array"),
        (np.zeros((0, 5), dtype=np.int64), 4, "(N, T+1) array"),
        (np.zeros((2, 3)), 4, "integer token ids"),
        (np.array([[0, 1, 4]]), 4, "is vocab_size right"),
        (np.array([[0, -1, 2]]), 4, "is vocab_size right"),
    ],
)
def test_bad_input_is_a_clear_error(tokens, V, message):
    for fn in (corpus_stats, literal_stats):
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
            fn(tokens, V)


def test_bad_chunk_is_a_clear_error():
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        corpus_stats(np.zeros((2, 3), dtype=np.int64), 2, chunk=0)


def test_benchmark_prints_one_json_line(capsys):
    """The benchmark's --quick run on Zipfian tokens ends with a JSON object whose forms agree
    (timings are not checked: they depend on the machine)."""
    import json

    from mechbook.benchmarks.leading_terms import main

    assert main(["--quick", "--source", "zipf", "--repeats", "1", "--literal-n", "1", "2"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["agree"] and result["data"] == "zipf" and result["max_rel_error_fast_vs_literal"] < 1e-10
    assert result["fast_seconds"] > 0 and min(result["literal_seconds_measured"].values()) > 0
    # a + b N with b >= 0 never falls below the time measured at the larger subset
    assert result["literal_seconds_extrapolated"] >= result["literal_seconds_measured"]["2"] - 1e-3
