"""Lesson 06b's exercise references agree with the entmax package, torch autograd and the course's backward passes."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from course_utils import entmax15_backward, entmax_bisect, exercises, softmax_backward, sparsemax_backward

EX = exercises.load("06b")


def test_q1_reference_is_where_the_row_turns_one_hot():
    row = np.array([1.0, 0.2, -0.5])
    alpha = EX.q1.reference
    assert alpha == pytest.approx(2.25)
    assert np.count_nonzero(entmax_bisect(row, alpha=alpha - 0.01)) == 2
    np.testing.assert_array_equal(entmax_bisect(row, alpha=alpha + 1e-9), [1.0, 0.0, 0.0])
    below = entmax.entmax_bisect(torch.from_numpy(row), alpha=alpha - 0.01, dim=-1).numpy()
    assert np.count_nonzero(below) == 2


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: f"alpha={c.args[2]}")
def test_q2_reference_equals_autograd_through_the_entmax_package(case):
    g, p, alpha = case.args
    row = np.array([0.2, 1.4, -0.5, 0.9, 0.6])
    x = torch.from_numpy(row).requires_grad_(True)
    out = torch.softmax(x, -1) if alpha == 1.0 else entmax.entmax_bisect(x, alpha, dim=-1, n_iter=60)
    out.backward(torch.from_numpy(g))
    np.testing.assert_allclose(EX.q2.reference(g, p, alpha), x.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize(
    "alpha,backward", [(1.0, softmax_backward), (1.5, entmax15_backward), (2.0, sparsemax_backward)], ids=["softmax", "entmax15", "sparsemax"]
)
def test_q2_reference_unifies_the_three_backward_passes_of_course_utils(alpha, backward):
    case = next(c for c in EX.q2.cases if c.args[2] == alpha)
    g, p, _ = case.args
    np.testing.assert_allclose(EX.q2.reference(g, p, alpha), backward(g, p), atol=1e-14)


def test_q2_cases_include_rows_with_exact_zeros_and_rows_without():
    zeros = {case.args[2]: bool((case.args[1] == 0).any()) for case in EX.q2.cases}
    assert zeros == {1.0: False, 1.3: False, 1.5: True, 1.8: True, 2.0: True}
