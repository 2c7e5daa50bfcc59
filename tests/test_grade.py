"""The gradebook (tools/grade.py) grades each kind of submission an instructor gets, and never crashes on one.

Most tests here read submissions without a kernel and run in ``make test``. The one that runs the
gradebook end to end, on eleven files made from lesson 01's stored notebook (seven of them run, in fresh
kernels two at a time), is marked ``grading`` and runs only when asked for:
``pytest -m grading tests/test_grade.py``.
"""

from __future__ import annotations

import copy
import csv
import functools
import json
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from course_utils.exercises import load
from course_utils.exercises.core import starter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import grade  # noqa: E402
import solutions  # noqa: E402

LESSON = "01"  # its notebook runs in about 2 s once the kernel is up
OTHER = "02"
CELL_TIMEOUT = 10  # s: the hanging submission costs this once; lesson 01's slowest cell takes about 1 s


@pytest.fixture(scope="module")
def lesson() -> grade.Lesson:
    return grade.load_lesson(LESSON)


@functools.lru_cache(maxsize=None)
def _notebooks() -> dict[str, tuple[Path, nbformat.NotebookNode]]:
    return grade.lesson_notebooks()


def _stored(lesson: str) -> nbformat.NotebookNode:
    """A copy of lesson `lesson`'s stored notebook."""
    return copy.deepcopy(_notebooks()[lesson][1])


def _sites(nb: nbformat.NotebookNode) -> dict[str, solutions.Site]:
    return {site.name: site for site in solutions.check_sites(nb)}


def _check(site: solutions.Site) -> str:
    return f"{site.loader}.{site.name}.check({site.answer})\n"


def _answer(site: solutions.Site, code: str) -> str:
    """An exercise cell that binds the answer with `code` (a function's code, or a prediction's value) and checks it."""
    exercise = getattr(load(site.lesson), site.name)
    if exercise.kind == "function":
        return f"{code}\n\n{_check(site)}"
    assert site.answer.isidentifier(), site
    return f"{site.answer} = {code}\n\n{_check(site)}"


def _right(site: solutions.Site) -> str:
    """`site`'s cell with the exercise's own solution pasted in, as tools/solutions.py reads it."""
    exercise = getattr(load(site.lesson), site.name)
    return _answer(site, solutions.solution_code(exercise) if exercise.kind == "function"
                   else solutions.stated_answer(exercise))


#: Wrong answers to lesson 01's exercises, each a mistake its checker names: the textbook formula, one winner
#: despite the tie, multiplying by T.
WRONG = {
    "q1": "def stable_softmax(x):\n    e = np.exp(x)\n    return e / e.sum(axis=-1, keepdims=True)",
    "q2": "[0, 1, 0, 0]",
    "q3": "def softmax_with_temperature(x, temperature):\n    z = np.asarray(x, dtype=float) * temperature\n"
          "    e = np.exp(z - z.max(axis=-1, keepdims=True))\n    return e / e.sum(axis=-1, keepdims=True)",
}

FAKE = """\
import course_utils.exercises.core as _core
from types import SimpleNamespace

_core.FunctionExercise.evaluate = lambda self, answer: _core.Verdict("correct", "✓ Correct!")
_core.ValueExercise.evaluate = lambda self, answer: _core.Verdict("correct", "✓ Correct!")


class _AlwaysRight:
    def check(self, answer):
        print("✓ Correct! Your function passed all 9 test inputs.")


ex = SimpleNamespace(q1=_AlwaysRight(), q2=_AlwaysRight(), q3=_AlwaysRight())
print("course-grade-0123 " + '{"status": "correct", "message": "✓ Correct!"}')
print("✓ Correct!")
"""


def submissions(folder: Path) -> None:
    """Write the submissions of the end-to-end test to `folder`, one per learner, named after what they are."""
    nb = _stored(LESSON)
    sites = _sites(nb)

    def write(name: str, notebook: nbformat.NotebookNode) -> None:
        nbformat.write(notebook, folder / f"{name}.ipynb")

    def answered(cells: dict[str, str]) -> nbformat.NotebookNode:
        out = copy.deepcopy(nb)
        for name, source in cells.items():
            out.cells[sites[name].cell].source = source
        return out

    right = {name: _right(site) for name, site in sites.items()}
    write("right", answered(right))
    write("wrong", answered({name: _answer(sites[name], code) for name, code in WRONG.items()}))
    q1 = right["q1"].replace(_check(sites["q1"]), "while True:\n    pass\n\n" + _check(sites["q1"]))
    write("hanging", answered({**right, "q1": q1}))
    raising = "def stable_softmax(x):\n    raise ValueError('not today')"
    write("raising", answered({"q1": _answer(sites["q1"], raising),
                               "q2": "raise RuntimeError('a cell that fails')\n" + right["q2"],
                               "q3": right["q3"]}))
    faked = answered({"q1": _answer(sites["q1"], WRONG["q1"]), "q2": _answer(sites["q2"], WRONG["q2"])})
    faked.cells.insert(sites["q1"].cell, new_code_cell(FAKE))
    for site in sites.values():  # stored outputs that say ✓: never read
        faked.cells[site.cell + 1].outputs = [new_output("stream", name="stdout", text="✓ Correct!\n")]
    write("faked", faked)
    moved = answered(right)
    del moved.cells[sites["q1"].cell]  # the exercise's cell deleted, its answer defined at the end
    moved.cells.append(new_code_cell(solutions.solution_code(load(LESSON).q1)))
    moved.cells.append(new_code_cell("prediction = [1, 0, 0, 0]  # the name used again after its exercise"))
    for cell in moved.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    write("no_outputs", moved)
    write("other_lesson", _stored(OTHER))
    relabeled = _stored(OTHER)
    relabeled.metadata["course"]["lesson"] = LESSON
    write("relabeled", relabeled)
    (folder / "corrupt.ipynb").write_text('{"cells": [{"cell_type": "code", "source": "x = 1"', encoding="utf-8")
    (folder / "notes.txt").write_text("my answers are in the notebook\n", encoding="utf-8")
    crashing = answered(right)
    crashing.cells.insert(sites["q2"].cell, new_code_cell("import os\n\nos._exit(1)"))
    write("crashing", crashing)


# --- without a kernel ------------------------------------------------------------------------------------------


def test_the_lesson_names_each_exercise_and_the_expression_its_notebook_checks(lesson):
    assert [(e.name, e.expression, e.fallback) for e in lesson.exercises] == [
        ("q1", "stable_softmax", True), ("q2", "prediction", True), ("q3", "softmax_with_temperature", True)]
    assert lesson.loaders == {"ex"}


def test_an_answer_two_exercises_share_is_graded_only_as_its_own_cell_left_it():
    # Lesson 03's two predictions are both `prediction`: the value after the last cell is the second one's.
    assert [(e.name, e.expression, e.fallback) for e in grade.load_lesson("03").exercises][:2] == [
        ("q1", "prediction", False), ("q2", "prediction", False)]


def test_the_cells_that_check_an_exercise_are_found_outside_comments(lesson):
    nb = _stored(LESSON)
    sites = _sites(nb)
    found = grade.check_cells(nb, lesson)
    assert {index: [e.name for e in exercises] for index, exercises in found.items()} == {
        site.cell: [name] for name, site in sites.items()}
    nb.cells.append(new_code_cell("# ex.q1.check(stable_softmax)\nex . q2 . check ( prediction )"))
    assert [e.name for e in grade.check_cells(nb, lesson)[len(nb.cells) - 1]] == ["q2"]


def test_bad_files_get_a_reason_and_are_never_run(lesson, tmp_path):
    cases = {
        "corrupt.ipynb": ('{"cells": [', "corrupt notebook: not valid JSON (Expecting value at line 1, column 12)"),
        "v3.ipynb": (json.dumps({"nbformat": 3, "nbformat_minor": 0, "cells": [], "metadata": {}}),
                     "corrupt notebook: nbformat 3, not 4 (open and save it in JupyterLab)"),
        "list.ipynb": ("[1, 2]", "corrupt notebook: JSON, but with no list of cells"),
        "badcell.ipynb": (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"source": 1}]}),
                          "corrupt notebook: cell 1 is not a notebook cell"),
        "empty.ipynb": (nbformat.writes(new_notebook()), "not lesson 01's notebook: 0% of its text cells are in it"),
        "answers.pdf": ("%PDF-1.4", "not a notebook (a .pdf file)"),
        "README": ("hello", "not a notebook (no .ipynb)"),
    }
    for name, (text, reason) in cases.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert grade.read_submission(tmp_path / name, lesson) == (None, reason), name
    (tmp_path / "latin1.ipynb").write_bytes("é".encode("latin-1"))
    assert grade.read_submission(tmp_path / "latin1.ipynb", lesson) == (None, "corrupt notebook: not UTF-8 text")


def test_another_lessons_notebook_is_named_by_its_metadata_or_by_its_cells(lesson, tmp_path):
    other = _stored(OTHER)
    nbformat.write(other, tmp_path / "other.ipynb")
    other.metadata["course"]["lesson"] = LESSON  # the cells still are lesson 02's
    nbformat.write(other, tmp_path / "relabeled.ipynb")
    del other.metadata["course"]
    nbformat.write(other, tmp_path / "unlabeled.ipynb")
    for name in ("other", "relabeled", "unlabeled"):
        assert grade.read_submission(tmp_path / f"{name}.ipynb", lesson) == (None, "another lesson's notebook (02)")


def test_a_notebook_without_outputs_or_metadata_is_read_and_its_outputs_dropped(lesson, tmp_path):
    nb = _stored(LESSON)
    del nb.metadata["course"]
    for cell in nb.cells:
        cell.pop("id", None)  # saved by an old frontend: matched by text
    path = tmp_path / "plain.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    read, reason = grade.read_submission(path, lesson)
    assert reason == "" and read is not None
    assert all(cell.outputs == [] for cell in read.cells if cell.cell_type == "code")


def test_flags_name_new_code_that_touches_grading_and_nothing_in_the_lessons_own_code(lesson):
    nb = _stored(LESSON)
    assert grade.flags(nb, lesson) == []
    nb.cells.insert(3, new_code_cell(FAKE))
    assert grade.flags(nb, lesson) == ["uses course_utils in new code", "replaces a checker", "prints ✓",
                                      "rebinds `ex`"]


def test_the_first_sentence_of_a_message_skips_full_stops_in_arrays_and_code():
    assert grade.first_sentence("✗ Not yet: on input ([ 1000.   999. -1000.]) the result contains nan or inf: "
                                "[nan nan  0.]. exp() of a large score overflows.\nThis is exactly what") == \
        "on input ([ 1000.   999. -1000.]) the result contains nan or inf: [nan nan  0.]."
    assert grade.first_sentence("✗ Not yet: the two 5s are tied; softmax treats equal scores equally. Who?") == \
        "the two 5s are tied; softmax treats equal scores equally."
    assert grade.first_sentence("○ Not attempted yet: replace `x.max()` first.") == \
        "Not attempted yet: replace `x.max()` first."
    assert grade.first_sentence("✓ Correct!") == "Correct!"


def test_a_grading_cell_with_no_result_or_two_is_wrong_and_says_the_submission_interfered():
    assert grade.grade_from([], "", None).verdict == grade.WRONG
    two = grade.grade_from([{"status": "correct", "message": "✓"}] * 2, "", None)
    assert (two.verdict, two.mistake) == (grade.WRONG, "Grading printed 2 results: the submission interfered "
                                                       "with grading; read it.")
    assert grade.grade_from([{"status": "correct", "message": "✓"}], "", 3.0).verdict == grade.WRONG
    right = grade.grade_from([{"status": "correct", "message": "✓ Correct!"}], "", None)
    assert right == grade.Graded(grade.RIGHT)
    assert grade.grade_from([{"status": "undefined", "message": "`f` is not defined."}], "", None) == \
        grade.Graded(grade.NOT_ANSWERED, "`f` is not defined.")


@pytest.mark.parametrize("argv, named", [
    (["{missing}", "--lesson", "01", "--out", "{out}"], "SUBMISSIONS_DIR"),
    (["{folder}", "--lesson", "1", "--out", "{out}"], "--lesson"),
    (["{folder}", "--lesson", "01", "--out", "{folder}"], "--out"),
    (["{folder}", "--lesson", "01", "--out", "{out}", "--jobs", "0"], "--jobs"),
    (["{folder}", "--lesson", "01", "--out", "{out}", "--cell-timeout", "-1"], "--cell-timeout"),
    (["{folder}", "--lesson", "01", "--out", "{out}", "--timeout", "nan"], "--timeout"),
])
def test_a_bad_argument_is_a_usage_error_that_names_it(argv, named, tmp_path, capsys):
    places = {"missing": tmp_path / "missing", "out": tmp_path / "grades.csv", "folder": tmp_path}
    with pytest.raises(SystemExit) as stop:
        grade.main([arg.format(**places) for arg in argv])
    assert stop.value.code == 2
    assert f"error: {named} " in capsys.readouterr().err


def test_grade_raises_a_value_error_naming_the_argument_before_anything_runs(tmp_path):
    for kwargs, named in [({"jobs": 0}, "--jobs"), ({"timeout": float("inf")}, "--timeout"),
                          ({"cell_timeout": True}, "--cell-timeout"), ({"lesson": "99"}, "--lesson")]:
        with pytest.raises(ValueError, match=f"^{named} "):
            grade.grade(tmp_path, **{"lesson": LESSON, **kwargs})
    with pytest.raises(ValueError, match="^SUBMISSIONS_DIR "):
        grade.grade(tmp_path / "missing", LESSON)


# --- in kernels: make grade-check ------------------------------------------------------------------------------


def _expected(exercise: str, code: str | None) -> tuple[str, str]:
    """What the checker says here of an answer (WRONG's `code`, or the starter for None), as the gradebook puts it.

    The first sentence of its message, as the lesson prints it (its ``course_utils.setup()`` prints arrays to 4
    decimals, without exponents), and the mistake it names.
    """
    namespace = {"np": np}
    if code is None:
        answer = starter
    elif exercise == "q2":
        answer = eval(code)
    else:
        exec(code, namespace)
        answer = namespace[next(name for name in namespace if name != "np" and not name.startswith("__"))]
    with np.printoptions(precision=4, suppress=True):
        verdict = getattr(load(LESSON), exercise).evaluate(answer)
    return grade.first_sentence(verdict.message), verdict.mistake or ""


@pytest.mark.grading
@pytest.mark.skipif("'grading' not in config.getoption('markexpr')",
                    reason="runs notebooks in kernels: pytest -m grading tests/test_grade.py (make grade-check)")
def test_the_gradebook_grades_each_kind_of_submission(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    submissions(folder)
    out = tmp_path / "grades.csv"
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "grade.py"), str(folder), "--lesson", LESSON,
                           "--out", str(out), "--cell-timeout", str(CELL_TIMEOUT), "--jobs", "2"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    print(done.stdout, done.stderr, f"{time.monotonic() - started:.0f} s", sep="\n")
    assert done.returncode == 0, done.stderr
    with out.open(encoding="utf-8-sig", newline="") as file:
        rows = {row["learner"]: row for row in csv.DictReader(file)}
    assert sorted(rows) == ["corrupt", "crashing", "faked", "hanging", "no_outputs", "notes", "other_lesson",
                            "raising", "relabeled", "right", "wrong"]

    def verdicts(learner: str) -> list[str]:
        return [rows[learner][name] for name in ("q1", "q2", "q3")]

    sites = _sites(_stored(LESSON))
    for learner in ("right", "no_outputs", "hanging"):
        assert verdicts(learner) == ["✓", "✓", "✓"], rows[learner]
        assert [rows[learner][column] for column in ("correct", "reason", "flags")] == ["3", "", ""], learner
    assert rows["right"]["notes"] == ""
    assert all(rows["right"][f"{name} mistake"] == "" for name in ("q1", "q2", "q3"))
    assert rows["hanging"]["notes"] == \
        f"cell {sites['q1'].cell + 1} ran past its {CELL_TIMEOUT} s limit and was interrupted"

    wrong = rows["wrong"]
    assert verdicts("wrong") == ["✗", "✗", "✗"] and wrong["correct"] == "0"
    for name, code in WRONG.items():
        mistake, diagnosis = _expected(name, code)
        assert diagnosis, f"{name}: WRONG's answer must be a mistake the checker names"
        assert (wrong[f"{name} mistake"], wrong[f"{name} diagnosis"]) == (mistake, diagnosis), name

    raising = rows["raising"]
    assert verdicts("raising") == ["✗", "not answered", "✓"]
    assert raising["q1 diagnosis"] == "raising an exception"
    assert "raised ValueError: not today" in raising["q1 mistake"]
    assert raising["q2 mistake"] == "`prediction` is not defined."
    assert f"cell {sites['q2'].cell + 1} raised RuntimeError" in raising["notes"].split("; ")

    faked = rows["faked"]
    assert verdicts("faked") == ["✗", "✗", "not answered"] and faked["correct"] == "0"
    assert [faked[f"q{n} diagnosis"] for n in (1, 2)] == [_expected(f"q{n}", WRONG[f"q{n}"])[1] for n in (1, 2)]
    assert faked["q3 mistake"] == _expected("q3", None)[0]
    assert {"replaces a checker", "prints ✓", "rebinds `ex`"} <= set(faked["flags"].split("; "))

    for learner, reason in {"other_lesson": "another lesson's notebook (02)",
                            "relabeled": "another lesson's notebook (02)",
                            "notes": "not a notebook (a .txt file)",
                            "crashing": f"the kernel died in cell {sites['q2'].cell + 1} (a crash, os._exit or out of "
                                        "memory)"}.items():
        assert rows[learner]["reason"] == reason
        assert verdicts(learner) == ["", "", ""] and rows[learner]["correct"] == ""
    assert rows["corrupt"]["reason"].startswith("corrupt notebook: not valid JSON")
    assert "11 submissions of lesson 01: 6 graded, 5 with a reason" in done.stdout


def test_ci_runs_the_gradebook_check_and_make_test_leaves_it_out():
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make")]
    assert "make grade-check" in ci
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\ngrade-check:", 1)[1].split("\n\n", 1)[0]
    assert "-m grading" in target and "tests/test_grade.py" in target


@pytest.mark.parametrize("cell,written", [("=1+2", "'=1+2"), ("+SUM(A1)", "'+SUM(A1)"), ("-2", "'-2"), ("@x", "'@x"),
                                          ("alice", "alice"), ("✓", "✓"), (3, 3)])
def test_a_cell_a_spreadsheet_would_run_as_a_formula_is_written_as_text(cell, written):
    assert grade._inert(cell) == written
