"""The softmax variants of lesson 09: each stated property holds, and each matches PyTorch or a formula written out here."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import scaled_dot_product_attention, softmax
from course_utils.variants import (
    llama4_query_scale,
    qk_norm,
    scalable_softmax,
    sigmoid_attention,
    sink_attention,
    softcap,
    softmax_one,
    softmax_with_sink,
    softpick,
    yarn_logit_scale,
)
from rounding_bounds import exponent_error, gamma, score_error

rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=8),
    elements=st.floats(-300, 300, allow_nan=False),
)
sinks = st.floats(-50, 50, allow_nan=False)


def padded_torch(x: np.ndarray, sink: float) -> np.ndarray:
    """gpt-oss's form: one more logit column holding the sink, torch.softmax, the column dropped."""
    t = torch.from_numpy(np.asarray(x, np.float64))
    column = torch.full((*t.shape[:-1], 1), float(sink), dtype=torch.float64)
    return torch.softmax(torch.cat([t, column], dim=-1), dim=-1)[..., :-1].numpy()


# --- softmax with a sink, and softmax₁ ----------------------------------------------


@settings(max_examples=80, deadline=None)
@given(rows)
def test_softmax_one_is_below_softmax_everywhere_and_its_rows_sum_to_less_than_one(x):
    one = softmax_one(x)
    assert (one <= softmax(x) * (1 + 1e-12)).all()
    total = one.sum(axis=-1)
    assert (total <= 1 + 4 * np.finfo(float).eps).all()  # a sum of rounded weights may round up by an ulp or two
    # The sink keeps 1 / (1 + sum e^x), which rounds away once sum e^x > 2^53: strictly below 1 before that.
    assert (total[np.logaddexp.reduce(x, axis=-1) < 30] < 1).all()


@settings(max_examples=80, deadline=None)
@given(rows, sinks)
def test_the_sink_logit_form_equals_the_padded_column_form_of_torch_softmax(x, sink):
    # float64 rounding of two softmaxes of the padded row, each weight within exponent_error (relative): up to
    # about 7e-13 for scores of ±300; atol 1e-300 for weights that underflow.
    padded = np.concatenate([x, np.full((*x.shape[:-1], 1), sink)], axis=-1)
    np.testing.assert_allclose(softmax_with_sink(x, sink), padded_torch(x, sink), rtol=2 * exponent_error(padded), atol=1e-300)


@settings(max_examples=60, deadline=None)
@given(rows, sinks)
def test_the_sink_keeps_exactly_the_mass_the_row_does_not_take(x, sink):
    kept = 1.0 - softmax_with_sink(x, sink).sum(axis=-1)
    lse = np.logaddexp.reduce(x, axis=-1)
    # 1 - sum loses the digits below ~1e-16 of the sum: an absolute tolerance, not a relative one.
    np.testing.assert_allclose(kept, 1.0 / (1.0 + np.exp(lse - sink)), rtol=1e-9, atol=1e-13)


def test_softmax_one_known_value_against_mpmath():
    x = [2.0, -1.0, 0.5]
    denominator = 1 + sum(mpmath.e ** mpmath.mpf(v) for v in x)
    expected = [float(mpmath.e ** mpmath.mpf(v) / denominator) for v in x]
    np.testing.assert_allclose(softmax_one(x), expected, rtol=1e-15)


def test_softmax_one_equals_attention_with_one_extra_all_zero_key_and_value():
    rng = np.random.default_rng(3)
    q, k, v = rng.normal(size=(5, 8)), rng.normal(size=(7, 8)), rng.normal(size=(7, 3))
    out_zero_key, _ = scaled_dot_product_attention(q, np.vstack([k, np.zeros(8)]), np.vstack([v, np.zeros(3)]))
    np.testing.assert_allclose(softmax_one(q @ k.T / math.sqrt(8)) @ v, out_zero_key, rtol=1e-12, atol=1e-15)


def test_a_per_head_sink_broadcasts_over_the_rows_of_its_head():
    x = np.random.default_rng(0).normal(size=(3, 4, 5))
    heads = np.array([-1.0, 0.0, 2.5])
    got = softmax_with_sink(x, heads[:, None, None])
    for h in range(3):
        # float64 rounding: 2·exponent_error of these rows of 6 normal scores is about 1e-14, far inside 1e-12,
        # which still rejects a sink taken from another head.
        np.testing.assert_allclose(got[h], padded_torch(x[h], heads[h]), rtol=1e-12)


def test_a_fully_masked_row_gives_all_its_mass_to_the_sink_not_nan():
    np.testing.assert_array_equal(softmax_with_sink([[-np.inf, -np.inf], [0.0, -np.inf]], 1.0)[0], [0.0, 0.0])
    np.testing.assert_allclose(softmax_one([0.0, -np.inf]), [0.5, 0.0])


def test_huge_scores_do_not_overflow():
    np.testing.assert_allclose(softmax_with_sink([1000.0, 1000.0], 1000.0), [1 / 3, 1 / 3], rtol=1e-15)


def test_float32_stays_float32_and_float16_is_computed_in_float32():
    x32 = np.array([1.0, 2.0], np.float32)
    assert softmax_with_sink(x32).dtype == np.float32
    x16 = np.array([1.0, 2.0], np.float16)
    out = softmax_with_sink(x16)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, softmax_with_sink(x16.astype(np.float64)), rtol=2e-3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, [0.0, np.nan]])
def test_a_non_finite_sink_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match="sink"):
        softmax_with_sink(np.zeros((2, 3)), bad)


def test_a_sink_that_does_not_broadcast_to_the_rows_is_rejected_by_name():
    with pytest.raises(ValueError, match="sink"):
        softmax_with_sink(np.zeros((2, 3)), [1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="sink"):
        softmax_with_sink(np.zeros(3), "zero")


# --- sink attention: the tiled recurrence from the state (s, 1, 0) --------------------


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9), st.integers(1, 10), sinks, st.integers(1, 11), st.integers(0, 2**16))
def test_sink_attention_equals_sink_softmax_times_values_for_every_block_size(n_q, n_k, sink, block_k, seed):
    rng = np.random.default_rng(seed)
    q, k, v = rng.normal(scale=3.0, size=(n_q, 4)), rng.normal(size=(n_k, 4)), rng.normal(size=(n_k, 2))
    expected = softmax_with_sink(q @ k.T / 2.0, sink) @ v
    np.testing.assert_allclose(sink_attention(q, k, v, sink, block_k=block_k), expected, rtol=1e-10, atol=1e-13)


def test_sink_attention_matches_the_gpt_oss_style_torch_computation_with_one_sink_per_head():
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(2, 6, 4)), rng.normal(size=(2, 9, 4)), rng.normal(size=(2, 9, 3))
    sink = np.array([[0.5], [-2.0]])  # one per head, broadcast over the query rows
    scores = torch.from_numpy(q) @ torch.from_numpy(k).transpose(-1, -2) * 0.5
    padded = torch.cat([scores, torch.from_numpy(sink)[..., None].expand(2, 6, 1)], dim=-1)
    expected = torch.softmax(padded, dim=-1)[..., :-1] @ torch.from_numpy(v)
    # float64 rounding of two implementations: scores within score_error, each weight within exponent_error of the
    # padded row (relative), and the weighted sum of 9 values: max|v|·(that + γ_10) on each side, about 1e-14.
    eps = exponent_error(padded.numpy(), input_error=score_error(q, k, scale=0.5))
    bound = 2 * np.abs(v).max() * (eps + gamma(10))
    np.testing.assert_allclose(sink_attention(q, k, v, sink, block_k=4), expected.numpy(), rtol=0, atol=bound)


def test_sink_attention_rejects_a_non_finite_sink_and_a_bad_block_size():
    q = np.zeros((2, 3))
    with pytest.raises(ValueError, match="sink"):
        sink_attention(q, q, q, np.inf)
    with pytest.raises(ValueError, match="block_k"):
        sink_attention(q, q, q, 0.0, block_k=0)


# --- sigmoid attention -----------------------------------------------------------------


@pytest.mark.parametrize("n", [16, 256, 4096])
def test_a_row_of_zero_scores_has_total_sigmoid_weight_n_over_2_and_n_over_n_plus_1_with_the_log_n_bias(n):
    x = np.zeros(n)
    assert sigmoid_attention(x).sum() == pytest.approx(n / 2, rel=1e-14)
    assert sigmoid_attention(x, bias=-math.log(n)).sum() == pytest.approx(n / (n + 1), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(-20, 20))
def test_sigmoid_attention_equals_torch_sigmoid_and_needs_no_normalizer(x, bias):
    got = sigmoid_attention(x, bias=bias)
    # float64 rounding of 1 / (1 + e^-z), z = x + bias: relative u·|z| (z's rounding through exp) + 4 ulp + 2u per
    # side, under 1e-13 for |z| <= 320: rtol 1e-12 covers it and rejects a missing or doubled bias.
    np.testing.assert_allclose(got, torch.sigmoid(torch.from_numpy(x) + bias).numpy(), rtol=1e-12, atol=1e-300)
    cut = x.shape[-1] // 2  # each half, on its own, gives its own weights: no row statistic
    np.testing.assert_array_equal(np.concatenate([sigmoid_attention(x[..., :cut], bias=bias), sigmoid_attention(x[..., cut:], bias=bias)], axis=-1), got)


def test_sigmoid_attention_of_very_negative_scores_keeps_full_relative_precision():
    assert sigmoid_attention(np.array([-700.0]))[0] == pytest.approx(float(1 / (1 + mpmath.e ** 700)), rel=1e-12)
    np.testing.assert_array_equal(sigmoid_attention(np.array([-np.inf, np.inf])), [0.0, 1.0])


def test_sigmoid_attention_keeps_float32():
    assert sigmoid_attention(np.zeros(3, np.float32), bias=-1.0).dtype == np.float32


# --- softpick -----------------------------------------------------------------------


def torch_softpick(x: np.ndarray) -> np.ndarray:
    """The formula, unshifted (fine for moderate scores), written in torch."""
    t = torch.from_numpy(x)
    e = torch.expm1(t)
    return (torch.relu(e) / e.abs().sum(dim=-1, keepdim=True)).numpy()


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=8), elements=st.floats(-30, 30)))
def test_softpick_equals_the_formula_gives_exact_zeros_and_sums_to_at_most_one(x):
    den = np.abs(np.expm1(x)).sum(axis=-1, keepdims=True)
    if (den == 0).any():
        return  # 0/0 rows are tested below
    got = softpick(x)
    # float64 rounding: expm1 and exp within 4 ulp, sums of positive terms within γ_n, no cancellation: about 30u
    # relative per side; rtol 1e-9 keeps a wide margin and rejects a shifted or unnormalized form.
    np.testing.assert_allclose(got, torch_softpick(x), rtol=1e-9, atol=1e-14)
    assert (got[x <= 0] == 0).all()
    assert (got.sum(axis=-1) <= 1 + 1e-12).all()


def test_softpick_of_large_scores_does_not_overflow_and_equals_the_shifted_formula():
    x = np.array([800.0, 799.0, -5.0])
    e = np.exp(x - 800.0) - np.exp(-800.0)
    np.testing.assert_allclose(softpick(x), np.maximum(e, 0) / np.abs(e).sum(), rtol=1e-15)


def test_softpick_of_a_row_with_no_positive_score_is_exactly_zero_and_masked_keys_are_left_out():
    np.testing.assert_array_equal(softpick([[-1.0, -3.0, 0.0], [0.0, 0.0, 0.0]]), np.zeros((2, 3)))
    np.testing.assert_allclose(softpick([1.0, -np.inf]), [1.0, 0.0])
    np.testing.assert_array_equal(softpick([-np.inf, -np.inf]), [0.0, 0.0])


def test_softpick_is_not_shift_invariant():
    x = np.array([1.0, 0.5, -0.5])
    assert not np.allclose(softpick(x), softpick(x + 1.0))


# --- Scalable-Softmax ----------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(0.05, 5.0))
def test_ssmax_equals_softmax_where_n_is_e_to_the_one_over_s(x, s):
    np.testing.assert_allclose(scalable_softmax(x, s, n=math.exp(1 / s)), softmax(x), rtol=1e-9, atol=1e-300)


@settings(max_examples=60, deadline=None)
@given(rows, st.floats(0.05, 5.0))
def test_ssmax_equals_torch_softmax_of_logits_times_s_log_n(x, s):
    n = x.shape[-1]
    expected = torch.softmax(torch.from_numpy(x) * (s * math.log(n)), dim=-1).numpy()
    np.testing.assert_allclose(scalable_softmax(x, s), expected, rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("n", [10, 1000, 100_000])
def test_ssmax_weight_of_one_key_with_gap_a_is_n_to_the_sa_over_n_to_the_sa_plus_n_minus_1(n):
    x = np.zeros(n)
    x[0] = 2.0
    s = 0.7
    assert scalable_softmax(x, s)[0] == pytest.approx(n ** (s * 2) / (n ** (s * 2) + n - 1), rel=1e-12)


def test_ssmax_takes_one_n_per_row_as_under_a_causal_mask():
    x = np.array([[1.0, -np.inf, -np.inf], [1.0, 0.0, -np.inf], [1.0, 0.0, 0.5]])
    got = scalable_softmax(x, 1.0, n=np.array([[1], [2], [3]]))
    for i in range(3):
        np.testing.assert_allclose(got[i, : i + 1], scalable_softmax(x[i, : i + 1], 1.0), rtol=1e-14)


@pytest.mark.parametrize("bad", [0, 0.5, -3, np.nan, np.inf])
def test_n_below_one_or_not_finite_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match=r"\bn\b"):
        scalable_softmax(np.zeros(4), 1.0, n=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, np.inf])
def test_s_not_finite_and_positive_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match=r"\bs\b"):
        scalable_softmax(np.zeros(4), bad)


# --- YaRN and Llama 4 --------------------------------------------------------------------


@pytest.mark.parametrize("factor", [1.0, 2.0, 8.0, 32.0])
def test_yarn_multiplies_logits_by_the_square_of_0_1_ln_s_plus_1(factor):
    assert yarn_logit_scale(factor) == pytest.approx((0.1 * math.log(factor) + 1) ** 2, rel=1e-15)


@pytest.mark.parametrize("bad", [0.5, 0.0, -2.0, np.inf])
def test_a_yarn_factor_below_one_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match="factor"):
        yarn_logit_scale(bad)


def test_llama4_query_scale_is_one_in_the_first_window_and_steps_up_every_floor_scale_positions():
    pos = np.array([0, 8190, 8191, 16382, 16383])
    expected = [1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3)]
    np.testing.assert_allclose(llama4_query_scale(pos), expected, rtol=1e-15)
    np.testing.assert_allclose(llama4_query_scale([3], floor_scale=2, attn_scale=0.5), [1 + 0.5 * math.log(3)])


def test_llama4_query_scale_rejects_negative_and_non_integer_positions_by_name():
    with pytest.raises(ValueError, match="position"):
        llama4_query_scale([-1, 2])
    with pytest.raises(TypeError, match="position"):
        llama4_query_scale([0.5])
    with pytest.raises(ValueError, match="floor_scale"):
        llama4_query_scale([1], floor_scale=0)


# --- soft-capping ----------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 20), elements=st.floats(-1e300, 1e300)), st.floats(0.1, 100.0))
def test_softcap_is_bounded_by_cap_is_odd_and_increasing_and_equals_torch_tanh(x, cap):
    got = softcap(x, cap)
    assert (np.abs(got) <= cap).all()
    np.testing.assert_array_equal(softcap(-x, cap), -got)
    order = np.argsort(x, kind="stable")
    assert (np.diff(got[order]) >= 0).all()
    # float64 rounding of c·tanh(x/c): 10u relative per side (x/c, tanh's 4 ulp and its argument's u, c·), 2.2e-15.
    np.testing.assert_allclose(got, cap * torch.tanh(torch.from_numpy(x) / cap).numpy(), rtol=1e-14, atol=1e-300)


@settings(max_examples=60, deadline=None)
@given(st.floats(-1.0, 1.0), st.floats(10.0, 1000.0))
def test_softcap_is_the_identity_near_zero_to_within_x_cubed_over_3_c_squared(x, cap):
    assert abs(softcap(np.array([x]), cap)[0] - x) <= abs(x) ** 3 / (3 * cap**2) + 1e-15


def test_softcap_maps_infinities_to_the_cap():
    np.testing.assert_array_equal(softcap(np.array([-np.inf, np.inf]), 50.0), [-50.0, 50.0])


@pytest.mark.parametrize("bad", [0.0, -50.0, np.nan, np.inf])
def test_a_cap_that_is_not_positive_and_finite_is_rejected_by_name(bad):
    with pytest.raises(ValueError, match="cap"):
        softcap(np.zeros(3), bad)


# --- QK-norm -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=8), elements=st.floats(-100, 100)))
def test_qk_norm_equals_torch_rms_norm_and_layer_norm(x):
    d = x.shape[-1]
    t = torch.from_numpy(x)
    # float64 rounding: rms, x / sqrt(mean(x²) + eps), within (d + 8)u relative per side; layer, (x - mean) / sqrt(var
    # + eps), within (d + 8)u relative plus the centring's d·u·max|x| / sqrt(eps) <= 3e-11 absolute (|x| <= 100,
    # d <= 8). The tolerances cover both sides, and reject a missing eps, a biased variance or no centring.
    np.testing.assert_allclose(qk_norm(x), F.rms_norm(t, (d,), eps=1e-6).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(qk_norm(x, kind="layer", eps=1e-5), F.layer_norm(t, (d,), eps=1e-5).numpy(), rtol=1e-9, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.floats(1e-3, 1e4), st.integers(0, 2**16))
def test_qk_norm_removes_the_size_of_q_and_k_so_scaled_logits_stay_within_sqrt_d(c, seed):
    rng = np.random.default_rng(seed)
    q, k = rng.normal(size=(2, 5, 16))
    logits = qk_norm(c * q, eps=0.0) @ qk_norm(c * k, eps=0.0).T / 4.0
    np.testing.assert_allclose(logits, qk_norm(q, eps=0.0) @ qk_norm(k, eps=0.0).T / 4.0, rtol=1e-10, atol=1e-12)
    assert np.abs(logits).max() <= 4.0 + 1e-12


def test_qk_norm_rejects_an_unknown_kind_and_a_negative_eps_by_name():
    with pytest.raises(ValueError, match="kind"):
        qk_norm(np.ones(3), kind="batch")
    with pytest.raises(ValueError, match="eps"):
        qk_norm(np.ones(3), eps=-1.0)


def test_float32_inputs_give_float32_outputs_for_sink_attention_and_ssmax():
    q = np.ones((2, 3), np.float32)
    assert sink_attention(q, q, q, 0.0).dtype == np.float32
    assert scalable_softmax(np.ones(3, np.float32), 0.5).dtype == np.float32


def test_an_empty_key_axis_gives_an_empty_result_not_an_error():
    assert scalable_softmax(np.zeros((2, 0)), 1.0).shape == (2, 0)
    assert softmax_with_sink(np.zeros((2, 0)), 1.0).shape == (2, 0)
    assert softpick(np.zeros((2, 0))).shape == (2, 0)
    np.testing.assert_array_equal(sink_attention(np.zeros((2, 3)), np.zeros((0, 3)), np.ones((0, 2)), 1.0), np.zeros((2, 2)))
