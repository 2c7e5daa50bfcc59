"""The README starts with the learner and stays true: its lesson table is generated, its first screen complete."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
_spec = importlib.util.spec_from_file_location("notebook_tools", ROOT / "tools" / "notebooks.py")
notebook_tools = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = notebook_tools
_spec.loader.exec_module(notebook_tools)


def test_the_lesson_table_is_generated_from_the_notebooks():
    assert notebook_tools.readme_with_lessons(README) == README, "run `python tools/notebooks.py readme`"


def test_the_table_links_every_lesson_with_its_minutes():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert f"(notebooks/{path.name})" in README, f"the README does not link {path.name}"
    total = sum(lesson.minutes for lesson in notebook_tools.read_course(ROOT / "notebooks").values())
    assert f"**Total: {total} minutes**" in README


def test_the_first_screen_says_what_who_what_you_need_how_long_and_one_command():
    first = README.split("## The lessons", 1)[0]
    for words in ("For", "You need", "Time:", "No GPU", "make lab"):
        assert words in first, f"the README's first screen lacks {words!r}"
    assert "make test" not in first, "the first screen is for learners: make test belongs to contributors"


def test_the_readme_has_no_unfilled_placeholder():
    prose = re.sub(r"`[^`\n]+`", "", README)  # code, such as an environment variable's name, is not a placeholder
    assert not re.search(r"\b[A-Z]{4,}_[A-Z_]{3,}\b", prose), "fill in every placeholder"
