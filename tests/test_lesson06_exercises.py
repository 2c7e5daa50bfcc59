"""Lesson 06's exercise references agree with the entmax package, and each prediction is what the mappings give."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from course_utils import exercises
from rounding_bounds import entmax_error

EX = exercises.load("06")


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_the_entmax_package(case):
    (x,) = case.args
    # float64 rounding of two sort-based sparsemaxes, each within entmax_error: up to 1.3e-12 for the case of
    # scores of 1000, where the threshold rounds at 1000·u.
    np.testing.assert_allclose(EX.q1.reference(x), entmax.sparsemax(torch.from_numpy(x), dim=-1).numpy(), atol=2 * entmax_error(x, alpha=2.0))


def test_q1_cases_include_rows_with_zeros_and_rows_without():
    supports = [np.count_nonzero(EX.q1.reference(*c.args)) for c in EX.q1.cases]
    sizes = [c.args[0].size for c in EX.q1.cases]
    assert any(s < n for s, n in zip(supports, sizes)) and any(s == n for s, n in zip(supports, sizes))


def test_q2_reference_is_one_plus_t_over_two_then_saturated():
    np.testing.assert_allclose(EX.q2.reference, [[0.7, 0.3], [1.0, 0.0]], atol=1e-15)


def test_q1_cases_include_an_all_negative_row_with_a_support_of_several_keys():
    rows = [c.args[0] for c in EX.q1.cases if (c.args[0] < 0).all()]
    assert rows and any(np.count_nonzero(EX.q1.reference(row)) > 1 for row in rows)


def test_q1_an_answer_wrong_only_on_all_negative_rows_is_rejected_and_named():
    wrong = EX.q1.variants["uniform weights for a row without a positive score"]
    right_elsewhere = [EX.q1.agrees_with_reference(wrong, c) for c in EX.q1.cases if not (c.args[0] < 0).all()]
    assert all(right_elsewhere)
    message = EX.q1.evaluate(wrong).message
    assert "[-2.  -1.3 -3.5 -1.1]" in message and "A score at or below 0 is a score like any other" in message


@pytest.mark.parametrize("eps", [1e-3, 1e-6, 1e-9, 1e-10, 1e-12, 1e-15, 1e-300])
@pytest.mark.parametrize("how", ["renormalized", "clipped"])
def test_q1_an_answer_with_small_weights_instead_of_exact_zeros_is_rejected(eps, how):
    def answer(x):
        if how == "renormalized":
            p = EX.q1.reference(x) + eps
            return p / p.sum()
        z = np.sort(x)[::-1]
        k = np.arange(1, x.size + 1)
        support = np.sum(1 + k * z > np.cumsum(z))
        return np.maximum(x - (np.cumsum(z)[support - 1] - 1) / support, eps)

    verdict = EX.q1.evaluate(answer)
    assert verdict.status == "incorrect"
    message = verdict.message
    assert "to a key whose sparsemax weight is exactly 0" in message or "max(x - tau, 0) = 0 exactly" in message
    # Never named after a different member of the family (once "sparsemax plus 1e-10" for max(x - tau, 1e-12)).
    if eps < 1e-9:
        assert "This is exactly what" not in message or "small weights instead of exact zeros" in message
        assert "plus 1e-" not in message and "max(x - tau, 1e-" not in message


def _float32_sparsemax(x):
    x = np.asarray(x, dtype=np.float32)
    z = np.sort(x)[::-1]
    cumsum, k = np.cumsum(z), np.arange(1, x.size + 1, dtype=np.float32)
    support = np.sum(1 + k * z > cumsum)
    return np.maximum(x - (cumsum[support - 1] - 1) / support, 0)


def test_q1_a_float32_answer_is_told_it_is_float32():
    message = EX.q1.evaluate(_float32_sparsemax).message
    assert "float32" in message and "differs from" not in message and "shift-invariant" not in message


def _where_sparsemax(x):
    z = np.sort(x)[::-1]
    cumsum = np.cumsum(z)
    k = np.arange(1, x.size + 1)
    support = k[1 + k * z > cumsum][-1]
    tau = (cumsum[support - 1] - 1) / support
    return np.where(x > tau, x - tau, 0.0)


def _bisection_sparsemax(x):
    lo, hi = x.max() - 1, x.max()
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if np.maximum(x - mid, 0).sum() >= 1 else (lo, mid)
    support = x > lo
    return np.maximum(x - (x[support].sum() - 1) / support.sum(), 0)


@pytest.mark.parametrize(
    "answer",
    [
        _where_sparsemax,
        lambda x: entmax.sparsemax(torch.tensor(x), dim=-1),
        _bisection_sparsemax,
    ],
    ids=["np.where", "the entmax package", "bisection on tau"],
)
def test_q1_other_correct_answers_pass_with_their_exact_zeros(answer):
    assert EX.q1.evaluate(answer).status == "correct"


def test_q1_a_nan_gets_advice_about_the_support_not_about_exp():
    message = EX.q1.evaluate(EX.q1.variants["taking the positive scores as the support"]).message
    assert "A score at or below 0" in message
    nan_message = EX.q1.evaluate(lambda x: np.full(x.shape, np.nan)).message
    assert "support size of 0" in nan_message and "overflow" not in nan_message
