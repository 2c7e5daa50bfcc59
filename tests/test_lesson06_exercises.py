"""Lesson 06's exercise references agree with the entmax package, and each prediction is what the mappings give."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from course_utils import exercises

EX = exercises.load("06")


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_the_entmax_package(case):
    (x,) = case.args
    np.testing.assert_allclose(EX.q1.reference(x), entmax.sparsemax(torch.from_numpy(x), dim=-1).numpy(), atol=1e-12)


def test_q1_cases_include_rows_with_zeros_and_rows_without():
    supports = [np.count_nonzero(EX.q1.reference(*c.args)) for c in EX.q1.cases]
    sizes = [c.args[0].size for c in EX.q1.cases]
    assert any(s < n for s, n in zip(supports, sizes)) and any(s == n for s, n in zip(supports, sizes))


def test_q2_reference_is_one_plus_t_over_two_then_saturated():
    np.testing.assert_allclose(EX.q2.reference, [[0.7, 0.3], [1.0, 0.0]], atol=1e-15)
