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
    np.testing.assert_allclose(ours, x.grad.numpy(), rtol=1e-12, atol=1e-15)
    x.grad = None
    torch.log_softmax(x, dim=axis).backward(g)
    ours = log_softmax_backward(g.numpy(), log_softmax(x.detach().numpy(), axis=axis), axis=axis)
    np.testing.assert_allclose(ours, x.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_cross_entropy_grad_is_p_minus_y_like_torch():
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.0, 3.0, 1.0]], dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 2])
    torch.nn.functional.cross_entropy(logits, target, reduction="sum").backward()
    onehot = np.eye(3)[target.numpy()]
    np.testing.assert_allclose(cross_entropy_grad(logits.detach().numpy(), onehot), logits.grad.numpy(), rtol=1e-12)


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
