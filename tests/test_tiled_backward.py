"""The tiled backward pass equals the full one and torch autograd, from the output and the lse alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import attention_backward, causal_mask
from course_utils.tiled import tiled_attention, tiled_attention_backward
from rounding_bounds import attention_backward_error


def _problem(rng, batch, L, S, E, Ev, kind, dtype=np.float64):
    q = rng.normal(size=(*batch, L, E)).astype(dtype)
    k = rng.normal(size=(*batch, S, E)).astype(dtype)
    v = rng.normal(size=(*batch, S, Ev)).astype(dtype)
    kwargs: dict = {}
    if kind == "bool":
        m = rng.random((L, S)) > 0.4
        m[0] = False  # a query that may attend to nothing
        kwargs["mask"] = m
    elif kind == "float":
        kwargs["mask"] = rng.normal(size=(L, S)).astype(dtype)
    elif kind == "causal":
        kwargs["is_causal"] = True
    d_out = rng.normal(size=(*batch, L, Ev)).astype(dtype)
    return q, k, v, d_out, kwargs


def _autograd(q, k, v, d_out, kwargs):
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    extra = dict(kwargs)
    if "mask" in extra:
        extra["attn_mask"] = torch.from_numpy(extra.pop("mask"))
    (F.scaled_dot_product_attention(tq, tk, tv, **extra) * torch.from_numpy(d_out)).sum().backward()
    return [t.grad.numpy() for t in (tq, tk, tv)]


def _tiled(q, k, v, d_out, kwargs, block_q, block_k, masked_lse="-inf"):
    out, lse = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, masked_lse=masked_lse, **kwargs)
    return tiled_attention_backward(q, k, v, out, lse, d_out, block_q=block_q, block_k=block_k, **kwargs)


@settings(max_examples=60, deadline=None)
@given(
    L=st.integers(1, 13),
    S=st.integers(1, 13),
    E=st.integers(1, 6),
    Ev=st.integers(1, 5),
    batch=st.sampled_from([(), (2,), (2, 3)]),
    block_q=st.integers(1, 9),
    block_k=st.integers(1, 9),
    kind=st.sampled_from(["none", "bool", "float", "causal"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    seed=st.integers(0, 2**16),
)
def test_equals_torch_autograd_and_attention_backward_on_random_problems(L, S, E, Ev, batch, block_q, block_k, kind, dtype, seed):
    q, k, v, d_out, kwargs = _problem(np.random.default_rng(seed), batch, L, S, E, Ev, kind, dtype)
    grads = _tiled(q, k, v, d_out, kwargs, block_q, block_k)
    # Rounding of two implementations in this dtype, each within attention_backward_error (rounding_bounds): about
    # 1e-13 in float64 and 1e-4 to 1e-3 in float32 here, while a dropped term or a wrong scale misses by 1e-2 or more.
    bounds = attention_backward_error(q, k, v, d_out, **kwargs)
    for ours, theirs, name, bound in zip(grads, _autograd(q, k, v, d_out, kwargs), "qkv", bounds):
        assert ours.dtype == dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * bound, err_msg=f"d{name} vs torch autograd")
    if dtype == np.float64:
        for ours, theirs, name in zip(grads, attention_backward(q, k, v, d_out, **kwargs), "qkv"):
            np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12, err_msg=f"d{name} vs attention_backward")


@pytest.mark.parametrize("L,S", [(5, 9), (9, 5), (7, 7)])
@pytest.mark.parametrize("blocks", [(1, 1), (2, 3), (4, 4), (64, 64)], ids=str)
def test_causal_with_l_not_equal_s_matches_autograd_for_every_block_size(L, S, blocks):
    q, k, v, d_out, kwargs = _problem(np.random.default_rng(L * S), (2,), L, S, 4, 3, "causal")
    # float64 rounding of two implementations, each within attention_backward_error.
    bounds = attention_backward_error(q, k, v, d_out, **kwargs)
    for ours, theirs, bound in zip(_tiled(q, k, v, d_out, kwargs, *blocks), _autograd(q, k, v, d_out, kwargs), bounds):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * bound)


def test_keys_that_no_query_sees_get_exactly_zero_gradient():
    q, k, v, d_out, kwargs = _problem(np.random.default_rng(1), (), 3, 8, 4, 2, "causal")
    _, dk, dv = _tiled(q, k, v, d_out, kwargs, 2, 2)
    assert (dk[3:] == 0).all() and (dv[3:] == 0).all()  # upper-left: keys 3..7 lie beyond the last query


@pytest.mark.parametrize("masked_lse", ["-inf", "+inf"])
def test_a_fully_masked_row_passes_no_gradient_with_either_lse_convention(masked_lse):
    rng = np.random.default_rng(2)
    q, k, v, d_out, _ = _problem(rng, (2,), 6, 7, 4, 3, "none")
    mask = rng.random((6, 7)) > 0.3
    mask[[1, 4]] = False
    dq, dk, dv = _tiled(q, k, v, d_out, {"mask": mask}, 4, 3, masked_lse=masked_lse)
    assert np.isfinite(dq).all() and np.isfinite(dk).all() and np.isfinite(dv).all()
    assert (dq[:, [1, 4]] == 0).all()
    # The masked rows add nothing to dk and dv: dropping them leaves them unchanged.
    keep = [0, 2, 3, 5]
    _, dk_kept, dv_kept = _tiled(q[:, keep], k, v, d_out[:, keep], {"mask": mask[keep]}, 4, 3)
    np.testing.assert_allclose(dk, dk_kept, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(dv, dv_kept, rtol=1e-12, atol=1e-15)


def test_recomputing_p_from_an_lse_of_minus_inf_without_care_gives_nan():
    """What the function avoids: exp(S - lse) with S = lse = -inf for a fully masked row."""
    rng = np.random.default_rng(3)
    q, k = rng.normal(size=(2, 4)), rng.normal(size=(3, 4))
    mask = np.array([[True, False, True], [False, False, False]])
    _, lse = tiled_attention(q, k, rng.normal(size=(3, 2)), mask=mask)
    scores = np.where(mask, q @ k.T / 2.0, -np.inf)
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.exp(scores - lse[:, None])[1]).all()


def test_a_lower_right_causal_mask_as_in_decoding_matches_autograd():
    q, k, v, d_out, _ = _problem(np.random.default_rng(4), (3,), 4, 11, 5, 2, "none")
    kwargs = {"mask": causal_mask(4, 11, align="lower-right")}
    # float64 rounding of two implementations, each within attention_backward_error.
    bounds = attention_backward_error(q, k, v, d_out, **kwargs)
    for ours, theirs, bound in zip(_tiled(q, k, v, d_out, kwargs, 3, 4), _autograd(q, k, v, d_out, kwargs), bounds):
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * bound)


def test_broadcast_batch_dimensions_are_summed_back_to_each_input():
    rng = np.random.default_rng(5)
    q, k, v = rng.normal(size=(2, 3, 5, 4)), rng.normal(size=(3, 6, 4)), rng.normal(size=(1, 1, 6, 2))
    out, lse = tiled_attention(q, k, v, block_q=2, block_k=4)
    d_out = rng.normal(size=out.shape)
    grads = tiled_attention_backward(q, k, v, out, lse, d_out, block_q=2, block_k=4)
    assert [g.shape for g in grads] == [q.shape, k.shape, v.shape]
    for ours, theirs in zip(grads, attention_backward(q, k, v, d_out)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_an_explicit_scale_is_used_in_the_weights_and_in_the_chain_rule():
    q, k, v, d_out, _ = _problem(np.random.default_rng(6), (), 5, 6, 3, 2, "none")
    out, lse = tiled_attention(q, k, v, scale=0.7, block_q=2, block_k=4)
    grads = tiled_attention_backward(q, k, v, out, lse, d_out, scale=0.7, block_q=2, block_k=4)
    for ours, theirs in zip(grads, attention_backward(q, k, v, d_out, scale=0.7)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_large_scores_do_not_overflow():
    q, k, v, d_out, _ = _problem(np.random.default_rng(7), (), 4, 6, 3, 2, "none")
    q, k = q * 40, k * 40  # scores in the thousands: exp would overflow without the lse
    grads = _tiled(q, k, v, d_out, {}, 2, 2)
    assert all(np.isfinite(g).all() for g in grads)
    for ours, theirs in zip(grads, attention_backward(q, k, v, d_out)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9)


def test_the_inputs_are_not_mutated():
    q, k, v, d_out, _ = _problem(np.random.default_rng(8), (2,), 4, 5, 3, 2, "none")
    out, lse = tiled_attention(q, k, v)
    before = [a.copy() for a in (q, k, v, out, lse, d_out)]
    tiled_attention_backward(q, k, v, out, lse, d_out, block_q=3, block_k=2)
    for a, b in zip((q, k, v, out, lse, d_out), before):
        np.testing.assert_array_equal(a, b)


def test_a_nan_in_a_query_reaches_only_the_gradients_it_touches():
    q, k, v, d_out, _ = _problem(np.random.default_rng(9), (), 4, 5, 3, 2, "none")
    q[2, 0] = np.nan
    out, lse = tiled_attention(q, k, v)
    dq, dk, dv = tiled_attention_backward(q, k, v, out, lse, d_out, block_q=2, block_k=2)
    assert np.isnan(dq[2]).all() and np.isfinite(dq[[0, 1, 3]]).all()
    assert np.isnan(dk).any() and np.isnan(dv).any()


@pytest.mark.parametrize(
    "change, error, match",
    [
        ({"out": np.zeros((4, 3))}, ValueError, "out must have shape"),
        ({"d_out": np.zeros((5, 2))}, ValueError, "d_out must have shape"),
        ({"lse": np.zeros((4, 1))}, ValueError, "lse must have shape"),
        ({"lse": np.array(["a"] * 4)}, TypeError, "lse"),
        ({"block_q": 0}, ValueError, "block_q"),
        ({"block_k": 2.0}, TypeError, "block_k"),
        ({"is_causal": True, "mask": np.ones((4, 5), bool)}, ValueError, "mask or is_causal"),
        ({"mask": np.ones((3, 5), bool)}, ValueError, "mask of shape"),
        ({"scale": -1.0}, ValueError, "scale"),
        ({"k": np.zeros((5, 4))}, ValueError, "q and k"),
    ],
)
def test_bad_arguments_are_rejected_by_name(change, error, match):
    q, k, v, d_out, _ = _problem(np.random.default_rng(10), (), 4, 5, 3, 2, "none")
    out, lse = tiled_attention(q, k, v)
    args = {"q": q, "k": k, "v": v, "out": out, "lse": lse, "d_out": d_out, **change}
    positional = [args.pop(name) for name in ("q", "k", "v", "out", "lse", "d_out")]
    with pytest.raises(error, match=match):
        tiled_attention_backward(*positional, **args)


@settings(max_examples=30, deadline=None)
@given(
    L=st.integers(1, 10),
    S=st.integers(1, 10),
    blocks=st.tuples(st.integers(1, 6), st.integers(1, 6)),
    masked_lse=st.sampled_from(["-inf", "+inf"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    seed=st.integers(0, 2**16),
)
def test_an_additive_mask_with_minus_inf_rows_matches_torch_autograd(L, S, blocks, masked_lse, dtype, seed):
    rng = np.random.default_rng(seed)
    q, k, v, d_out, _ = _problem(rng, (2,), L, S, 4, 3, "none", dtype)
    mask = np.where(rng.random((L, S)) > 0.4, rng.normal(size=(L, S)), -np.inf).astype(dtype)
    mask[rng.integers(L)] = -np.inf  # a query that may attend to nothing, through -inf in a float mask
    grads = _tiled(q, k, v, d_out, {"mask": mask}, *blocks, masked_lse=masked_lse)
    # Rounding of two implementations in this dtype, each within attention_backward_error.
    bounds = attention_backward_error(q, k, v, d_out, mask=mask)
    for ours, theirs, bound in zip(grads, _autograd(q, k, v, d_out, {"mask": mask}), bounds):
        assert np.isfinite(ours).all()
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=2 * bound)
