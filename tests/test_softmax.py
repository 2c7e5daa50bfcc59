"""Tests for course_utils.softmax: known values, properties, torch agreement, conventions, bad input."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import log_softmax, logsumexp, naive_softmax, softmax
from rounding_bounds import exponent_error, unit_roundoff

mpmath.mp.dps = 50
INF, NAN = math.inf, math.nan


def mp_softmax(row: list[float]) -> list[float]:
    """Softmax of one row in 50-digit arithmetic: the independent reference."""
    exps = [mpmath.exp(mpmath.mpf(v)) for v in row]
    total = mpmath.fsum(exps)
    return [float(e / total) for e in exps]


def mp_logsumexp(row: list[float]) -> mpmath.mpf:
    return mpmath.log(mpmath.fsum(mpmath.exp(mpmath.mpf(v)) for v in row))


def mp_log_softmax(row: list[float]) -> list[float]:
    lse = mp_logsumexp(row)
    return [float(mpmath.mpf(v) - lse) for v in row]


ROWS = [
    [1.0, 0.0, 1.0],
    [2.0, 4.0, 4.0],
    [2.0, 2.0, 3.0],
    [10.0, 0.0, -5.0],
    [1.0, 1.0, 10.0],
    [0.0, -40.0],
    [700.0, 699.0, -3.0],
    [-1000.0, -1000.5],
]

finite_rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
    elements=st.floats(-1e3, 1e3, allow_nan=False),
)


# --- known values -------------------------------------------------------------


@pytest.mark.parametrize("row", ROWS)
def test_softmax_matches_50_digit_reference(row):
    np.testing.assert_allclose(softmax(row), mp_softmax(row), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("row", ROWS)
def test_log_softmax_matches_50_digit_reference(row):
    np.testing.assert_allclose(log_softmax(row), mp_log_softmax(row), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("row", ROWS)
def test_logsumexp_matches_50_digit_reference(row):
    assert logsumexp(row) == pytest.approx(float(mp_logsumexp(row)), rel=1e-15, abs=1e-300)


def test_logsumexp_keeps_the_tail_below_machine_epsilon():
    expected = float(mpmath.log1p(mpmath.exp(-40)))
    assert expected == pytest.approx(4.248354255291589e-18, rel=1e-12)
    assert logsumexp([0.0, -40.0]) == pytest.approx(expected, rel=1e-14)


def test_log_softmax_of_a_huge_gap_is_exact():
    np.testing.assert_array_equal(log_softmax([0.0, -1000.0]), [0.0, -1000.0])


def test_softmax_survives_exp_1000_where_the_textbook_form_gives_nan():
    np.testing.assert_array_equal(softmax([1000.0, 0.0]), [1.0, 0.0])
    naive = naive_softmax([1000.0, 0.0])
    assert math.isnan(naive[0])


def test_naive_softmax_agrees_with_softmax_on_moderate_scores():
    x = np.array([[1.0, 0.0, 1.0], [2.0, 4.0, 4.0]])
    np.testing.assert_allclose(naive_softmax(x), softmax(x), rtol=1e-15)


def test_naive_softmax_does_not_warn(recwarn):
    naive_softmax(np.array([1000.0, -1000.0, 0.0]))
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_temperature_zero_limit_is_argmax_with_ties_split():
    np.testing.assert_array_equal(softmax([2.0, 5.0, 5.0, 1.0], temperature=1e-3), [0.0, 0.5, 0.5, 0.0])


def test_temperature_infinity_limit_is_uniform():
    np.testing.assert_allclose(softmax([10.0, 0.0, -5.0], temperature=1e12), [1 / 3] * 3, rtol=1e-10)


def test_temperature_divides_the_scores():
    x = np.array([10.0, 0.0, -5.0])
    np.testing.assert_allclose(softmax(x, temperature=8.0), mp_softmax(list(x / 8.0)), rtol=1e-14)
    np.testing.assert_allclose(log_softmax(x, temperature=8.0), mp_log_softmax(list(x / 8.0)), rtol=1e-14)


# --- properties ---------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(finite_rows, st.integers(-3, 2))
def test_softmax_is_a_distribution_along_any_axis(x, axis):
    axis = axis % x.ndim
    p = softmax(x, axis=axis)
    assert p.shape == x.shape and p.dtype == x.dtype
    assert (p >= 0).all() and (p <= 1).all()
    np.testing.assert_allclose(p.sum(axis=axis), 1.0, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(finite_rows, st.floats(-1e3, 1e3))
def test_softmax_is_shift_invariant(x, c):
    np.testing.assert_allclose(softmax(x + c), softmax(x), rtol=1e-9, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.integers(2, 8), elements=st.floats(-50, 50), unique=True))
def test_softmax_preserves_order(x):
    p = softmax(x)
    i, j = np.argmax(x), np.argmin(x)
    assert p[i] >= p[j]
    order = np.argsort(x)
    assert (np.diff(p[order]) >= 0).all()


def test_softmax_is_not_scale_invariant():
    x = np.array([1.0, 0.0, 1.0])
    assert not np.allclose(softmax(2 * x), softmax(x))


@settings(max_examples=60, deadline=None)
@given(finite_rows)
def test_log_softmax_is_the_log_of_softmax_and_logsumexp_its_normalizer(x):
    np.testing.assert_allclose(np.exp(log_softmax(x)), softmax(x), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(log_softmax(x), x - logsumexp(x, keepdims=True), rtol=1e-12, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(finite_rows, st.floats(0.05, 20.0))
def test_temperature_equals_dividing_the_scores(x, t):
    np.testing.assert_allclose(softmax(x, temperature=t), softmax(x / t), rtol=1e-9, atol=1e-300)


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, st.integers(2, 6), elements=st.floats(-5, 5)), st.floats(0.1, 10.0))
def test_lower_temperature_puts_more_weight_on_the_argmax(x, t):
    top = int(np.argmax(x))
    assert softmax(x, temperature=t / 2)[top] >= softmax(x, temperature=t)[top] - 1e-12


# --- torch agreement ----------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_the_family_matches_torch(dtype, axis):
    x = np.random.default_rng(0).normal(scale=5.0, size=(3, 4, 5)).astype(dtype)
    t = torch.from_numpy(x)
    # Rounding of two implementations in this dtype: every exponent x_j - lse within exponent_error on each side,
    # so the weights agree to 2ε relative, and the log-weights and lses to 2ε absolute plus their last rounding,
    # u·|value| each. 2ε is about 5e-14 in float64 and 6e-5 in float32 here, where (1e-5, 1e-6) held by this
    # CPU's rounding; a missing shift, a wrong axis or a wrong base misses by 1e-2 or more.
    eps, u = exponent_error(x, axis), unit_roundoff(x)
    weights, logs = {"rtol": 2 * eps, "atol": np.finfo(dtype).tiny}, {"rtol": 2 * u, "atol": 2 * eps}
    np.testing.assert_allclose(softmax(x, axis=axis), torch.softmax(t, dim=axis).numpy(), **weights)
    np.testing.assert_allclose(log_softmax(x, axis=axis), torch.log_softmax(t, dim=axis).numpy(), **logs)
    np.testing.assert_allclose(logsumexp(x, axis=axis), torch.logsumexp(t, dim=axis).numpy(), **logs)
    np.testing.assert_allclose(
        logsumexp(x, axis=axis, keepdims=True), torch.logsumexp(t, dim=axis, keepdim=True).numpy(), **logs
    )


SPECIAL_ROWS = [
    [-INF, -INF],
    [INF, 0.0],
    [INF, -INF],
    [INF, INF],
    [NAN, 0.0],
    [0.0, -INF],
    [-INF, 1.0, -INF],
]


@pytest.mark.parametrize("row", SPECIAL_ROWS, ids=str)
def test_nan_and_infinities_follow_torch(row):
    t = torch.tensor(row, dtype=torch.float64)
    # Exact: every result here is nan, ±inf, 0, 1 or a finite score itself, which no rounding can move.
    np.testing.assert_array_equal(softmax(row), torch.softmax(t, -1).numpy())
    np.testing.assert_array_equal(log_softmax(row), torch.log_softmax(t, -1).numpy())
    np.testing.assert_array_equal(logsumexp(row), torch.logsumexp(t, -1).numpy())


def test_a_row_of_all_minus_inf_gives_nan_like_torch():
    assert np.isnan(softmax([-INF, -INF, -INF])).all()


# --- conventions --------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.longdouble])
def test_float_dtype_is_kept(dtype):
    x = np.array([1.0, 2.0, 3.0], dtype=dtype)
    for f in (softmax, naive_softmax, log_softmax):
        assert f(x).dtype == dtype
    assert np.asarray(logsumexp(x)).dtype == dtype


@pytest.mark.parametrize("x", [[1, 2, 3], np.array([1, 2, 3], dtype=np.int8), np.array([True, False])])
def test_int_bool_and_list_inputs_become_float64(x):
    assert softmax(x).dtype == np.float64
    assert log_softmax(x).dtype == np.float64


def test_float16_softmax_of_4096_equal_scores_is_exactly_2_to_the_minus_12():
    p = softmax(np.zeros(4096, dtype=np.float16))
    assert p.dtype == np.float16
    assert (p == np.float16(2.0**-12)).all()


def test_axis_none_normalizes_over_all_elements():
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(softmax(x, axis=None), softmax(x.ravel()).reshape(2, 3))
    assert softmax(x, axis=None).sum() == pytest.approx(1.0)
    assert logsumexp(x, axis=None) == pytest.approx(float(mp_logsumexp(list(x.ravel()))))
    assert logsumexp(x, axis=None, keepdims=True).shape == (1, 1)


def test_a_scalar_is_a_single_certain_outcome():
    assert softmax(3.0) == 1.0 and softmax(3.0).shape == ()
    assert log_softmax(3.0) == 0.0
    assert logsumexp(3.0) == 3.0


@pytest.mark.parametrize("shape,axis", [((0,), -1), ((3, 0), -1), ((0, 3), -1), ((0, 3), 0), ((2, 0, 4), 1)])
def test_empty_input_gives_empty_output(shape, axis):
    x = np.empty(shape)
    for f in (softmax, naive_softmax, log_softmax):
        assert f(x, axis=axis).shape == shape
    expected = torch.logsumexp(torch.empty(shape, dtype=torch.float64), dim=axis).numpy()
    np.testing.assert_array_equal(logsumexp(x, axis=axis), expected)  # exact: empty, or -inf for an empty sum


def test_logsumexp_of_nothing_is_minus_inf():
    assert logsumexp([]) == -INF


@pytest.mark.parametrize("f", [softmax, naive_softmax, log_softmax, logsumexp])
def test_the_input_is_never_mutated(f):
    x = np.array([[3.0, 1.0, -2.0], [1000.0, 0.0, -INF]])
    before = x.copy()
    f(x)
    np.testing.assert_array_equal(x, before)


def test_results_do_not_share_memory_with_the_input():
    x = np.array([0.5, 0.25])
    assert not np.shares_memory(softmax(x), x)
    assert not np.shares_memory(log_softmax(x), x)


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize("f", [softmax, naive_softmax, log_softmax, logsumexp])
@pytest.mark.parametrize(
    "bad,error",
    [
        (["a", "b"], TypeError),
        (np.array([1 + 2j]), TypeError),
        (np.array([object()]), TypeError),
        ([[1.0, 2.0], [3.0]], ValueError),
    ],
)
def test_non_real_input_is_rejected_naming_x(f, bad, error):
    with pytest.raises(error, match=r"\bx\b"):
        f(bad)


@pytest.mark.parametrize("f", [softmax, naive_softmax, log_softmax, logsumexp])
@pytest.mark.parametrize("axis,error", [(2, ValueError), (-3, ValueError), (1.0, TypeError), ("0", TypeError), (True, TypeError)])
def test_bad_axis_is_rejected_naming_axis(f, axis, error):
    with pytest.raises(error, match="axis"):
        f(np.zeros((2, 3)), axis=axis)


@pytest.mark.parametrize("f", [softmax, log_softmax])
@pytest.mark.parametrize(
    "t,error", [(0.0, ValueError), (-1.0, ValueError), (INF, ValueError), (NAN, ValueError), ("2", TypeError), (None, TypeError), (True, TypeError)]
)
def test_bad_temperature_is_rejected_naming_temperature(f, t, error):
    with pytest.raises(error, match="temperature"):
        f([1.0, 2.0], temperature=t)


def test_keepdims_must_be_a_bool():
    with pytest.raises(TypeError, match="keepdims"):
        logsumexp([1.0, 2.0], keepdims="yes")
