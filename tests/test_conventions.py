"""The package keeps its conventions: dtypes, NumPy scalars, `where=`, fully masked rows, NaN and the lse.

Each convention is stated in the module docstrings; this file checks it for every
public function it concerns, against NumPy, SciPy, JAX's documented semantics and torch.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
import torch

import course_utils as cu
from course_utils import (
    log_softmax,
    scaled_dot_product_attention,
    softmax,
    tiled_attention,
)
from rounding_bounds import attention_error, exponent_error

FLOATS = [np.float16, np.float32, np.float64]
_rng = np.random.default_rng(11)
_X = _rng.normal(size=(3, 5))
_P = softmax(_X)
_Q, _K, _V = _rng.normal(size=(4, 8)), _rng.normal(size=(6, 8)), _rng.normal(size=(6, 3))


def _out(result):
    """The array results of a call (a tuple or NamedTuple gives each of its fields)."""
    if isinstance(result, tuple):
        return [np.asarray(r) for r in result]
    return [np.asarray(result)]


#: Each public function that takes float arrays, called on inputs of one float dtype.
CALLS = {
    "softmax": lambda t: softmax(_X.astype(t)),
    "naive_softmax": lambda t: cu.naive_softmax(_X.astype(t)),
    "log_softmax": lambda t: log_softmax(_X.astype(t)),
    "logsumexp": lambda t: cu.logsumexp(_X.astype(t)),
    "softmax with where=": lambda t: softmax(_X.astype(t), where=_X > 0),
    "log_softmax with where=": lambda t: log_softmax(_X.astype(t), where=_X > 0),
    "online_softmax": lambda t: cu.online_softmax(_X.astype(t), block_size=2),
    "softmax_state": lambda t: cu.softmax_state(_X.astype(t)),
    "merge_softmax_states": lambda t: cu.merge_softmax_states(
        cu.softmax_state(_X[:, :2].astype(t)), cu.softmax_state(_X[:, 2:].astype(t))
    ),
    "softmax_jacobian": lambda t: cu.softmax_jacobian(_P[0].astype(t)),
    "softmax_backward": lambda t: cu.softmax_backward(_X.astype(t), _P.astype(t)),
    "log_softmax_backward": lambda t: cu.log_softmax_backward(_X.astype(t), np.log(_P).astype(t)),
    "cross_entropy_grad": lambda t: cu.cross_entropy_grad(_X.astype(t), _P.astype(t)),
    "sparsemax": lambda t: cu.sparsemax(_X.astype(t)),
    "entmax15": lambda t: cu.entmax15(_X.astype(t)),
    "entmax_bisect": lambda t: cu.entmax_bisect(_X.astype(t)),
    "sparsemax_backward": lambda t: cu.sparsemax_backward(_X.astype(t), cu.sparsemax(_X).astype(t)),
    "entmax15_backward": lambda t: cu.entmax15_backward(_X.astype(t), cu.entmax15(_X).astype(t)),
    "scaled_dot_product_attention": lambda t: scaled_dot_product_attention(_Q.astype(t), _K.astype(t), _V.astype(t)),
    "scaled_dot_product_attention, causal": lambda t: scaled_dot_product_attention(
        _Q.astype(t), _K.astype(t), _V.astype(t), is_causal=True
    ),
    "tiled_attention": lambda t: tiled_attention(_Q.astype(t), _K.astype(t), _V.astype(t), block_q=2, block_k=4),
    "tiled_attention_backward": lambda t: cu.tiled_attention_backward(
        _Q.astype(t), _K.astype(t), _V.astype(t), *tiled_attention(_Q.astype(t), _K.astype(t), _V.astype(t)),
        np.ones((4, 3), dtype=t), block_q=2, block_k=4,
    ),
    "split_kv_attention": lambda t: cu.split_kv_attention(_Q.astype(t), _K.astype(t), _V.astype(t), n_splits=4),
    "merge_attention_parts": lambda t: cu.merge_attention_parts(
        np.stack([tiled_attention(_Q, _K[:3], _V[:3])[0], tiled_attention(_Q, _K[3:], _V[3:])[0]]).astype(t),
        np.stack([tiled_attention(_Q, _K[:3], _V[:3])[1], tiled_attention(_Q, _K[3:], _V[3:])[1]]).astype(t),
    ),
    "attention_entropy": lambda t: cu.attention_entropy(_P.astype(t)),
    "attention_distance": lambda t: cu.attention_distance(softmax(_X[:, :3]).astype(t)),
    "attention_backward": lambda t: cu.attention_backward(
        _Q.astype(t), _K.astype(t), _V.astype(t), np.ones((4, 3), dtype=t)
    ),
    "entmax_alpha_backward": lambda t: cu.entmax_alpha_backward(_X.astype(t), cu.entmax15(_X).astype(t), 1.5),
    "qk_norm": lambda t: cu.qk_norm(_X.astype(t)),
    "scalable_softmax": lambda t: cu.scalable_softmax(_X.astype(t), 0.5),
    "sigmoid_attention": lambda t: cu.sigmoid_attention(_X.astype(t)),
    "sink_attention": lambda t: cu.sink_attention(_Q.astype(t), _K.astype(t), _V.astype(t), 0.5, block_k=4),
    "softcap": lambda t: cu.softcap(_X.astype(t), 2.0),
    "softmax_one": lambda t: cu.softmax_one(_X.astype(t)),
    "softmax_with_sink": lambda t: cu.softmax_with_sink(_X.astype(t), 0.5),
    "softpick": lambda t: cu.softpick(_X.astype(t)),
}

#: Public names that take no float array, each with the reason.
NO_FLOAT_INPUT = {
    "causal_mask": "sizes in, bool out",
    "padding_mask": "integer lengths in, bool out",
    "toy_sentence": "a seed and sizes in; draws float64 data",
    "exp_limits": "takes a dtype and returns Python floats for it",
    "sample_dot_products": "a random generator and sizes in; draws float64 samples",
    "sample_scores": "a random generator and sizes in; draws float64 samples",
    "dot_product_variance": "a random generator and sizes in",
    "dot_product_tail": "Python numbers in and out",
    "attention_row_stats": "returns summary statistics as Python floats, as documented",
    "check_claim": "prints a comparison",
    "conclude": "a statement and a bool in; prints a line",
    "describe_figure": "a figure and its text in; the figure out",
    "table": "rows of cells in; text and HTML out (numbers formatted as given)",
    "markdown_table": "Markdown text in; the same text out",
    "sample_attention_gradients": "a random generator and sizes in; draws float64 samples",
    "llama4_query_scale": "integer token positions in",
    "yarn_logit_scale": "a Python number in and out",
    "cross_check": "compares with torch and prints",
    "setup": "seeds and prints",
    "use_course_style": "plotting style",
    "plot_exp_overflow": "draws a figure; no array in",
}


def test_every_public_function_is_covered_by_the_dtype_test():
    functions = {
        name for name in cu.__all__ if callable(getattr(cu, name)) and not isinstance(getattr(cu, name), type)
    }
    covered = {name.split(" ")[0].rstrip(",") for name in CALLS} | set(NO_FLOAT_INPUT)
    assert functions <= covered, f"add these to CALLS or NO_FLOAT_INPUT: {sorted(functions - covered)}"


#: The documented exception: an online-softmax state is an accumulator, float32 for float16 blocks.
ACCUMULATORS = {"softmax_state", "merge_softmax_states"}


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda t: t.__name__)
@pytest.mark.parametrize("name", CALLS)
def test_float_inputs_keep_their_dtype_in_every_public_function(name, dtype):
    with np.errstate(all="ignore"):
        results = _out(CALLS[name](dtype))
    expected = np.float32 if name in ACCUMULATORS and dtype == np.float16 else dtype
    for r in results:
        if r.dtype.kind == "f":
            assert r.dtype == expected, f"{name} turned {dtype.__name__} into {r.dtype}"


def test_sdpa_with_the_default_scale_keeps_float32_and_agrees_with_torch():
    q, k, v = (a.astype(np.float32) for a in (_Q, _K, _V))
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.dtype == weights.dtype == np.float32
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)))
    # float32 rounding of two implementations (u = 2^-24, exp within 20 ulp in torch's kernel): about 1e-4 here,
    # while a missing or wrong scale moves the output by 0.1.
    np.testing.assert_allclose(out, ref.numpy(), rtol=0, atol=2 * attention_error(q, k, v))


# --- 0-d inputs give NumPy scalars, as NumPy and SciPy do ---------------------------


@pytest.mark.parametrize(
    "ours, theirs, value",
    [
        (softmax, scipy.special.softmax, 1000.0),
        (log_softmax, scipy.special.log_softmax, 1.0),
        (cu.logsumexp, scipy.special.logsumexp, 3.0),
        (softmax, scipy.special.softmax, np.float32(2.0)),
    ],
)
def test_a_0d_input_gives_a_numpy_scalar_as_scipy_does(ours, theirs, value):
    mine, scipy_value = ours(value), theirs(value)
    assert isinstance(mine, np.generic) and not isinstance(mine, np.ndarray)
    assert type(mine) is type(np.asarray(value)[()]), "the dtype of the input is kept"
    # Each result is exact (softmax of one entry is 1, log_softmax 0, logsumexp the entry itself), so
    # approx's default rel 1e-6 bounds no rounding at all; it only lets float32 and float64 compare.
    assert float(mine) == pytest.approx(float(scipy_value))


# --- where= (True = keep), as jax.nn.softmax documents it ---------------------------


def test_where_gives_left_out_entries_weight_zero_and_renormalizes_the_rest():
    x = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 4.0]])
    keep = np.array([[True, False, True], [True, True, True]])
    out = softmax(x, where=keep)
    np.testing.assert_array_equal(out[0, 1], 0.0)
    np.testing.assert_allclose(out[0, [0, 2]], softmax(x[0, [0, 2]]), rtol=1e-15)
    np.testing.assert_allclose(out[1], softmax(x[1]), rtol=1e-15)
    np.testing.assert_allclose(np.exp(log_softmax(x, where=keep)), out, rtol=1e-15, atol=0)


def test_where_agrees_with_torch_masked_fill_on_rows_with_something_kept():
    x = _rng.normal(size=(4, 6))
    keep = _rng.random((4, 6)) < 0.6
    keep[:, 0] = True
    ref = torch.softmax(torch.from_numpy(x).masked_fill(~torch.from_numpy(keep), -math.inf), dim=-1)
    # float64 rounding: each weight's relative error is within exponent_error per side, about 1e-14 for
    # these rows of 6; rtol 1e-12 keeps a margin and still rejects any weight given to a left-out entry.
    assert 2 * exponent_error(x) < 1e-12
    np.testing.assert_allclose(softmax(x, where=keep), ref.numpy(), rtol=1e-12, atol=0)


def test_a_row_with_nothing_kept_is_all_zeros_and_all_minus_inf_not_nan():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    keep = np.array([[True, True], [False, False]])
    np.testing.assert_array_equal(softmax(x, where=keep)[1], [0.0, 0.0])
    np.testing.assert_array_equal(log_softmax(x, where=keep)[1], [-np.inf, -np.inf])


def test_where_broadcasts_along_the_leading_axes_and_works_with_axis_none_and_temperature():
    x = _rng.normal(size=(2, 3, 4))
    keep = np.array([True, False, True, True])
    np.testing.assert_allclose(softmax(x, where=keep)[1, 2, [0, 2, 3]], softmax(x[1, 2, [0, 2, 3]]), rtol=1e-14)
    out = softmax(x, axis=None, where=x > 0, temperature=2.0)
    assert out.sum() == pytest.approx(1.0) and (out[x <= 0] == 0).all()


def test_left_out_scores_may_be_inf_or_huge_without_harm():
    x = np.array([np.inf, 1.0, 1e308, 0.0])
    np.testing.assert_allclose(softmax(x, where=np.array([False, True, False, True])), [0, softmax([1.0, 0.0])[0], 0, softmax([1.0, 0.0])[1]])


@pytest.mark.parametrize("function", [softmax, log_softmax])
def test_a_where_that_is_not_bool_is_rejected_by_name(function):
    with pytest.raises(TypeError, match="where"):
        function(np.ones(3), where=np.array([1, 0, 1]))


@pytest.mark.parametrize("function", [softmax, log_softmax])
@pytest.mark.parametrize("shape", [(2,), (3, 3), (4, 1, 3)])
def test_a_where_that_does_not_broadcast_to_x_is_rejected_by_name(function, shape):
    with pytest.raises(ValueError, match="where"):
        function(np.ones((2, 3)), where=np.ones(shape, bool))


# --- Sparse mappings: a fully masked row ---------------------------------------------


@pytest.mark.parametrize("mapping", [cu.sparsemax, cu.entmax15, cu.entmax_bisect], ids=lambda f: f.__name__)
def test_a_fully_masked_row_of_a_sparse_mapping_is_nan_as_in_softmax_and_other_rows_are_unharmed(mapping):
    x = np.array([[-np.inf, -np.inf, -np.inf], [1.0, 0.5, -np.inf]])
    out = mapping(x)
    assert np.isnan(out[0]).all() and np.isnan(softmax(x)[0]).all()
    np.testing.assert_allclose(out[1], mapping(x[1]), rtol=1e-12)
    assert out[1, 2] == 0.0


def test_the_entmax_package_raises_on_a_fully_masked_row_where_course_utils_gives_nan():
    entmax = pytest.importorskip("entmax")
    for mapping in (entmax.sparsemax, entmax.entmax15):  # sort-based: an index error from the support size
        with pytest.raises((IndexError, RuntimeError), match="out of bounds"):
            mapping(torch.full((1, 3), -math.inf), dim=-1)
    assert torch.isnan(entmax.entmax_bisect(torch.full((1, 3), -math.inf), dim=-1)).all()


# --- NaN propagates through tiled attention as in the naive form ---------------------


def _nan_rows(out):
    return np.isnan(out).any(axis=-1).tolist()


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("where_nan", ["q", "k"])
def test_nan_in_tiled_attention_gives_nan_in_exactly_the_rows_the_naive_form_does(where_nan, is_causal):
    q, k, v = _rng.normal(size=(5, 4)), _rng.normal(size=(7, 4)), _rng.normal(size=(7, 3))
    {"q": q, "k": k}[where_nan][{"q": 1, "k": 3}[where_nan], 0] = np.nan
    tiled, lse = tiled_attention(q, k, v, is_causal=is_causal, block_q=2, block_k=3)
    naive, _ = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    assert _nan_rows(tiled) == _nan_rows(naive) and any(_nan_rows(naive))
    assert np.isnan(lse).tolist() == _nan_rows(naive)
    np.testing.assert_allclose(tiled[~np.isnan(naive)], naive[~np.isnan(naive)], rtol=1e-12)


def test_nan_in_a_value_reaches_the_rows_that_attend_to_it():
    q, k, v = _rng.normal(size=(5, 4)), _rng.normal(size=(7, 4)), _rng.normal(size=(7, 3))
    v[3, 0] = np.nan
    assert all(_nan_rows(tiled_attention(q, k, v, block_q=2, block_k=3)[0]))
    # With a causal mask, the naive product weights @ v also gives rows 0-2 NaN (0 * NaN = NaN).
    # tiled_attention skips the tiles above the diagonal, as FlashAttention does: rows 0-1 never
    # read v[3]; row 2 shares a tile with row 3 and gets 0 * NaN there, as the naive form does.
    causal = tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3)[0]
    naive, _ = scaled_dot_product_attention(q, k, v, is_causal=True)
    assert _nan_rows(causal) == [False, False, True, True, True] and all(_nan_rows(naive))


@pytest.mark.parametrize("where_nan", ["q", "k"])
def test_without_a_mask_nan_spreads_as_in_torch(where_nan):
    q, k, v = _rng.normal(size=(5, 4)), _rng.normal(size=(7, 4)), _rng.normal(size=(7, 3))
    {"q": q, "k": k}[where_nan][2, 1] = np.nan
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    assert _nan_rows(tiled_attention(q, k, v, block_q=2, block_k=3)[0]) == _nan_rows(ref)


def test_torch_math_sdpa_spreads_a_masked_nan_key_to_every_row_where_course_utils_does_not():
    # torch 2.13's math backend adds the mask to the scores, and NaN + (-inf) is NaN: a NaN key
    # poisons even the queries that may not attend to it. The course's functions, like
    # masked_fill, replace masked scores with -inf, so only the rows that attend to the key are NaN.
    q, k, v = _rng.normal(size=(5, 4)), _rng.normal(size=(7, 4)), _rng.normal(size=(7, 3))
    k[4, 0] = np.nan
    ref = torch.nn.functional.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), is_causal=True)
    assert all(_nan_rows(ref.numpy()))
    assert _nan_rows(tiled_attention(q, k, v, is_causal=True, block_q=2, block_k=3)[0]) == [False] * 4 + [True]


# --- The lse of a fully masked row: -inf to merge, +inf to recompute P ---------------


def _halves(mask_left_row0: bool, masked_lse: str):
    q, k, v = _rng.normal(size=(3, 4)), _rng.normal(size=(8, 4)), _rng.normal(size=(8, 2))
    mask = np.ones((3, 8), bool)
    mask[0, :4] = False  # row 0 may not attend to the left half of the keys
    mask[2, :] = False  # row 2 may attend to nothing
    left = tiled_attention(q, k[:4], v[:4], mask=mask[:, :4], block_q=2, block_k=2, masked_lse=masked_lse)
    right = tiled_attention(q, k[4:], v[4:], mask=mask[:, 4:], block_q=2, block_k=2, masked_lse=masked_lse)
    full, _ = scaled_dot_product_attention(q, k, v, mask)
    return left, right, full


def test_an_lse_of_minus_inf_merges_partial_results_and_plus_inf_does_not():
    (o1, l1), (o2, l2), full = _halves(True, "-inf")
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp(l1, l2)
        w1, w2 = np.exp(l1 - lse), np.exp(l2 - lse)
    merged = np.where(np.isneginf(lse)[:, None], 0.0, w1[:, None] * o1 + w2[:, None] * o2)
    np.testing.assert_allclose(merged, full, rtol=1e-12, atol=1e-15)
    (o1, l1), (o2, l2), _ = _halves(True, "+inf")
    with np.errstate(invalid="ignore"):
        lse = np.logaddexp(l1, l2)
        broken = np.exp(l1 - lse)[:, None] * o1 + np.exp(l2 - lse)[:, None] * o2
    assert np.isnan(broken[0]).all(), "+inf for row 0's empty left half makes the merge NaN"


def test_an_lse_of_plus_inf_recomputes_p_as_zeros_and_minus_inf_gives_nan():
    q, k, v = _rng.normal(size=(3, 4)), _rng.normal(size=(5, 4)), _rng.normal(size=(5, 2))
    mask = np.ones((3, 5), bool)
    mask[1] = False
    scores = np.where(mask, q @ k.T / 2.0, -np.inf)
    _, weights = scaled_dot_product_attention(q, k, v, mask)
    _, lse = tiled_attention(q, k, v, mask=mask, block_k=2, masked_lse="+inf")
    np.testing.assert_allclose(np.exp(scores - lse[:, None]), weights, rtol=1e-12, atol=0)
    _, lse = tiled_attention(q, k, v, mask=mask, block_k=2)
    with np.errstate(invalid="ignore"):
        assert np.isnan(np.exp(scores - lse[:, None])[1]).all()


@pytest.mark.parametrize("bad, error", [("inf", ValueError), ("-Infinity", ValueError), (-np.inf, TypeError), (None, TypeError)])
def test_a_bad_masked_lse_is_rejected_by_name(bad, error):
    with pytest.raises(error, match="masked_lse"):
        tiled_attention(_Q, _K, _V, masked_lse=bad)
