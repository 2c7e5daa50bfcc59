"""Lesson 02's exercises: references computed independently, and whole families of wrong answers rejected."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from course_utils import exercises
from course_utils.exercises.lesson02 import Q3_TERMS
from rounding_bounds import exponent_error, unit_roundoff
from test_exercises import _shown_solution, _unwrapped

EX = exercises.load("02")


def rejected(ex, answer, capsys) -> str:
    assert ex.check(answer).status == "incorrect"
    return _unwrapped(capsys.readouterr().out)


# --- q1: the largest integer score whose e^x is finite in float32 ------------------------


def test_q1_reference_is_the_floor_of_the_log_of_the_largest_float32():
    largest = mpmath.mpf(float(np.finfo(np.float32).max))
    assert EX.q1.reference == int(mpmath.floor(mpmath.log(largest)))
    with np.errstate(over="ignore"):
        assert np.isfinite(np.exp(np.float32(EX.q1.reference)))
        assert np.isinf(np.exp(np.float32(EX.q1.reference + 1)))


def test_q1_every_other_integer_and_every_rounding_of_the_limit_is_rejected():
    # One test over all 1004 answers: as 1004 test items, pytest's own work per item cost more than the checks.
    accepted = [a for a in [x for x in range(0, 1001) if x != 88] + [88.5, 88.7, 87.9, -88]
                if EX.q1.evaluate(a).status != "incorrect"]
    assert accepted == []


# --- q2: a stable log-softmax ------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_matches_torch_log_softmax(case):
    (x,) = case.args
    expected = torch.log_softmax(torch.from_numpy(x), dim=-1).numpy()  # in the input's own dtype
    # Rounding of two implementations in the input's dtype: each log-probability within exponent_error (which
    # grows with the spread of the row: 3·6000·u in the widest case) plus its last rounding, u·|value|.
    np.testing.assert_allclose(EX.q2.reference(x), expected, rtol=2 * unit_roundoff(x), atol=2 * exponent_error(x))


def test_the_shown_log_softmax_keeps_the_tail_with_log1p():
    log_softmax = _shown_solution(exercises.load("02").q2)
    assert "log1p" in exercises.load("02").q2._solution
    assert log_softmax(np.array([0.0, -40.0]))[0] == pytest.approx(-np.exp(-40.0), rel=1e-12)


def test_where_the_maximum_is_already_subtracted_the_hint_does_not_say_subtract_it():
    ex = exercises.load("02").q2
    message = ex.evaluate(ex.wrong_answers["taking the log of softmax (which underflows)"]).message
    assert "log(0) = -inf" in message and "subtract each row's own maximum first" not in message


# --- q3: where a float16 running sum of ones stalls --------------------------------------


def _running_sum_by_scalars(n: int) -> float:
    """The float16 running sum, one scalar addition at a time (independent of np.cumsum)."""
    total, one = np.float16(0), np.float16(1)
    for _ in range(n):
        total = np.float16(total + one)
    return float(total)


def test_q3_reference_is_the_scalar_float16_running_sum():
    assert EX.q3.reference == _running_sum_by_scalars(Q3_TERMS) == 2.0**11


def test_q3_the_reference_is_where_adding_one_first_changes_nothing():
    stall = np.float16(EX.q3.reference)
    assert np.float16(stall + np.float16(1)) == stall
    assert np.float16(stall - np.float16(1) + np.float16(1)) == stall  # one step earlier it still grew
    assert np.spacing(stall) == 2.0


def test_q3_the_exact_sum_overflows_float16():
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(Q3_TERMS))


def _q3_wrong_answers():
    """Integers near and far, powers of two and their neighbours, halves, other dtypes' stalls."""
    yield from (x for x in range(0, 5001) if x != 2048)
    for k in range(0, 60):
        yield from (2.0**k - 1, 2.0**k + 1, 2.0**k)
    yield from (2047.5, 2048.5, 2048.001, 2050.0, 65504.0, 65520.0, 65536.0, -2048.0, 2.0**24, 2.0**53)


WRONG_Q3 = sorted({float(x) for x in _q3_wrong_answers()} - {2048.0})


def test_q3_every_generated_wrong_prediction_is_rejected():
    accepted = [x for x in WRONG_Q3 if EX.q3.evaluate(x).status != "incorrect"]
    assert not accepted


@pytest.mark.parametrize("answer", [math.inf, np.inf, float("inf"), np.float16(np.inf), [math.inf]])
def test_q3_inf_is_explained_as_what_numpy_sum_returns(answer, capsys):
    out = rejected(EX.q3, answer, capsys)
    assert "NumPy's `.sum()`" in out


@pytest.mark.parametrize(
    "answer,phrase",
    [(65536, "exact sum"), (65504, "never gets that far"), (256, "bfloat16"), (2**24, "float32"),
     (2049, "2 apart"), (2047, "one short"), (1024, "1025"), (4096, "never reaches")],
)
def test_q3_each_plausible_mistake_gets_its_own_explanation(answer, phrase, capsys):
    assert phrase in rejected(EX.q3, answer, capsys)


@pytest.mark.parametrize("answer", [2048, 2048.0, "2048", np.float16(2048), 2**11])
def test_q3_the_answer_is_accepted_in_any_spelling(answer):
    assert EX.q3.evaluate(answer).status == "correct"


def test_q3_nan_and_text_get_the_usual_messages(capsys):
    assert "nan" in rejected(EX.q3, math.nan, capsys)
    assert "not a number" in rejected(EX.q3, "a lot", capsys)


# --- q2, adversarially: other correct spellings pass, near-misses do not ------------------


def _shifted(x):
    return x - x.max(axis=-1, keepdims=True)


Q2_CORRECT = {
    "log of the shifted sum, no log1p": lambda x: _shifted(x) - np.log(np.exp(_shifted(x)).sum(axis=-1, keepdims=True)),
    "np.logaddexp.reduce": lambda x: x - np.logaddexp.reduce(x, axis=-1, keepdims=True),
    "torch.log_softmax": lambda x: torch.log_softmax(torch.from_numpy(np.asarray(x)), dim=-1).numpy(),
    "computed in float32": lambda x: Q2_CORRECT["log of the shifted sum, no log1p"](np.asarray(x, np.float32)),
}

Q2_WRONG = {
    "computed in float16": lambda x: Q2_CORRECT["log of the shifted sum, no log1p"](np.asarray(x, np.float16)),
    "the normalizer summed over the whole batch": lambda x: _shifted(x) - np.log(np.exp(_shifted(x)).sum()),
    "normalized along axis 0": lambda x: torch.log_softmax(torch.from_numpy(np.asarray(x)), dim=0).numpy(),
    "log2 for log": lambda x: _shifted(x) - np.log2(np.exp(_shifted(x)).sum(axis=-1, keepdims=True)),
    "the log of softmax plus a tiny epsilon": lambda x: np.log(
        np.exp(_shifted(x)) / np.exp(_shifted(x)).sum(-1, keepdims=True) + 1e-300
    ),
    "the minimum subtracted instead of the maximum": lambda x: (x - x.min(-1, keepdims=True))
    - np.log(np.exp(x - x.min(-1, keepdims=True)).sum(-1, keepdims=True)),
}


@pytest.mark.parametrize("label", Q2_CORRECT)
def test_q2_other_correct_spellings_are_accepted(label):
    assert EX.q2.evaluate(Q2_CORRECT[label]).status == "correct"


@pytest.mark.parametrize("label", Q2_WRONG)
def test_q2_near_misses_are_rejected(label):
    with np.errstate(all="ignore"):
        assert EX.q2.evaluate(Q2_WRONG[label]).status == "incorrect"


# --- rerun 33: a number between 88 and 89 is told the answer is an integer, rounded down (C5) ----


@pytest.mark.parametrize("answer", [88.72, 88.5, float(np.log(np.float64(np.finfo(np.float32).max))), "88.7", 88.1])
def test_q1_a_number_between_88_and_89_is_told_to_round_down_to_an_integer(answer, capsys):
    verdict = EX.q1.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and "integer" in out and "round it down" in out and "max abs diff" not in out
    assert "`np.exp(np.float32(x + 1))`" in verdict.next_step and verdict.next_step not in out


@pytest.mark.parametrize("answer", [88, 89, 709, 87.5])
def test_q1_answers_outside_88_to_89_are_not_told_to_round_down(answer):
    assert "round it down" not in EX.q1.evaluate(answer).message


# --- review 33 ---------------------------------------------------------------------------------------


def _log_of_softmax_plus(eps):
    def answer(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return np.log(e / e.sum(axis=-1, keepdims=True) + eps)

    return answer


@pytest.mark.parametrize("eps", [1e-9, 1e-12, 1e-15])
def test_q2_the_log_of_the_probabilities_plus_a_small_number_is_named_not_called_positive(eps):
    """N2: log(p + 1e-12) has an entry of 1e-12, 0 to the tolerance; its mistake is the log of the probabilities."""
    verdict = EX.q2.evaluate(_log_of_softmax_plus(eps))
    assert not verdict and "positive entries" not in verdict.message
    message = _unwrapped(verdict.message)  # added (1e-9, where a weight near eps tells) or a floor (no weight tells)
    assert ("the log of the probabilities with a small number, about 1e-09, added to them" in message) == (eps == 1e-9)
    assert ("`np.log` of the probabilities with a small number as their floor (or added)" in message) == (eps < 1e-9)
    assert "never form the probabilities" in verdict.next_step


def test_q2_a_result_rounded_to_4_decimals_is_named_as_that_slip_alone():
    """N3: no "loses digits" guess beside the rounding, and 4 decimals even where the case shows 0.8620 as 0.862."""
    def rounded(x):
        shifted = x - x.max(axis=-1, keepdims=True)
        return np.round(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)), 4)

    verdict = EX.q2.evaluate(rounded)
    assert verdict.mistake == "rounding the result to 4 decimals" and "loses digits" not in verdict.message


def test_q3_minus_infinity_gets_its_own_feedback_not_the_overflow_one():
    verdict = EX.q3.evaluate(-math.inf)
    assert verdict.mistake == "minus infinity" and ".sum()" not in verdict.message
    assert EX.q3.evaluate(math.inf).mistake == "overflow to inf"
