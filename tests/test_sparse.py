"""sparsemax, 1.5-entmax and entmax_bisect: known values, properties, the entmax package, torch autograd, bad input."""

from __future__ import annotations

import math

import entmax
import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import entmax15, entmax15_backward, entmax_bisect, softmax, sparsemax, sparsemax_backward
from rounding_bounds import entmax_error

rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=7),
    elements=st.floats(-50, 50, allow_nan=False),
)
MAPPINGS = [sparsemax, entmax15, lambda x, axis=-1: entmax_bisect(x, 1.3, axis=axis)]


def mp_entmax(row: list[float], alpha: float) -> list[float]:
    """alpha-entmax of one row in 50-digit arithmetic: tau by mpmath's root finder."""
    mpmath.mp.dps = 50
    z = [mpmath.mpf(v) * (alpha - 1) for v in row]
    power = 1 / mpmath.mpf(alpha - 1)

    def excess(tau):
        return mpmath.fsum(max(zi - tau, 0) ** power for zi in z) - 1

    lo, hi = max(z) - 1, max(z)  # excess(lo) >= 0 > excess(hi)
    for _ in range(200):  # plain bisection, to far below float64 resolution
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) >= 0 else (lo, mid)
    return [float(max(zi - lo, 0) ** power) for zi in z]


# --- known values -------------------------------------------------------------


def test_sparsemax_known_value_from_the_paper():
    np.testing.assert_allclose(sparsemax([0.5, 0.0]), [0.75, 0.25], rtol=1e-15)


@pytest.mark.parametrize("row", [[0.5, 0.0], [1.0, 0.8, 0.1, -2.0], [3.0, 3.0, 2.5], [0.0, 0.0, 0.0, 0.0]])
@pytest.mark.parametrize("alpha", [1.5, 2.0, 1.25, 3.0])
def test_entmax_matches_a_50_digit_reference(row, alpha):
    expected = mp_entmax(row, alpha)
    np.testing.assert_allclose(entmax_bisect(row, alpha), expected, rtol=1e-10, atol=1e-14)
    if alpha == 1.5:
        np.testing.assert_allclose(entmax15(row), expected, rtol=1e-12, atol=1e-15)
    if alpha == 2.0:
        np.testing.assert_allclose(sparsemax(row), expected, rtol=1e-12, atol=1e-15)


def test_alpha_one_is_softmax_and_alpha_two_is_sparsemax():
    x = np.random.default_rng(0).normal(size=(5, 8))
    np.testing.assert_array_equal(entmax_bisect(x, alpha=1.0), softmax(x))
    np.testing.assert_allclose(entmax_bisect(x, alpha=2.0), sparsemax(x), atol=1e-12)


# --- properties ---------------------------------------------------------------


@pytest.mark.parametrize("f", MAPPINGS, ids=["sparsemax", "entmax15", "bisect1.3"])
@settings(max_examples=40, deadline=None)
@given(x=rows, axis=st.integers(0, 2))
def test_outputs_are_distributions_along_any_axis(f, x, axis):
    axis %= x.ndim
    p = f(x, axis=axis)
    assert p.shape == x.shape and p.dtype == x.dtype
    assert (p >= 0).all()
    np.testing.assert_allclose(p.sum(axis=axis), 1.0, rtol=1e-9)


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 9), elements=st.floats(-20, 20)))
def test_sort_based_equals_bisection(x):
    np.testing.assert_allclose(entmax15(x), entmax_bisect(x, 1.5), atol=1e-12)
    np.testing.assert_allclose(sparsemax(x), entmax_bisect(x, 2.0), atol=1e-12)


@pytest.mark.parametrize("f", MAPPINGS, ids=["sparsemax", "entmax15", "bisect1.3"])
@settings(max_examples=40, deadline=None)
@given(x=hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(-20, 20)), pad=st.integers(1, 4))
def test_padding_with_minus_inf_gives_exact_zeros_and_changes_nothing_else(f, x, pad):
    padded = np.concatenate([x, np.full(pad, -np.inf)])
    p = f(padded)
    assert (p[x.size:] == 0).all()
    np.testing.assert_allclose(p[: x.size], f(x), atol=1e-15)


@pytest.mark.parametrize("f", MAPPINGS, ids=["sparsemax", "entmax15", "bisect1.3"])
@settings(max_examples=30, deadline=None)
@given(x=hnp.arrays(np.float64, st.integers(1, 8), elements=st.floats(-20, 20)), c=st.floats(-1e3, 1e3))
def test_shift_invariance(f, x, c):
    np.testing.assert_allclose(f(x + c), f(x), atol=1e-9)


@pytest.mark.parametrize("f", MAPPINGS, ids=["sparsemax", "entmax15", "bisect1.3"])
def test_huge_spreads_and_ties_are_stable(f):
    np.testing.assert_array_equal(f(np.array([1e300, -1e300, 0.0])), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(f(np.array([5.0, 5.0, 5.0])), [1 / 3] * 3, rtol=1e-12)
    np.testing.assert_allclose(f(np.array([1e300, 1e300])), [0.5, 0.5], rtol=1e-12)


def test_sparsemax_is_sparse_where_softmax_is_not():
    x = np.array([2.0, 1.5, 0.0, -1.0])
    assert (sparsemax(x) == 0).sum() == 2 and (softmax(x) > 0).all()


@pytest.mark.parametrize("f", [sparsemax, entmax15], ids=["sparsemax", "entmax15"])
def test_conventions_follow_softmax(f):
    assert np.isnan(f([-np.inf, -np.inf])).all()
    assert np.isnan(f([np.nan, 1.0])).all()
    assert f(np.empty((3, 0))).shape == (3, 0)
    assert f(np.array([1.0, 2.0], dtype=np.float16)).dtype == np.float16
    assert f([1, 2]).dtype == np.float64
    x = np.array([[3.0, 1.0, -np.inf]])
    before = x.copy()
    f(x)
    np.testing.assert_array_equal(x, before)


# --- the entmax package and torch autograd -----------------------------------


@pytest.mark.parametrize("scale", [0.1, 1.0, 10.0, 1000.0])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_outputs_match_the_entmax_package(scale, axis):
    x = np.random.default_rng(int(scale * 10) + axis).normal(scale=scale, size=(3, 5, 6))
    t = torch.from_numpy(x)
    # float64 rounding (and the bisection's interval) of two implementations, each within entmax_error: from
    # about 1e-15 at scale 0.1 to 1e-11 at scale 1000 (1e-8 for 1.5-entmax's closed form), where the old 1e-14
    # held only because both sides sum in the same order; a wrong threshold misses by 1e-2 or more.
    np.testing.assert_allclose(sparsemax(x, axis=axis), entmax.sparsemax(t, dim=axis).numpy(), atol=2 * entmax_error(x, axis, 2.0))
    np.testing.assert_allclose(entmax15(x, axis=axis), entmax.entmax15(t, dim=axis).numpy(), atol=2 * entmax_error(x, axis, 1.5))
    np.testing.assert_allclose(
        entmax_bisect(x, 1.7, axis=axis), entmax.entmax_bisect(t, 1.7, dim=axis).numpy(), atol=2 * entmax_error(x, axis, 1.7)
    )


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_backward_functions_match_autograd_through_the_entmax_package(axis):
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(4, 5, 6, dtype=torch.float64, generator=gen) * 2
    g = torch.randn(4, 5, 6, dtype=torch.float64, generator=gen)
    for ours_forward, ours_backward, theirs in (
        (sparsemax, sparsemax_backward, entmax.sparsemax),
        (entmax15, entmax15_backward, entmax.entmax15),
    ):
        xt = x.clone().requires_grad_(True)
        theirs(xt, dim=axis).backward(g)
        p = ours_forward(x.numpy(), axis=axis)
        # float64 rounding: both sides share the support; s (1 or sqrt p) differs by the forward's error, about
        # 1e-15 for these scores of size 2 (entmax_error), and the sums by γ_n·max|g|: 1e-12 holds with a margin.
        np.testing.assert_allclose(ours_backward(g.numpy(), p, axis=axis), xt.grad.numpy(), atol=1e-12)


def test_sparsemax_jacobian_is_diag_s_minus_s_s_over_support_size():
    x = np.array([1.0, 0.8, 0.1, -2.0])
    p = sparsemax(x)
    s = (p > 0).astype(float)
    jac = np.diag(s) - np.outer(s, s) / s.sum()
    numeric = torch.autograd.functional.jacobian(lambda t: entmax.sparsemax(t, dim=-1), torch.from_numpy(x)).numpy()
    # Entries 0, 1 - 1/k and -1/k, one rounding each on either side (u = 2^-53): atol 1e-12 is far looser, and
    # still rejects a support of the wrong size (1/k changes by 1/12 or more).
    np.testing.assert_allclose(jac, numeric, atol=1e-12)
    np.testing.assert_allclose(np.stack([sparsemax_backward(e, p) for e in np.eye(4)]), jac, atol=1e-15)


# --- bad input ----------------------------------------------------------------


@pytest.mark.parametrize("alpha,error", [(0.5, ValueError), (-1.0, ValueError), (math.inf, TypeError), ("2", TypeError), (True, TypeError)])
def test_a_bad_alpha_is_rejected_by_name(alpha, error):
    with pytest.raises(error, match="alpha"):
        entmax_bisect([1.0, 2.0], alpha=alpha)


@pytest.mark.parametrize("n_iter,error", [(0, ValueError), (-5, ValueError), (2.5, TypeError)])
def test_a_bad_n_iter_is_rejected_by_name(n_iter, error):
    with pytest.raises(error, match="n_iter"):
        entmax_bisect([1.0, 2.0], n_iter=n_iter)


@pytest.mark.parametrize("f", [sparsemax, entmax15, entmax_bisect])
def test_bad_x_and_axis_are_rejected_by_name(f):
    with pytest.raises(TypeError, match=r"\bx\b"):
        f(["a", "b"])
    with pytest.raises(ValueError, match="axis"):
        f([1.0, 2.0], axis=1)


@pytest.mark.parametrize("f", [sparsemax_backward, entmax15_backward])
def test_backward_shapes_must_match(f):
    with pytest.raises(ValueError, match="grad_output and probs"):
        f(np.zeros(3), np.zeros(4))
