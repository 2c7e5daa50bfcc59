"""Lesson 04's exercises: q2 promises the gradient without the Jacobian, and its checker holds it to that."""

from __future__ import annotations

import numpy as np

from course_utils import exercises


def test_q2_an_answer_that_builds_the_jacobian_is_rejected_and_told_why():
    ex = exercises.load("04").q2

    def with_jacobian(g, p):
        rows = [(np.diag(pr) - np.outer(pr, pr)) @ gr for gr, pr in zip(np.atleast_2d(g), np.atleast_2d(p))]
        return np.reshape(rows, np.shape(g))

    message = ex.evaluate(with_jacobian).message
    assert "Not yet" in message and "as an n x n Jacobian does" in message


def test_q2_the_vector_formula_passes_on_the_long_row_too():
    ex = exercises.load("04").q2
    assert max(np.shape(case.args[0])[-1] for case in ex.cases) >= 1000
    assert ex.evaluate(lambda g, p: p * (g - (g * p).sum(axis=-1, keepdims=True))).passed
