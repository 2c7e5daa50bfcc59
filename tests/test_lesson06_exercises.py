"""Lesson 06's exercise references agree with the entmax package, and each prediction is what the mappings give."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from course_utils import exercises
from rounding_bounds import entmax_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

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


# --- q1: slips of the support, named; q2: a zero that must be exact ---------------------------------


def _sorted_test(first_k):
    """A learner's sort-based sparsemax whose k starts at `first_k` in the support test."""
    def answer(x):
        z = np.sort(x)[::-1]
        cumsum = np.cumsum(z)
        k = np.arange(first_k, first_k + x.size)
        support = np.sum(1 + k * z > cumsum)
        return np.maximum(x - (cumsum[support - 1] - 1) / support, 0)

    return answer


def _michelot(steps):
    """Michelot's algorithm, stopped after `steps` refinements of the support."""
    def answer(x):
        tau = (x.sum() - 1) / x.size
        for _ in range(steps):
            support = x > tau
            tau = (x[support].sum() - 1) / support.sum()
        return np.maximum(x - tau, 0)

    return answer


@pytest.mark.parametrize(
    ("answer", "named", "step"),
    [
        (_sorted_test(0), "counting k from 0", "`k = np.arange(1, x.size + 1)`"),
        (_michelot(1), "one Michelot step", "until `support` stops changing"),
        (lambda x: (np.arange(x.size) == np.argmax(x)).astype(float), "one-hot on the largest score", "top gap is 0.2"),
    ],
    ids=["k from 0", "one Michelot step", "one-hot"],
)
def test_q1_slips_of_the_support_are_named_with_a_next_step_about_sparsemax(answer, named, step, capsys):
    verdict = EX.q1.check(answer)
    assert not verdict
    assert named in _unwrapped(capsys.readouterr().out)
    assert step in verdict.next_step


def test_q1_michelot_iterated_to_convergence_and_k_from_1_pass(capsys):
    assert EX.q1.check(_michelot(20)), capsys.readouterr().out
    assert EX.q1.check(_sorted_test(1)), capsys.readouterr().out


def test_q1_an_unexplained_sum_error_gets_sparsemax_s_next_step_not_softmax_s():
    def bisection(x, halvings=10):
        lo, hi = x.max() - 1, x.max()
        for _ in range(halvings):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.maximum(x - mid, 0).sum() >= 1 else (lo, mid)
        return np.maximum(x - (lo + hi) / 2, 0)

    verdict = EX.q1.evaluate(bisection)
    assert verdict.status == "incorrect" and "does not sum to 1" in verdict.message
    assert "`tau`" in verdict.next_step and "keepdims" not in verdict.next_step


def test_q1_an_answer_that_special_cases_rows_far_below_0_is_rejected():
    def uniform_below(x):
        return np.full(x.shape, 1 / x.size) if x.max() < -1.5 else EX.q1.reference(x)

    assert EX.q1.evaluate(uniform_below).status == "incorrect"


@pytest.mark.parametrize("small", [3e-4, 1e-4, 1e-9])
def test_q2_a_small_weight_where_sparsemax_gives_exactly_0_is_rejected_and_named(small, capsys):
    verdict = EX.q2.check([[0.7, 0.3], [1 - small, small]])
    assert not verdict
    assert "where sparsemax gives exactly 0" in _unwrapped(capsys.readouterr().out)
    assert "`tau = (1.5 - 1) / 1 = 0.5`" in verdict.next_step


@pytest.mark.parametrize(
    "answer",
    [[[0.7, 0.3], [1, 0]], ((0.7002, 0.2998), (1.0, -0.0)), np.array([[0.7, 0.3], [1.0, 0.0]]),
     torch.tensor([[0.7, 0.3], [1.0, 0.0]])],
    ids=["list", "rounded tuple", "ndarray", "tensor"],
)
def test_q2_the_answer_with_an_exact_zero_passes_in_any_container(answer, capsys):
    assert EX.q2.check(answer), capsys.readouterr().out


# --- rerun 33: the right four numbers in the wrong layout are named (C8) ---------------------------


@pytest.mark.parametrize(
    "answer,named,step",
    [
        ([[0.7, 1.0], [0.3, 0.0]], "transposed", "`np.transpose`"),
        ([[1.0, 0.0], [0.7, 0.3]], "the rows are swapped", "`your_answer[::-1]`"),
        ([[0.3, 0.7], [0.0, 1.0]], "the columns are swapped", "`np.fliplr`"),
    ],
    ids=["transposed", "rows swapped", "columns swapped"],
)
def test_q2_the_right_numbers_in_the_wrong_layout_are_named(answer, named, step, capsys):
    verdict = EX.q2.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and named in out and "max abs diff" not in out
    assert step in verdict.next_step


# --- review 33 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [2, 3, 5])
def test_q1_michelots_algorithm_cut_after_a_few_rounds_is_rejected(rounds):
    """A1: a long tail far below the support takes 6 rounds; 2 and 3 are named, 5 is rejected all the same."""
    from course_utils.exercises.lesson06 import _q1_michelot_steps as michelot

    verdict = EX.q1.evaluate(michelot(rounds))
    assert not verdict
    if rounds in (2, 3):
        assert verdict.mistake.startswith(f"refining the support {rounds} times")
    assert EX.q1.evaluate(michelot(30)).passed  # run until the support stops changing (15 rounds on the longest row): right


def test_q1_weights_from_a_softmax_get_a_hint_about_zeros_below_tau_not_about_an_epsilon():
    """N1: softmax gives 0.053 where sparsemax gives 0: the hint must not ask to remove an epsilon or a clip."""
    from course_utils import softmax

    verdict = EX.q1.evaluate(lambda x: softmax(x))
    assert not verdict and "`+ eps`" not in verdict.next_step and "`x - tau <= 0`" in verdict.next_step


def _bisection(halvings):
    def answer(x):
        lo, hi = x.max() - 1, x.max()
        for _ in range(halvings):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if np.maximum(x - mid, 0).sum() > 1 else (lo, mid)
        return np.maximum(x - hi, 0)

    return answer


@pytest.mark.parametrize("halvings", [20, 23, 24, 25, 27, 28, 40])
def test_q1_a_bisection_is_judged_by_its_error_and_never_called_float32(halvings):
    """Known item: 24 halvings land on float32 numbers on [2, 0, -1], where no input move shows float32. A weight of
    4.56e-9 (the flush case of reruns 5 and 6) asks for that weight within atol 1e-9 + rtol 1e-6 x 4.56e-9: on that row, 28
    halvings of the unit interval land within it, 27 do not."""
    verdict = EX.q1.evaluate(_bisection(halvings))
    assert "float32" not in verdict.message
    assert verdict.passed == (halvings >= 28)
