"""Notebook hygiene: every lesson is executed top to bottom, clean, and framed as a lesson.

nbval (run by `make test`) checks that the stored outputs reproduce; this file
checks what nbval does not: how the notebooks were stored.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest

from course_utils.course import (LESSON_FILE, MAX_MINUTES, METADATA_KEY, Lesson, header_markdown, learner_minutes,
                                 optional_minutes, read_course)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
_places = {str(ROOT), str(ROOT.parent), os.path.expanduser("~"), tempfile.gettempdir(), "/home/", "/Users/", "C:\\"}
LEAK = re.compile("|".join(re.escape(p) for p in sorted(_places, key=len, reverse=True) if len(p) > 1) + r"|0x[0-9a-fA-F]{6,}")
REPR_LEAK = re.compile(r"<matplotlib\.|^Text\(|<function |<module |<Axes|^\[<matplotlib", re.MULTILINE)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _code_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def _text(output: dict) -> str:
    return "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.fixture(params=NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def notebook(request) -> tuple[Path, dict]:
    return request.param, _load(request.param)


def test_executed_top_to_bottom(notebook):
    _, nb = notebook
    counts = [c.get("execution_count") for c in _code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), "re-run with `make outputs` (a clean Restart & Run All)"


def test_no_error_or_stderr_outputs(notebook):
    _, nb = notebook
    for i, cell in enumerate(_code_cells(nb), 1):
        for out in cell["outputs"]:
            assert out["output_type"] != "error", f"code cell {i} stores an error"
            assert not (out["output_type"] == "stream" and out["name"] == "stderr"), f"code cell {i} writes to stderr"


def test_no_absolute_paths_or_memory_addresses(notebook):
    _, nb = notebook
    for i, cell in enumerate(nb["cells"], 1):
        texts = ["".join(cell["source"])] + [_text(o) for o in cell.get("outputs", [])]
        for text in texts:
            match = LEAK.search(text)
            assert not match, f"cell {i} shows {match.group(0)!r}"


def test_no_object_reprs_leak_from_plot_cells(notebook):
    _, nb = notebook
    for i, cell in enumerate(_code_cells(nb), 1):
        for out in cell["outputs"]:
            if out["output_type"] == "execute_result":
                assert not REPR_LEAK.search(_text(out)), f"code cell {i}: end the cell with plt.show() or ;"


def test_python3_kernel_and_size(notebook):
    path, nb = notebook
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    assert path.stat().st_size < 1_000_000


def test_no_widget_state_is_stored(notebook):
    # With a widget state in the metadata, nbconvert and nbviewer show an empty live view instead of each
    # explorer's stored still PNG; `tools/notebooks.py execute` stores none.
    _, nb = notebook
    assert "widgets" not in nb["metadata"], "re-run `make outputs`, which stores no widget state"


def test_metadata_is_complete_and_the_header_shows_it(notebook):
    path, nb = notebook
    lesson = Lesson.from_metadata(nb["metadata"].get(METADATA_KEY, {}), path)
    if lesson.page:  # a page of the course, not a lesson (the sources page): named by its record, never numbered
        assert not LESSON_FILE.match(path.name) and path.stem == lesson.lesson, "a numbered notebook is a lesson"
    else:
        assert path.name.startswith(lesson.lesson + "_")
    first = nb["cells"][0]
    assert first["cell_type"] == "markdown"
    expected = header_markdown(lesson, read_course(path.parent))
    assert "".join(first["source"]) == expected, "run `python tools/notebooks.py headers` on it"


def test_minutes_are_computed_from_the_notebook_never_typed(notebook):
    _, nb = notebook
    record = nb["metadata"][METADATA_KEY]
    assert record["minutes"] == learner_minutes(nb), "run `python tools/notebooks.py headers` on it"
    assert record.get("optional_minutes", 0) == optional_minutes(nb), "run `python tools/notebooks.py headers` on it"


def test_each_lesson_takes_at_most_75_minutes_without_its_optional_parts(notebook):
    _, nb = notebook
    assert learner_minutes(nb) <= MAX_MINUTES, "mark parts optional, or split the lesson (course_utils.course.RATES)"


def test_an_optional_part_is_marked_so_in_its_text(notebook):
    """A cell tagged optional is skipped by the minutes: the learner must see that it may be skipped."""
    _, nb = notebook
    cells = nb["cells"]
    for i, cell in enumerate(cells):
        if "optional" not in cell.get("metadata", {}).get("tags", []) or cell["cell_type"] != "markdown":
            continue
        previous = cells[i - 1] if i else None
        continues = previous is not None and "optional" in previous.get("metadata", {}).get("tags", [])
        text = "".join(cell["source"])
        assert continues or "(optional)" in text.splitlines()[0] or text.startswith("*Optional:*"), (
            f"cell {i + 1}: an optional part starts with a heading ending in (optional) or with *Optional:*")


def test_ends_with_a_summary_and_what_comes_next(notebook):
    _, nb = notebook
    last = nb["cells"][-1]
    text = "".join(last["source"])
    assert last["cell_type"] == "markdown"
    assert "## Summary" in text and ("## What comes next" in text or "## Further reading" in text)


def test_every_lesson_after_the_start_has_exercises_and_questions_with_answers_to_reveal(notebook):
    _, nb = notebook
    record = nb["metadata"][METADATA_KEY]
    if "lesson" not in record:
        return  # a page, not a lesson (the sources page): nothing to exercise; the metadata test checks its record
    lesson = record["lesson"]
    if lesson == "00":
        return  # the start-here notebook: how the course works, nothing to answer
    from course_utils import exercises

    names = sorted(vars(exercises.load(lesson)))
    assert names == [f"q{i}" for i in range(1, len(names) + 1)] and 2 <= len(names) <= 4, (
        f"{names}: the README promises two to four exercises per lesson")
    text = "".join(nb["cells"][-1]["source"])
    assert "## Questions to discuss" in text
    questions = text.split("## Questions to discuss", 1)[1].split("\n## ", 1)[0]
    asked = len(re.findall(r"^\s*(?:\d+\.|[-*])\s", questions, re.MULTILINE))
    revealed = questions.count("<details>")
    assert asked >= 1 and revealed == questions.count("</details>") >= asked, (
        f"{asked} questions, {revealed} collapsed answers: give every question an answer in <details>")


def test_first_code_cell_runs_the_reproducible_setup(notebook):
    _, nb = notebook
    assert re.search(r"\bsetup\(", "".join(_code_cells(nb)[0]["source"]))


def test_no_installs_network_or_nbval_comment_markers(notebook):
    _, nb = notebook
    for i, cell in enumerate(_code_cells(nb), 1):
        source = "".join(cell["source"])
        assert not re.search(r"^\s*[!%]\s*(pip|conda)\b", source, re.MULTILINE), f"code cell {i} installs packages"
        assert not re.search(r"urlopen|requests\.get|https?://", source), f"code cell {i} uses the network"
        assert "NBVAL_" not in source, f"code cell {i}: mark it with a cell tag, not a comment"


def test_stored_exercises_are_unattempted_and_reveal_nothing(notebook):
    _, nb = notebook
    for i, cell in enumerate(_code_cells(nb), 1):
        source = "".join(cell["source"])
        assert not re.search(r"^\s*ex\.\w+\.(solution|hint)\(", source, re.MULTILINE), f"code cell {i} reveals help"
        if re.search(r"ex\.\w+\.check\(", source):
            assert any("Not attempted" in _text(o) for o in cell["outputs"]), f"code cell {i} is not in its starter state"


def test_every_required_lesson_exists():
    course = read_course(ROOT / "notebooks")
    for lesson in course.values():
        missing = [r for r in lesson.requires if r not in course]
        assert not missing, f"lesson {lesson.lesson} requires missing lessons {missing}"


LINK = re.compile(r"\]\(([^)#\s]+\.ipynb)(#[^)]*)?\)")


def test_every_link_between_notebooks_resolves(notebook):
    path, nb = notebook
    for i, cell in enumerate(nb["cells"], 1):
        texts = ["".join(cell["source"])] if cell["cell_type"] == "markdown" else []
        for out in cell.get("outputs", []):
            texts.append("".join(out.get("data", {}).get("text/markdown", "")))
        for text in texts:
            for target, _ in LINK.findall(text):
                assert (path.parent / target).is_file(), f"cell {i} links to missing {target}"


# Figures drawn by course_utils functions that set their own title and axis labels.
SELF_LABELLING = ("plot_prerequisites(", "plot_exp_overflow(")


def _functions_defined(nb: dict) -> dict[str, str]:
    """Source of every function a notebook defines, by name."""
    found = {}
    for cell in _code_cells(nb):
        source = "".join(cell["source"])
        for match in re.finditer(r"^def (\w+)\(.*?(?=^\S|\Z)", source, re.MULTILINE | re.DOTALL):
            found[match.group(1)] = match.group(0)
    return found


#: Text that says nothing about a figure: what nbconvert writes where alt text is missing, and other placeholders.
PLACEHOLDERS = re.compile(r"no description|^(a |the )?(figure|plot|image|chart|graph)\.?$|^alt$|lorem", re.IGNORECASE)


def test_every_stored_picture_has_a_specific_text_alternative(notebook):
    """WCAG 2.1, 1.1.1: each figure and slider still says in words what it shows, with its numbers (issue 37).

    The alt text travels twice: as the alt of an <img> in text/html, which JupyterLab and nbconvert's HTML
    show, and in the image/png output's metadata, which every other reader of the notebook can use."""
    _, nb = notebook
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        titles = set(re.findall(r"(?:set_title|suptitle)\(f?[\"']([^\"']+)[\"']", "".join(cell["source"])))
        for output in cell.get("outputs", []):
            if "image/png" not in output.get("data", {}):
                continue
            alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
            where = f"cell {i + 1}"
            assert alt, f"{where}: the picture has no alt text (course_utils.describe_figure(fig, text))"
            assert not PLACEHOLDERS.search(alt), f"{where}: the alt text is a placeholder: {alt!r}"
            assert alt.strip().rstrip(".") not in titles, f"{where}: the alt text is only the title"
            assert len(alt) >= 80 and re.search(r"\d", alt), f"{where}: say what the picture shows, with its numbers: {alt!r}"
            html = "".join(output["data"].get("text/html", ""))
            assert "<img " in html and "alt=" in html, f"{where}: JupyterLab shows no alt without the text/html <img>"


def test_every_figure_has_a_title_labelled_axes_and_words_around_it(notebook):
    _, nb = notebook
    cells = nb["cells"]
    helpers = _functions_defined(nb)
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []):
            continue  # live widgets draw their own figures, checked by tests/test_widgets*.py
        if not any("image/png" in o.get("data", {}) for o in cell["outputs"]):
            continue
        source = "".join(cell["source"])
        text = source + "".join(body for name, body in helpers.items() if re.search(rf"\b{name}\(", source))
        if not any(call in source for call in SELF_LABELLING):
            assert re.search(r"set_title|suptitle", text), f"cell {i + 1}: the figure needs a title"
            assert "set_xlabel" in text and "set_ylabel" in text, f"cell {i + 1}: label both axes"
        assert cells[i - 1]["cell_type"] == "markdown", f"cell {i + 1}: say what to look for before the figure"
        assert any(c["cell_type"] == "markdown" for c in cells[i + 1 : i + 4]), f"cell {i + 1}: say what was seen after it"
