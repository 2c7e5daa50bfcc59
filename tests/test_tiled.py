"""Tiled (FlashAttention-style) attention: equal to the full computation, its logsumexp, masks, torch, bad input."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import logsumexp, scaled_dot_product_attention
from course_utils.tiled import tiled_attention
from rounding_bounds import attention_error, exponent_error, score_error, unit_roundoff


def _qkv(rng, batch=(2, 3), L=5, S=7, E=4, Ev=3, spread=1.0):
    return (
        rng.normal(scale=spread, size=(*batch, L, E)),
        rng.normal(scale=spread, size=(*batch, S, E)),
        rng.normal(size=(*batch, S, Ev)),
    )


def _torch(*arrays):
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in arrays]


def _masked_scaled_scores(q, k, mask=None, is_causal=False, scale=None):
    scores = q @ np.swapaxes(k, -1, -2) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        mask = np.tri(q.shape[-2], k.shape[-2], dtype=bool)
    if mask is not None:
        mask = np.asarray(mask)
        scores = np.where(mask, scores, -np.inf) if mask.dtype == bool else scores + mask
    return scores


def test_known_value_by_hand():
    q, k, v = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[10.0], [20.0]])
    out, lse = tiled_attention(q, k, v, scale=1.0, block_k=1)
    p = 1 / (1 + math.exp(-1))
    np.testing.assert_allclose(out, [[10 * p + 20 * (1 - p)]], rtol=1e-15)
    np.testing.assert_allclose(lse, [math.log(math.e + 1)], rtol=1e-15)


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("L,S", [(5, 5), (3, 8), (8, 3)])
@pytest.mark.parametrize("blocks", [(1, 1), (2, 3), (4, 4), (64, 64)], ids=str)
def test_equals_scaled_dot_product_attention_for_every_block_size(kind, L, S, blocks):
    rng = np.random.default_rng(L * 10 + S)
    q, k, v = _qkv(rng, L=L, S=S, spread=2.0)
    kwargs = {}
    if kind == "bool":
        m = rng.random((3, L, S)) > 0.4
        m[:, 0] = False  # one fully masked row per head
        kwargs["mask"] = m
    elif kind == "float":
        kwargs["mask"] = np.where(rng.random((2, 1, L, S)) > 0.3, 0.0, -np.inf) + rng.normal(size=(2, 1, L, S))
    elif kind == "causal":
        kwargs["is_causal"] = True
    out, _ = tiled_attention(q, k, v, block_q=blocks[0], block_k=blocks[1], **kwargs)
    ref, _ = scaled_dot_product_attention(q, k, v, **kwargs)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["none", "bool", "float", "causal"])
@pytest.mark.parametrize("L,S", [(6, 6), (4, 9), (9, 4)])
def test_matches_torch_sdpa(kind, L, S):
    rng = np.random.default_rng(100 + L * 10 + S)
    q, k, v = _qkv(rng, L=L, S=S, E=8, Ev=5)
    kwargs, tkwargs = {}, {}
    if kind == "bool":
        m = rng.random((L, S)) > 0.5
        m[-1] = False
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "float":
        m = rng.normal(size=(3, L, S))
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "causal":
        kwargs["is_causal"] = tkwargs["is_causal"] = True
    out, _ = tiled_attention(q, k, v, block_q=3, block_k=2, **kwargs)
    ref = F.scaled_dot_product_attention(*_torch(q, k, v), **tkwargs).numpy()
    # float64 rounding of two implementations, each within attention_error (rounding_bounds).
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, **kwargs))


@pytest.mark.parametrize("kind", ["none", "bool", "causal"])
def test_lse_is_the_logsumexp_of_the_scaled_masked_scores(kind):
    rng = np.random.default_rng(7)
    q, k, v = _qkv(rng, L=6, S=11, spread=3.0)
    kwargs = {"mask": rng.random((6, 11)) > 0.5} if kind == "bool" else {"is_causal": True} if kind == "causal" else {}
    _, lse = tiled_attention(q, k, v, block_q=4, block_k=3, **kwargs)
    scores = _masked_scaled_scores(q, k, **kwargs)
    # float64 rounding: our scores differ from these by score_error, each logsumexp is within exponent_error of
    # them plus a last rounding of u·|lse|: about 1e-14 here.
    bound = 2 * exponent_error(scores, input_error=score_error(q, k, mask=kwargs.get("mask")))
    np.testing.assert_allclose(lse, torch.logsumexp(torch.from_numpy(scores), dim=-1).numpy(), rtol=2 * unit_roundoff(lse), atol=bound)
    np.testing.assert_allclose(lse, logsumexp(scores, axis=-1), rtol=1e-13, atol=1e-14)


def test_the_lse_recomputes_the_weights_tile_by_tile():
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng, batch=(), L=6, S=9)
    _, lse = tiled_attention(q, k, v, block_q=2, block_k=4)
    _, weights = scaled_dot_product_attention(q, k, v)
    scores = _masked_scaled_scores(q, k)
    # What a backward pass does: P = exp(S - lse) for one tile, with no max and no sum.
    np.testing.assert_allclose(np.exp(scores[2:4, 4:8] - lse[2:4, None]), weights[2:4, 4:8], rtol=1e-13)


@pytest.mark.parametrize("blocks", [(1, 1), (2, 5), (8, 8)], ids=str)
def test_a_fully_masked_row_gives_zero_output_and_lse_minus_inf(blocks):
    rng = np.random.default_rng(3)
    q, k, v = _qkv(rng, batch=(), L=3, S=5)
    mask = np.array([[True, False, True, False, False], [False] * 5, [True] * 5])
    out, lse = tiled_attention(q, k, v, mask=mask, block_q=blocks[0], block_k=blocks[1])
    assert (out[1] == 0).all() and lse[1] == -np.inf
    assert np.isfinite(out).all() and np.isfinite(lse[[0, 2]]).all()
    ref = F.scaled_dot_product_attention(*_torch(q, k, v), attn_mask=torch.from_numpy(mask)).numpy()
    # float64 rounding of two implementations, each within attention_error; the masked row's zeros are exact.
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, mask=mask))
    float_mask = np.where(mask, 0.0, -np.inf)
    np.testing.assert_array_equal(tiled_attention(q, k, v, mask=float_mask, block_q=blocks[0], block_k=blocks[1])[1][1], -np.inf)


def test_empty_keys_give_zero_output_and_empty_queries_give_empty_output():
    out, lse = tiled_attention(np.ones((2, 3)), np.ones((0, 3)), np.ones((0, 4)))
    assert out.shape == (2, 4) and (out == 0).all() and (lse == -np.inf).all()
    out, lse = tiled_attention(np.ones((0, 3)), np.ones((5, 3)), np.ones((5, 4)))
    assert out.shape == (0, 4) and lse.shape == (0,)


def test_batch_dimensions_broadcast_like_matmul():
    rng = np.random.default_rng(4)
    q, k, v = rng.normal(size=(2, 1, 5, 4)), rng.normal(size=(3, 6, 4)), rng.normal(size=(6, 2))
    out, lse = tiled_attention(q, k, v, block_q=2, block_k=4)
    ref, _ = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 5, 2) and lse.shape == (2, 3, 5)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)


def test_large_scores_do_not_overflow():
    q = np.array([[30.0, 0.0], [0.0, 30.0]])
    k = np.array([[30.0, 0.0], [-30.0, 0.0], [0.0, 30.0]])
    out, lse = tiled_attention(q, k, np.eye(3), scale=1.0, block_k=1)
    np.testing.assert_allclose(out, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], atol=1e-300)
    np.testing.assert_allclose(lse, [900.0, 900.0], rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept_and_float32_matches_torch(dtype):
    rng = np.random.default_rng(5)
    q, k, v = (a.astype(dtype) for a in _qkv(rng, L=9, S=10))
    out, lse = tiled_attention(q, k, v, block_q=4, block_k=3, is_causal=True)
    assert out.dtype == dtype and lse.dtype == dtype
    ref = F.scaled_dot_product_attention(*_torch(q, k, v), is_causal=True).numpy()
    # Rounding of two implementations in this dtype, each within attention_error: about 1e-13 in float64, and in
    # float32 (u = 2^-24, torch's exp within 20 ulp) about 1e-4, where 1e-5 held only by this CPU's rounding.
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, is_causal=True))


def test_the_inputs_are_not_mutated():
    rng = np.random.default_rng(6)
    q, k, v = _qkv(rng)
    mask = rng.random((5, 7)) > 0.5
    copies = [a.copy() for a in (q, k, v, mask)]
    tiled_attention(q, k, v, mask=mask, block_q=2, block_k=2)
    for a, b in zip((q, k, v, mask), copies):
        np.testing.assert_array_equal(a, b)


def test_peak_memory_grows_with_the_tile_not_with_the_score_matrix():
    rng = np.random.default_rng(9)
    q, k, v = (rng.normal(size=(512, 16)) for _ in range(3))
    peaks = []
    for fn in (lambda: tiled_attention(q, k, v, block_q=32, block_k=32), lambda: scaled_dot_product_attention(q, k, v)):
        tracemalloc.start()
        fn()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[0] < 512 * 512 * 8 / 4 < peaks[1]  # tiled: far less than one (L, S) float64 matrix


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 7), st.integers(1, 7), st.integers(1, 9), st.integers(1, 9),
    st.sampled_from(["none", "bool", "causal"]), st.integers(0, 2**32 - 1),
)
def test_any_block_sizes_give_the_same_result(L, S, block_q, block_k, kind, seed):
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, batch=(2,), L=L, S=S, E=3, Ev=2, spread=3.0)
    kwargs = {"mask": rng.random((L, S)) > 0.5} if kind == "bool" else {"is_causal": True} if kind == "causal" else {}
    out, lse = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, **kwargs)
    one_tile, lse_one = tiled_attention(q, k, v, block_q=L, block_k=S, **kwargs)
    ref, _ = scaled_dot_product_attention(q, k, v, **kwargs)
    np.testing.assert_allclose(out, one_tile, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lse, lse_one, rtol=1e-12, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_a_bool_mask_equals_its_float_version(L, S, seed):
    rng = np.random.default_rng(seed)
    q, k, v = _qkv(rng, batch=(), L=L, S=S)
    mask = rng.random((L, S)) > 0.5
    out_b, lse_b = tiled_attention(q, k, v, mask=mask, block_q=2, block_k=2)
    out_f, lse_f = tiled_attention(q, k, v, mask=np.where(mask, 0.0, -np.inf), block_q=2, block_k=2)
    np.testing.assert_array_equal(out_b, out_f)
    np.testing.assert_array_equal(lse_b, lse_f)


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"block_q": 0}, ValueError, "block_q"),
        ({"block_k": -2}, ValueError, "block_k"),
        ({"block_q": 2.0}, TypeError, "block_q"),
        ({"block_k": True}, TypeError, "block_k"),
        ({"block_k": "8"}, TypeError, "block_k"),
        ({"q": np.zeros((2, 2, 3)), "k": np.zeros((3, 4, 3)), "v": np.zeros((4, 2))}, ValueError, "batch dimensions"),
        ({"q": np.zeros((2, 2, 3)), "k": np.zeros((2, 4, 3)), "v": np.zeros((3, 4, 2))}, ValueError, r"\bv\b"),
    ],
)
def test_bad_tiling_and_batch_arguments_are_rejected_by_name(kwargs, error, match):
    # The arguments shared with scaled_dot_product_attention are checked in tests/test_attention.py.
    args = {"q": np.zeros((2, 3)), "k": np.zeros((4, 3)), "v": np.zeros((4, 2))}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        tiled_attention(args.pop("q"), args.pop("k"), args.pop("v"), **args)


def test_the_same_bad_arguments_give_the_same_messages_as_scaled_dot_product_attention():
    q, k, v = np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 2))
    calls = (
        lambda f: f(q, np.zeros((4, 5)), v),
        lambda f: f(q, k, np.zeros((5, 2))),
        lambda f: f(q, k, v, mask=np.ones((3, 3), bool)),
        lambda f: f(q, k, v, scale=-1.0),
    )
    for call in calls:
        with pytest.raises(ValueError) as ours:
            call(tiled_attention)
        with pytest.raises(ValueError) as theirs:
            call(scaled_dot_product_attention)
        assert str(ours.value) == str(theirs.value)


def _ceil(a, b):
    return -(-a // b)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12), st.integers(1, 12), st.integers(1, 5), st.integers(1, 5),
    st.sampled_from(["none", "bool", "causal"]), st.sampled_from([np.float32, np.float64]),
)
def test_counts_equal_the_closed_form_io_model(L, S, block_q, block_k, kind, dtype):
    E, Ev = 3, 2
    rng = np.random.default_rng(L * 100 + S)
    q, k, v = (a.astype(dtype) for a in _qkv(rng, batch=(), L=L, S=S, E=E, Ev=Ev))
    mask = rng.random((L, S)) > 0.5
    kwargs = {"mask": mask} if kind == "bool" else {"is_causal": True} if kind == "causal" else {}
    counts = {}
    out, lse = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, counts=counts, **kwargs)
    b = np.dtype(dtype).itemsize
    n_q_tiles = _ceil(L, block_q)
    # Keys each query tile reads: all S, or (causal) up to the tile's last query.
    keys_seen = [min(S, L, i0 + block_q) if kind == "causal" else S for i0 in range(0, L, block_q)]
    tiles = sum(_ceil(n, block_k) for n in keys_seen)
    assert counts["tiles"] == tiles
    assert counts["tiles_skipped"] == n_q_tiles * _ceil(S, block_k) - tiles
    if kind == "causal":
        crossing = sum(
            1 for i0 in range(0, L, block_q) for j0 in range(0, keys_seen[i0 // block_q], block_k)
            if min(j0 + block_k, keys_seen[i0 // block_q]) - 1 > i0
        )
        assert counts["tiles_masked"] == crossing
    else:
        assert counts["tiles_masked"] == (tiles if kind == "bool" else 0)
    assert counts["bytes_read"] == {
        "q": L * E * b, "k": sum(keys_seen) * E * b, "v": sum(keys_seen) * Ev * b,
        "mask": L * S if kind == "bool" else 0, "out": 0, "lse": 0,
    }
    assert counts["bytes_written"] == {"q": 0, "k": 0, "v": 0, "mask": 0, "out": out.nbytes, "lse": lse.nbytes}
    if kind != "causal":  # K and V are read once per query tile (FlashAttention-1, Theorem 2)
        assert counts["bytes_read"]["k"] == n_q_tiles * k.nbytes


@pytest.mark.parametrize("n", [1, 3, 8])
def test_causal_square_tiles_compute_the_lower_triangle_and_mask_only_the_diagonal(n):
    b = 4
    rng = np.random.default_rng(n)
    q, k, v = _qkv(rng, batch=(), L=n * b, S=n * b)
    counts = {}
    tiled_attention(q, k, v, is_causal=True, block_q=b, block_k=b, counts=counts)
    assert (counts["tiles"], counts["tiles_skipped"], counts["tiles_masked"]) == (n * (n + 1) // 2, n * (n - 1) // 2, n)


def test_counts_add_up_over_calls_and_do_not_change_the_result():
    rng = np.random.default_rng(11)
    q, k, v = _qkv(rng, L=6, S=9)
    counts = {"tiles": 100, "note": "kept"}
    out, lse = tiled_attention(q, k, v, block_q=4, block_k=4, counts=counts)
    once = {key: (dict(val) if isinstance(val, dict) else val) for key, val in counts.items()}
    out2, lse2 = tiled_attention(q, k, v, block_q=4, block_k=4, counts=counts)
    ref_out, ref_lse = tiled_attention(q, k, v, block_q=4, block_k=4)
    np.testing.assert_array_equal(out, ref_out)
    np.testing.assert_array_equal(lse, ref_lse)
    assert once["tiles"] == 100 + 2 * 3 and counts["tiles"] == 100 + 2 * 6 and counts["note"] == "kept"
    assert counts["bytes_read"]["q"] == 2 * once["bytes_read"]["q"] == 2 * q.nbytes


def test_a_broadcast_mask_is_counted_once_and_batch_tiles_span_every_head():
    rng = np.random.default_rng(12)
    q, k, v = _qkv(rng, batch=(2, 3), L=5, S=7)
    mask = rng.random((5, 7)) > 0.3  # the same mask for all six heads
    counts = {}
    out, lse = tiled_attention(q, k, v, mask=mask, block_q=5, block_k=7, counts=counts)
    assert counts["tiles"] == counts["tiles_masked"] == 1
    assert counts["bytes_read"]["mask"] == mask.nbytes
    assert counts["bytes_read"]["q"] == q.nbytes and counts["bytes_written"]["out"] == out.nbytes


def test_float16_inputs_count_float16_bytes():
    rng = np.random.default_rng(13)
    q, k, v = (a.astype(np.float16) for a in _qkv(rng, batch=(), L=4, S=6))
    counts = {}
    out, lse = tiled_attention(q, k, v, block_q=2, block_k=3, counts=counts)
    assert out.dtype == np.float16
    assert counts["bytes_read"]["k"] == 2 * k.nbytes and counts["bytes_written"]["out"] == out.nbytes == 4 * 3 * 2


@pytest.mark.parametrize("bad", [[], 0, "tiles"])
def test_counts_that_is_not_a_dict_is_rejected_by_name(bad):
    with pytest.raises(TypeError, match="counts"):
        tiled_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.zeros((4, 2)), counts=bad)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 9), st.integers(1, 9), st.integers(1, 6), st.integers(1, 6), st.integers(1, 5), st.integers(1, 4),
    st.sampled_from(["none", "bool", "float", "causal"]), st.sampled_from([np.float32, np.float64]),
    st.integers(0, 2**32 - 1),
)
def test_matches_torch_sdpa_on_random_shapes_masks_and_dtypes(L, S, block_q, block_k, E, Ev, kind, dtype, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (a.astype(dtype) for a in _qkv(rng, batch=(2,), L=L, S=S, E=E, Ev=Ev, spread=2.0))
    kwargs, tkwargs = {}, {}
    if kind == "bool":
        m = rng.random((L, S)) > 0.4
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "float":
        m = np.where(rng.random((2, L, S)) > 0.3, 0.0, -np.inf) + rng.normal(size=(2, L, S))
        m = m.astype(dtype)
        kwargs["mask"], tkwargs["attn_mask"] = m, torch.from_numpy(m)
    elif kind == "causal":
        kwargs["is_causal"] = tkwargs["is_causal"] = True
    out, _ = tiled_attention(q, k, v, block_q=block_q, block_k=block_k, **kwargs)
    ref = F.scaled_dot_product_attention(*_torch(q, k, v), **tkwargs).numpy()
    if kind == "float":  # torch gives NaN for a row with no allowed key under a float mask; we give zeros
        ref = np.where(np.isneginf(m).all(axis=-1)[..., None], 0.0, ref)
    assert out.dtype == dtype
    # Rounding of two implementations in this dtype, each within attention_error (rounding_bounds): at most about
    # 1e-13 in float64 and 2e-4 in float32 for these shapes, while a wrong mask or scale misses by 1e-2 or more.
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, **kwargs))
