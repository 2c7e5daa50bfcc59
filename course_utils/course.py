"""Lesson metadata: one record per notebook, from which its header is built.

Each notebook stores, under ``metadata["course"]``, its lesson number, title,
estimated minutes, learning objectives and prerequisites. The notebook's first
cell is generated from that record by :func:`header_markdown`, and the tests
check that the two agree, so what a learner reads at the top of a lesson can
never drift from what the course knows about it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["Lesson", "header_markdown", "read_lesson", "METADATA_KEY"]

METADATA_KEY = "course"
_FIELDS = ("lesson", "title", "minutes", "objectives", "prerequisites")


@dataclass(frozen=True)
class Lesson:
    """What the course knows about one notebook."""

    lesson: str
    title: str
    minutes: int
    objectives: tuple[str, ...]
    prerequisites: tuple[str, ...]
    path: Path | None = None

    @classmethod
    def from_metadata(cls, record: Mapping[str, Any], path: Path | None = None) -> "Lesson":
        """Build a Lesson from a notebook's ``metadata["course"]``, checking every field.

        Raises
        ------
        ValueError
            If a field is missing or empty, naming the field and the notebook.
        """
        where = f" in {path.name}" if path else ""
        missing = [f for f in _FIELDS if not record.get(f)]
        if missing:
            raise ValueError(f"notebook metadata '{METADATA_KEY}'{where} lacks {', '.join(missing)}")
        minutes = record["minutes"]
        if not isinstance(minutes, int) or minutes <= 0:
            raise ValueError(f"minutes{where} must be a positive int; got {minutes!r}")
        return cls(
            lesson=str(record["lesson"]),
            title=str(record["title"]),
            minutes=minutes,
            objectives=tuple(record["objectives"]),
            prerequisites=tuple(record["prerequisites"]),
            path=path,
        )


def read_lesson(path: str | Path) -> Lesson:
    """Read the lesson record stored in a notebook file."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    return Lesson.from_metadata(nb.get("metadata", {}).get(METADATA_KEY, {}), path)


def header_markdown(lesson: Lesson) -> str:
    """The Markdown of a notebook's first cell, built from its lesson record.

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
    """
    lines = [
        f"# Lesson {lesson.lesson} · {lesson.title}",
        "",
        f"**Estimated time:** {lesson.minutes} minutes",
        "",
        "**By the end of this lesson you can:**",
        *[f"- {item}" for item in lesson.objectives],
        "",
        "**Before you start, you should know:**",
        *[f"- {item}" for item in lesson.prerequisites],
    ]
    return "\n".join(lines)
