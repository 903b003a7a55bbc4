"""The scaled comparison of tests/helpers/tolerance.py: it lets through the rounding of another
summation order (also on an entry near cancellation, which an elementwise relative tolerance
fails), and still fails the errors a broken implementation makes."""

import math

import numpy as np
import pytest
import torch
from tolerance import EPS64, assert_close_scaled, scaled_bound

N = 256  # the inner dimension: the longest reduction behind each entry


def _operands(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A (8, N) and B (N, 8) of entries about 1e3, B's first column made orthogonal to A's first
    row, so the product's entry (0, 0) cancels to rounding level among entries about 1e7."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(8, N)) * 1e3
    b = rng.normal(size=(N, 8)) * 1e3
    b[:, 0] -= a[0] * (a[0] @ b[:, 0]) / (a[0] @ a[0])
    return a, b


def _sum_product(a: np.ndarray, b: np.ndarray, total) -> np.ndarray:
    """a @ b with each entry summed by ``total`` over the list of its products (IEEE float64 in
    Python: the same bits on every CPU)."""
    return np.array([[total([float(x) * float(y) for x, y in zip(row, col)]) for col in b.T] for row in a])


def _left_to_right(values: list[float]) -> float:
    s = 0.0
    for v in values:
        s += v
    return s


def test_rounding_of_another_summation_order_passes_also_near_cancellation():
    a, b = _operands()
    exact = _sum_product(a, b, math.fsum)  # the correctly rounded sum of the rounded products
    naive = _sum_product(a, b, _left_to_right)
    scale = np.abs(exact).max()
    assert abs(exact[0, 0]) < 1e-12 * scale < 1e-3 * np.abs(exact[1:]).min(), "entry (0, 0) cancels"
    assert not np.array_equal(naive, exact), "the two orders round differently"
    assert naive[0, 0] != exact[0, 0]
    with pytest.raises(AssertionError):  # an elementwise tolerance fails on the cancelled entry
        torch.testing.assert_close(torch.from_numpy(naive), torch.from_numpy(exact), rtol=1e-9, atol=1e-12)
    worst = assert_close_scaled(naive, exact, terms=N)
    assert 0 < worst <= 8 * N * EPS64 * scale
    # and so does BLAS's order (whatever this CPU's kernels), in torch and in numpy
    assert_close_scaled(torch.from_numpy(a) @ torch.from_numpy(b), exact, terms=N)
    assert_close_scaled(a @ b, torch.from_numpy(exact), terms=N)


@pytest.mark.parametrize(
    "broken",
    [
        pytest.param(lambda a, b, p: -p, id="wrong sign"),
        pytest.param(lambda a, b, p: np.where(np.arange(8) == 3, -p, p), id="wrong sign of one column"),
        pytest.param(lambda a, b, p: p * 1.001, id="a factor 1.001"),
        pytest.param(lambda a, b, p: p * (1 + 1e-9), id="a factor 1 + 1e-9"),
        pytest.param(lambda a, b, p: p.T, id="transposed"),
        pytest.param(lambda a, b, p: a[:, :-1] @ b[:-1], id="a dropped term"),
        pytest.param(lambda a, b, p: a @ np.roll(b, 1, axis=0), id="misaligned operands"),
    ],
)
def test_a_real_error_fails_under_the_same_bound(broken):
    a, b = _operands()  # (8, N) @ (N, 8): square, so a transposed product has the same shape
    exact = _sum_product(a, b, math.fsum)
    with pytest.raises(AssertionError, match="largest difference"):
        assert_close_scaled(broken(a, b, exact), exact, terms=N)


def test_the_epsilon_is_the_less_precise_operands():
    a, b = _operands(1)
    exact = torch.from_numpy(_sum_product(a, b, math.fsum))
    single = torch.from_numpy(a).float() @ torch.from_numpy(b).float()
    assert_close_scaled(single, exact, terms=N)  # float32's rounding, allowed by float32's epsilon
    with pytest.raises(AssertionError, match=r"eps\(float64\)"):  # the same numbers claimed as float64
        assert_close_scaled(single.double(), exact, terms=N)
    x = torch.linspace(-3, 3, 101, dtype=torch.float64)
    assert_close_scaled(x.bfloat16(), x)  # one rounding to bfloat16, within its epsilon
    assert scaled_bound(x.bfloat16(), x)[1]["dtype"] == "bfloat16"
    assert scaled_bound(x.half(), x.float())[1]["dtype"] == "float16"
    assert scaled_bound(torch.arange(3), torch.arange(3))[1]["eps"] == EPS64  # exact operands
    with pytest.raises(AssertionError):  # bfloat16 allows 8 x 2^-7 of the scale (6%), not more
        assert_close_scaled(x.bfloat16() * 1.1, x)


def test_floats_arrays_and_tensors_and_exact_shapes():
    assert_close_scaled(0.1 + 0.2, 0.3)
    assert_close_scaled(np.float32(0.1) + np.float32(0.2), 0.3)
    with pytest.raises(AssertionError):
        assert_close_scaled(0.3 + 1e-12, 0.3)
    assert_close_scaled([1.0, 2.0], np.array([1.0, 2.0]))
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close_scaled(np.ones(3), np.ones((1, 3)))
    with pytest.raises(AssertionError, match="shapes differ"):
        assert_close_scaled(torch.ones(3), 1.0)


def test_the_scale_is_the_whole_tensors_or_the_callers():
    expected = np.array([1e3, 1e-9])
    assert_close_scaled(expected + [0, 1e-13], expected)  # 1e-16 of the tensor's scale
    with pytest.raises(AssertionError):  # a zero expected is compared exactly unless a scale is given
        assert_close_scaled(np.array([1e-15, 0.0]), np.zeros(2))
    assert_close_scaled(np.array([1e-15, 0.0]), np.zeros(2), scale=10.0)
    with pytest.raises(ValueError):
        assert_close_scaled(1.0, 1.0, scale=-1.0)
    with pytest.raises(ValueError):
        assert_close_scaled(1.0, 1.0, terms=0)


def test_non_finite_entries_must_agree():
    inf, nan = float("inf"), float("nan")
    assert_close_scaled(np.array([1.0, inf]), np.array([1.0, inf]))
    with pytest.raises(AssertionError, match="non-finite"):
        assert_close_scaled(np.array([1.0, inf]), np.array([1.0, -inf]))
    with pytest.raises(AssertionError, match="non-finite"):
        assert_close_scaled(np.array([1.0, nan]), np.array([1.0, nan]))
    assert_close_scaled(np.array([1.0, nan]), np.array([1.0, nan]), equal_nan=True)
    with pytest.raises(AssertionError, match="non-finite"):
        assert_close_scaled(np.array([1.0, nan]), np.array([1.0, 2.0]), equal_nan=True)


def test_the_message_names_the_difference_where_and_the_bounds_parts():
    expected = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    actual = expected.clone()
    actual[1, 0] += 1e-6
    with pytest.raises(AssertionError) as info:
        assert_close_scaled(actual, expected, terms=16, msg="W_Q")
    text = str(info.value)
    for part in ("W_Q: largest difference 1e-06", "at index (1, 0)", "allowed 1.13687e-13", "c 8", "terms 16"):
        assert part in text, (part, text)
    assert "eps(float64) 2.22e-16" in text and "scale 4" in text and "1 of 4 entries" in text
