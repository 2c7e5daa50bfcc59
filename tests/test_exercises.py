"""Every checker accepts its reference, rejects every known and every generated wrong answer, and never raises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import exercises
from course_utils.exercises import FunctionExercise, ValueExercise, all_exercises
from course_utils.exercises.core import Verdict, generic_variants

ALL = list(all_exercises())
IDS = [f"{ex.lesson}.{ex.name}" for ex in ALL]
WRONG = [(ex, label) for ex in ALL for label in ex.wrong_answers]


def test_every_lesson_has_two_to_four_exercises():
    for lesson in exercises.LESSONS:
        assert 2 <= len(vars(exercises.load(lesson))) <= 4


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_reference_answer_is_correct(ex, capsys):
    assert ex.check(ex.reference).passed is True
    assert capsys.readouterr().out.startswith("✓ Correct")


@pytest.mark.parametrize("ex,label", WRONG, ids=[f"{e.lesson}.{e.name}: {l}" for e, l in WRONG])
def test_every_known_wrong_answer_is_rejected(ex, label, capsys):
    assert ex.check(ex.wrong_answers[label]).status == "incorrect"
    assert capsys.readouterr().out.startswith("✗ Not yet")


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_starter_is_reported_as_not_attempted(ex, capsys):
    assert ex.evaluate(ex.starter).status == "not attempted"
    assert not ex.check(ex.starter)
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
    assert ex.check(answer).status == "incorrect"
    out = capsys.readouterr().out
    assert phrase in out and "Traceback" not in out


@pytest.mark.parametrize("ex", VALUES, ids=[f"{e.lesson}.{e.name}" for e in VALUES])
@pytest.mark.parametrize(
    "answer,phrase",
    [("half", "not a number"), (None, "not numbers"), ([np.nan] * 4, "nan"), ([1.0, 2.0], "shape")],
)
def test_a_malformed_prediction_gets_a_clear_message(ex, answer, phrase, capsys):
    assert ex.check(answer).status == "incorrect"
    assert phrase in capsys.readouterr().out


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


# --- A check cell shows the message and nothing else ------------------------------------


def test_a_check_cell_shows_only_the_message():
    from IPython.core.interactiveshell import InteractiveShell

    verdict = exercises.load("01").q2.evaluate([0, 0.5, 0.5, 0])
    data, metadata = InteractiveShell.instance().display_formatter.format(verdict)
    assert data == {} and metadata == {}  # nothing under the printed message, not even "True"


def test_the_verdict_stays_readable_by_code(capsys):
    ex = exercises.load("01").q2
    verdict = ex.check([0, 0.5, 0.5, 0])
    assert verdict.passed and bool(verdict) and verdict == True  # noqa: E712
    assert ex.last_verdict is verdict
    wrong = ex.check([0.25] * 4)
    assert not wrong and wrong == False and wrong.status == "incorrect"  # noqa: E712
    assert wrong == Verdict("incorrect", wrong.message)


# --- Generated wrong variants: the whole family of plausible mistakes is rejected ----------

#: (exercise, label) for every generated or generic wrong answer of every function exercise,
#: including the exercises of lessons whose modules declare no variants of their own.
GENERATED = [(ex, label) for ex in FUNCTIONS for label in {**ex.variants, **generic_variants(ex)}]


def _pool(ex):
    return list(ex.cases) + list(ex.probes)


@pytest.mark.parametrize("ex,label", GENERATED, ids=[f"{e.lesson}.{e.name}: {l}" for e, l in GENERATED])
def test_every_generated_variant_that_is_wrong_somewhere_is_rejected(ex, label):
    wrong = ex.known_mistakes()[label]
    wrong_on = [c.describe() for c in _pool(ex) if not ex.agrees_with_reference(wrong, c)]
    if wrong_on:
        verdict = ex.evaluate(wrong)
        assert verdict.status == "incorrect", f"{label} is wrong on {wrong_on[0]} but the checker accepts it"
    else:  # a generic variant may coincide with the reference (float16 on inputs float16 holds exactly)
        assert label not in ex.variants, f"the declared variant {label!r} is right on every case and probe"


DECLARED = [(ex, label) for ex in FUNCTIONS for label in ex.variants]


@pytest.mark.parametrize("ex,label", DECLARED, ids=[f"{e.lesson}.{e.name}: {l}" for e, l in DECLARED])
def test_a_generated_mistake_is_named_in_the_feedback(ex, label):
    message = ex.evaluate(ex.variants[label]).message
    named = ex.diagnose(ex.variants[label])
    assert named is not None and f"This is exactly what {named} gives." in message
    if named in ex.advice:
        assert ex.advice[named] in message


SOFTMAX_LIKE = [ex for ex in FUNCTIONS if any(label.startswith("shifting by the row mean") for label in ex.variants)]


@pytest.mark.parametrize("ex", SOFTMAX_LIKE, ids=[f"{e.lesson}.{e.name}" for e in SOFTMAX_LIKE])
def test_shifting_by_the_mean_is_named_and_shown_an_input_that_breaks_it(ex):
    message = ex.evaluate(ex.variants["shifting by the row mean instead of each row's own maximum"]).message
    assert "You shifted by the row mean" in message and "[2000, 0]" in message


def test_rounding_the_square_root_of_d_k_is_named():
    ex = exercises.load("03").q3
    message = ex.evaluate(lambda Q, K: Q @ K.T / round(np.sqrt(Q.shape[-1]))).message
    assert "You rounded √d_k" in message


def test_clipping_the_logits_is_caught_on_a_gap_between_large_logits():
    ex = exercises.load("04").q3
    clipped = lambda z, y: np.exp(np.clip(z, -50, 50) - np.clip(z, -50, 50).max(-1, keepdims=True)) / np.exp(  # noqa: E731
        np.clip(z, -50, 50) - np.clip(z, -50, 50).max(-1, keepdims=True)
    ).sum(-1, keepdims=True) - y
    message = ex.evaluate(clipped).message
    assert "[1000.  995.    0.]" in message and "You clipped the scores" in message


@pytest.mark.parametrize("ex", FUNCTIONS, ids=[f"{e.lesson}.{e.name}" for e in FUNCTIONS])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_any_answer_off_by_more_than_the_tolerance_on_one_entry_of_one_case_is_rejected(ex, data):
    case_index = data.draw(st.integers(0, len(ex.cases) - 1), label="case")
    target = ex.cases[case_index]
    expected = np.asarray(ex.reference(*target.args, **target.kwargs), dtype=np.float64)
    finite = np.flatnonzero(np.isfinite(expected))
    if not finite.size:
        return
    entry = int(finite[data.draw(st.integers(0, finite.size - 1), label="entry")])
    factor = data.draw(st.floats(1.5, 1e6), label="times the tolerance")
    sign = data.draw(st.sampled_from([-1.0, 1.0]), label="sign")
    step = sign * factor * (ex.atol + ex.rtol * abs(expected.flat[entry]))

    def answer(*args, **kwargs):
        out = np.array(ex.reference(*args, **kwargs), dtype=np.float64)
        same_input = all(
            np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True) and np.shape(a) == np.shape(b)
            for a, b in zip(args, target.args)
        )
        if same_input:
            out.flat[entry] += step
        return out

    assert ex.evaluate(answer).status == "incorrect"


def test_a_difference_below_four_decimals_is_shown_with_enough_digits():
    ex = exercises.load("01").q1
    message = ex.evaluate(lambda x: ex.reference(x) * (1 + 2e-6)).message
    shown = message.split("the result ")[1].split(" differs")[0]
    expected = message.split("the expected ")[1].split(" (max")[0]
    assert shown != expected


def _shown_solution(ex):
    """The function defined by the Python block of the solution the learner is shown."""
    code = ex._solution.split("```python")[1].split("```")[0]
    import torch  # the lessons import torch, torch.nn.functional as F and course_utils

    import course_utils

    namespace = {"np": np, "math": __import__("math"), "torch": torch, "F": torch.nn.functional,
                 "course_utils": course_utils, "cu": course_utils}
    exec(code, namespace)  # the code the learner is shown
    functions = [v for k, v in namespace.items() if callable(v) and getattr(v, "__module__", "") is None]
    return functions[-1] if functions else None


SHOWN = [ex for ex in FUNCTIONS if "```python" in ex._solution]


@pytest.mark.parametrize("ex", SHOWN, ids=[f"{e.lesson}.{e.name}" for e in SHOWN])
def test_the_shown_solution_passes_its_own_checker(ex):
    solution = _shown_solution(ex)
    assert solution is not None
    assert ex.evaluate(solution).status == "correct", ex.evaluate(solution).message


MINE = [ex for ex in FUNCTIONS if ex.lesson in {"01", "02", "03", "04", "07"}]


@pytest.mark.parametrize("ex", MINE, ids=[f"{e.lesson}.{e.name}" for e in MINE])
def test_each_exercise_has_its_own_hint_for_nan_or_inf(ex):
    assert ex.nonfinite_hint


def test_without_its_own_hint_a_masked_input_gets_the_fully_masked_row_hint():
    ex = FunctionExercise(
        "xx", "q1", "masked softmax", reference=lambda x: np.zeros_like(x), starter=lambda x: None,
        cases=[exercises.core.Case((np.array([[-np.inf, -np.inf], [1.0, 2.0]]),))],
        wrong_answers={}, hints=["h"], solution="s",
    )
    message = ex.evaluate(lambda x: np.full(x.shape, np.nan)).message
    assert "-inf - (-inf) = nan" in message and "subtract each row's own maximum first" not in message


def test_a_wrong_batch_of_matrices_is_shown_by_its_first_differing_entry():
    ex = FunctionExercise(
        "xx", "q1", "batch", reference=lambda x: x * 2.0, starter=lambda x: None,
        cases=[exercises.core.Case((np.ones((2, 3, 4)),))], wrong_answers={}, hints=["h"], solution="s",
    )

    def wrong(x):
        out = x * 2.0
        out[1, 2, 3] = 5.0
        return out

    message = ex.evaluate(wrong).message
    assert "at index (1, 2, 3): 5.0 instead of 2.0" in message
    assert "differs from the expected an array" not in message
