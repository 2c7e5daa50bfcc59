"""Self-checked exercises: ``ex = load("01")``, then ``ex.q1.check(answer)``, ``ex.q1.hint()``, ``ex.q1.solution()``.

Examples
--------
>>> ex = load("01")
>>> verdict = ex.q2.check(...)
○ Not attempted yet: replace `...` with your prediction.
>>> verdict = ex.q2.check([0, 1, 0, 0])
✗ Not yet: the two 5s are tied; softmax treats equal scores equally. Who gets the mass?
>>> verdict.status, bool(verdict)
('incorrect', False)

In a notebook, ``ex.q2.check(answer)`` as the last line of a cell shows the
message only: the returned :class:`Verdict` displays nothing.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import SimpleNamespace
from typing import Iterator

from .core import Exercise, FunctionExercise, ValueExercise, Verdict

__all__ = ["LESSONS", "Exercise", "FunctionExercise", "ValueExercise", "Verdict", "all_exercises", "load"]

#: Lessons that have exercises ("01", "05b", ...), mapped to their module (lesson01, lesson05b, ...):
#: every module named lessonNN or lessonNNx in this package defines ``exercises()`` for that lesson.
LESSONS: dict[str, str] = {
    match.group(1): info.name
    for info in pkgutil.iter_modules(__path__)
    if (match := re.fullmatch(r"lesson(\d\d[a-z]?)", info.name))
}


def load(lesson: str) -> SimpleNamespace:
    """Return one lesson's exercises as attributes ``q1``, ``q2``, ...

    Parameters
    ----------
    lesson : str
        The lesson number, e.g. ``"01"``, or ``"05b"`` for the second part of a split lesson.

    Raises
    ------
    ValueError
        If the lesson has no exercises.
    """
    if not isinstance(lesson, str) or lesson not in LESSONS:
        raise ValueError(f"lesson must be one of {sorted(LESSONS)}; got {lesson!r}")
    module = importlib.import_module(f"{__name__}.{LESSONS[lesson]}")
    return SimpleNamespace(**{ex.name: ex for ex in module.exercises()})


def all_exercises() -> Iterator[Exercise]:
    """Yield every exercise of every lesson, in course order."""
    for lesson in sorted(LESSONS):
        yield from vars(load(lesson)).values()
