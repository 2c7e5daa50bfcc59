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
    "PATHS",
    "calibration_markdown",
    "course_map_markdown",
    "paths_markdown",
    "header_markdown",
    "learner_minutes",
    "lesson_counts",
    "optional_minutes",
    "read_course",
    "read_lesson",
]

METADATA_KEY = "course"
_FIELDS = ("lesson", "title", "minutes", "objectives", "prerequisites")
#: A lesson notebook's file name: its lesson number, an optional part letter, then "_".
LESSON_FILE = re.compile(r"^(\d\d[a-z]?)_.*\.ipynb$")

#: The minutes model, in one place: what a learner who does every exercise spends on each thing a lesson holds.
#: Calibrated (course_utils/data/minutes_readings.json) on three rounds of expert readings of every notebook made in
#: November 2026 by readers who did each exercise, a first wrong attempt included: the README's "Minutes are
#: computed" compares them. Prose is read at 80 words a minute, with the discussion at the end; a display equation
#: asks a minute more, and each inline formula ($...$) three seconds; code is read and run at 12 lines a minute (not
#: blank, not a comment: a long cell takes longer than a short one, as the readers found), except the lines readers
#: skim, at 24 a minute: the code of a cell that draws a figure (mostly axes, labels and its text alternative) and
#: the calls that check a result and print a verdict (`check_claim`, `cross_check`, `conclude`); a figure, slider
#: picture or table, a minute; an exercise, by its kind, as the readers timed them with a first wrong attempt.
RATES: dict[str, float] = {
    "words": 1 / 80,
    "equations": 1.0,
    "inline maths": 0.05,
    "code lines": 1 / 12,
    "skimmed code lines": 1 / 24,
    "figures and tables": 1.0,
    "predict a value": 3.0,
    "write a line": 6.0,
    "write a function": 9.0,
    "write a loop": 25.0,
}
#: The longest a lesson may take, honestly read, doing its exercises (issue 36): longer lessons mark parts optional.
MAX_MINUTES = 75
#: The tag of a cell a learner may skip on a first pass (an optional section): counted apart, as optional minutes.
OPTIONAL = "optional"
#: A line that checks a result and prints its verdict: read at a glance, as its ✓ says what it found.
_CHECK_LINE = re.compile(r"^\s*(?:cu\.)?(?:check_claim|cross_check|conclude)\(")


def exercise_kind(exercise: Any) -> str:
    """The kind of an exercise, for the minutes model: what its model solution asks the learner to write.

    A value exercise asks for a prediction; a function exercise whose solution has a ``for`` or ``while`` loop
    asks for a loop, one of at most two lines of body asks for a line, any other for a function.

    Examples
    --------
    >>> from course_utils import exercises
    >>> [exercise_kind(ex) for ex in vars(exercises.load("07")).values()]
    ['write a function', 'write a loop', 'predict a value']
    """
    from .exercises.core import FunctionExercise

    if not isinstance(exercise, FunctionExercise):
        return "predict a value"
    found = re.search(r"```python\n(.*?)```", exercise._solution or "", re.S)
    code = found.group(1) if found else ""
    if re.search(r"^\s*(for|while) ", code, re.M):
        return "write a loop"
    body = [line for line in code.splitlines()
            if line.strip() and not line.strip().startswith(("def ", "#", '"""', "import ", "from "))]
    return "write a line" if len(body) <= 2 else "write a function"


def _is_optional(cell: Mapping[str, Any]) -> bool:
    return OPTIONAL in cell.get("metadata", {}).get("tags", [])


def lesson_counts(notebook: Mapping[str, Any], *, optional: bool = False,
                  exercise_kinds: Mapping[str, int] | None = None) -> dict[str, int]:
    """What the minutes model counts in a notebook: its required cells, or with ``optional=True`` its optional ones.

    Words count every Markdown cell but the generated header (display equations left out); equations, the
    ``$$ ... $$`` blocks; inline maths, the ``$...$`` in the prose; code lines, the lines of code cells that are
    neither blank nor a comment, but for the skimmed code lines: every line of a cell with a picture in its outputs,
    and the lines that call ``check_claim``, ``cross_check`` or ``conclude``; figures and tables, every picture in
    the outputs, every HTML table in them and every Markdown table; exercises, those of the lesson's exercise module by :func:`exercise_kind` (or
    `exercise_kinds`), all in the required part.

    Examples
    --------
    >>> cell = lambda kind, text: {"cell_type": kind, "source": text, "metadata": {}}
    >>> nb = {"cells": [cell("markdown", "# header"), cell("markdown", "two words $$x$$ and $y$"),
    ...                 cell("code", "# a comment\\nx = 1")]}
    >>> counts = lesson_counts(nb, exercise_kinds={"write a line": 1})
    >>> counts["words"], counts["equations"], counts["inline maths"], counts["code lines"]
    (4, 1, 1, 1)
    >>> lesson_counts({"cells": [cell("code", "x = 1\\ncross_check(x, 1)")]}, exercise_kinds={})["skimmed code lines"]
    1
    """
    counts = dict.fromkeys(RATES, 0)
    for index, cell in enumerate(notebook["cells"]):
        if _is_optional(cell) != optional:
            continue
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and index > 0:
            counts["equations"] += len(re.findall(r"\$\$.*?\$\$", source, re.S))
            prose = re.sub(r"\$\$.*?\$\$", " ", source, flags=re.S)
            counts["inline maths"] += len(re.findall(r"\$[^$\n]+\$", prose))
            counts["words"] += len(prose.split())
            counts["figures and tables"] += len(re.findall(r"^\|[ :|-]*-[ :|-]*\|\s*$", source, re.M))
        elif cell["cell_type"] == "code" and source.strip():
            lines = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith("#")]
            outputs = [output.get("data", {}) for output in cell.get("outputs", [])]
            figure = any("image/png" in data for data in outputs)
            skimmed = len(lines) if figure else sum(1 for line in lines if _CHECK_LINE.match(line))
            counts["skimmed code lines"] += skimmed
            counts["code lines"] += len(lines) - skimmed
            for data in outputs:
                counts["figures and tables"] += ("image/png" in data) + ("<table" in "".join(data.get("text/html", "")))
    if not optional:
        if exercise_kinds is None:
            from . import exercises

            lesson = str(notebook.get("metadata", {}).get(METADATA_KEY, {}).get("lesson", ""))
            found = vars(exercises.load(lesson)).values() if lesson in exercises.LESSONS else ()
            exercise_kinds = {}
            for exercise in found:
                kind = exercise_kind(exercise)
                exercise_kinds[kind] = exercise_kinds.get(kind, 0) + 1
        for kind, n in exercise_kinds.items():
            if kind not in RATES:
                raise ValueError(f"exercise_kinds names an unknown kind {kind!r}; the kinds are those of RATES")
            counts[kind] += n
    return counts


def _rounded_up(minutes: float) -> int:
    return max(5, 5 * math.ceil(minutes / 5 - 1e-9))


def learner_minutes(notebook: Mapping[str, Any], exercise_kinds: Mapping[str, int] | None = None) -> int:
    """Minutes a learner takes over a notebook's required part, doing its exercises: rounded up to 5.

    The sum over :func:`lesson_counts` of each count times its rate in :data:`RATES`.

    Examples
    --------
    >>> cell = lambda kind, text, tags=(): {"cell_type": kind, "source": text, "metadata": {"tags": list(tags)}}
    >>> nb = {"cells": [cell("markdown", "# header"), cell("markdown", "word " * 800), cell("code", "x = 1"),
    ...                 cell("markdown", "more " * 800, ["optional"])]}
    >>> learner_minutes(nb, exercise_kinds={"write a function": 1})  # 800 / 80 + 1 / 12 + 9 = 19.1, rounded up
    20
    """
    return _rounded_up(model_minutes(notebook, exercise_kinds=exercise_kinds))


def model_minutes(notebook: Mapping[str, Any], *, optional: bool = False,
                  exercise_kinds: Mapping[str, int] | None = None) -> float:
    """The model's minutes for a notebook's required part (or its optional one), not rounded."""
    counts = lesson_counts(notebook, optional=optional, exercise_kinds=exercise_kinds)
    return sum(RATES[name] * n for name, n in counts.items())


def optional_minutes(notebook: Mapping[str, Any]) -> int:
    """Minutes of the notebook's optional parts (cells tagged ``optional``), rounded up to 5; 0 if it has none.

    Examples
    --------
    >>> cell = lambda kind, text, tags=(): {"cell_type": kind, "source": text, "metadata": {"tags": list(tags)}}
    >>> optional_minutes({"cells": [cell("markdown", "# header"), cell("markdown", "more " * 800, ["optional"])]})
    10
    """
    if not any(lesson_counts(notebook, optional=True).values()):
        return 0
    return _rounded_up(model_minutes(notebook, optional=True))


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
    optional_minutes: int = 0  # of the parts a learner may skip on a first pass (cells tagged "optional")

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
        optional = record.get("optional_minutes", 0)
        if not isinstance(optional, int) or optional < 0:
            raise ValueError(f"optional_minutes{where} must be an int >= 0; got {optional!r}")
        return cls(
            lesson=name,
            title=str(record["title"]),
            minutes=minutes,
            optional_minutes=optional,
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
        f"**Estimated time:** {lesson.minutes} minutes" + (
            f", and {lesson.optional_minutes} more for the parts marked *(optional)*" if lesson.optional_minutes else ""),
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
        minutes = f"{lesson.minutes} (+{lesson.optional_minutes} optional)" if lesson.optional_minutes else str(lesson.minutes)
        cells = [lesson.link_from(folder), minutes, *([listed] if objectives else []), first]
        rows.append("| " + " | ".join(cells) + " |")
    total = sum(lesson.minutes for lesson in course.values())
    extra = sum(lesson.optional_minutes for lesson in course.values())
    more = f", and {extra} minutes of optional parts" if extra else ""
    return "\n".join(rows) + f"\n\n**Total: {total} minutes** (about {total / 60:.1f} hours){more}."


#: Routes through the course: the core, which a learner can stop after with a whole story, and deeper routes an
#: instructor can pick as modules. Each: its name, what it is for, and its lessons in order.
PATHS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("The core", "softmax, its stable form, the √d_k scale, its gradients, masking and attention, sparsemax",
     ("01", "02", "03", "04", "05", "06")),
    ("Attention on real hardware", "masks in PyTorch's modules and GPU backends, the tiled FlashAttention loop, "
     "its backward pass and decoding, and what a GPU measures", ("05b", "05c", "07", "07b", "07c")),
    ("Training", "whether the scale matters when a model learns, with Adam, learning rates and QK-norm",
     ("08", "08b")),
    ("The frontier", "learned sparsity, sinks, gates and sigmoid attention, long context and logit growth",
     ("06b", "09", "09b")),
)


def paths_markdown(course: Mapping[str, Lesson], folder: str = "") -> str:
    """A Markdown table of the routes of :data:`PATHS`: lessons, what to do first and minutes, from the records.

    "Do first" lists the lessons the route's lessons require that are not in it (the whole core, if it is that).

    Examples
    --------
    >>> lesson = lambda n, req=(): Lesson(n, "T" + n, 30, ("x",), ("y",), req, Path(f"{n}_t.ipynb"))
    >>> course = {n: lesson(n) for n in ("01", "02", "03", "04", "05", "06")}
    >>> course |= {"05b": lesson("05b", ("05",)), "05c": lesson("05c", ("05b",)), "07": lesson("07", ("05",)),
    ...            "07b": lesson("07b", ("07",)), "07c": lesson("07c", ("07b",)), "08": lesson("08", ("04",)),
    ...            "08b": lesson("08b", ("08",)), "06b": lesson("06b", ("06",)), "09": lesson("09", ("07",)),
    ...            "09b": lesson("09b", ("08b", "09"))}
    >>> print(paths_markdown(course).splitlines()[2])
    | **The core**: softmax, its stable form, the √d_k scale, its gradients, masking and attention, sparsemax | [01](01_t.ipynb), [02](02_t.ipynb), [03](03_t.ipynb), [04](04_t.ipynb), [05](05_t.ipynb), [06](06_t.ipynb) | lesson 00 | 180 |
    """
    core = set(PATHS[0][2])
    rows = ["| Route | Lessons | Do first | Minutes |", "|---|---|---|---|"]
    for name, what, lessons in PATHS:
        missing = [n for n in lessons if n not in course]
        if missing:
            raise ValueError(f"PATHS names lessons the course does not have: {missing}")
        needed = sorted({r for n in lessons for r in course[n].requires} - set(lessons))
        outside = [r for r in needed if r not in core]
        first = (["the core"] if needed and any(r in core for r in needed) else []) + outside
        minutes = sum(course[n].minutes for n in lessons)
        extra = sum(course[n].optional_minutes for n in lessons)
        shown = f"{minutes} (+{extra} optional)" if extra else str(minutes)
        links = ", ".join(f"[{n}]({folder}{course[n].path.name})" if course[n].path else n for n in lessons)
        rows.append(f"| **{name}**: {what} | {links} | {', '.join(first) or 'lesson 00'} | {shown} |")
    return "\n".join(rows)


#: The expert readings the model is calibrated on (see its "what").
READINGS = Path(__file__).parent / "data" / "minutes_readings.json"
#: How far from a reading the model may be, as a fraction of it (issue 36).
CALIBRATION = 0.15
#: The first round of readings made afresh, by readers who gave a lesson's required path apart from its optional parts.
FRESH_ROUND = 3


def calibration_markdown(directory: str | Path, readings: str | Path = READINGS) -> str:
    """A Markdown table of each notebook's expert readings against the model's minutes.

    Two comparisons: the whole notebook (optional parts included, as the readers of every round read it) against
    the mean of the readings; and the required path alone against the mean of the fresh readings (rounds 3 and
    later, by readers who gave the required path apart). Each difference is a share of the reading, and a line
    under the table says for how many notebooks the model is within :data:`CALIBRATION` of it, naming the others.
    """
    recorded: dict[str, list[dict[str, Any]]] = {}
    for r in json.loads(Path(readings).read_text(encoding="utf-8"))["readings"]:
        recorded.setdefault(r["lesson"], []).append(r)
    rows = ["| Notebook | Readings, whole (min) | Their mean | Model | Difference "
            f"| Fresh readings, required (rounds {FRESH_ROUND} on) | Model, required | Difference |",
            "|---|---|---|---|---|---|---|---|"]
    outside: dict[str, list[str]] = {"mean": [], "fresh": []}
    for path in sorted(Path(directory).glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        record = nb.get("metadata", {}).get(METADATA_KEY, {})
        key = str(record.get("lesson", record.get("page", "")))
        if key not in recorded:
            continue
        whole = [r["minutes"] for r in recorded[key]]
        read = sum(whole) / len(whole)
        required = model_minutes(nb)
        model = required + model_minutes(nb, optional=True)
        share = (model - read) / read
        fresh = [r["required"] for r in recorded[key] if r["round"] >= FRESH_ROUND and "required" in r]
        fresh_read = sum(fresh) / len(fresh) if fresh else None
        fresh_share = (required - fresh_read) / fresh_read if fresh_read else None
        for name, value in (("mean", share), ("fresh", fresh_share)):
            if value is not None and abs(value) > CALIBRATION:
                outside[name].append(f"{key} ({value:+.0%})")
        rows.append(f"| {path.name} | {', '.join(str(m) for m in whole)} | {read:.0f} | {model:.0f} | {share:+.0%} | "
                    + (f"{', '.join(str(m) for m in fresh)} | {required:.0f} | {fresh_share:+.0%} |" if fresh
                       else "– | – | – |"))
    n = len(rows) - 2

    def within(name: str, what: str) -> str:
        found = outside[name]
        return (f"within ±{CALIBRATION:.0%} of {what} for {n - len(found)} of {n} notebooks"
                + (f" (not for {', '.join(found)})" if found else ""))

    return ("\n".join(rows) + "\n\nThe model is " + within("mean", "the readings' mean") + ", and "
            + within("fresh", "the mean of the fresh readings of the required path") + ".")
