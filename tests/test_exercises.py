"""Every checker accepts its reference, rejects every known wrong answer, and never raises."""

from __future__ import annotations

import numpy as np
import pytest

from course_utils import exercises
from course_utils.exercises import FunctionExercise, ValueExercise, all_exercises

ALL = list(all_exercises())
IDS = [f"{ex.lesson}.{ex.name}" for ex in ALL]
WRONG = [(ex, label) for ex in ALL for label in ex.wrong_answers]


def test_every_lesson_has_two_to_four_exercises():
    for lesson in exercises.LESSONS:
        assert 2 <= len(vars(exercises.load(lesson))) <= 4


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_reference_answer_is_correct(ex, capsys):
    assert ex.check(ex.reference) is True
    assert capsys.readouterr().out.startswith("✓ Correct")


@pytest.mark.parametrize("ex,label", WRONG, ids=[f"{e.lesson}.{e.name}: {l}" for e, l in WRONG])
def test_every_known_wrong_answer_is_rejected(ex, label, capsys):
    assert ex.check(ex.wrong_answers[label]) is False
    assert capsys.readouterr().out.startswith("✗ Not yet")


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_starter_is_reported_as_not_attempted(ex, capsys):
    assert ex.evaluate(ex.starter).status == "not attempted"
    assert ex.check(ex.starter) is False
    assert "Not attempted" in capsys.readouterr().out


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_each_hint_call_reveals_the_next_hint_then_stays_on_the_last(ex, capsys):
    n = len(ex._hints)
    assert n >= 1
    for i in range(n + 1):
        ex.hint()
        assert f"Hint {min(i + 1, n)} of {n}" in capsys.readouterr().out


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_solution_prints_a_worked_answer(ex, capsys):
    ex.solution()
    assert capsys.readouterr().out.startswith(f"Solution to {ex.lesson}.{ex.name}")


FUNCTIONS = [ex for ex in ALL if isinstance(ex, FunctionExercise)]
VALUES = [ex for ex in ALL if isinstance(ex, ValueExercise)]


def _raises(*args, **kwargs):
    raise ZeroDivisionError("oops")


def _returns_none(*args, **kwargs):
    return None


def _returns_text(*args, **kwargs):
    return "probabilities"


def _wrong_shape(x, *args, **kwargs):
    return np.ones(7)


def _mutates(x, *args, **kwargs):
    np.add(x, 1, out=x, casting="unsafe")  # works for int and float inputs
    return np.full(np.shape(x), 1.0 / np.shape(x)[-1])


BAD_FUNCTIONS = {
    "raises": (_raises, "raised ZeroDivisionError: oops on input"),
    "returns None": (_returns_none, "forget `return`"),
    "returns text": (_returns_text, "not numbers"),
    "returns NaN": (None, "nan or inf"),  # built per exercise, shaped like its reference
    "wrong shape": (_wrong_shape, "shape"),
    "mutates its input": (_mutates, "changed its input in place"),
    "not a function": (np.zeros(3), "Pass your function itself"),
}


@pytest.mark.parametrize("ex", FUNCTIONS, ids=[f"{e.lesson}.{e.name}" for e in FUNCTIONS])
@pytest.mark.parametrize("kind", BAD_FUNCTIONS)
def test_a_broken_function_gets_a_clear_message_not_a_traceback(ex, kind, capsys):
    answer, phrase = BAD_FUNCTIONS[kind]
    if kind == "mutates its input" and not isinstance(ex.cases[0].args[0], np.ndarray):
        pytest.skip("this exercise's inputs are numbers, which cannot be changed in place")
    if kind == "returns NaN":
        answer = lambda *args, **kwargs: np.full(np.shape(ex.reference(*args, **kwargs)), np.nan)  # noqa: E731
        if ex.early_properties:  # e.g. "return a bool mask": that message comes first, and is the right one
            phrase = "Not yet"
    assert ex.check(answer) is False
    out = capsys.readouterr().out
    assert phrase in out and "Traceback" not in out


@pytest.mark.parametrize("ex", VALUES, ids=[f"{e.lesson}.{e.name}" for e in VALUES])
@pytest.mark.parametrize(
    "answer,phrase",
    [("half", "not a number"), (None, "not numbers"), ([np.nan] * 4, "nan"), ([1.0, 2.0], "shape")],
)
def test_a_malformed_prediction_gets_a_clear_message(ex, answer, phrase, capsys):
    assert ex.check(answer) is False
    assert phrase in capsys.readouterr().out


def test_a_known_mistake_gets_its_own_explanation(capsys):
    ex = exercises.load("01")
    ex.q2.check([0.25, 0.25, 0.25, 0.25])
    assert "high" in capsys.readouterr().out


def test_a_failure_names_the_property_and_the_input(capsys):
    ex = exercises.load("01")
    ex.q1.check(lambda x: np.exp(x) / np.exp(x).sum(axis=0, keepdims=True))
    out = capsys.readouterr().out
    assert "sum to 1" in out and "[[2. 4. 4.]" in out and "max abs diff" in out


def test_load_gives_fresh_hint_counters(capsys):
    exercises.load("01").q1.hint()
    exercises.load("01").q1.hint()
    assert capsys.readouterr().out.count("Hint 1 of") == 2


def test_an_unknown_lesson_is_rejected_by_name():
    with pytest.raises(ValueError, match="lesson"):
        exercises.load("99")


@pytest.mark.parametrize("answer", ["3/16", "0.1875", 0.1875, 0.188, 0.187])
def test_a_prediction_within_the_stated_tolerance_or_written_as_a_fraction_is_correct(answer):
    assert exercises.load("04").q1.evaluate(answer).status == "correct"


def test_a_prediction_just_outside_the_tolerance_is_not():
    assert exercises.load("04").q1.evaluate(0.189).status == "incorrect"
