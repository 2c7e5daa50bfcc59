"""Online softmax equals softmax for every block size; states merge exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import merge_softmax_states, online_softmax, softmax, softmax_state
from rounding_bounds import exponent_error

rows = hnp.arrays(
    np.float64,
    hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
    elements=st.floats(-1e4, 1e4, allow_nan=False),
)


@settings(max_examples=80, deadline=None)
@given(rows, st.integers(1, 12), st.integers(-3, 2))
def test_online_softmax_equals_softmax_for_every_block_size(x, block_size, axis):
    axis = axis % x.ndim
    np.testing.assert_allclose(
        online_softmax(x, axis=axis, block_size=block_size), softmax(x, axis=axis), rtol=1e-12, atol=1e-300
    )


@pytest.mark.parametrize("block_size", [None, 1, 2, 3, 4, 7, 10, 11])
def test_block_sizes_that_do_not_divide_the_length_give_the_same_result(block_size):
    x = np.random.default_rng(1).normal(scale=30.0, size=(3, 10))
    np.testing.assert_allclose(online_softmax(x, block_size=block_size), softmax(x), rtol=1e-13)


@settings(max_examples=60, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 12), elements=st.floats(-700, 700)), st.integers(0, 12))
def test_merging_two_blocks_gives_the_state_of_the_whole_row(x, cut):
    cut = min(cut, x.size)
    merged = merge_softmax_states(softmax_state(x[:cut]), softmax_state(x[cut:]))
    whole = softmax_state(x)
    assert merged.max == whole.max
    np.testing.assert_allclose(merged.normalizer, whole.normalizer, rtol=1e-12)


def test_merging_is_commutative_and_the_empty_state_is_its_identity():
    a, b = softmax_state([3.0, -1.0]), softmax_state([5.0])
    ab, ba = merge_softmax_states(a, b), merge_softmax_states(b, a)
    np.testing.assert_array_equal(ab.max, ba.max)
    np.testing.assert_allclose(ab.normalizer, ba.normalizer, rtol=1e-15)
    empty = softmax_state(np.empty(0))
    assert (empty.max[0], empty.normalizer[0]) == (-math.inf, 0.0)
    same = merge_softmax_states(empty, a)
    np.testing.assert_array_equal(same.max, a.max)
    np.testing.assert_array_equal(same.normalizer, a.normalizer)


def test_the_normalizer_is_sum_of_exp_minus_max_known_value():
    state = softmax_state([0.0, 1.0, 2.0])
    assert state.max[0] == 2.0
    assert state.normalizer[0] == pytest.approx(math.exp(-2) + math.exp(-1) + 1.0, rel=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_online_softmax_matches_torch(dtype):
    x = np.random.default_rng(2).normal(scale=10.0, size=(4, 6, 33)).astype(dtype)
    for axis in (0, 1, 2):
        # Rounding of two softmaxes in this dtype: each weight within exponent_error (relative), about 1e-13 in
        # float64 and 2e-4 in float32 for these rows of scores up to 40 (where 1e-5 held by this CPU's rounding);
        # the smallest weights, e^-80, stay normal numbers, so no absolute slack beyond the smallest normal.
        rtol = 2 * exponent_error(x, axis)
        np.testing.assert_allclose(
            online_softmax(x, axis=axis, block_size=5), torch.softmax(torch.from_numpy(x), dim=axis).numpy(),
            rtol=rtol, atol=np.finfo(dtype).tiny,
        )


@pytest.mark.parametrize("row", [[-math.inf, -math.inf], [math.inf, 0.0], [math.nan, 1.0], [0.0, -math.inf, 2.0]], ids=str)
def test_special_values_follow_softmax(row):
    np.testing.assert_array_equal(online_softmax(row, block_size=1), softmax(row))


def test_dtype_is_kept_and_float16_is_exact_for_equal_scores():
    p = online_softmax(np.zeros(4096, dtype=np.float16), block_size=1000)
    assert p.dtype == np.float16 and (p == np.float16(2.0**-12)).all()


def test_the_input_is_not_mutated():
    x = np.array([[1.0, 5.0, -2.0]])
    before = x.copy()
    online_softmax(x, block_size=2)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("block_size,error", [(0, ValueError), (-3, ValueError), (2.0, TypeError), (True, TypeError)])
def test_a_bad_block_size_is_rejected_by_name(block_size, error):
    with pytest.raises(error, match="block_size"):
        online_softmax([1.0, 2.0], block_size=block_size)


def test_bad_x_and_axis_are_rejected_by_name():
    with pytest.raises(TypeError, match=r"\bx\b"):
        online_softmax(["a"])
    with pytest.raises(ValueError, match="axis"):
        online_softmax([1.0], axis=3)
