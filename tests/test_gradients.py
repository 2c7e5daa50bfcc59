"""The softmax Jacobian: known values, its four properties, and torch autograd."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from course_utils import softmax, softmax_jacobian


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
        np.testing.assert_allclose(ours[i], ref.numpy(), rtol=1e-12, atol=1e-15)


def test_bad_input_is_rejected_by_name():
    with pytest.raises(TypeError, match=r"\bp\b"):
        softmax_jacobian(["a"])
    with pytest.raises(ValueError, match=r"\bp\b"):
        softmax_jacobian(0.5)
