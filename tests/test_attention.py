"""Scaled dot-product attention, masks and row statistics: known values, properties, torch, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from rounding_bounds import attention_error, multihead_attention_error
from course_utils import (
    attention_distance,
    attention_entropy,
    causal_mask,
    padding_mask,
    scaled_dot_product_attention,
    softmax,
    tiled_attention,
)


def _qkv(rng, batch=(2, 3), L=4, S=5, E=8, Ev=6):
    return rng.normal(size=(*batch, L, E)), rng.normal(size=(*batch, S, E)), rng.normal(size=(*batch, S, Ev))


def _torch(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


def test_known_value_by_hand():
    q, k, v = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[10.0], [20.0]])
    out, w = scaled_dot_product_attention(q, k, v, scale=1.0)
    p = 1 / (1 + math.exp(-1))
    np.testing.assert_allclose(w, [[p, 1 - p]], rtol=1e-15)
    np.testing.assert_allclose(out, [[10 * p + 20 * (1 - p)]], rtol=1e-15)


def test_default_scale_is_one_over_sqrt_e():
    rng = np.random.default_rng(0)
    q, k, v = _qkv(rng)
    out_default, _ = scaled_dot_product_attention(q, k, v)
    out_explicit, _ = scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(8))
    np.testing.assert_array_equal(out_default, out_explicit)


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("L,S", [(4, 4), (3, 6), (6, 3)])
def test_matches_torch_sdpa(kind, L, S):
    rng = np.random.default_rng(L * 10 + S)
    q, k, v = _qkv(rng, L=L, S=S)
    kwargs, tkwargs = {}, {}
    if kind == "bool":
        m = rng.random((L, S)) > 0.4
        m[0] = False  # one fully masked row
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "float":
        m = np.where(rng.random((2, 1, L, S)) > 0.3, 0.0, -np.inf) + rng.normal(size=(2, 1, L, S))
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "causal":
        kwargs["is_causal"] = tkwargs["is_causal"] = True
    out, w = scaled_dot_product_attention(q, k, v, **kwargs)
    ref = F.scaled_dot_product_attention(*_torch(q, k, v), **tkwargs).numpy()
    # float64 rounding of two implementations: scores γ_E·|q||k|/sqrt(E), softmax and weighted sum (rounding_bounds).
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, **kwargs))
    if kind == "bool":
        assert (w[..., ~kwargs["mask"]] == 0).all()


def test_matches_multihead_attention_weights_and_output():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True, dtype=torch.float64)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    ref_out, ref_w = mha(x, x, x, average_attn_weights=False)
    W = mha.in_proj_weight.detach().numpy()
    b = mha.in_proj_bias.detach().numpy()
    xs = x.numpy()
    q, k, v = (xs @ W[i * 8:(i + 1) * 8].T + b[i * 8:(i + 1) * 8] for i in range(3))
    heads = lambda a: a.reshape(3, 5, 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
    out, w = scaled_dot_product_attention(heads(q), heads(k), heads(v))
    # float64 rounding of two implementations, each within multihead_attention_error: the projections of x,
    # then the weights (relative) and the output, through the output projection.
    Wo, bo = mha.out_proj.weight.detach().numpy(), mha.out_proj.bias.detach().numpy()
    w_error, out_error = multihead_attention_error(xs, W, b, Wo, bo, 2)
    np.testing.assert_allclose(w, ref_w.detach().numpy(), rtol=2 * w_error, atol=0)
    merged = out.transpose(0, 2, 1, 3).reshape(3, 5, 8)
    final = merged @ Wo.T + bo
    np.testing.assert_allclose(final, ref_out.detach().numpy(), rtol=0, atol=2 * out_error)


def test_a_fully_masked_row_gives_zero_weights_and_zero_output():
    rng = np.random.default_rng(3)
    q, k, v = _qkv(rng, batch=(), L=2, S=3)
    mask = np.array([[True, False, True], [False, False, False]])
    out, w = scaled_dot_product_attention(q, k, v, mask=mask)
    assert (w[1] == 0).all() and (out[1] == 0).all()
    assert np.isclose(w[0].sum(), 1.0)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_rows_sum_to_one_wherever_a_key_is_allowed_and_bool_equals_float_mask(L, S, seed):
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, batch=(2,), L=L, S=S, E=3, Ev=2)
    mask = rng.random((L, S)) > 0.5
    out_b, w_b = scaled_dot_product_attention(q, k, v, mask=mask)
    out_f, w_f = scaled_dot_product_attention(q, k, v, mask=np.where(mask, 0.0, -np.inf))
    np.testing.assert_allclose(w_b, w_f, rtol=0, atol=0)
    np.testing.assert_allclose(out_b, out_f, rtol=0, atol=0)
    sums = w_b.sum(axis=-1)
    np.testing.assert_allclose(sums[..., mask.any(axis=-1)], 1.0, rtol=1e-12)
    assert (sums[..., ~mask.any(axis=-1)] == 0).all()


def test_the_input_is_not_mutated():
    rng = np.random.default_rng(4)
    q, k, v = _qkv(rng)
    copies = [a.copy() for a in (q, k, v)]
    scaled_dot_product_attention(q, k, v, is_causal=True)
    for a, b in zip((q, k, v), copies):
        np.testing.assert_array_equal(a, b)


def test_causal_mask_is_upper_left_aligned_like_torch():
    for L, S in [(3, 3), (2, 5), (5, 2), (0, 3)]:
        ref = torch.ones(L, S, dtype=torch.bool).tril(diagonal=0).numpy()
        np.testing.assert_array_equal(causal_mask(L, S), ref)


@pytest.mark.parametrize("L,S", [(2, 5), (3, 3), (5, 2), (0, 3), (3, 0)])
def test_lower_right_causal_mask_matches_torch_causal_lower_right(L, S):
    import warnings

    from torch.nn.attention.bias import causal_lower_right

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch warns that L > S gives empty rows
        ref = causal_lower_right(L, S)._materialize().numpy()
    mask = causal_mask(L, S, align="lower-right")
    np.testing.assert_array_equal(mask, ref)
    # Independently: query i sees key j exactly when j <= i + S - L.
    i, j = np.indices((L, S))
    np.testing.assert_array_equal(mask, j <= i + S - L)


def test_lower_right_alignment_empties_the_first_rows_when_queries_outnumber_keys():
    mask = causal_mask(5, 3, align="lower-right")
    assert mask.sum(axis=-1).tolist() == [0, 0, 1, 2, 3]
    assert causal_mask(3, 5, align="lower-right")[:, :3].all()  # every query sees the 3 oldest keys


def test_padding_mask_marks_the_first_lengths_positions():
    np.testing.assert_array_equal(padding_mask([0, 2, 3], 3), [[0, 0, 0], [1, 1, 0], [1, 1, 1]])
    ref = torch.arange(4)[None, :] < torch.tensor([1, 4])[:, None]
    np.testing.assert_array_equal(padding_mask(np.array([1, 4]), 4), ref.numpy())


def test_entropy_known_values_and_torch():
    np.testing.assert_allclose(attention_entropy(np.full(8, 1 / 8)), math.log(8), rtol=1e-15)
    assert attention_entropy([1.0, 0.0, 0.0]) == 0.0
    assert attention_entropy([0.0, 0.0]) == 0.0
    p = softmax(np.random.default_rng(5).normal(size=(4, 7)))
    ref = torch.distributions.Categorical(probs=torch.from_numpy(p)).entropy().numpy()
    # float64 rounding: -Σ p log p over 7 positive terms, log within 4 ulp: |error| <= 2·(γ_9 + 8u)·(H + 1),
    # under 1e-14 here; rtol 1e-12 keeps a wide margin and still rejects a wrong base or a missing term.
    np.testing.assert_allclose(attention_entropy(p), ref, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_entropy_lies_between_zero_and_log_n(n, seed):
    p = softmax(np.random.default_rng(seed).normal(scale=3, size=n))
    h = attention_entropy(p)
    assert -1e-12 <= h <= math.log(n) + 1e-12


def test_lower_right_alignment_places_the_queries_at_the_last_positions():
    w = causal_mask(6) / causal_mask(6).sum(axis=-1, keepdims=True)
    full = attention_distance(w)
    np.testing.assert_allclose(attention_distance(w[-2:], align="lower-right"), full[-2:], rtol=1e-15)
    np.testing.assert_array_equal(attention_distance(w, align="lower-right"), full)  # square: the same


def test_attention_distance_known_values_and_causal_case():
    eye = np.eye(4)
    np.testing.assert_array_equal(attention_distance(eye), 0.0)
    uniform_causal = causal_mask(4) / causal_mask(4).sum(axis=-1, keepdims=True)
    # query i attends uniformly to 0..i: mean distance i/2
    np.testing.assert_allclose(attention_distance(uniform_causal), np.arange(4) / 2, rtol=1e-15)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"q": np.zeros((2, 3)), "k": np.zeros((4, 5)), "v": np.zeros((4, 2))}, ValueError, "q and k"),
        ({"q": np.zeros((2, 3)), "k": np.zeros((4, 3)), "v": np.zeros((5, 2))}, ValueError, "k and v"),
        ({"q": np.zeros(3), "k": np.zeros((4, 3)), "v": np.zeros((4, 2))}, ValueError, r"\bq\b"),
        ({"mask": np.ones((3, 3), bool)}, ValueError, "mask"),
        ({"mask": np.ones((2, 4), bool), "is_causal": True}, ValueError, "mask or is_causal"),
        ({"mask": np.array([["a"] * 4] * 2)}, TypeError, "mask"),
        ({"scale": 0.0}, ValueError, "scale"),
        ({"scale": math.inf}, ValueError, "scale"),
        ({"scale": "2"}, TypeError, "scale"),
        ({"is_causal": 1}, TypeError, "is_causal"),
        ({"q": [["a"]]}, TypeError, r"\bq\b"),
    ],
)
@pytest.mark.parametrize("attention", [scaled_dot_product_attention, tiled_attention], ids=["sdpa", "tiled"])
def test_bad_arguments_are_rejected_by_name(attention, kwargs, error, match):
    args = {"q": np.zeros((2, 3)), "k": np.zeros((4, 3)), "v": np.zeros((4, 2))}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


@pytest.mark.parametrize(
    "call,error,match",
    [
        (lambda: causal_mask(-1), ValueError, "n_q"),
        (lambda: causal_mask(2, -3), ValueError, "n_k"),
        (lambda: causal_mask(2.5), TypeError, "n_q"),
        (lambda: causal_mask(2, 3, align="lower_right"), ValueError, "align"),
        (lambda: padding_mask([1, 5], 4), ValueError, "lengths"),
        (lambda: padding_mask([-1], 4), ValueError, "lengths"),
        (lambda: padding_mask([1.5], 4), TypeError, "lengths"),
        (lambda: padding_mask([1], -2), ValueError, "max_len"),
        (lambda: attention_entropy([-0.5, 1.5]), ValueError, "non-negative"),
        (lambda: attention_distance([0.5, 0.5]), ValueError, "weights"),
        (lambda: attention_distance([[0.5, 0.5]], align="left"), ValueError, "align"),
    ],
)
def test_bad_mask_and_statistic_arguments_are_rejected_by_name(call, error, match):
    with pytest.raises(error, match=match):
        call()
