"""The softmax Jacobian: known values, its four properties, and torch autograd."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import softmax, softmax_jacobian
from rounding_bounds import (
    attention_backward_error,
    exponent_error,
    log_softmax_backward_error,
    softmax_backward_error,
    unit_roundoff,
)


def test_known_value_for_two_equal_scores():
    np.testing.assert_array_equal(softmax_jacobian([0.5, 0.5]), [[0.25, -0.25], [-0.25, 0.25]])


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float64, st.integers(2, 7), elements=st.floats(-20, 20)))
def test_symmetric_psd_rows_sum_to_zero_and_rank_n_minus_1(x):
    p = softmax(x)
    jac = softmax_jacobian(p)
    np.testing.assert_allclose(jac, jac.T, atol=0)
    np.testing.assert_allclose(jac.sum(axis=-1), 0.0, atol=1e-15)
    assert np.linalg.eigvalsh(jac).min() >= -1e-15
    if p.min() > 1e-6:
        assert np.linalg.matrix_rank(jac, tol=1e-12) == x.size - 1


def test_batched_rows_match_torch_autograd():
    x = torch.randn(3, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    ours = softmax_jacobian(softmax(x.numpy()))
    for i in range(3):
        ref = torch.autograd.functional.jacobian(lambda r: torch.softmax(r, -1), x[i])
        # float64 rounding, per side: entries p_i(δ_ij - p_j) carry p_i·(2ε + u), ε = exponent_error of the row.
        np.testing.assert_allclose(ours[i], ref.numpy(), rtol=0, atol=2 * (2 * exponent_error(x[i].numpy()) + unit_roundoff(x.numpy())))


def test_bad_input_is_rejected_by_name():
    with pytest.raises(TypeError, match=r"\bp\b"):
        softmax_jacobian(["a"])
    with pytest.raises(ValueError, match=r"\bp\b"):
        softmax_jacobian(0.5)


# --- vector-Jacobian products -------------------------------------------------

from course_utils import cross_entropy_grad, log_softmax, log_softmax_backward, softmax_backward  # noqa: E402


@settings(max_examples=50, deadline=None)
@given(
    hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6), elements=st.floats(-30, 30)),
    st.integers(0, 2),
)
def test_softmax_backward_equals_the_jacobian_product(x, axis):
    axis = axis % x.ndim
    p = softmax(x, axis=axis)
    g = np.cos(np.arange(x.size)).reshape(x.shape)
    jac = softmax_jacobian(np.moveaxis(p, axis, -1))
    expected = np.moveaxis(np.einsum("...ik,...i->...k", jac, np.moveaxis(g, axis, -1)), -1, axis)
    np.testing.assert_allclose(softmax_backward(g, p, axis=axis), expected, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_backward_functions_match_torch_autograd(axis):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    g = torch.randn(3, 4, 5, dtype=torch.float64, generator=gen)
    torch.softmax(x, dim=axis).backward(g)
    ours = softmax_backward(g.numpy(), softmax(x.detach().numpy(), axis=axis), axis=axis)
    # float64 rounding of two implementations of p ∘ (g - Σ g p) and of g - p·Σ g (rounding_bounds).
    bound = 2 * softmax_backward_error(x.detach().numpy(), g.numpy(), axis)
    np.testing.assert_allclose(ours, x.grad.numpy(), rtol=0, atol=bound)
    x.grad = None
    torch.log_softmax(x, dim=axis).backward(g)
    ours = log_softmax_backward(g.numpy(), log_softmax(x.detach().numpy(), axis=axis), axis=axis)
    bound = 2 * log_softmax_backward_error(x.detach().numpy(), g.numpy(), axis)
    np.testing.assert_allclose(ours, x.grad.numpy(), rtol=0, atol=bound)


def test_cross_entropy_grad_is_p_minus_y_like_torch():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0]], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2])
    torch.nn.functional.cross_entropy(logits, target, reduction="sum").backward()
    onehot = np.eye(3)[target.numpy()]
    # float64 rounding, per side: p - y, with p within exponent_error (relative, p <= 1) and one subtraction.
    bound = 2 * (exponent_error(logits.detach().numpy()) + unit_roundoff(onehot))
    np.testing.assert_allclose(cross_entropy_grad(logits.detach().numpy(), onehot), logits.grad.numpy(), rtol=0, atol=bound)


def test_central_finite_differences_agree_with_softmax_backward():
    x = np.array([0.3, -1.2, 2.0, 0.0])
    g = np.array([1.0, -2.0, 0.5, 3.0])
    h = 1e-6
    numeric = np.array([(g @ softmax(x + h * e) - g @ softmax(x - h * e)) / (2 * h) for e in np.eye(4)])
    np.testing.assert_allclose(softmax_backward(g, softmax(x)), numeric, atol=1e-9)


def test_a_saturated_softmax_passes_almost_no_gradient():
    g = np.array([1.0, -1.0, 0.5])
    small = np.abs(softmax_backward(g, softmax(np.array([100.0, 0.0, -3.0])))).max()
    assert small < 1e-40


@pytest.mark.parametrize("f,names", [(softmax_backward, ("grad_output", "probs")), (log_softmax_backward, ("grad_output", "log_probs")), (cross_entropy_grad, ("logits", "targets"))])
def test_mismatched_shapes_are_rejected_by_name(f, names):
    with pytest.raises(ValueError, match=f"{names[0]} and {names[1]}"):
        f(np.zeros(3), np.full(4, 0.25))


def test_targets_must_be_a_distribution():
    with pytest.raises(ValueError, match="targets"):
        cross_entropy_grad([1.0, 2.0], [1.0, 1.0])


# --- attention_backward ---------------------------------------------------------

from course_utils import attention_backward, scaled_dot_product_attention  # noqa: E402


def torch_attention_grads(q, k, v, g, mask=None, is_causal=False, scale=None):
    """dq, dk, dv from torch autograd through F.scaled_dot_product_attention."""
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    tmask = None if mask is None else torch.as_tensor(mask)
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, is_causal=is_causal, scale=scale)
    out.backward(torch.as_tensor(g))
    return tq.grad.numpy(), tk.grad.numpy(), tv.grad.numpy()


def random_inputs(seed, q_shape, k_shape, ev, dtype=np.float64):
    gen = np.random.default_rng(seed)
    v_shape = k_shape[:-1] + (ev,)
    q, k, v = (gen.normal(size=s).astype(dtype) for s in (q_shape, k_shape, v_shape))
    out_shape = np.broadcast_shapes(q_shape[:-2], k_shape[:-2]) + (q_shape[-2], ev)
    return q, k, v, gen.normal(size=out_shape).astype(dtype)


def test_attention_backward_known_value_by_hand():
    # One query, two keys, scale 1: p = softmax([1, 0]), O = p1, dO = 1.
    p1 = 1 / (1 + math.exp(-1))
    dq, dk, dv = attention_backward([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [0.0]], [[1.0]], scale=1.0)
    ds = np.array([p1 * (1 - p1), -p1 * (1 - p1)])  # p * (dP - <dP, p>) with dP = v = [1, 0]
    np.testing.assert_allclose(dq, [ds @ np.array([[1.0, 0.0], [0.0, 1.0]])], rtol=1e-15)
    np.testing.assert_allclose(dk, np.outer(ds, [1.0, 0.0]), rtol=1e-15)
    np.testing.assert_allclose(dv, [[p1], [1 - p1]], rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float", "scale"])
@pytest.mark.parametrize("L,S", [(5, 5), (3, 7), (6, 2)])
def test_attention_backward_matches_torch_autograd(dtype, kind, L, S):
    q, k, v, g = random_inputs(L * 10 + S, (2, 3, L, 4), (2, 3, S, 4), 5, dtype)
    kwargs = {}
    gen = np.random.default_rng(S)
    if kind == "causal":
        kwargs["is_causal"] = True
    elif kind == "bool":
        kwargs["mask"] = gen.random((L, S)) < 0.7
        kwargs["mask"][:, 0] = True  # no fully masked row here (tested on its own below)
    elif kind == "float":
        kwargs["mask"] = gen.normal(size=(2, 1, L, S)).astype(dtype)
    elif kind == "scale":
        kwargs["scale"] = 0.3
    ours = attention_backward(q, k, v, g, **kwargs)
    ref = torch_attention_grads(q, k, v, g, **kwargs)
    # Rounding of two implementations in this dtype, propagated through the backward pass (rounding_bounds):
    # about 1e-13 in float64 and 5e-4 in float32 here, while a dropped term or a wrong scale moves a gradient by 0.1.
    bounds = attention_backward_error(q, k, v, g, **kwargs)
    for name, a, b, bound in zip("qkv", ours, ref, bounds):
        assert a.dtype == dtype, name
        np.testing.assert_allclose(a, b, rtol=0, atol=2 * bound, err_msg=f"d{name}")


def test_broadcast_batch_dimensions_are_summed_back_like_torch():
    # One key/value set shared by 4 heads: k and v have batch shape (1,), q has (4,).
    q, k, v, g = random_inputs(3, (4, 6, 8), (1, 5, 8), 3)
    ours = attention_backward(q, k, v, g)
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    torch.nn.functional.scaled_dot_product_attention(tq, tk.expand(4, 5, 8), tv.expand(4, 5, 3)).backward(torch.tensor(g))
    # float64 rounding of two implementations, the sums over the 4 heads included (rounding_bounds).
    for a, b, bound in zip(ours, (tq.grad, tk.grad, tv.grad), attention_backward_error(q, k, v, g)):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=2 * bound)


def test_a_fully_masked_row_passes_zero_gradient_not_nan_like_torch():
    q, k, v, g = random_inputs(4, (4, 3), (5, 3), 2)
    mask = np.ones((4, 5), dtype=bool)
    mask[2] = False  # query 2 may attend to nothing
    dq, dk, dv = attention_backward(q, k, v, g, mask=mask)
    assert np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    np.testing.assert_array_equal(dq[2], 0.0)
    # Row 2 adds nothing to dk and dv: the same as leaving query 2 out.
    keep = [0, 1, 3]
    _, dk3, dv3 = attention_backward(q[keep], k, v, g[keep])
    np.testing.assert_allclose(dk, dk3, rtol=1e-12)
    np.testing.assert_allclose(dv, dv3, rtol=1e-12)
    ref = torch_attention_grads(q, k, v, g, mask=mask)
    # float64 rounding of two implementations (rounding_bounds); the masked row's zeros are exact on both sides.
    for a, b, bound in zip((dq, dk, dv), ref, attention_backward_error(q, k, v, g, mask=mask)):
        np.testing.assert_allclose(a, b, rtol=0, atol=2 * bound)


def test_a_float_mask_of_all_minus_inf_also_passes_zero_gradient():
    q, k, v, g = random_inputs(5, (3, 2), (4, 2), 2)
    mask = np.zeros((3, 4))
    mask[0] = -np.inf
    dq, dk, dv = attention_backward(q, k, v, g, mask=mask)
    np.testing.assert_array_equal(dq[0], 0.0)
    assert np.isfinite(dk).all() and np.isfinite(dv).all()


@pytest.mark.parametrize("where", ["q", "k", "v", "grad_out"])
def test_a_nan_in_the_inputs_propagates_and_never_becomes_zero(where):
    q, k, v, g = random_inputs(6, (3, 4), (5, 4), 2)
    arrays = {"q": q, "k": k, "v": v, "grad_out": g}
    arrays[where][0, 0] = np.nan
    dq, dk, dv = attention_backward(arrays["q"], arrays["k"], arrays["v"], arrays["grad_out"])
    # Query 0's row (or key 0, which every query sees) is poisoned: some gradient must be NaN.
    assert np.isnan(dq).any() or np.isnan(dk).any() or np.isnan(dv).any()
    if where in ("q", "grad_out"):
        assert np.isnan(dq[0]).all() if where == "q" else np.isnan(dk).any()


def test_central_finite_differences_agree_with_attention_backward():
    q, k, v, g = random_inputs(7, (3, 4), (5, 4), 2)
    dq, dk, dv = attention_backward(q, k, v, g, scale=0.7)
    h = 1e-6

    def loss(qq, kk, vv):
        return float((scaled_dot_product_attention(qq, kk, vv, scale=0.7)[0] * g).sum())

    for arr, grad, pos in ((q, dq, 0), (k, dk, 1), (v, dv, 2)):
        numeric = np.zeros_like(arr)
        for idx in np.ndindex(arr.shape):
            plus, minus = [a.copy() for a in (q, k, v)], [a.copy() for a in (q, k, v)]
            plus[pos][idx] += h
            minus[pos][idx] -= h
            numeric[idx] = (loss(*plus) - loss(*minus)) / (2 * h)
        np.testing.assert_allclose(grad, numeric, atol=1e-8)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4), st.floats(0.05, 5.0), st.integers(0, 2**32 - 1))
def test_dk_sums_to_zero_over_keys_direction_and_dv_columns_sum_to_grad_out(L, S, E, scale, seed):
    # Softmax rows are shift-invariant, so moving every key by the same vector changes nothing:
    # the dk rows sum to zero. And every weight row sums to 1, so dv summed over keys is dO summed over queries.
    q, k, v, g = random_inputs(seed, (L, E), (S, E), 3)
    _, dk, dv = attention_backward(q, k, v, g, scale=scale)
    np.testing.assert_allclose(dk.sum(axis=0), 0.0, atol=1e-10 * (1 + np.abs(dk).max()))
    np.testing.assert_allclose(dv.sum(axis=0), g.sum(axis=0), rtol=1e-10, atol=1e-10)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.floats(0.1, 10.0), st.integers(0, 2**32 - 1))
def test_dq_is_scale_times_the_gradient_wrt_the_scores_times_k(L, S, scale, seed):
    # Doubling the scale while halving q leaves the forward pass unchanged and doubles dq.
    q, k, v, g = random_inputs(seed, (L, 3), (S, 3), 2)
    dq1, dk1, _ = attention_backward(q, k, v, g, scale=scale)
    dq2, dk2, _ = attention_backward(q / 2, k, v, g, scale=2 * scale)
    np.testing.assert_allclose(dq2, 2 * dq1, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(dk2, dk1, rtol=1e-9, atol=1e-12)


def test_attention_backward_does_not_mutate_its_inputs():
    q, k, v, g = random_inputs(8, (3, 4), (5, 4), 2)
    copies = [a.copy() for a in (q, k, v, g)]
    attention_backward(q, k, v, g, is_causal=True)
    for a, b in zip((q, k, v, g), copies):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"grad_out": np.zeros((3, 3))}, ValueError, "grad_out"),
        ({"grad_out": np.zeros((2, 2))}, ValueError, "grad_out"),
        ({"grad_out": ["a"]}, TypeError, "grad_out"),
        ({"k": np.zeros((5, 3))}, ValueError, r"\bq\b.*\bk\b"),
        ({"v": np.zeros((4, 2))}, ValueError, r"\bk\b.*\bv\b"),
        ({"scale": 0.0}, ValueError, "scale"),
        ({"scale": -1.0}, ValueError, "scale"),
        ({"scale": float("nan")}, ValueError, "scale"),
        ({"scale": float("inf")}, ValueError, "scale"),
        ({"mask": np.ones((4, 4), dtype=bool)}, ValueError, "mask"),
        ({"mask": np.ones((3, 5), dtype=bool), "is_causal": True}, ValueError, "mask"),
        ({"is_causal": 1}, TypeError, "is_causal"),
    ],
)
def test_attention_backward_rejects_bad_arguments_by_name(kwargs, error, match):
    gen = np.random.default_rng(0)
    args = {"q": gen.normal(size=(3, 4)), "k": gen.normal(size=(5, 4)), "v": gen.normal(size=(5, 2)),
            "grad_out": gen.normal(size=(3, 2))}
    extra = {key: kwargs[key] for key in kwargs if key not in args}
    args.update({key: kwargs[key] for key in kwargs if key in args})
    with pytest.raises(error, match=match):
        attention_backward(args["q"], args["k"], args["v"], args["grad_out"], **extra)
