"""The √d_k experiment's data: variances, exact tails, score rows and their statistics."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils.experiments import (
    RowStats,
    attention_row_stats,
    dot_product_tail,
    dot_product_variance,
    sample_dot_products,
    sample_scores,
)
from rounding_bounds import exponent_error, gamma, unit_roundoff

def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# --- sample_dot_products and dot_product_variance ---------------------------------


@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_the_variance_of_q_dot_k_is_d_k(d_k):
    # 8,000 samples: relative standard error about sqrt(2 / 8000) = 1.6%; allow 6 of them.
    assert dot_product_variance(d_k, 8_000, rng(d_k)) == pytest.approx(d_k, rel=0.1)


@pytest.mark.parametrize("d_k", [1, 16, 256])
def test_dividing_by_sqrt_d_k_gives_variance_one(d_k):
    assert dot_product_variance(d_k, 8_000, rng(d_k + 1), scale=math.sqrt(d_k)) == pytest.approx(1.0, rel=0.1)


@pytest.mark.parametrize("d_k", [2, 16, 256])
def test_unit_vectors_give_variance_one_over_d_k(d_k):
    assert dot_product_variance(d_k, 8_000, rng(d_k + 2), unit_norm=True) == pytest.approx(1 / d_k, rel=0.1)


def test_unit_vectors_in_one_dimension_are_plus_or_minus_one():
    np.testing.assert_array_equal(np.abs(sample_dot_products(1, 100, rng(), unit_norm=True)), 1.0)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_unit_vector_dot_products_obey_cauchy_schwarz(d_k, seed):
    assert np.abs(sample_dot_products(d_k, 50, rng(seed), unit_norm=True)).max() <= 1 + 1e-12


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64), st.floats(0.01, 100.0), st.integers(0, 2**32 - 1))
def test_scale_divides_the_variance_by_its_square_on_the_same_draws(d_k, scale, seed):
    plain = dot_product_variance(d_k, 40, rng(seed))
    assert dot_product_variance(d_k, 40, rng(seed), scale=scale) == pytest.approx(plain / scale**2, rel=1e-12)


def test_samples_are_q_dot_k_of_queries_drawn_before_keys():
    # The documented draw order, computed independently (one block, since 10 * 8 numbers is small).
    gen = rng(5)
    q, k = gen.standard_normal((10, 8)), gen.standard_normal((10, 8))
    np.testing.assert_allclose(sample_dot_products(8, 10, rng(5)), (q * k).sum(axis=1), rtol=1e-13)


def test_large_requests_are_drawn_in_blocks_with_the_same_statistics():
    x = sample_dot_products(1024, 3_000, rng(1))  # 3,000 * 1024 numbers: three blocks
    assert x.shape == (3_000,) and x.dtype == np.float64
    assert x.var() == pytest.approx(1024, rel=0.1)


def test_the_same_seed_gives_the_same_samples_and_the_generator_advances():
    gen = rng(7)
    first = sample_dot_products(32, 100, gen)
    np.testing.assert_array_equal(first, sample_dot_products(32, 100, rng(7)))
    assert not np.array_equal(first, sample_dot_products(32, 100, gen))


# --- dot_product_tail --------------------------------------------------------------


def mp_tail(d_k: int, t: float) -> float:
    """P(|q·k| >= t) via q·k = (A - B) / 2, A and B independent chi-square(d_k): an independent route."""
    half = mpmath.mpf(d_k) / 2

    def density(a):  # chi-square(d_k) density
        return a ** (half - 1) * mpmath.exp(-a / 2) / (2**half * mpmath.gamma(half))

    def upper(b):  # P(A >= b + 2t)
        return mpmath.gammainc(half, (b + 2 * t) / 2, mpmath.inf, regularized=True)

    with mpmath.workdps(20):
        return float(2 * mpmath.quad(lambda b: density(b) * upper(b), [0, d_k, 4 * d_k + 100, mpmath.inf]))


@pytest.mark.parametrize("t", [0.1, 1.0, 5.0, 20.0])
def test_the_tail_for_d_k_2_is_laplace(t):
    # (A - B) / 2 with A, B exponential of mean 2 is Laplace with scale 1.
    assert dot_product_tail(2, t) == pytest.approx(math.exp(-t), rel=1e-10)


@pytest.mark.parametrize("t", [0.5, 3.0])
def test_the_tail_for_d_k_1_is_the_bessel_integral(t):
    # The product of two standard normals has density K0(|x|) / pi.
    with mpmath.workdps(15):
        expected = float(2 * mpmath.quad(lambda x: mpmath.besselk(0, x) / mpmath.pi, [t, mpmath.inf]))
    assert dot_product_tail(1, t) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("d_k,t", [(3, 2.0), (64, 8.0), (64, 50.0), (256, 48.0)])
def test_the_tail_matches_the_difference_of_two_chi_squares(d_k, t):
    assert dot_product_tail(d_k, t) == pytest.approx(mp_tail(d_k, t), rel=1e-9)


def test_the_tail_agrees_with_sampling():
    x = sample_dot_products(16, 20_000, rng(3))
    # 0.2% standard error; allow 5 of them.
    assert np.mean(np.abs(x) >= 4.0) == pytest.approx(dot_product_tail(16, 4.0), abs=0.012)


def test_the_tail_at_zero_is_one_and_it_falls_with_the_threshold():
    assert dot_product_tail(8, 0.0) == 1.0
    tails = [dot_product_tail(8, t) for t in (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)]
    assert all(a > b > 0 for a, b in zip(tails, tails[1:]))


# --- sample_scores -----------------------------------------------------------------


def test_scores_are_each_rows_query_against_its_own_keys():
    gen = rng(11)
    q = gen.standard_normal((4, 8))
    k = gen.standard_normal((4, 3, 8))
    expected = np.array([[q[r] @ k[r, j] for j in range(3)] for r in range(4)])
    np.testing.assert_allclose(sample_scores(8, 3, 4, rng(11)), expected, rtol=1e-13)


def test_scaled_scores_are_the_raw_scores_divided_by_sqrt_d_k():
    raw = sample_scores(49, 5, 6, rng(2))
    np.testing.assert_allclose(sample_scores(49, 5, 6, rng(2), scaled=True), raw / 7, rtol=1e-15)


def test_score_spread_grows_like_sqrt_d_k():
    assert sample_scores(400, 16, 100, rng(4)).std() == pytest.approx(20, rel=0.1)


# --- attention_row_stats -------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 5, 16])
def test_uniform_rows_have_the_known_statistics(n):
    stats = attention_row_stats(np.zeros((3, n)))
    assert isinstance(stats, RowStats)
    assert stats.max_weight == pytest.approx(1 / n, rel=1e-14)
    assert stats.entropy == pytest.approx(math.log(n), rel=1e-14)
    # J = I/n - 11ᵀ/n²: diagonal (n-1)/n², off-diagonal -1/n², so |J|_F² = (n-1)/n².
    assert stats.jacobian_norm == pytest.approx(math.sqrt(n - 1) / n, rel=1e-14)


def test_a_two_key_row_matches_hand_values():
    stats = attention_row_stats([0.0, math.log(3.0)])  # weights 1/4 and 3/4
    assert stats.max_weight == pytest.approx(0.75, rel=1e-15)
    assert stats.entropy == pytest.approx(float(-(0.25 * mpmath.log(0.25) + 0.75 * mpmath.log(0.75))), rel=1e-14)
    assert stats.jacobian_norm == pytest.approx(2 * 0.25 * 0.75, rel=1e-14)  # four entries ±3/16


def test_a_saturated_row_has_no_entropy_and_no_gradient():
    stats = attention_row_stats([[1000.0, 0.0, -1000.0]])
    assert stats.max_weight == 1.0
    assert stats.entropy == pytest.approx(0.0, abs=1e-300) and not math.isnan(stats.entropy)
    assert stats.jacobian_norm == pytest.approx(0.0, abs=1e-300)


def test_statistics_average_over_all_leading_axes():
    x = sample_scores(4, 6, 12, rng(9))
    rows = [attention_row_stats(r) for r in x]
    batched = attention_row_stats(x.reshape(3, 4, 6))
    np.testing.assert_allclose(batched, np.mean(rows, axis=0), rtol=1e-13)


rows = hnp.arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 8)), elements=st.floats(-30, 30))


@settings(max_examples=50, deadline=None)
@given(rows)
def test_statistics_stay_within_their_ranges(x):
    n = x.shape[-1]
    stats = attention_row_stats(x)
    assert 1 / n - 1e-12 <= stats.max_weight <= 1
    assert -1e-12 <= stats.entropy <= math.log(n) + 1e-12
    # |J|_F² = sum_i p_i² ((1 - p_i)² + sum_{j != i} p_j²) <= 2 sum_i p_i² (1 - p_i)² <= 8/27.
    assert 0 <= stats.jacobian_norm <= math.sqrt(8 / 27)


@settings(max_examples=50, deadline=None)
@given(rows, st.floats(-100, 100))
def test_statistics_are_shift_invariant(x, c):
    np.testing.assert_allclose(attention_row_stats(x + c), attention_row_stats(x), rtol=1e-9, atol=1e-12)


@settings(max_examples=30, deadline=None)
@given(hnp.arrays(np.float64, st.integers(2, 8), elements=st.floats(-5, 5)), st.floats(1.1, 10.0))
def test_larger_scores_make_rows_more_peaked(x, factor):
    base, stretched = attention_row_stats(x), attention_row_stats(factor * x)
    assert stretched.max_weight >= base.max_weight - 1e-12
    assert stretched.entropy <= base.entropy + 1e-12


def test_statistics_match_torch():
    x = sample_scores(64, 16, 20, rng(8))
    t = torch.from_numpy(x)
    p = torch.softmax(t, dim=-1)
    entropy = torch.distributions.Categorical(logits=t).entropy()  # an independent formula
    jac = torch.stack([torch.autograd.functional.jacobian(lambda r: torch.softmax(r, dim=-1), row) for row in t])
    expected = [p.amax(dim=-1).mean(), entropy.mean(), torch.linalg.matrix_norm(jac).mean()]
    # float64 rounding, per side, with ε = exponent_error(x) for the weights (relative) and the log-weights
    # (absolute), n = 16 keys and a mean over 20 rows: the max weight (<= 1) within ε + γ_20; the entropy
    # (<= log n) within ε·(1 + log n) + γ_(n+21)·log n; the Jacobian p_i(δ_ij - p_j), whose entries carry
    # p_i·(2ε + u), has a Frobenius norm (< 1) within √2·(2ε + u) + γ_(n²+20). About 1e-13 each.
    eps, n, u = exponent_error(x), x.shape[-1], unit_roundoff(x)
    bounds = [eps + gamma(20), eps * (1 + math.log(n)) + gamma(n + 21) * math.log(n), math.sqrt(2) * (2 * eps + u) + gamma(n * n + 20)]
    for name, ours, theirs, bound in zip(RowStats._fields, attention_row_stats(x), expected, bounds):
        assert abs(ours - float(theirs)) <= 2 * bound, name


# --- bad input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,error,name",
    [
        ({"d_k": 0}, ValueError, "d_k"),
        ({"d_k": 2.0}, TypeError, "d_k"),
        ({"d_k": True}, TypeError, "d_k"),
        ({"n_samples": 0}, ValueError, "n_samples"),
        ({"n_samples": "10"}, TypeError, "n_samples"),
        ({"rng": 0}, TypeError, "rng"),
        ({"rng": np.random.RandomState(0)}, TypeError, "rng"),
        ({"unit_norm": "yes"}, TypeError, "unit_norm"),
    ],
)
def test_bad_sampling_arguments_are_rejected_by_name(kwargs, error, name):
    args = {"d_k": 4, "n_samples": 10, "rng": rng()} | kwargs
    with pytest.raises(error, match=name):
        sample_dot_products(args.pop("d_k"), args.pop("n_samples"), args.pop("rng"), **args)


@pytest.mark.parametrize(
    "kwargs,error,name",
    [
        ({"n_samples": 1}, ValueError, "n_samples"),
        ({"scale": 0.0}, ValueError, "scale"),
        ({"scale": -2.0}, ValueError, "scale"),
        ({"scale": math.inf}, ValueError, "scale"),
        ({"scale": "8"}, TypeError, "scale"),
    ],
)
def test_bad_variance_arguments_are_rejected_by_name(kwargs, error, name):
    args = {"n_samples": 10} | kwargs
    with pytest.raises(error, match=name):
        dot_product_variance(4, args.pop("n_samples"), rng(), **args)


@pytest.mark.parametrize(
    "d_k,t,error,name",
    [(0, 1.0, ValueError, "d_k"), (2, -1.0, ValueError, "threshold"), (2, math.nan, ValueError, "threshold"),
     (2, "1", TypeError, "threshold"), (2.5, 1.0, TypeError, "d_k")],
)
def test_bad_tail_arguments_are_rejected_by_name(d_k, t, error, name):
    with pytest.raises(error, match=name):
        dot_product_tail(d_k, t)


@pytest.mark.parametrize(
    "args,kwargs,error,name",
    [
        ((4, 0, 3), {}, ValueError, "n_keys"),
        ((4, 3, 0), {}, ValueError, "n_rows"),
        ((-1, 3, 3), {}, ValueError, "d_k"),
        ((4, 3, 3), {"scaled": 1}, TypeError, "scaled"),
    ],
)
def test_bad_score_arguments_are_rejected_by_name(args, kwargs, error, name):
    with pytest.raises(error, match=name):
        sample_scores(*args, rng(), **kwargs)


@pytest.mark.parametrize(
    "scores,error",
    [(1.0, ValueError), (np.empty((3, 0)), ValueError), ([0.0, -math.inf], ValueError), ([math.nan, 1.0], ValueError),
     (["a", "b"], TypeError)],
)
def test_bad_scores_are_rejected_by_name(scores, error):
    with pytest.raises(error, match="scores"):
        attention_row_stats(scores)


# --- sample_attention_gradients: the shortcut has the distribution of attention_backward's norms ----------

from scipy import stats  # noqa: E402

from course_utils import attention_backward, sample_attention_gradients  # noqa: E402


def direct_gradient_norms(d_k, n_keys, n_rows, seed, scaled, d_v=16):
    gen = np.random.default_rng(seed)
    q = gen.standard_normal((n_rows, 1, d_k))
    k = gen.standard_normal((n_rows, n_keys, d_k))
    v = gen.standard_normal((n_rows, n_keys, d_v))
    g = gen.standard_normal((n_rows, 1, d_v)) / math.sqrt(d_v)
    dq, dk, _ = attention_backward(q, k, v, g, scale=1 / math.sqrt(d_k) if scaled else 1.0)
    return np.linalg.norm(dq[:, 0], axis=-1), np.linalg.norm(dk.reshape(n_rows, -1), axis=-1)


@pytest.mark.parametrize("d_k,scaled", [(2, False), (8, True), (32, False), (64, False), (64, True)])
def test_the_shortcut_draws_the_same_distribution_as_attention_backward(d_k, scaled):
    direct_q, direct_k = direct_gradient_norms(d_k, 6, 6000, d_k, scaled)
    short = sample_attention_gradients(d_k, 6, 6000, rng(d_k + 100), scaled=scaled)
    # Two-sample Kolmogorov-Smirnov tests: a wrong shortcut (a missing factor c, or the wrong
    # chi-square degrees) moves the distribution far beyond what 6,000 samples allow (p < 1e-4).
    assert stats.ks_2samp(direct_q, short.query).pvalue > 1e-4
    assert stats.ks_2samp(direct_k, short.keys).pvalue > 1e-4


@pytest.mark.parametrize("scaled", [False, True])
def test_the_shortcut_matches_where_the_random_lengths_of_q_and_g_matter(scaled):
    # Few dimensions and 20,000 rows: here the test also detects a shortcut that replaces |q| or |g|
    # by its typical value, drops the component along q, or uses d_k instead of d_k - 1 degrees
    # (unscaled, each of these gives p < 1e-8 here; scaled, all but the |q| one give p < 1e-4;
    # measured with the seeds below. The next test shows the |g| case through d_v).
    direct_q, direct_k = direct_gradient_norms(4, 4, 20_000, 11, scaled, d_v=2)
    short = sample_attention_gradients(4, 4, 20_000, rng(12), scaled=scaled, d_v=2)
    assert stats.ks_2samp(direct_q, short.query).pvalue > 1e-4
    assert stats.ks_2samp(direct_k, short.keys).pvalue > 1e-4


def test_a_wrong_shortcut_would_fail_the_distribution_test():
    direct_q, _ = direct_gradient_norms(64, 6, 6000, 1, True)
    short = sample_attention_gradients(64, 6, 6000, rng(2), scaled=True)
    assert stats.ks_2samp(direct_q, short.query).pvalue > 1e-4
    assert stats.ks_2samp(direct_q, short.query * 1.25).pvalue < 1e-4  # 25% too large: detected
    # Ignoring the randomness of |g| (as d_v = 400 nearly does) is detected where d_v is small.
    direct_q2, _ = direct_gradient_norms(4, 4, 20_000, 13, False, d_v=2)
    nearly_fixed_g = sample_attention_gradients(4, 4, 20_000, rng(14), scaled=False, d_v=400)
    assert stats.ks_2samp(direct_q2, nearly_fixed_g.query).pvalue < 1e-4


def test_scaled_gradients_do_not_depend_on_d_k_while_unscaled_rows_freeze():
    scaled = [np.median(sample_attention_gradients(d, 16, 20_000, rng(d), scaled=True).query) for d in (64, 1024)]
    assert scaled[1] == pytest.approx(scaled[0], rel=0.05)
    raw = sample_attention_gradients(1024, 16, 20_000, rng(3), scaled=False)
    assert np.mean(raw.query < 1e-3) > 0.3 and raw.query.mean() > 3 * scaled[1]


def test_the_shortcut_is_seeded_and_checks_its_arguments():
    a = sample_attention_gradients(16, 4, 10, rng(5), scaled=True)
    b = sample_attention_gradients(16, 4, 10, rng(5), scaled=True)
    np.testing.assert_array_equal(a.query, b.query)
    with pytest.raises(ValueError, match="d_k"):
        sample_attention_gradients(1, 4, 10, rng(), scaled=True)
    with pytest.raises(TypeError, match="scaled"):
        sample_attention_gradients(16, 4, 10, rng(), scaled=1)
    with pytest.raises(TypeError, match="rng"):
        sample_attention_gradients(16, 4, 10, 0, scaled=True)
