"""entmax_alpha_backward: the gradient of α-entmax with respect to α, against the entmax package and 50-digit arithmetic."""

from __future__ import annotations

import entmax
import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from course_utils import entmax_alpha_backward, entmax_bisect


def package_alpha_grad(x: np.ndarray, g: np.ndarray, alpha: float, dim: int = -1) -> np.ndarray:
    """The entmax package's learnable-α gradient: one α per row, through autograd."""
    shape = list(x.shape)
    shape[dim] = 1
    a = torch.full(shape, alpha, dtype=torch.float64, requires_grad=True)
    entmax.entmax_bisect(torch.from_numpy(x), a, dim=dim, n_iter=60).backward(torch.from_numpy(g))
    return a.grad.squeeze(dim).numpy()


def mp_entmax(row: list[float], alpha) -> list:
    z = [mpmath.mpf(v) * (alpha - 1) for v in row]
    power = 1 / (alpha - 1)
    tau = mpmath.findroot(lambda t: sum(max(zi - t, 0) ** power for zi in z) - 1, (max(z) - 1, max(z)), solver="bisect")
    return [max(zi - tau, 0) ** power for zi in z]


@pytest.mark.parametrize("alpha", [1.05, 1.3, 1.5, 2.0, 2.7])
def test_alpha_gradient_equals_the_entmax_package_with_alpha_requiring_grad(alpha):
    gen = np.random.default_rng(1)
    x, g = gen.normal(scale=2.0, size=(4, 7)), gen.normal(size=(4, 7))
    ours = entmax_alpha_backward(g, entmax_bisect(x, alpha), alpha)
    # Each side's tau is within its bisection interval (2^-50 here, 2^-60 in the package) plus rounding,
    # γ_(n+2)·(M + 1) ≈ 1e-14 in float64 for these scores; the weights then move by at most dtau/(alpha - 1) (20 at
    # alpha = 1.05), and the gradient, a few sums of p^(2-alpha)·log p-like terms times |g|, by under 1e-11:
    # (rtol 1e-8, atol 1e-10) covers that, while a wrong formula misses by 1e-3 or more.
    np.testing.assert_allclose(ours, package_alpha_grad(x, g, alpha), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_alpha_gradient_works_along_any_axis(axis):
    gen = np.random.default_rng(2)
    x, g = gen.normal(size=(3, 4, 5)), gen.normal(size=(3, 4, 5))
    ours = entmax_alpha_backward(g, entmax_bisect(x, 1.6, axis=axis), 1.6, axis=axis)
    # The bound of the test above (bisection interval and rounding of tau, through 1/(alpha - 1)).
    np.testing.assert_allclose(ours, package_alpha_grad(x, g, 1.6, dim=axis), rtol=1e-8, atol=1e-10)


def test_alpha_gradient_equals_a_50_digit_central_difference():
    row, g = [0.2, 1.4, -0.5, 0.9, 0.6], [1.0, -2.0, 0.5, 3.0, -1.0]
    mpmath.mp.dps = 50
    try:
        alpha, h = mpmath.mpf("1.7"), mpmath.mpf("1e-20")
        plus, minus = mp_entmax(row, alpha + h), mp_entmax(row, alpha - h)
        expected = float(sum(gi * (a - b) / (2 * h) for gi, a, b in zip(g, plus, minus)))
    finally:
        mpmath.mp.dps = 15
    ours = float(entmax_alpha_backward(g, entmax_bisect(row, 1.7), 1.7))
    assert ours == pytest.approx(expected, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, 6, elements=st.floats(-5, 5)), st.floats(1.1, 3.0))
def test_alpha_gradient_of_a_constant_upstream_gradient_is_zero(x, alpha):
    # The weights always sum to 1, so an upstream gradient of all ones sees no change in alpha.
    p = entmax_bisect(x, alpha)
    assert abs(float(entmax_alpha_backward(np.ones(6), p, alpha))) < 1e-9


def test_a_one_hot_row_has_zero_alpha_gradient():
    p = entmax_bisect([5.0, 0.0, -1.0], 2.0)
    np.testing.assert_array_equal(p, [1.0, 0.0, 0.0])
    assert entmax_alpha_backward([3.0, -1.0, 2.0], p, 2.0) == 0.0


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_alpha_at_or_below_one_is_rejected_by_name(alpha):
    with pytest.raises(ValueError, match="alpha"):
        entmax_alpha_backward([1.0, 0.0], [0.5, 0.5], alpha)


def test_bad_inputs_are_rejected_by_name():
    with pytest.raises(TypeError, match="alpha"):
        entmax_alpha_backward([1.0, 0.0], [0.5, 0.5], "1.5")
    with pytest.raises(ValueError, match="grad_output and probs"):
        entmax_alpha_backward([1.0, 0.0, 0.0], [0.5, 0.5], 1.5)
    with pytest.raises(ValueError, match="axis"):
        entmax_alpha_backward([1.0, 0.0], [0.5, 0.5], 1.5, axis=3)
