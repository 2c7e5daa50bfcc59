"""Lesson 01's exercises: references computed independently, correct forms accepted, whole families of wrong answers rejected."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from course_utils import exercises, log_softmax, logsumexp, softmax
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("01")


def _softmax_50_digits(x: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Softmax along the last axis in 50-digit arithmetic, with no shift: an independent reference."""
    with mpmath.workdps(50):
        def row(r):
            e = [mpmath.exp(mpmath.mpf(float(v)) / mpmath.mpf(temperature)) for v in r]
            total = mpmath.fsum(e)
            return [float(v / total) for v in e]

        flat = np.asarray(x, dtype=np.float64).reshape(-1, np.shape(x)[-1])
        return np.array([row(r) for r in flat]).reshape(np.shape(x))


def _tolerances(x: np.ndarray) -> dict[str, float]:
    # float64: a few units in the last place; float32 (the reference keeps float32): a few float32
    # units, and an absolute floor below float32's smallest normal, where subnormals lose digits.
    return {"rtol": 1e-6, "atol": 1e-44} if np.asarray(x).dtype == np.float32 else {"rtol": 1e-13, "atol": 1e-320}


# --- q1: a stable softmax ---------------------------------------------------------------------

Q1_INPUTS = [case.args[0] for case in (*EX.q1.cases, *EX.q1.probes)]


@pytest.mark.parametrize("x", Q1_INPUTS, ids=lambda x: np.array2string(np.asarray(x), threshold=6).replace("\n", ""))
def test_q1_reference_is_softmax_computed_in_50_digit_arithmetic(x):
    np.testing.assert_allclose(EX.q1.reference(x), _softmax_50_digits(x), **_tolerances(x))


def test_q1_reference_keeps_float32_as_float32():
    assert EX.q1.reference(np.array([1.0, 2.0], dtype=np.float32)).dtype == np.float32


def test_the_shown_stable_softmax_keeps_float32_as_float32():
    from test_exercises import _shown_solution

    stable_softmax = _shown_solution(EX.q1)
    assert stable_softmax(np.array([1.0, 2.0], dtype=np.float32)).dtype == np.float32
    assert stable_softmax([1, 2]).dtype == np.float64


def _q1_correct_forms():
    def shift_then_normalize(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    yield "exp(x - max) / sum", shift_then_normalize
    yield "exp(x - logsumexp(x))", lambda x: np.exp(x - logsumexp(x, axis=-1, keepdims=True))
    yield "exp of log_softmax", lambda x: np.exp(log_softmax(x, axis=-1))
    yield "computed in float64 for every input", lambda x: shift_then_normalize(np.asarray(x, dtype=np.float64))
    # The stated tolerance (rtol 1e-6) accepts a correct answer computed in float32 throughout.
    yield "computed in float32 for every input", lambda x: shift_then_normalize(np.asarray(x, dtype=np.float32))


@pytest.mark.parametrize("label,answer", list(_q1_correct_forms()), ids=[v[0] for v in _q1_correct_forms()])
def test_q1_every_correct_form_is_accepted(label, answer):
    verdict = EX.q1.evaluate(answer)
    assert verdict.status == "correct", verdict.message


def _q1_wrong():
    def normalize(e, axis=-1):
        return e / e.sum(axis=axis, keepdims=True)

    def shifted(x):
        return x - x.max(axis=-1, keepdims=True)

    yield "plain normalization", lambda x: normalize(np.asarray(x, dtype=float))
    yield "the textbook formula", lambda x: normalize(np.exp(x))
    yield "not normalized", lambda x: np.exp(shifted(x))
    yield "divided by the largest exponential", lambda x: np.exp(shifted(x)) / np.exp(shifted(x)).max(axis=-1, keepdims=True)
    yield "normalized over the whole batch", lambda x: np.exp(shifted(x)) / np.exp(shifted(x)).sum()
    yield "normalized along the first axis", lambda x: normalize(np.exp(x - x.max(axis=0, keepdims=True)), axis=0)
    yield "log-softmax", lambda x: log_softmax(x, axis=-1)
    yield "softmax of the negated scores", lambda x: softmax(-np.asarray(x), axis=-1)
    yield "base 2 instead of e", lambda x: normalize(np.exp2(shifted(x)))
    yield "base 10 instead of e", lambda x: normalize(10.0 ** shifted(x))
    yield "a temperature of 2", lambda x: softmax(x, axis=-1, temperature=2.0)
    yield "a temperature of 0.99", lambda x: softmax(x, axis=-1, temperature=0.99)
    yield "e^x - 1 instead of e^x", lambda x: normalize(np.expm1(shifted(x)))
    yield "relu then plain normalization", lambda x: normalize(np.maximum(np.asarray(x, dtype=float), 0.0))
    yield "squares then plain normalization", lambda x: normalize(np.asarray(x, dtype=float) ** 2)
    yield "uniform weights", lambda x: np.full(np.shape(x), 1.0 / np.shape(x)[-1])
    yield "the argmax, one-hot", lambda x: (x == x.max(axis=-1, keepdims=True)).astype(float)
    yield "rounded to 4 decimals", lambda x: np.round(softmax(x, axis=-1), 4)
    yield "rounded to 5 decimals", lambda x: np.round(softmax(x, axis=-1), 5)
    yield "computed in float16", lambda x: softmax(np.asarray(x, dtype=np.float16), axis=-1).astype(np.asarray(x).dtype)
    yield "shifted by the mean, then clipped to at most 700", lambda x: normalize(
        np.exp(np.minimum(x - np.mean(x, axis=-1, keepdims=True), 700.0))
    )
    yield "a floor of 1e-6 on every weight", lambda x: normalize(np.maximum(softmax(x, axis=-1), 1e-6))
    yield "the rows reversed", lambda x: softmax(x, axis=-1)[::-1]
    yield "the keys reversed", lambda x: softmax(x, axis=-1)[..., ::-1]
    yield "a flattened result", lambda x: softmax(x, axis=-1).ravel()
    yield "only the first row, broadcast", lambda x: np.broadcast_to(softmax(np.asarray(x).reshape(-1, np.shape(x)[-1])[0]), np.shape(x))


@pytest.mark.parametrize("label,answer", list(_q1_wrong()), ids=[v[0] for v in _q1_wrong()])
def test_q1_every_plausible_wrong_answer_is_rejected(label, answer):
    verdict = EX.q1.evaluate(answer)
    assert verdict.status == "incorrect", label
    assert verdict.message.startswith("✗")


def test_a_failure_names_the_property_and_the_input(capsys):
    EX.q1.check(lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True))
    out = _unwrapped(capsys.readouterr().out)
    assert "sum to 1" in out and "[[2. 4. 4.]" in out and "max abs diff" in out


def test_plain_normalization_is_named_and_caught_by_shift_invariance():
    message = EX.q1.evaluate(lambda x: x / x.sum(axis=-1, keepdims=True)).message
    assert "not shift-invariant" in message and "plain normalization" in message


# --- q2: predict the T -> 0 limit -------------------------------------------------------------


def test_q2_reference_is_the_argmax_with_the_tie_split_equally():
    np.testing.assert_allclose(EX.q2.reference, [0.0, 0.5, 0.5, 0.0], rtol=0, atol=1e-300)


@pytest.mark.parametrize("answer", [[0, 0.5, 0.5, 0], (0.0, 0.5, 0.5, 0.0), np.array([0, 0.5, 0.5, 0]),
                                    [0, 0.4999, 0.5001, 0], [0.0003, 0.4997, 0.4997, 0.0003]])
def test_q2_the_answer_is_accepted_within_the_stated_tolerance(answer):
    assert EX.q2.evaluate(answer).status == "correct"


def _q2_wrong():
    scores = np.array([2.0, 5.0, 5.0, 1.0])
    for i in range(4):
        yield f"one-hot at {i}", np.eye(4)[i]
    yield "uniform (T -> infinity)", [0.25] * 4
    yield "tie not normalized", [0, 1, 1, 0]
    yield "the tie given to the outer scores", [0.5, 0, 0, 0.5]
    yield "an uneven split of the tie", [0, 0.6, 0.4, 0]
    yield "a little left for the others", [0.05, 0.45, 0.45, 0.05]
    yield "plain normalization", scores / scores.sum()
    yield "softmax at T = 1", softmax(scores)
    yield "softmax at T = 0.5", softmax(scores, temperature=0.5)
    yield "three numbers", [0, 0.5, 0.5]


@pytest.mark.parametrize("label,answer", list(_q2_wrong()), ids=[v[0] for v in _q2_wrong()])
def test_q2_every_plausible_wrong_prediction_is_rejected(label, answer):
    assert EX.q2.evaluate(answer).status == "incorrect", label


def test_a_known_mistake_gets_its_own_explanation(capsys):
    EX.q2.check([0.25, 0.25, 0.25, 0.25])
    assert "high" in _unwrapped(capsys.readouterr().out)
    assert "tied" in EX.q2.evaluate([0, 1, 0, 0]).message


# --- q3: softmax with a temperature -----------------------------------------------------------

Q3_INPUTS = [case.args for case in (*EX.q3.cases, *EX.q3.probes)]


@pytest.mark.parametrize("x,temperature", Q3_INPUTS, ids=lambda v: np.array2string(np.asarray(v), threshold=6).replace("\n", ""))
def test_q3_reference_is_softmax_of_x_over_t_in_50_digit_arithmetic(x, temperature):
    np.testing.assert_allclose(EX.q3.reference(x, temperature), _softmax_50_digits(x, temperature), **_tolerances(x))


def _q3_correct_forms():
    def shift_then_divide(x, temperature):
        z = (x - x.max(axis=-1, keepdims=True)) / temperature  # shifting before dividing is as good
        e = np.exp(z)
        return e / e.sum(axis=-1, keepdims=True)

    yield "shift, then divide by T", shift_then_divide
    yield "course_utils.softmax with temperature", lambda x, t: softmax(x, axis=-1, temperature=t)
    yield "exp(x/T - logsumexp(x/T))", lambda x, t: np.exp(x / t - logsumexp(x / t, axis=-1, keepdims=True))


@pytest.mark.parametrize("label,answer", list(_q3_correct_forms()), ids=[v[0] for v in _q3_correct_forms()])
def test_q3_every_correct_form_is_accepted(label, answer):
    verdict = EX.q3.evaluate(answer)
    assert verdict.status == "correct", verdict.message


def _q3_wrong():
    yield "temperature ignored", lambda x, t: softmax(x, axis=-1)
    yield "multiplied by T", lambda x, t: softmax(x * t, axis=-1)
    yield "divided by T squared", lambda x, t: softmax(x / t**2, axis=-1)
    yield "divided by the square root of T", lambda x, t: softmax(x / math.sqrt(t), axis=-1)
    yield "T subtracted", lambda x, t: softmax(x - t, axis=-1)
    yield "probabilities divided by T", lambda x, t: softmax(x, axis=-1) / t
    yield "probabilities to the power 1/T, not renormalized", lambda x, t: softmax(x, axis=-1) ** (1 / t)
    yield "the maximum divided by T, the scores not", lambda x, t: softmax(x - x.max(axis=-1, keepdims=True) / t, axis=-1)
    yield "1 / T instead of T", lambda x, t: softmax(x, axis=-1, temperature=1 / t)
    yield "unstable exp(x / T)", lambda x, t: np.exp(x / t) / np.exp(x / t).sum(axis=-1, keepdims=True)
    yield "normalized over the whole batch", lambda x, t: np.exp((x - x.max()) / t) / np.exp((x - x.max()) / t).sum()
    yield "rounded to 4 decimals", lambda x, t: np.round(softmax(x, axis=-1, temperature=t), 4)
    yield "shifted by the mean, then clipped to at most 700", lambda x, t: _normalized(
        np.exp(np.minimum(x / t - np.mean(x / t, axis=-1, keepdims=True), 700.0))
    )
    yield "exponentiated, then raised to 1/T and renormalized", lambda x, t: _normalized(softmax(x, axis=-1) ** (1 / t))
    yield "computed in float32", lambda x, t: softmax(np.asarray(x, dtype=np.float32), axis=-1, temperature=np.float32(t))


def _normalized(e):
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("label,answer", list(_q3_wrong()), ids=[v[0] for v in _q3_wrong()])
def test_q3_every_plausible_wrong_answer_is_rejected(label, answer):
    verdict = EX.q3.evaluate(answer)
    assert verdict.status == "incorrect", label


# --- issue 27: every clip limit and every shift that is wrong somewhere is rejected and named ------------


@pytest.mark.parametrize("limit", [3001.0, 4000.0, 1e4, 1e5, 5e5])
def test_q1_clipping_the_scores_at_any_limit_below_a_million_is_rejected(limit):
    ex = exercises.load("01").q1
    clipped = lambda x: ex.reference(np.clip(np.asarray(x), -limit, limit))  # noqa: E731
    assert ex.evaluate(clipped).status == "incorrect"


@pytest.mark.parametrize("c", [80.0, 85.0, 100.0, 710.0])
def test_q1_shifting_by_the_maximum_minus_a_large_constant_is_rejected(c):
    ex = exercises.load("01").q1

    def shifted(x):
        x = np.asarray(x)
        e = np.exp(x - (x.max(axis=-1, keepdims=True) - c))
        return e / e.sum(axis=-1, keepdims=True)

    assert ex.evaluate(shifted).status == "incorrect"


def test_q1_shifting_by_the_maximum_minus_a_small_constant_is_still_right():
    ex = exercises.load("01").q1

    def shifted(x):
        x = np.asarray(x)
        e = np.exp(x - (x.max(axis=-1, keepdims=True) - 1.0))
        return e / e.sum(axis=-1, keepdims=True)

    assert ex.evaluate(shifted).passed


@pytest.mark.parametrize("limit", [1e4, 5e4, 1e5])
def test_q3_clipping_x_over_t_at_a_large_limit_is_rejected(limit):
    ex = exercises.load("01").q3
    clipped = lambda x, t: ex.reference(np.clip(np.asarray(x) / t, -limit, limit), 1.0)  # noqa: E731
    assert ex.evaluate(clipped).status == "incorrect"


# --- rerun 33: q3's arguments swapped, float32 named (B9, C2) -----------------------------------


def _stable_over_t(z):
    z = np.asarray(z, dtype=float)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_q3_a_function_that_takes_temperature_first_is_told_so_not_to_subtract_the_maximum(capsys):
    def swapped(temperature, x):  # the right body, the parameters in the other order
        return _stable_over_t(np.asarray(x, dtype=float) / temperature)

    ex = exercises.load("01").q3
    verdict = ex.check(swapped)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict
    assert "two arguments the other way round" in out and "subtract each row's own maximum" not in out
    assert "`def softmax_with_temperature(x, temperature):`" in verdict.next_step
    ex.hint()
    assert _unwrapped(capsys.readouterr().out).startswith("Next step for this mistake: Swap the two parameters")


def test_q3_the_nan_hint_hedges_its_advice_to_subtract_the_maximum():
    assert "if you did not subtract" in EX.q3.nonfinite_hint


@pytest.mark.parametrize(
    "answer",
    [
        lambda x, t: _stable_over_t(np.asarray(x, dtype=np.float32) / np.float32(t)),  # returns float32
        lambda x, t: _stable_over_t(np.asarray(x, dtype=np.float32) / np.float32(t)).astype(np.float64),
        lambda x, t: _stable_over_t(np.asarray(x).astype(np.float32).astype(np.float64) / t),  # the scores only
    ],
    ids=["float32 result", "float32 cast back to float64", "scores rounded to float32"],
)
def test_q3_an_answer_computed_in_float32_is_told_float32(answer):
    verdict = EX.q3.evaluate(answer)
    assert verdict.status == "incorrect" and "float32" in verdict.message, verdict.message
    assert "`astype(np.float32)`" in verdict.message and "`result.dtype`" in verdict.next_step


def test_q3_an_answer_that_floors_t_is_not_called_float32():
    # T = 0.01 and its float32 rounding both floor to 0.05: the same result, but not float32.
    verdict = EX.q3.evaluate(lambda x, t: _stable_over_t(np.asarray(x, dtype=float) / max(t, 0.05)))
    assert verdict.status == "incorrect" and "float32" not in verdict.message, verdict.message


def test_q3_a_float64_answer_that_reads_t_as_float32_still_passes():
    assert EX.q3.evaluate(lambda x, t: _stable_over_t(np.asarray(x, dtype=float) / np.float32(t))).passed


# --- review 33 ---------------------------------------------------------------------------------------


def test_q3_a_floor_on_the_temperature_is_judged_on_the_case_it_breaks_not_called_lost_digits():
    """N1: `max(T, 0.05)` is off by 2e-9 on one case and by 0.35 on the next: a formula, not its digits."""
    def floored(x, temperature):
        z = x / max(temperature, 0.05)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    verdict = EX.q3.evaluate(floored)
    assert not verdict and verdict.mistake != "a small error" and "loses digits" not in verdict.message


def test_q3_the_float32_advice_names_only_casts_that_fail():
    """Notes: `x / np.float32(T)` passes, so the float32 feedback must not tell the learner to drop it."""
    def float32_temperature(x, temperature):
        z = np.asarray(x) / np.float32(temperature)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    assert EX.q3.evaluate(float32_temperature).passed
    verdict = EX.q3.evaluate(lambda x, t: EX.q3.reference(np.asarray(x, dtype=np.float32), np.float32(t)))
    assert not verdict and "float32" in verdict.message and "np.float32(temperature)" not in verdict.message
