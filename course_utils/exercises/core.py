"""The machinery behind every exercise: ``check``, ``hint`` and ``solution``.

Two kinds of exercise exist:

* :class:`FunctionExercise`: the learner writes a function. It is called on
  copies of a few inputs and its results are tested property by property
  (shape, non-negative, sums to 1, ...) and then against a reference.
* :class:`ValueExercise`: the learner predicts a value (a number or a short
  array) before computing it.

``check`` never lets an exception escape: whatever the learner's code does
(raise, return None, return NaN, modify its input), the learner reads a
sentence about it, not a traceback from ``course_utils``.
"""

from __future__ import annotations

import copy
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

__all__ = [
    "Case",
    "Exercise",
    "FunctionExercise",
    "Property",
    "Run",
    "ValueExercise",
    "Verdict",
    "describe",
    "non_negative",
    "starter",
    "shift_invariant",
    "sums_to_one",
]

Status = Literal["correct", "incorrect", "not attempted"]


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one answer."""

    status: Status
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "correct"


def describe(value: Any) -> str:
    """A short, readable rendering of an input for feedback messages.

    Examples
    --------
    >>> describe(np.array([1.0, 0.5]))
    '[1.  0.5]'
    >>> describe(np.zeros((2, 3, 5, 8)))  # a batch of matrices: its numbers would fill the screen
    'an array of shape (2, 3, 5, 8)'
    """
    if isinstance(value, np.ndarray) and value.ndim >= 3:
        return f"an array of shape {value.shape}"
    if isinstance(value, np.ndarray) and value.ndim:
        return np.array2string(value, precision=4, threshold=12, separator=" ").replace("\n", "")
    if isinstance(value, (np.ndarray, np.generic)):  # a NumPy scalar: show the number, not np.float64(...)
        return repr(value.item())
    return repr(value)


@dataclass(frozen=True)
class Case:
    """One input on which a learner's function is called."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [describe(a) for a in self.args] + [f"{k}={describe(v)}" for k, v in self.kwargs.items()]
        return "(" + ", ".join(parts) + ")"


class _NotAttempted(Exception):
    """The learner's function is still the starter stub."""


class _Failed(Exception):
    """The learner's answer failed; the message says how."""


@dataclass
class Run:
    """A learner's function evaluated on one case, handed to each property."""

    function: Callable[..., Any]
    case: Case
    output: np.ndarray
    expected: np.ndarray

    def call(self, *args: Any, **kwargs: Any) -> np.ndarray:
        """Call the learner's function on other inputs, safely (used by properties)."""
        return _call_safely(self.function, Case(args, kwargs))


#: A property takes a :class:`Run` and returns None if it holds, else a short
#: description of what failed ("does not sum to 1 along the last axis").
Property = Callable[[Run], "str | None"]


def sums_to_one(run: Run) -> str | None:
    """Property: the output sums to 1 along its last axis."""
    total = run.output.sum(axis=-1)
    if not np.allclose(total, 1.0, atol=1e-6):
        return f"does not sum to 1 along the last axis (sums: {describe(np.round(total, 4))})"
    return None


def non_negative(run: Run) -> str | None:
    """Property: no output is negative."""
    if (run.output < 0).any():
        return f"has negative entries (smallest {run.output.min():.4g})"
    return None


def shift_invariant(run: Run) -> str | None:
    """Property: adding 100 to every input score leaves the output unchanged."""
    shifted = run.call(np.asarray(run.case.args[0]) + 100.0, *run.case.args[1:], **run.case.kwargs)
    # atol 1e-6 lets float32 answers through; a function that is not shift-invariant misses by far more.
    if shifted.shape != run.output.shape or not np.allclose(shifted, run.output, atol=1e-6, equal_nan=False):
        return "is not shift-invariant: adding 100 to every score changed the result"
    return None


def _as_numbers(value: Any, what: str, *, allow_text: bool = False) -> np.ndarray:
    """Convert a learner's value to a float array, or fail with a sentence.

    With `allow_text`, a single number written as text, "3/16" or "0.1875", is accepted too.
    """
    if type(value).__module__.startswith("torch"):
        value = value.detach().cpu().numpy()
    if allow_text and isinstance(value, str):
        try:
            value = float(Fraction(value.strip()))
        except (ValueError, ZeroDivisionError):
            raise _Failed(f"{what} the text {value!r:.60}, not a number") from None
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise _Failed(f"{what} a {type(value).__name__}, not numbers: {value!r:.60}") from None
    return arr


def _call_safely(function: Callable[..., Any], case: Case) -> np.ndarray:
    """Call `function` on copies of the case's inputs and return its output as floats."""
    args, kwargs = copy.deepcopy(case.args), copy.deepcopy(dict(case.kwargs))
    try:
        # Overflow warnings would only repeat what the feedback says about nan/inf.
        with np.errstate(all="ignore"):
            out = function(*args, **kwargs)
    except NotImplementedError:
        raise _NotAttempted from None
    except Exception as exc:  # the learner's bug, reported as feedback
        raise _Failed(f"your function raised {type(exc).__name__}: {exc} on input {case.describe()}") from None
    for before, after in zip(case.args, args):
        if isinstance(before, np.ndarray) and not np.array_equal(before, after, equal_nan=True):
            raise _Failed(
                f"your function changed its input in place on {case.describe()}; "
                "compute into a new array (e.g. `y = x / s` rather than `x /= s`)"
            )
    if out is None:
        raise _Failed(f"your function returned None on input {case.describe()}: did you forget `return`?")
    return _as_numbers(out, f"on input {case.describe()} your function returned")


def starter(*args: Any, **kwargs: Any) -> Any:
    """The stub a function exercise ships with: it raises ``NotImplementedError`` ("not attempted")."""
    raise NotImplementedError


class Exercise:
    """Base class: hints, solution and the never-raising ``check``.

    Subclasses implement :meth:`evaluate`, which returns a :class:`Verdict`.
    """

    kind = "exercise"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Any,
        wrong_answers: Mapping[str, Any],
        hints: Sequence[str],
        solution: str,
    ) -> None:
        self.lesson = lesson
        self.name = name
        self.title = title
        self.reference = reference
        self.wrong_answers = dict(wrong_answers)
        self._hints = tuple(hints)
        self._solution = solution
        self._hints_shown = 0

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.lesson}.{self.name}: {self.title}>"

    def evaluate(self, answer: Any) -> Verdict:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, answer: Any) -> bool:
        """Check `answer`, print feedback, and return True if it is correct."""
        try:
            verdict = self.evaluate(answer)
        except Exception as exc:  # never show a course_utils traceback to a learner
            verdict = Verdict("incorrect", f"✗ The checker could not use your answer ({type(exc).__name__}: {exc}).")
        print(verdict.message)
        return verdict.passed

    def hint(self) -> None:
        """Print the next hint; each call reveals one more."""
        if not self._hints:
            print("No hints for this one.")
            return
        shown = min(self._hints_shown, len(self._hints) - 1)
        self._hints_shown = shown + 1
        print(f"Hint {shown + 1} of {len(self._hints)}: {self._hints[shown]}")
        if shown + 1 == len(self._hints):
            print(f"That was the last hint. `ex.{self.name}.solution()` shows a full answer.")

    def solution(self) -> None:
        """Print a worked solution."""
        print(f"Solution to {self.lesson}.{self.name} ({self.title}):\n\n{self._solution.strip()}")


class FunctionExercise(Exercise):
    """An exercise whose answer is a function, tested on several inputs.

    Parameters
    ----------
    reference : callable
        A correct answer; its outputs are the expected values.
    cases : sequence of Case
        Inputs, from easy to hard; the first failing one is reported.
    properties : sequence of Property
        Checked in order on each case before the comparison with the reference.
    early_properties : sequence of Property
        Checked right after the shape, before the check for nan and inf: for
        outputs where nan or inf is not an overflow but a wrong kind of answer.
    nonfinite_hint : str
        What to say when the result holds nan or inf where the reference does not
        (an inf that the reference has too is correct).
    starter : callable
        The stub the notebook ships (it raises ``NotImplementedError``).
    rtol, atol : float
        Tolerances of the final comparison with the reference.
    """

    kind = "function"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Callable[..., Any],
        cases: Sequence[Case],
        properties: Sequence[Property] = (),
        early_properties: Sequence[Property] = (),
        starter: Callable[..., Any],
        wrong_answers: Mapping[str, Callable[..., Any]],
        hints: Sequence[str],
        solution: str,
        rtol: float = 1e-6,
        atol: float = 1e-9,
        nonfinite_hint: str = (
            "Large scores overflow exp(), and a row whose exponentials all underflow gives 0/0: "
            "subtract each row's own maximum first."
        ),
    ) -> None:
        super().__init__(
            lesson, name, title, reference=reference, wrong_answers=wrong_answers, hints=hints, solution=solution
        )
        self.cases = tuple(cases)
        self.properties = tuple(properties)
        self.early_properties = tuple(early_properties)
        self.starter = starter
        self.rtol, self.atol = rtol, atol
        self.nonfinite_hint = nonfinite_hint

    def evaluate(self, answer: Any) -> Verdict:
        """Return the verdict on `answer` without printing anything."""
        if not callable(answer):
            return Verdict("incorrect", f"✗ Pass your function itself (no parentheses), not a {type(answer).__name__}.")
        try:
            for case in self.cases:
                self._check_case(answer, case)
        except _NotAttempted:
            return Verdict(
                "not attempted",
                "○ Not attempted yet: replace `raise NotImplementedError` with your code, then run the check again.",
            )
        except _Failed as failure:
            return Verdict("incorrect", f"✗ Not yet: {failure}")
        return Verdict("correct", f"✓ Correct! Your function passed all {len(self.cases)} test inputs.")

    def _check_case(self, answer: Callable[..., Any], case: Case) -> None:
        expected = np.asarray(self.reference(*copy.deepcopy(case.args), **case.kwargs), dtype=np.float64)
        out = _call_safely(answer, case)
        if out.shape != expected.shape:
            raise _Failed(f"on input {case.describe()} the result has shape {out.shape}; expected {expected.shape}")
        run = Run(answer, case, out, expected)
        for prop in self.early_properties:
            problem = prop(run)
            if problem:
                raise _Failed(f"on input {case.describe()} the result {problem}")
        if (~np.isfinite(out) & (out != expected)).any():  # an inf the reference also has is right
            raise _Failed(f"on input {case.describe()} the result contains nan or inf: {describe(out)}. {self.nonfinite_hint}")
        with np.errstate(invalid="ignore"):
            diff = np.where(out == expected, 0.0, np.abs(out - expected))
        max_diff = float(diff.max()) if out.size else 0.0
        for prop in self.properties:
            problem = prop(run)
            if problem:
                raise _Failed(f"on input {case.describe()} the result {problem} (max abs diff from the reference {max_diff:.2g})")
        if not np.allclose(out, expected, rtol=self.rtol, atol=self.atol):
            raise _Failed(
                f"on input {case.describe()} the result {describe(np.round(out, 4))} differs from the "
                f"expected {describe(np.round(expected, 4))} (max abs diff {max_diff:.2g})"
            )


class ValueExercise(Exercise):
    """An exercise whose answer is a value: a prediction made before computing.

    The starter value is ``...`` (Ellipsis), reported as "not attempted".
    A known wrong answer gets its own explanation from `wrong_answers`,
    which maps a label to ``(value, feedback)``.
    """

    kind = "value"

    def __init__(
        self,
        lesson: str,
        name: str,
        title: str,
        *,
        reference: Any,
        wrong_answers: Mapping[str, tuple[Any, str]],
        hints: Sequence[str],
        solution: str,
        atol: float = 5e-4,
        rtol: float = 0.0,
    ) -> None:
        super().__init__(
            lesson,
            name,
            title,
            reference=reference,
            wrong_answers={label: value for label, (value, _) in wrong_answers.items()},
            hints=hints,
            solution=solution,
        )
        self._feedback = [(np.asarray(value, dtype=np.float64), text) for value, text in wrong_answers.values()]
        self.starter = ...
        self.atol, self.rtol = atol, rtol

    def evaluate(self, answer: Any) -> Verdict:
        """Return the verdict on `answer` without printing anything."""
        if answer is ...:
            return Verdict("not attempted", "○ Not attempted yet: replace `...` with your prediction.")
        if answer is None:
            return Verdict("incorrect", "✗ Not yet: your answer is None, not numbers. Write your prediction in place of `...`.")
        try:
            got = _as_numbers(answer, "your answer is", allow_text=True)
        except _Failed as failure:
            return Verdict("incorrect", f"✗ Not yet: {failure}")
        expected = np.asarray(self.reference, dtype=np.float64)
        if not np.isfinite(got).all():
            return Verdict("incorrect", f"✗ Not yet: your answer contains nan or inf: {describe(got)}.")
        if got.shape != expected.shape:
            return Verdict("incorrect", f"✗ Not yet: give {expected.size} number(s) (shape {expected.shape}); you gave shape {got.shape}.")
        # A prediction exactly at the tolerance counts as right (hence the 1 + 1e-9).
        atol, rtol = self.atol * (1 + 1e-9), self.rtol * (1 + 1e-9)
        if np.allclose(got, expected, rtol=rtol, atol=atol):
            return Verdict("correct", "✓ Correct!")
        for value, text in self._feedback:
            if value.shape == got.shape and np.allclose(got, value, rtol=rtol, atol=atol):
                return Verdict("incorrect", f"✗ Not yet: {text}")
        max_diff = float(np.abs(got - expected).max())
        tolerance = f"tolerance {self.atol:g}" + (f" + {self.rtol:g} of the answer" if self.rtol else "")
        return Verdict("incorrect", f"✗ Not yet: max abs diff from the answer is {max_diff:.2g} ({tolerance}).")
