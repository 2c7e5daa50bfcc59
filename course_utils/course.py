"""Lesson metadata: one record per notebook, from which its header is built.

Each notebook stores, under ``metadata["course"]``, its lesson number, title,
estimated minutes, learning objectives, prerequisites and the earlier lessons
it builds on (``requires``). The notebook's first cell is generated from that
record by :func:`header_markdown`, and the course map of the start-here
notebook and the README by :func:`course_map_markdown`; the tests check that
they agree, so what a learner reads can never drift from what the course
knows about its lessons.

A notebook that is a page of the course but not a lesson (the sources page,
``sources.ipynb``) stores ``"page"``, its file's stem, instead of ``"lesson"``.
It gets a header and computed minutes like a lesson, but no number, no
exercises and no row in the course map: :func:`read_course` reads lessons only.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "METADATA_KEY",
    "Lesson",
    "course_map_markdown",
    "header_markdown",
    "learner_minutes",
    "read_course",
    "read_lesson",
]

METADATA_KEY = "course"
_FIELDS = ("lesson", "title", "minutes", "objectives", "prerequisites")
#: A lesson notebook's file name: its lesson number, an optional part letter, then "_".
LESSON_FILE = re.compile(r"^(\d\d[a-z]?)_.*\.ipynb$")

#: The pace of a learner, calibrated on what learners took for lessons 02, 05, 06 and 07
#: as they stood in November 2026 (about 90, 100-120, 100-120 and 120-150 minutes; the
#: formula gave 78, 120, 120 and 138): technical prose with formulas is read at about 80
#: words a minute, a code cell is read, run and its output looked at in about a minute,
#: and an exercise takes about five.
WORDS_PER_MINUTE = 80
MINUTES_PER_CODE_CELL = 1.0
MINUTES_PER_EXERCISE = 5.0


def learner_minutes(notebook: Mapping[str, Any], n_exercises: int | None = None) -> int:
    """Real learner time for a notebook, rounded up to a multiple of 5 minutes.

    ``words / 80 + 1 * code cells + 5 * exercises``, where words counts every
    Markdown cell but the generated header (the first cell), code cells the
    non-empty ones, and exercises those of the lesson's exercise module (or
    `n_exercises`, if given).

    Examples
    --------
    >>> cell = lambda kind, text: {"cell_type": kind, "source": text}
    >>> nb = {"cells": [cell("markdown", "# header"), cell("markdown", "word " * 800), cell("code", "x = 1")]}
    >>> learner_minutes(nb, n_exercises=1)  # 10 + 1 + 5 = 16, rounded up
    20
    """
    cells = notebook["cells"]
    words = sum(len("".join(c["source"]).split()) for c in cells[1:] if c["cell_type"] == "markdown")
    code = sum(1 for c in cells if c["cell_type"] == "code" and "".join(c["source"]).strip())
    if n_exercises is None:
        from . import exercises

        lesson = str(notebook.get("metadata", {}).get(METADATA_KEY, {}).get("lesson", ""))
        n_exercises = len(vars(exercises.load(lesson))) if lesson in exercises.LESSONS else 0
    raw = words / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * code + MINUTES_PER_EXERCISE * n_exercises
    return max(5, 5 * math.ceil(raw / 5 - 1e-9))


@dataclass(frozen=True)
class Lesson:
    """What the course knows about one notebook."""

    lesson: str
    title: str
    minutes: int
    objectives: tuple[str, ...]
    prerequisites: tuple[str, ...]
    requires: tuple[str, ...] = ()
    path: Path | None = None
    page: bool = False  # a page of the course that is not a lesson: `lesson` holds its file's stem

    @classmethod
    def from_metadata(cls, record: Mapping[str, Any], path: Path | None = None) -> "Lesson":
        """Build a Lesson from a notebook's ``metadata["course"]``, checking every field.

        Raises
        ------
        ValueError
            If a field is missing or empty, naming the field and the notebook.
        """
        where = f" in {path.name}" if path else ""
        page = "page" in record and "lesson" not in record
        fields = ("page",) + _FIELDS[1:] if page else _FIELDS
        missing = [f for f in fields if not record.get(f)]
        if missing:
            raise ValueError(f"notebook metadata '{METADATA_KEY}'{where} lacks {', '.join(missing)}")
        minutes = record["minutes"]
        if not isinstance(minutes, int) or minutes <= 0:
            raise ValueError(f"minutes{where} must be a positive int; got {minutes!r}")
        name = str(record["page" if page else "lesson"])
        requires = tuple(str(r) for r in record.get("requires", ()))
        if not page and any(r >= name for r in requires):
            raise ValueError(f"requires{where} may only name earlier lessons; got {list(requires)}")
        return cls(
            lesson=name,
            title=str(record["title"]),
            minutes=minutes,
            objectives=tuple(record["objectives"]),
            prerequisites=tuple(record["prerequisites"]),
            requires=requires,
            path=path,
            page=page,
        )

    @property
    def link(self) -> str:
        """A Markdown link to this lesson's notebook, relative to the notebooks folder."""
        return self.link_from("")

    def link_from(self, folder: str) -> str:
        """A Markdown link to this lesson's notebook from a page whose path to the notebooks is `folder`."""
        name = self.path.name if self.path else ""
        if self.page:
            return f"[{self.title}]({folder}{name})"
        return f"[Lesson {self.lesson} · {self.title}]({folder}{name})"


def read_lesson(path: str | Path) -> Lesson:
    """Read the lesson record stored in a notebook file."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    return Lesson.from_metadata(nb.get("metadata", {}).get(METADATA_KEY, {}), path)


def read_course(directory: str | Path) -> dict[str, Lesson]:
    """Every lesson of the notebooks in `directory`, keyed and sorted by lesson number."""
    lessons = [read_lesson(p) for p in sorted(Path(directory).glob("*.ipynb")) if LESSON_FILE.match(p.name)]
    return {lesson.lesson: lesson for lesson in lessons}


#: The last line of every header: the first code cell's wait, which shows only ``[*]`` (issue 26).
FIRST_CELL_NOTE = "*The first code cell imports PyTorch: on a busy 2-core machine it took 13 to 17 s, with only `[*]` beside it.*"


def header_markdown(lesson: Lesson, course: Mapping[str, Lesson] | None = None) -> str:
    """The Markdown of a notebook's first cell, built from its lesson record.

    Lessons it ``requires`` are linked when `course` (from :func:`read_course`) is given.
    A page that is not a lesson is headed by its title alone.

    Examples
    --------
    >>> lesson = Lesson("01", "Softmax basics", 30, ("Compute a softmax",), ("Python",))
    >>> print(header_markdown(lesson))
    # Lesson 01 · Softmax basics
    <BLANKLINE>
    **Estimated time:** 30 minutes
    <BLANKLINE>
    **By the end of this lesson you can:**
    - Compute a softmax
    <BLANKLINE>
    **Before you start, you should know:**
    - Python
    <BLANKLINE>
    *The first code cell imports PyTorch: on a busy 2-core machine it took 13 to 17 s, with only `[*]` beside it.*
    >>> page = Lesson("sources", "The sources", 10, ("Find a claim",), ("Lesson 00",), page=True)
    >>> print(header_markdown(page).splitlines()[0])
    # The sources
    """
    lines = [
        f"# {lesson.title}" if lesson.page else f"# Lesson {lesson.lesson} · {lesson.title}",
        "",
        f"**Estimated time:** {lesson.minutes} minutes",
        "",
        "**On this page you can:**" if lesson.page else "**By the end of this lesson you can:**",
        *[f"- {item}" for item in lesson.objectives],
        "",
        "**Before you start, you should know:**",
        *[f"- {item}" for item in lesson.prerequisites],
    ]
    if lesson.requires:
        links = [course[r].link if course and r in course else f"Lesson {r}" for r in lesson.requires]
        lines += ["", "**Lessons to do first:** " + ", ".join(links)]
    lines += ["", FIRST_CELL_NOTE]
    return "\n".join(lines)


def course_map_markdown(course: Mapping[str, Lesson], folder: str = "", *, objectives: bool = True) -> str:
    """A Markdown table of the lessons: link, minutes, what you learn, what to do first.

    Links are relative to the notebooks folder, or prefixed with `folder`
    (``"notebooks/"`` for the README). ``objectives=False`` leaves out the
    column of objectives, for a table that fits on a screen.

    Examples
    --------
    >>> a = Lesson("01", "Basics", 30, ("Compute a softmax",), ("Python",), path=Path("01_basics.ipynb"))
    >>> print(course_map_markdown({"01": a}))
    | Lesson | Minutes | You will be able to | Do first |
    |---|---|---|---|
    | [Lesson 01 · Basics](01_basics.ipynb) | 30 | Compute a softmax | (none) |
    <BLANKLINE>
    **Total: 30 minutes** (about 0.5 hours).
    """
    header = ["Lesson", "Minutes", *(["You will be able to"] if objectives else []), "Do first"]
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for lesson in course.values():
        listed = "<br>".join(f"• {o}" for o in lesson.objectives) if len(lesson.objectives) > 1 else lesson.objectives[0]
        first = ", ".join(lesson.requires) if lesson.requires else "(none)"
        cells = [lesson.link_from(folder), str(lesson.minutes), *([listed] if objectives else []), first]
        rows.append("| " + " | ".join(cells) + " |")
    total = sum(lesson.minutes for lesson in course.values())
    return "\n".join(rows) + f"\n\n**Total: {total} minutes** (about {total / 60:.1f} hours)."
