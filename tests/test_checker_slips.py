"""The slips a learner makes in any function exercise, each named as that slip and nothing else.

For every function exercise the same family of slips is built from its reference: no ``return``, a
``NameError``, a ``TypeError``, the wrong shape, the transpose, the wrong axis, float32, a float64 result
slightly off, a rounded result, the input changed. Each must get a message that names that slip and no known
mistake of the exercise, and a first hint about that slip. Then what a learner may pass to ``check`` by
accident: a lambda, a class, a string, a generator, a function that prints, a function that never ends.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from course_utils import exercises
from course_utils.exercises import FunctionExercise, all_exercises
from course_utils.exercises import core

FUNCTIONS = [ex for ex in all_exercises() if isinstance(ex, FunctionExercise)]
IDS = [f"{ex.lesson}.{ex.name}" for ex in FUNCTIONS]


def _fresh(ex):
    return getattr(exercises.load(ex.lesson), ex.name)


def _as_array(value):
    if type(value).__module__.startswith("torch"):
        return value.detach().numpy()
    return np.asarray(value)


def _ref(ex):
    return lambda *args, **kwargs: _as_array(ex.reference(*args, **kwargs))


def _bool_answer(ex):
    return _as_array(ex.reference(*ex.cases[0].args, **ex.cases[0].kwargs)).dtype == bool


def _no_return(ex):
    ref = _ref(ex)

    def answer(*args, **kwargs):
        ref(*args, **kwargs)  # computed, and never returned

    return answer


def _name_error(ex):
    def answer(*args, **kwargs):
        return undefined_result  # noqa: F821 - the slip under test

    return answer


def _type_error(ex):
    def answer(*args, **kwargs):
        return len(3.5)  # a function given the wrong kind of value

    return answer


def _extra_axis(ex):
    return lambda *args, **kwargs: _ref(ex)(*args, **kwargs)[..., None]


def _transposed(ex):
    return lambda *args, **kwargs: np.swapaxes(_ref(ex)(*args, **kwargs), -1, -2)


def _float32(ex):
    return lambda *args, **kwargs: _ref(ex)(*args, **kwargs).astype(np.float32)


def _slightly_off(ex):
    """Every nonzero entry moved by 3 times the tolerance: off by more than rounding, far less than a formula."""

    def answer(*args, **kwargs):
        out = _ref(ex)(*args, **kwargs).astype(np.float64)
        step = 3 * (ex.atol + ex.rtol * np.abs(out))
        return np.where((out != 0) & np.isfinite(out), out + step, out)

    return answer


def _rounded(ex):
    return lambda *args, **kwargs: np.round(_ref(ex)(*args, **kwargs).astype(np.float64), 8)


def _changes_its_input(ex):
    def answer(*args, **kwargs):
        out = _ref(ex)(*args, **kwargs).copy()
        for arg in args:
            if isinstance(arg, np.ndarray) and arg.dtype.kind == "f" and arg.size:
                arg.flat[0] += 1.0  # the caller's array, changed
                break
        return out

    return answer


def _applies(ex, answer):
    """Whether `answer` differs from the reference on some case: a slip that changes nothing is not one."""
    return not all(ex.agrees_with_reference(answer, case) for case in ex.cases)


#: Each slip: how it is built, the words its message must hold, and a word its first hint must hold.
SLIPS = {
    "no return": (_no_return, "forget `return`", "return"),
    "NameError": (_name_error, "raised NameError", "NameError"),
    "TypeError": (_type_error, "raised TypeError", "TypeError"),
    "wrong shape": (_extra_axis, "has shape", "shape"),
    "transposed": (_transposed, "transpose", ".T"),
    "float32": (_float32, "float32", "dtype"),
    "slightly off": (_slightly_off, "more than rounding can explain", "digits"),
    "rounded": (_rounded, "rounded to", "round"),
    "input changed": (_changes_its_input, "changed its input", "new name"),
}


@pytest.mark.parametrize("ex", FUNCTIONS, ids=IDS)
def test_every_slip_is_named_as_that_slip_and_its_first_hint_is_about_it(ex, capsys):
    wrong = []
    for slip, (build, phrase, hint_word) in SLIPS.items():
        answer = build(ex)
        if slip == "transposed" and np.ndim(ex.reference(*ex.cases[0].args, **ex.cases[0].kwargs)) < 2:
            continue  # a row or a number has no transpose
        if slip == "input changed" and not any(isinstance(a, np.ndarray) and a.dtype.kind == "f"
                                               for case in ex.cases for a in case.args):
            continue  # inputs that cannot be changed in place (numbers, torch tensors, an nn.Module)
        if slip in ("float32", "slightly off", "rounded") and _bool_answer(ex):
            phrase, hint_word = "bool", "bool"  # a mask: any float result is the slip of returning numbers
        fresh = _fresh(ex)
        verdict = fresh.evaluate(answer)
        if verdict.passed:
            if slip in ("float32", "rounded", "slightly off") and not _applies(ex, answer):
                continue  # the exercise's tolerance admits it: not a slip here
            wrong.append(f"{slip}: passed")
            continue
        message = " ".join(verdict.message.split())
        if phrase not in message:
            wrong.append(f"{slip}: {phrase!r} not in {message!r}")
        if "This is exactly what" in message:
            wrong.append(f"{slip}: a known mistake is named: {message!r}")
        fresh.check(answer)
        capsys.readouterr()
        fresh.hint()
        first = " ".join(capsys.readouterr().out.split())
        if not first.startswith("Next step for this mistake:") or hint_word not in first:
            wrong.append(f"{slip}: the first hint is {first!r}")
    assert not wrong, "\n".join(wrong)


def test_a_forgotten_return_in_lesson_01_keeps_every_hint_on_the_return(capsys):
    """The new learner's path: forget `return` in 01 q1, then call hint() twice."""
    ex = exercises.load("01").q1

    def softmax_stable(x):
        z = x - x.max(axis=-1, keepdims=True)
        e = np.exp(z)
        e / e.sum(axis=-1, keepdims=True)

    ex.check(softmax_stable)
    capsys.readouterr()
    hints = []
    for _ in range(2):
        ex.hint()
        hints.append(" ".join(capsys.readouterr().out.split()))
    assert hints[0].startswith("Next step for this mistake: Put `return`")
    assert hints[1].startswith("Then: ") and "type(out)" in hints[1]
    assert hints[1].endswith("That was the last hint about this. Fix it and check again.")
    for unrelated in ("in place", "x -=", "out=x", "keepdims", "Hint 2 of", "max"):
        assert not any(unrelated in hint for hint in hints), unrelated


def test_an_exception_is_named_with_the_line_that_raised_it():
    ex = exercises.load("01").q1

    def softmax_stable(x):
        z = x - x.max(axis=-1, keepdims=True)
        return np.exp(z) / totl  # noqa: F821 - a typo

    message = " ".join(ex.evaluate(softmax_stable).message.split())
    assert "raised NameError: name 'totl' is not defined" in message
    assert "`return np.exp(z) / totl" in message and "at line" in message
    assert "This is exactly what" not in message


def test_the_argument_changed_in_place_is_named_by_the_learners_own_name():
    ex = exercises.load("03").q3

    def scores(Q, K):
        K /= np.sqrt(Q.shape[-1])  # changes the caller's K
        return Q @ K.T

    verdict = ex.evaluate(scores)
    assert "changed its input `K` in place" in verdict.message and "`Q`" not in verdict.message
    assert "`K /= ...`" in verdict.next_step


def test_float32_is_named_only_for_float32_values():
    ex = exercises.load("06").q1  # sparsemax, which must be exact to 1e-9

    def twenty_halvings(x):  # bisection for tau stopped after 20 halvings: float64, off by about 1e-6
        lo, hi = x.max() - 1.0, x.max()
        for _ in range(20):
            tau = (lo + hi) / 2
            lo, hi = (tau, hi) if np.maximum(x - tau, 0).sum() > 1 else (lo, tau)
        return np.maximum(x - (lo + hi) / 2, 0)

    def through_float32(x):
        return ex.reference(x.astype(np.float32)).astype(np.float32).astype(np.float64)

    for answer in (twenty_halvings, lambda x: np.round(ex.reference(x), 6)):
        verdict = ex.evaluate(answer)
        assert not verdict.passed and "float32" not in verdict.message, verdict.message
    assert "float32" in ex.evaluate(through_float32).message


def test_shifting_by_the_second_largest_score_is_not_called_the_median():
    ex = exercises.load("04").q3
    label = "shifting by the second-largest score instead of each row's own maximum"
    verdict = ex.evaluate(ex.variants[label])
    assert "median" not in verdict.message and "second-largest" in verdict.message


@pytest.mark.parametrize("limit", [80.0, 700.0, 1e4])
def test_a_clip_at_any_limit_is_named_without_a_limit_the_learner_did_not_use(limit):
    ex = exercises.load("04").q3

    def clipped(logits, targets):
        return ex.reference(np.clip(logits, -limit, limit), targets)

    verdict = ex.evaluate(clipped)
    if verdict.passed:  # a clip beyond every score the cases hold changes nothing
        assert limit >= 1e4
        return
    assert "clipping the scores at a fixed limit" in verdict.message
    assert "[-50, 50]" not in verdict.message and "-50" not in verdict.next_step


# --- Whatever a learner passes to check ---------------------------------------------------


def _generator(x):
    yield from x


def _prints(x):
    print(x / x.sum())


class _Softmax:
    def __call__(self, x):
        return x


@pytest.mark.parametrize(
    "answer,phrase",
    [
        ("softmax_stable", "without quotes"),
        (_Softmax, "not the class _Softmax"),
        (_generator, "generator"),
        (_prints, "forget `return`"),
        (lambda x: "probabilities", "not numbers"),
        (3.0, "Pass your function itself"),
    ],
    ids=["a string", "a class", "a generator", "a function that prints", "text", "a number"],
)
def test_anything_passed_to_check_gets_a_sentence(answer, phrase, capsys):
    verdict = exercises.load("01").q1.check(answer)
    out = " ".join(capsys.readouterr().out.split())
    assert verdict.status == "incorrect" and phrase in out and "Traceback" not in out


def test_a_right_lambda_passes(capsys):
    ex = exercises.load("01").q1
    assert ex.check(lambda x: ex.reference(x)).passed


def test_a_function_that_never_ends_is_stopped_after_the_limit_and_the_next_check_works(monkeypatch, capsys):
    monkeypatch.setattr(core, "TIME_LIMIT", 0.5)
    ex = exercises.load("01").q1

    def forever(x):
        while True:
            time.sleep(0.01)

    start = time.monotonic()
    verdict = ex.check(forever)
    took = time.monotonic() - start
    assert verdict.mistake == "taking too long" and "used up this check's 0.5 s" in verdict.message
    assert took < 5  # stopped, not run for the diagnosis as well
    assert ex.check(ex.reference).passed  # the session goes on
    assert "✓ Correct" in capsys.readouterr().out


def test_a_bare_except_that_swallows_the_stop_is_stopped_all_the_same(monkeypatch, capsys):
    """The stop repeats until it lands outside the learner's `try` (review 33, H1)."""
    monkeypatch.setattr(core, "TIME_LIMIT", 0.5)
    ex = exercises.load("01").q1

    def retrying(x):
        while True:
            try:
                e = np.exp(x - x.max(axis=-1, keepdims=True))
                return e / e.summ(axis=-1, keepdims=True)  # a typo: AttributeError, retried for ever
            except:  # noqa: E722 (the learner's bare except is the point)
                continue

    start = time.monotonic()
    verdict = ex.check(retrying)
    assert verdict.mistake == "taking too long" and time.monotonic() - start < 5
    assert ex.check(ex.reference).passed


def test_the_time_limit_counts_the_learners_code_only(monkeypatch):
    """The checker's own work (its reference, the known mistakes) never uses up the learner's time."""
    monkeypatch.setattr(core, "TIME_LIMIT", 0.2)
    ex = exercises.load("07").q2  # the course's slowest checker
    assert ex.evaluate(ex.reference).passed


def test_a_whole_number_is_not_named_where_a_known_mistake_gives_the_answer():
    ex = exercises.load("07").q1
    label = "adding the normalizers without rescaling"
    verdict = ex.evaluate(ex.variants.get(label) or ex.wrong_answers[label])
    assert "whole number" not in verdict.message and "This is exactly what" in verdict.message


def test_a_bisection_that_lands_on_float32_numbers_is_not_called_float32():
    ex = exercises.load("06").q1

    def halvings_24(x):
        lo, hi = x.max() - 1.0, x.max()
        for _ in range(24):
            tau = (lo + hi) / 2
            lo, hi = (tau, hi) if np.maximum(x - tau, 0).sum() > 1 else (lo, tau)
        return np.maximum(x - (lo + hi) / 2, 0)

    assert "float32" not in ex.evaluate(halvings_24).message


@pytest.mark.parametrize("digits", [12, 13, 15])
def test_weights_rounded_to_12_decimals_or_more_are_named_a_rounding_not_a_flush(digits):
    ex = exercises.load("07b").q1
    verdict = ex.evaluate(lambda scores, lse: np.round(ex.reference(scores, lse), digits))
    assert verdict.mistake == f"rounding the result to {digits} decimals" and "flushed" not in verdict.message


@pytest.mark.parametrize(("lesson", "question"), [("01", "q1"), ("02", "q2"), ("04", "q2")])
def test_a_result_rounded_within_the_tolerance_passes_where_no_property_asks_for_more(lesson, question):
    ex = getattr(exercises.load(lesson), question)
    assert ex.evaluate(lambda *args: np.round(ex.reference(*args), 12)).passed
