"""Every checker accepts its reference, rejects every known and every generated wrong answer, and never raises."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils import exercises
from course_utils.exercises import FunctionExercise, ValueExercise, all_exercises
from course_utils.exercises.core import ChoiceExercise, Verdict, generic_variants, mistake_name
from course_utils.exercises.lesson06 import _q1_michelot_steps

ALL = list(all_exercises())


def _unwrapped(text):
    """`text` with every run of whitespace made one space: what was printed, before it was wrapped."""
    return " ".join(text.split())


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
    "raises": (_raises, "raised ZeroDivisionError: oops, at line"),
    "returns None": (_returns_none, "forget `return`"),
    "returns text": (_returns_text, "not numbers"),
    "returns NaN": (None, "nan or inf"),  # built per exercise, shaped like its reference
    "wrong shape": (_wrong_shape, "shape"),
    "mutates its input": (_mutates, "changed its input `"),
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
    out = _unwrapped(capsys.readouterr().out)
    assert phrase in out and "Traceback" not in out


@pytest.mark.parametrize("ex", VALUES, ids=[f"{e.lesson}.{e.name}" for e in VALUES])
@pytest.mark.parametrize(
    "answer,phrase",
    [("half", "not a number"), (None, "not numbers"), ([np.nan] * 4, "nan"), ([1.0, 2.0], "shape")],
)
def test_a_malformed_prediction_gets_a_clear_message(ex, answer, phrase, capsys):
    assert ex.check(answer).status == "incorrect"
    assert phrase in _unwrapped(capsys.readouterr().out)


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

# Each exercise's whole family (hand-picked, generated and generic wrong answers) is checked by
# test_every_known_mistake_is_rejected_named_and_followed_by_its_own_next_step, below.


def _pool(ex):
    return list(ex.cases) + list(ex.probes)


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
@settings(max_examples=12, deadline=None)
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
    shown = message.split(": ")[-2].split(" where")[0] if False else message.split("): ")[1].split(" where")[0]
    expected = message.split("where the expected is ")[1].split(".")[0] + "." + message.split("where the expected is ")[1].split(".")[1]
    assert "more than rounding can explain" in message
    assert shown != expected, message


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


# --- Hints go one step beyond the feedback ------------------------------------------------


def _fresh(ex):
    """A new instance of `ex`, with no check and no hint behind it."""
    return getattr(exercises.load(ex.lesson), ex.name)


def _mistakes(ex):
    """Every labelled wrong answer of `ex`: hand-picked, generated and generic (function exercises)."""
    return ex.known_mistakes() if isinstance(ex, FunctionExercise) else dict(ex.wrong_answers)


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_every_known_mistake_has_a_next_step_that_names_code_or_a_formula(ex):
    missing = [label for label in _mistakes(ex) if label not in ex.next_steps]
    assert not missing, f"no next step for {missing}"
    vague = [label for label in _mistakes(ex) if "`" not in ex.next_steps[label]]
    assert not vague, f"these next steps name no code or formula in backticks: {vague}"


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_every_known_mistake_is_rejected_named_and_followed_by_its_own_next_step(ex, capsys):
    """The whole family of each exercise's wrong answers (1,100 in all), one test per exercise.

    Each wrong answer (hand-picked, generated, and for function exercises the generic ones) that is wrong on some
    case or probe is rejected; its feedback names the mistake ("This is exactly what ... gives.") with the
    mistake's advice; and the hint after it is that mistake's next step, beyond the feedback. Mistakes with
    different feedback get different next steps. Every failure is collected and named by its label. (As one test
    item per wrong answer, pytest's own work per item and the repeated checks cost more than the checks once.)
    """
    wrong, found = [], {}
    for label, answer in _mistakes(ex).items():
        fresh = _fresh(ex)
        verdict = fresh.check(answer)
        if verdict.passed:  # a generic variant may coincide with the reference (float16 on inputs it holds exactly)
            wrong_on = [c.describe() for c in _pool(ex) if not ex.agrees_with_reference(answer, c)]
            if wrong_on or label not in generic_variants(ex):
                wrong.append(f"{label!r} passed" + (f" but is wrong on {wrong_on[0]}" if wrong_on else ""))
            capsys.readouterr()
            continue
        feedback = _unwrapped(capsys.readouterr().out)
        if verdict.mistake is None:
            wrong.append(f"{label!r} was rejected but not diagnosed")
            continue
        slip = bool(verdict.more_steps)  # a slip (an exception, rounding ...) is named as that, with its own steps
        if isinstance(ex, FunctionExercise) and label in ex.variants and not slip:
            if f"This is exactly what {mistake_name(verdict.mistake)} gives." not in verdict.message:
                wrong.append(f"{label!r} is not named in the feedback")
            elif verdict.mistake in ex.advice and ex.advice[verdict.mistake] not in verdict.message:
                wrong.append(f"{label!r}: the feedback lacks the advice for {verdict.mistake!r}")
        fresh.hint()
        shown = _unwrapped(capsys.readouterr().out)
        if not verdict.next_step:
            wrong.append(f"{label!r} was diagnosed as {verdict.mistake!r}, which has no next step")
            continue
        if not slip and verdict.next_step != ex.next_steps.get(verdict.mistake):
            wrong.append(f"{label!r}: the verdict's next step is not the exercise's for {verdict.mistake!r}")
        step = _unwrapped(verdict.next_step)
        if shown != f"Next step for this mistake: {step}":
            wrong.append(f"{label!r}: the hint showed {shown!r}")
        elif step in feedback or _unwrapped(ex._hints[0]) in shown or "Hint 1 of" in shown:
            wrong.append(f"{label!r}: the next step repeats the feedback or hint 1")
        found[mistake_name(verdict.mistake)] = (verdict.message, verdict.next_step)
    assert not wrong, "; ".join(wrong)
    steps = {}
    for message, step in found.values():  # one message per diagnosed mistake: different mistakes, different steps
        steps.setdefault(step, set()).add(message)
    shared = {step: messages for step, messages in steps.items() if len(messages) > 1}
    assert not shared, f"one next step for different feedback: {shared}"


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_before_any_check_the_hints_start_from_the_top(ex, capsys):
    _fresh(ex).hint()
    out = capsys.readouterr().out
    assert _unwrapped(out) .startswith(f"Hint 1 of {len(ex._hints)}: {_unwrapped(ex._hints[0])}")


def test_after_the_next_step_the_hints_go_on_one_step_each_and_a_new_mistake_starts_over(capsys):
    ex = exercises.load("01").q1
    mean = ex.variants["shifting by the row mean instead of each row's own maximum"]
    ex.check(mean)
    capsys.readouterr()
    for _ in range(4):
        ex.hint()
    out = capsys.readouterr().out
    assert [line.split(":")[0] for line in out.splitlines() if line[:4] in ("Next", "Hint")] == [
        "Next step for this mistake", "Hint 2 of 3", "Hint 3 of 3", "Hint 3 of 3"]
    ex.check(mean)  # the check cell run again with the same answer: the hints go on
    capsys.readouterr()
    ex.hint()
    assert capsys.readouterr().out.startswith("Hint 3 of 3")
    ex.check(ex.wrong_answers["normalizing over the wrong axis"])  # another mistake: its own next step first
    capsys.readouterr()
    ex.hint()
    out = _unwrapped(capsys.readouterr().out)
    assert out == f"Next step for this mistake: {_unwrapped(ex.next_steps['normalizing over the wrong axis'])}"


def test_after_a_failure_with_no_diagnosis_the_hints_start_from_the_top(capsys):
    ex = exercises.load("01").q1
    ex.check(lambda x: np.full(np.shape(x), 0.3))  # fails "sums to 1", and no known mistake explains it
    ex.hint()
    capsys.readouterr()
    # Right in every property, wrong only in the numbers, like no known mistake.
    verdict = ex.check(lambda x: 0.999 * ex.reference(x) + 0.001 / np.shape(x)[-1])
    assert verdict.status == "incorrect" and verdict.mistake is None and verdict.next_step is None
    capsys.readouterr()
    ex.hint()
    assert capsys.readouterr().out.startswith("Hint 1 of 3")


def test_a_failed_property_names_its_next_step_when_no_known_mistake_explains_the_answer(capsys):
    ex = exercises.load("01").q1
    verdict = ex.check(lambda x: np.full(np.shape(x), 0.3))
    assert verdict.mistake == "the property sums_to_one"
    assert "keepdims=True" in verdict.next_step and verdict.next_step not in verdict.message
    capsys.readouterr()
    ex.hint()
    assert capsys.readouterr().out.startswith("Next step for this mistake: Print `out.sum(axis=-1)`")


# --- Solutions: Markdown in a notebook, plain text elsewhere ---------------------------------


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_the_solution_reads_as_plain_text_outside_a_notebook(ex, capsys):
    ex.solution()
    out = capsys.readouterr().out
    prose = [line.split("`")[::2] for line in out.splitlines() if not line.startswith("    ")]  # outside code
    emphasis = re.compile(r"(?<![\w*])\*{1,2}[A-Za-z][^*]*[A-Za-z]\*{1,2}(?![\w*])")
    assert "```" not in out and not any(emphasis.search(part) for parts in prose for part in parts)
    assert all(len(line) <= exercises.core.WIDTH or line.startswith(("    ", "|")) or "`" in line or "[" in line
               for line in out.splitlines())


def test_the_solution_is_rendered_as_markdown_in_a_notebook_with_plain_text_as_the_fallback(monkeypatch):
    import IPython.display

    shown = []
    monkeypatch.setattr(exercises.core, "_rich_frontend", lambda: True)
    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False: shown.append((obj, raw)))
    ex = exercises.load("01").q1
    ex.solution()
    (bundle, raw), = shown
    assert raw and bundle["text/markdown"].count("```") == 2 and "*its own*" in bundle["text/markdown"]
    plain = bundle["text/plain"]
    assert "```" not in plain and "its own maximum" in plain and "*its own*" not in plain
    assert "    def stable_softmax(x):" in plain  # the code, indented as a block


def test_outside_an_ipython_kernel_there_is_no_rich_frontend():
    assert exercises.core._rich_frontend() is False


def test_emphasis_is_removed_but_code_is_left_as_written():
    text = exercises.core.plain_text("Use *both* and **all**, not `a*b*c` or 2*3*4.\n```python\ny = x ** 2 * z\n```")
    assert text == "Use both and all, not `a*b*c` or 2*3*4.\n\n    y = x ** 2 * z\n"


# --- Printed text is wrapped at words, never inside a word, code or an array -----------------


def test_long_feedback_is_wrapped_at_words_and_keeps_arrays_whole(capsys):
    ex = exercises.load("01").q1
    verdict = ex.check(ex.variants["shifting by the row mean instead of each row's own maximum"])
    out = capsys.readouterr().out
    lines = out.rstrip("\n").split("\n")
    assert len(lines) > 2 and all(len(line) <= exercises.core.WIDTH for line in lines)
    assert _unwrapped(out) == _unwrapped(verdict.message)  # only spaces became line breaks
    words = set(verdict.message.split())
    assert all(word in words for line in lines for word in line.split())  # no word was cut in two
    arrays = [a for a in verdict.message.replace("\n", " ").split("[") if "]" in a]
    assert all(f"[{a.split(']')[0]}]" in out.replace("\n", "~") for a in arrays)  # every array on one line


def test_code_list_items_and_tables_are_kept_intact():
    wrap = exercises.core.wrap
    code = "```python\n" + "x = " + " + ".join(["a_long_name"] * 10) + "\n```"
    assert wrap(code) == code
    row = "| " + " | ".join(["a cell of a table"] * 6) + " |"
    assert wrap(row) == row
    item = "- " + "word " * 30
    assert all(line.startswith("  ") for line in wrap(item.strip()).splitlines()[1:])


def test_a_lone_bracket_or_backtick_does_not_stop_the_wrapping():
    text = "in the half-open interval [0, 1) " + "word " * 40 + "and one ` backtick " + "word " * 40
    assert all(len(line) <= 88 for line in exercises.core.wrap(text).splitlines())


@pytest.mark.parametrize("width", [5, 88.0, "88"])
def test_a_bad_width_is_rejected_by_name(width):
    with pytest.raises(ValueError, match="width"):
        exercises.core.wrap("text", width)


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_hints_are_wrapped(ex, capsys):
    for _ in range(len(ex._hints)):
        ex.hint()
    for line in capsys.readouterr().out.splitlines():
        assert len(line) <= exercises.core.WIDTH or "`" in line or "[" in line, line


# --- Review 33: the time limit, the course's own functions, hints that name only what the learner wrote -------


def test_a_bare_except_nested_in_another_cannot_swallow_the_time_limit(monkeypatch):
    """Once the time is spent every new line of the learner's code raises the stop again, so the line after the
    one that caught it (the inner `except`'s body) raises it into the outer one, and the outer one's body out."""
    import sys
    import time

    monkeypatch.setattr(exercises.core, "TIME_LIMIT", 0.3)
    ex = exercises.load("01").q1

    def stubborn(x):
        while True:
            try:
                try:
                    with np.errstate(all="ignore"):  # its exit must run: NumPy's settings come back
                        while True:
                            pass
                except:  # noqa: E722 (the learner's bare excepts are the point)
                    pass
            except:  # noqa: E722
                continue

    before, trace = np.geterr(), sys.gettrace()
    start = time.monotonic()
    verdict = ex.evaluate(stubborn)
    assert verdict.mistake == "taking too long" and time.monotonic() - start < 3
    assert np.geterr() == before and sys.gettrace() is trace
    assert ex.evaluate(ex.reference).passed


OWN = [("06", "q1", lambda x: exercises.lesson06.sparsemax(x), "sparsemax"),
       ("07", "q1", lambda m1, l1, m2, l2: tuple(exercises.lesson07.merge_softmax_states(
           exercises.lesson07.SoftmaxState(m1, l1), exercises.lesson07.SoftmaxState(m2, l2))), "merge_softmax_states"),
       ("07", "q2", lambda q, k, v, bq, bk: exercises.lesson07.tiled_attention(q, k, v, block_q=bq, block_k=bk)[0],
        "tiled_attention"),
       ("07b", "q3", lambda outs, lses: exercises.lesson07b.merge_attention_parts(outs, lses)[0], "merge_attention_parts"),
       ("09", "q1", lambda x, sink: exercises.lesson09.softmax_with_sink(x, sink), "softmax_with_sink"),
       ("09b", "q1", lambda x, s: exercises.lesson09b.scalable_softmax(x, s), "scalable_softmax"),
       ("09b", "q2", lambda x, c: exercises.lesson09b.softcap(x, c), "softcap")]


@pytest.mark.parametrize("lesson,name,answer,function", OWN, ids=[f"{l}.{q}" for l, q, _, _ in OWN])
def test_calling_the_course_function_the_exercise_asks_for_is_refused_by_name(lesson, name, answer, function):
    ex = getattr(exercises.load(lesson), name)
    verdict = ex.evaluate(answer)
    assert not verdict and verdict.mistake == exercises.core.OWN_FUNCTION
    assert f"calls `course_utils.{function}`, which is the function this exercise asks you to write" in verdict.message
    assert ex.evaluate(ex.reference).passed  # the checker's own call of it is not the learner's


def test_the_generic_clip_hint_names_no_limit_the_learner_may_not_have_used():
    step = exercises.core.generic_next_steps()["clipping every input to [-50, 50]"]
    assert "50" not in step and "`np.clip(...)`" in step


def test_the_first_floating_point_error_is_named_with_the_learners_line():
    from course_utils.exercises.core import Case, first_float_error

    def overflowing(x):
        e = np.exp(x)
        return e / e.sum()

    found = first_float_error(overflowing, Case((np.array([1000.0, 0.0]),)))
    assert found.startswith("'overflow encountered in exp', at line") and "`e = np.exp(x)`" in found
    assert first_float_error(overflowing, Case((np.array([1.0, 0.0]),))) is None


def _flushed(f, threshold):
    """`f`, with every weight below `threshold` set to 0 afterwards (a 'clean-up' some learners add)."""

    def flushed(*args):
        out = np.array(f(*args), dtype=np.float64)
        out[np.abs(out) < threshold] = 0.0
        return out

    return flushed


@pytest.mark.parametrize("lesson,name,threshold", [("01", "q1", 3e-7), ("01", "q1", 1e-6), ("01", "q3", 3e-7),
                                                    ("04", "q3", 1e-3), ("04", "q3", 5e-3), ("05", "q2", 1e-6),
                                                    ("05", "q2", 0.02)])
def test_flushing_small_weights_to_zero_after_a_right_answer_is_rejected(lesson, name, threshold):
    from course_utils.exercises import load

    ex = getattr(load(lesson), name)
    assert ex.evaluate(ex.reference).status == "correct"
    assert ex.evaluate(_flushed(ex.reference, threshold)).status == "incorrect"


def _diagonal_guard(out, mask):
    """A guard that takes 'may attend to itself' for 'may attend to something' (right on causal masks only)."""
    mask = np.asarray(mask)
    if mask.shape[-1] != mask.shape[-2]:
        return np.where(mask.any(axis=-1, keepdims=True), out, 0.0)
    return np.where(np.diagonal(mask, axis1=-2, axis2=-1)[..., None], out, 0.0)


@pytest.mark.parametrize("lesson,name,answer", [
    ("06", "q1", _q1_michelot_steps(6)), ("06", "q1", _q1_michelot_steps(10)),
    ("06b", "q2", lambda g, p, alpha: (lambda s: s * g - (s @ g) / s.sum() * s)(np.where(p > 1e-20, p ** (2 - alpha), 0.0))),
    ("05c", "q2", _diagonal_guard),
], ids=["michelot-6", "michelot-10", "support-1e-20", "diagonal-guard"])
def test_fourth_rerun_acceptances_are_rejected(lesson, name, answer):
    from course_utils.exercises import load

    assert getattr(load(lesson), name).evaluate(answer).status == "incorrect"


def test_fourth_rerun_names_say_only_what_the_answer_did():
    """08b q1: a tiny value (an epsilon, not a factor) is not called 'epsilon = 0'; 08 q2: the ddof hint names no line."""
    from course_utils.exercises import load

    tiny = load("08b").q1.evaluate(4e-8)
    assert "an epsilon itself rather than the factor" in tiny.message and tiny.next_step.startswith("Answer with the factor")
    paired = load("08").q2.evaluate(lambda a, b: np.array([(a - b).mean(), np.sqrt(np.var(a) + np.var(b) - 2 * np.cov(a, b, ddof=0)[0, 1])]))
    assert paired.mistake == "ddof = 0" and "Change `d.std()`" not in paired.next_step
