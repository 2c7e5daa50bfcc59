"""A gradebook: every submitted notebook of one lesson rerun in a fresh kernel and checked by the course's checkers.

    python tools/grade.py SUBMISSIONS_DIR --lesson 01 --out grades.csv
    python tools/grade.py SUBMISSIONS_DIR --lesson 01 --out grades.csv --cell-timeout 60 --timeout 600 --jobs 2

Each file of SUBMISSIONS_DIR (hidden files aside) is one learner's submission,
named after the learner: ``alice.ipynb`` gives the row of ``alice``. The CSV
(UTF-8 with a byte-order mark, so that spreadsheets show ✓ and ✗) has one row per
file, sorted by learner, with these columns:

- ``learner``, ``file``;
- for each exercise the lesson checks (``q1``, ``q2``, ...): ``qN`` (``✓``, ``✗`` or
  ``not answered``), ``qN mistake`` (the first sentence of the checker's message,
  or why the exercise counts as not answered) and ``qN diagnosis`` (the checker's
  name for a known wrong answer, such as "the textbook formula (which
  overflows)", where it names one: the column to count a class's mistakes by);
- ``correct``: how many exercises are ✓;
- ``reason``: why a submission could not be graded (then its exercise columns
  are empty): not a notebook, a corrupt notebook, another lesson's notebook, a
  kernel that died or could not be interrupted;
- ``notes``: the cells that raised or ran past their time limit, and cells never
  run because the notebook ran past its own limit (these do not stop the grading);
- ``flags``: new code that touches what grading relies on (``sys.modules``,
  builtins, ``sys.stdout``, IPython's hooks, the checkers, the name ``ex``, a
  printed ✓). A flag changes no verdict: it asks the instructor to read the
  submission.

A short table goes to the terminal. The exit status is 0 once the CSV is
written (a submission that cannot be graded is a row, not an error) and 2 for an
argument that is not valid.

How a submission is graded
--------------------------
1. **Read**, never run: a file that is not a ``.ipynb``, not JSON, not an
   nbformat 4 notebook, or another lesson's notebook (its
   ``metadata["course"]["lesson"]``, or fewer than half of the lesson's text
   cells, matched by cell id or by text) gets its ``reason`` and is not run.
2. **Run** in a fresh ``python3`` kernel of this environment, in an empty
   temporary folder, with one thread: every code cell of the submission, in order,
   outputs cleared first (a notebook saved without outputs is run the same way).
   A cell has ``--cell-timeout`` seconds (60 by default); past it the kernel is
   interrupted and the next cell runs. A cell that raises does not stop the
   others either. A kernel that ignores the interrupt is stopped, and so is the
   submission (``reason``). The learner's cells have ``--timeout`` seconds in all
   (600 by default); the cells left then are not run (``notes``) and the
   exercises are graded as they stand.
3. **Grade** by code this tool runs in that kernel, none of it the learner's.
   The answer to an exercise is the expression that the lesson's own notebook
   (in ``notebooks/``) passes to ``ex.qN.check(...)``: a function's name such as
   ``stable_softmax``, or ``prediction``. Right after each cell of the
   submission that checks an exercise, a cell of this tool keeps that
   expression's value; once the learner's cells have run, one cell per exercise
   drops every ``course_utils`` module from ``sys.modules``, imports the course
   afresh (so that checkers the submission patched are not the ones used) and
   calls ``load(lesson).qN.evaluate`` on the answer kept. Where no cell checked
   the exercise, or its cell left it unanswered, the expression's value at the
   end stands in, except where the lesson binds that name in other cells too
   (lesson 03's two predictions are both ``prediction``). An answer that is not
   defined, or still the starter (``...``, ``raise NotImplementedError``), is
   "not answered". So an exercise's cell may be deleted as long as its answer
   is defined elsewhere, and a submission that rebinds ``ex`` changes nothing:
   grading never uses the learner's ``ex``. Each grading cell has
   ``--cell-timeout`` seconds plus the checker's own limit on the learner's
   code (``course_utils.exercises.core.TIME_LIMIT``).
4. **Read the result** from the grading cell's own output only, and only from a
   line that starts with a random nonce made for this run (``secrets``): no
   output the learner's cells stored or printed is read, and a printed
   "✓ Correct!" is just text. A grading cell that printed no such line, or more
   than one, is graded ✗ with a mistake that says the submission interfered.
5. Submissions are graded ``--jobs`` at a time (2 by default), each in a process
   of its own with its own kernel, so one that hangs or crashes stops no other.

What this does not stop: the learner's code runs in the grading kernel, with the
grader's rights. A determined cheat can still patch what the fresh checkers use
(NumPy, builtins, ``sys.stdout``), put an import hook in ``sys.meta_path`` that
serves a fake ``course_utils``, find and overwrite the answers kept in
``sys.modules``, register an IPython hook that reads the grading cell (and so
its nonce) and rewrites its output, or read the nonce from the stack while the
checker calls their function. Most such code shows in ``flags``: read
flagged submissions. Learner code is also free to read and write files as the
user running this tool: grade in a container or an account with nothing to lose.

Why not nbgrader or otter-grader
--------------------------------
Both rerun submissions and grade them, but each needs the exercises in its own
format: nbgrader, its cell metadata (grade ids, points, locked cells) written
into every lesson, and its gradebook database; otter-grader, tests written for
it (an Otter Assign notebook or test files) and a configuration zip from which
it builds the Docker image it grades in. This course has its checkers already:
``ex.qN.evaluate(answer)`` returns a verdict that names the mistake, and each
lesson notebook says what the answer to each exercise is. Either tool would
need a second copy of every exercise in its format, kept in step with
``course_utils``; a thin tool on nbclient (the library nbconvert runs notebooks
with) uses the checkers as they are. What it gives up is otter's container:
run this one in a container of your own where submissions are not trusted.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import inspect
import json
import math
import multiprocessing
import os
import re
import secrets
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import nbformat
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT)]

from solutions import bound_names, check_sites, runs  # noqa: E402 - after the path is set

NOTEBOOKS = ROOT / "notebooks"
CELL_TIMEOUT = 60.0  # s per cell
TIMEOUT = 600.0  # s for all the learner's cells of one submission
JOBS = 2
#: Seconds a kernel has, after a cell ran past its limit and was interrupted, to run ``pass``; past them it is stuck.
PROBE_TIMEOUT = 10.0
#: A submission is the lesson's notebook if at least this share of the lesson's text cells are in it.
SAME_LESSON = 0.5
RIGHT, WRONG, NOT_ANSWERED = "✓", "✗", "not answered"
_TIMED_OUT = "course-grade-timeout"  # the error nbclient reports, in our place, for a cell that ran past its limit


# --- the lesson ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Exercise:
    """One exercise as the lesson's notebook checks it: ``loader.name.check(expression)``."""

    lesson: str  # the lesson of the checker: "01"
    name: str  # "q1"
    expression: str  # what the notebook passes to check: "stable_softmax"
    #: Whether the expression's value after the last cell may stand in for an answer the exercise's own cell left
    #: unanswered: only where the lesson binds that name in no other cell (lesson 03 binds `prediction` twice).
    fallback: bool = True


@dataclass(frozen=True)
class Lesson:
    """What grading needs from a lesson's own notebook."""

    lesson: str
    notebook: str  # its file name
    exercises: tuple[Exercise, ...]
    loaders: frozenset[str]  # the names the notebook binds to load(...): {"ex"}
    texts: frozenset[tuple[str, str]]  # its Markdown cells: (id, text)
    code_lines: frozenset[str]  # every line of its code cells, stripped
    others: tuple[tuple[str, frozenset[tuple[str, str]]], ...] = ()  # (lesson, texts) of the other lessons


def _lesson_of(nb: Any) -> str | None:
    """The lesson a notebook's metadata names (``metadata["course"]["lesson"]``), or None."""
    course = nb.get("metadata", {}).get("course") if isinstance(nb.get("metadata"), dict) else None
    lesson = course.get("lesson") if isinstance(course, dict) else None
    return lesson if isinstance(lesson, str) else None


def lesson_notebooks(folder: Path = NOTEBOOKS) -> dict[str, tuple[Path, nbformat.NotebookNode]]:
    """The course's notebooks by the lesson their metadata names: {"01": (path, notebook), ...}."""
    found = {}
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        if (lesson := _lesson_of(nb)) is not None:
            found[lesson] = path, nb
    return found


def _markdown(nb: nbformat.NotebookNode) -> frozenset[tuple[str, str]]:
    """A notebook's Markdown cells, as (id, text) pairs (the id "" where it has none)."""
    return frozenset((cell.get("id") or "", cell.source.strip()) for cell in nb.cells
                     if cell.cell_type == "markdown" and cell.source.strip())


def _share(texts: frozenset[tuple[str, str]], nb: nbformat.NotebookNode) -> float:
    """The share of a lesson's Markdown cells (`texts`) that are in `nb`, matched by id or by text."""
    theirs = _markdown(nb)
    ids, sources = {i for i, _ in theirs if i}, {text for _, text in theirs}
    return sum(bool(i and i in ids) or text in sources for i, text in texts) / max(len(texts), 1)


def load_lesson(lesson: str, folder: Path = NOTEBOOKS) -> Lesson:
    """The exercises lesson `lesson`'s notebook checks, and what tells its notebook from another lesson's.

    ValueError (naming ``--lesson``) where no notebook of `folder` is that lesson's, or it checks no exercise.
    """
    notebooks = lesson_notebooks(folder)
    sites = {name: check_sites(nb) for name, (_, nb) in notebooks.items()}
    with_exercises = sorted(name for name in notebooks if sites[name])
    if not isinstance(lesson, str) or lesson not in with_exercises:
        raise ValueError(f"--lesson must be a lesson with exercises, one of {with_exercises}; got {lesson!r}")
    path, nb = notebooks[lesson]
    binders: dict[str, set[int]] = {}  # name -> the code cells that bind it
    for index, cell in enumerate(nb.cells):
        for name in bound_names(nbformat.v4.new_notebook(cells=[cell]), 1):
            binders.setdefault(name, set()).add(index)
    exercises: dict[tuple[str, str], Exercise] = {}
    for site in sites[lesson]:  # a lesson that checks an exercise twice: the first check says what the answer is
        alone = binders.get(site.answer, set()) <= {site.cell}
        exercises.setdefault((site.lesson, site.name), Exercise(site.lesson, site.name, site.answer, alone))
    others = tuple((name, _markdown(other)) for name, (_, other) in notebooks.items() if name != lesson)
    code_lines = frozenset(line.strip() for cell in nb.cells if cell.cell_type == "code"
                           for line in cell.source.splitlines())
    return Lesson(lesson, path.name, tuple(exercises.values()), frozenset(s.loader for s in sites[lesson]),
                  _markdown(nb), code_lines, others)


# --- reading a submission --------------------------------------------------------------------------------------


def read_submission(path: Path, lesson: Lesson) -> tuple[nbformat.NotebookNode | None, str]:
    """The submission's notebook and "", or None and the reason it cannot be graded. Never raises for bad input."""
    if path.suffix.lower() != ".ipynb":
        return None, f"not a notebook (a {path.suffix.lower()} file)" if path.suffix else "not a notebook (no .ipynb)"
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        return None, "corrupt notebook: not UTF-8 text"
    except json.JSONDecodeError as exc:
        return None, f"corrupt notebook: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    except OSError as exc:
        return None, f"could not read the file ({exc.strerror or exc})"
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        return None, "corrupt notebook: JSON, but with no list of cells"
    if data.get("nbformat") != 4:
        return None, f"corrupt notebook: nbformat {data.get('nbformat')!r}, not 4 (open and save it in JupyterLab)"
    for number, cell in enumerate(data["cells"], 1):
        source = cell.get("source") if isinstance(cell, dict) else None
        lines = [source] if isinstance(source, str) else source if isinstance(source, list) else [None]
        if (not isinstance(cell, dict) or cell.get("cell_type") not in {"code", "markdown", "raw"}
                or not all(isinstance(line, str) for line in lines)):
            return None, f"corrupt notebook: cell {number} is not a notebook cell"
    if not isinstance(data.get("metadata", {}), dict):
        return None, "corrupt notebook: its metadata is not a mapping"
    nb = nbformat.from_dict(data)
    nb.setdefault("metadata", nbformat.NotebookNode())
    for cell in nb.cells:
        if not isinstance(cell.source, str):
            cell.source = "".join(cell.source)
        if not isinstance(cell.get("metadata"), dict):
            cell.metadata = nbformat.NotebookNode()
        if cell.cell_type == "code":  # never trusted, never read: the run makes new ones
            cell.outputs, cell.execution_count = [], None
    claimed = _lesson_of(nb)
    if claimed is not None and claimed != lesson.lesson:
        return None, f"another lesson's notebook ({claimed})"
    own = _share(lesson.texts, nb)
    if own >= SAME_LESSON:
        return nb, ""
    best = max(lesson.others, key=lambda other: _share(other[1], nb), default=None)
    if best is not None and _share(best[1], nb) >= SAME_LESSON:
        return None, f"another lesson's notebook ({best[0]})"
    return None, f"not lesson {lesson.lesson}'s notebook: {own:.0%} of its text cells are in it"


#: New code that touches what grading relies on, and what to call it in the ``flags`` column.
FLAGS = (
    (r"\bsys\s*\.\s*modules\b|\bmeta_path\b|\bimportlib\b", "touches the import system"),
    (r"\bcourse_utils\b", "uses course_utils in new code"),
    (r"\b__builtins__\b|\bbuiltins\b", "touches builtins"),
    (r"\bsys\s*\.\s*(?:stdout|stderr|__stdout__|settrace|setprofile|_getframe)\b|\binspect\b|\bf_back\b",
     "touches sys.stdout or the stack"),
    (r"\bevents\s*\.\s*register\b|\bregister_post_execute\b|\b(?:pre|post)_(?:run|execute)_cell\b",
     "registers an IPython hook"),
    (r"\.\s*(?:evaluate|check|_evaluate|_check_case)\s*=(?!=)|\bVerdict\b|\bsetattr\s*\(", "replaces a checker"),
    (r"[✓✔]", "prints ✓"),
)


def flags(nb: nbformat.NotebookNode, lesson: Lesson) -> list[str]:
    """What the submission's new code lines (those not in the lesson's own code cells) touch; see :data:`FLAGS`."""
    new = [line for cell in nb.cells if cell.cell_type == "code" for line in cell.source.splitlines()
           if line.strip() and line.strip() not in lesson.code_lines]
    patterns = [*FLAGS, *((rf"(?<![\w.]){re.escape(name)}\s*(?::[^=]*)?=(?!=)", f"rebinds `{name}`")
                          for name in sorted(lesson.loaders))]
    return [label for pattern, label in patterns if any(re.search(pattern, line) for line in new)]


# --- grading in the learner's kernel ---------------------------------------------------------------------------


def _exception_text(exc):
    """In the kernel: "ValueError: message", or the type alone where the learner's exception cannot say its message."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except BaseException:
        return type(exc).__name__


def _answer_now(namespace, expression):
    """In the kernel: the answer as the learner's namespace holds it now: ("answer", value), or why there is none."""
    try:
        return "answer", eval(expression, namespace)
    except NameError:
        return "undefined", f"`{expression}` is not defined."
    except BaseException as exc:
        return "error", f"Evaluating `{expression}` raised {_exception_text(exc)}."


def _capture_in_kernel(namespace, name, expression, store):
    """In the kernel, right after a cell that checks exercise `name`: keep its answer as that cell left it.

    Kept in a module named `store` (random for each run) in ``sys.modules``, out of the learner's namespace:
    lesson 03's two predictions are both ``prediction``, and the second must not grade the first.
    """
    import sys
    import types

    box = sys.modules.get(store)
    if box is None:
        box = sys.modules[store] = types.ModuleType(store)
        box.answers = {}
    box.answers[name] = _answer_now(namespace, expression)


def _grade_in_kernel(namespace, lesson, name, expression, nonce, store, fallback):
    """In the kernel, after the learner's cells: one exercise's verdict, printed on one line after `nonce`.

    The answer is the one kept after the exercise's own cell ran (:func:`_capture_in_kernel`), or, where no cell
    checked it or that cell left it unanswered and `fallback` allows, the expression's value now. The course is
    imported afresh, whatever the learner's cells did to the modules already imported. Every exception is
    caught: the line is always printed (unless the learner broke printing itself).
    """
    import importlib
    import json
    import sys

    for module in [m for m in list(sys.modules) if m == "course_utils" or m.startswith("course_utils.")]:
        del sys.modules[module]
    importlib.invalidate_caches()
    exercise = getattr(importlib.import_module("course_utils.exercises").load(lesson), name)

    def judge(found):
        kind, value = found
        if kind != "answer":
            return {"status": "undefined" if kind == "undefined" else "incorrect", "message": value}
        try:
            verdict = exercise.evaluate(value)
        except BaseException as exc:
            return {"status": "incorrect", "message": f"The checker could not use the answer ({_exception_text(exc)})."}
        return {"status": str(verdict.status), "message": str(verdict.message),
                "mistake": None if verdict.mistake is None else str(verdict.mistake)}

    captured = getattr(sys.modules.get(store), "answers", {}).get(name)
    result = judge(captured or _answer_now(namespace, expression))
    if captured and fallback and result["status"] in ("undefined", "not attempted"):
        result = judge(_answer_now(namespace, expression))
    print(nonce + " " + json.dumps(result, ensure_ascii=True), flush=True)


def _kernel_cell(function, *arguments: Any) -> nbformat.NotebookNode:
    """A cell that calls `function` (one of the ``_..._in_kernel``) with `arguments` in the learner's kernel.

    The call runs in a namespace of its own with the real builtins, so that a learner's ``print``, ``eval`` or
    ``json`` at the top level of the notebook cannot replace the ones it uses; the learner's namespace is passed
    as ``namespace``.
    """
    helpers = [_exception_text, _answer_now, function]
    code = "\n\n".join(inspect.getsource(f) for f in helpers)
    code += f"\n\n{function.__name__}(namespace, {', '.join(map(repr, arguments))})\n"
    return new_code_cell(
        "import builtins as _course_grader\n"
        f"_course_grader.exec({code!r}, {{'__builtins__': _course_grader, '__name__': 'course_grader', "
        "'namespace': _course_grader.globals()})\n")


def grading_cell(exercise: Exercise, nonce: str, store: str) -> nbformat.NotebookNode:
    """The cell that grades `exercise` in the learner's kernel (:func:`_grade_in_kernel`)."""
    return _kernel_cell(_grade_in_kernel, exercise.lesson, exercise.name, exercise.expression, nonce, store,
                        exercise.fallback)


def capture_cell(exercise: Exercise, store: str) -> nbformat.NotebookNode:
    """The cell that keeps `exercise`'s answer after a cell that checks it (:func:`_capture_in_kernel`)."""
    return _kernel_cell(_capture_in_kernel, exercise.name, exercise.expression, store)


def check_cells(nb: nbformat.NotebookNode, lesson: Lesson) -> dict[int, list[Exercise]]:
    """The submission's code cells that check an exercise (``ex.q1.check(``, outside comments), and which."""
    loaders = "|".join(map(re.escape, sorted(lesson.loaders)))
    found: dict[int, list[Exercise]] = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith("#"))
        for exercise in lesson.exercises:
            if re.search(rf"(?<![\w.])(?:{loaders})\s*\.\s*{exercise.name}\s*\.\s*check\s*\(", code):
                found.setdefault(index, []).append(exercise)
    return found


def first_sentence(message: str) -> str:
    """The first sentence of a checker's message, without its ✓/✗/○ and "Not yet:".

    A full stop inside brackets, parentheses or `code` (an array's ``1000.``) ends no sentence.

    >>> first_sentence("✗ Not yet: on input ([ 1000.  999.]) the result is nan. Subtract the max.")
    'on input ([ 1000.  999.]) the result is nan.'
    >>> first_sentence("○ Not attempted yet: replace `...` with your prediction.")
    'Not attempted yet: replace `...` with your prediction.'
    """
    text = re.sub(r"^\s*[✓✗○]\s*", "", message.strip())
    text = re.sub(r"^Not yet:\s*", "", text)
    depth, in_code = 0, False
    for i, char in enumerate(text):
        if char == "`":
            in_code = not in_code
        elif in_code:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "\n" or (char in ".!?" and depth == 0 and (i + 1 == len(text) or text[i + 1].isspace())):
            return text[:i + (char != "\n")].strip()
    return text.strip()


# --- running one submission ------------------------------------------------------------------------------------


@dataclass
class Graded:
    """One exercise's grade."""

    verdict: str = ""  # ✓, ✗, "not answered", or "" where it could not be graded
    mistake: str = ""  # the first sentence of the checker's message ("" for ✓)
    diagnosis: str = ""  # the checker's name for a known wrong answer


@dataclass
class Row:
    """One submission's row of the gradebook."""

    learner: str
    file: str
    grades: dict[str, Graded] = field(default_factory=dict)
    reason: str = ""
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    seconds: float = 0.0  # to run and grade it

    @property
    def correct(self) -> int:
        return sum(grade.verdict == RIGHT for grade in self.grades.values())

    @property
    def counted(self) -> str:
        """The ``correct`` column: the ✓ count, or "" for a submission that was never graded."""
        return str(self.correct) if not self.reason or self.grades else ""


def _result(cell: nbformat.NotebookNode, nonce: str) -> tuple[list[dict], str]:
    """The results a grading cell printed after `nonce`, and its error (or "").

    The kernel may send one printed line in several stream messages: they are joined first.
    """
    outputs = cell.get("outputs", [])
    printed = "".join(out.get("text", "") for out in outputs
                      if out.get("output_type") == "stream" and out.get("name") == "stdout")
    results = []
    for line in printed.splitlines():
        if line.startswith(nonce + " "):
            try:
                results.append(json.loads(line[len(nonce) + 1:]))
            except json.JSONDecodeError:
                results.append({})
    errors = [f"{out.get('ename')}: {out.get('evalue')}" for out in outputs if out.get("output_type") == "error"]
    return results, errors[-1] if errors else ""


def grade_from(results: list[dict], error: str, timed_out: float | None) -> Graded:
    """One exercise's grade from what its grading cell printed (:func:`_result`)."""
    if timed_out is not None:
        return Graded(WRONG, f"Grading ran past its {timed_out:g} s limit: the answer did not return in time.")
    if len(results) != 1 or not isinstance(results[0], dict) or "status" not in results[0]:
        said = "no result" if not results else f"{len(results)} results"
        return Graded(WRONG, f"Grading printed {said}{' (' + error + ')' if error else ''}: "
                             "the submission interfered with grading; read it.")
    result = results[0]
    status, message = result.get("status"), str(result.get("message", ""))
    verdict = {"correct": RIGHT, "not attempted": NOT_ANSWERED, "undefined": NOT_ANSWERED}.get(status, WRONG)
    return Graded(verdict, "" if verdict == RIGHT else first_sentence(message), str(result.get("mistake") or ""))


class _Kernel:
    """A submission's fresh kernel that runs one cell at a time, each with its own time limit."""

    def __init__(self, nb: nbformat.NotebookNode, folder: str) -> None:
        from nbclient import NotebookClient

        self.nb, self.limit = nb, 0.0
        self.timed_out: dict[int, float] = {}  # cell index -> the limit it ran past
        # nbclient interrupts a cell past its limit and reports _TIMED_OUT for it; its own `timeout` takes whole
        # seconds only, its `timeout_func` any number.
        self.client = NotebookClient(nb, kernel_name="python3", allow_errors=True, interrupt_on_timeout=True,
                                     error_on_timeout={"ename": _TIMED_OUT, "evalue": "", "traceback": []},
                                     timeout_func=lambda cell: self.limit, on_cell_error=self._on_error,
                                     record_timing=False, store_widget_state=False,
                                     resources={"metadata": {"path": folder}})

    def _on_error(self, cell, cell_index, execute_reply) -> None:
        if execute_reply["content"].get("ename") == _TIMED_OUT:
            self.timed_out[cell_index] = self.limit

    def run(self, index: int, seconds: float) -> bool:
        """Run cell `index` for `seconds` at most; False where it ran past them and ignored the interrupt."""
        self.limit = seconds
        self.client.execute_cell(self.nb.cells[index], index)
        if index not in self.timed_out:
            return True
        self.nb.cells.append(new_code_cell("pass"))  # interrupted: is the kernel free again?
        probe = len(self.nb.cells) - 1
        self.limit = PROBE_TIMEOUT
        self.client.execute_cell(self.nb.cells[probe], probe)
        return probe not in self.timed_out


def _note(index: int, cell: nbformat.NotebookNode, limit: float | None, cell_timeout: float, timeout: float) -> str:
    """What the learner's cell `index` did that the instructor should know: ran past `limit`, raised, or ""."""
    if limit is not None and limit < cell_timeout:
        return f"cell {index + 1} was interrupted when the notebook reached its {timeout:g} s limit"
    if limit is not None:
        return f"cell {index + 1} ran past its {cell_timeout:g} s limit and was interrupted"
    errors = [out for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    return f"cell {index + 1} raised {errors[-1].get('ename')}" if errors else ""


def run_submission(nb: nbformat.NotebookNode, lesson: Lesson, nonce: str, cell_timeout: float = CELL_TIMEOUT,
                   timeout: float = TIMEOUT) -> tuple[dict[str, Graded], str, list[str]]:
    """Run `nb` in a fresh kernel, then grade each exercise there: (grades, reason, notes).

    See the module's docstring for the rules.
    """
    from nbclient.exceptions import DeadKernelError

    from course_utils.exercises.core import TIME_LIMIT

    learner_cells = [index for index, cell in enumerate(nb.cells) if runs(cell) and cell.source.strip()]
    checks = check_cells(nb, lesson)
    store = "course_grade_answers_" + secrets.token_hex(8)
    first_grading = len(nb.cells)
    nb.cells += [grading_cell(exercise, nonce, store) for exercise in lesson.exercises]
    grades: dict[str, Graded] = {}
    notes: list[str] = []
    where = "before its first cell"  # where the kernel is, for a reason
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath}
    with tempfile.TemporaryDirectory(prefix="course-grade-") as folder:
        kernel = _Kernel(nb, folder)
        try:
            with kernel.client.setup_kernel(env=env):
                deadline = time.monotonic() + timeout
                for index in learner_cells:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        notes.append(f"cells {index + 1}–{learner_cells[-1] + 1} not run: the notebook reached its "
                                     f"{timeout:g} s limit")
                        break
                    where = f"in cell {index + 1}"
                    free = kernel.run(index, min(cell_timeout, left))
                    notes += filter(None, [_note(index, nb.cells[index], kernel.timed_out.get(index), cell_timeout,
                                                 timeout)])
                    nb.cells[index].outputs = []  # never read; kept out of memory
                    if not free:
                        return grades, f"cell {index + 1} ignored the interrupt: the kernel was stopped", notes
                    for exercise in checks.get(index, []):  # keep the answer as its own cell left it
                        nb.cells.append(capture_cell(exercise, store))
                        if not kernel.run(len(nb.cells) - 1, cell_timeout):
                            return grades, f"keeping {exercise.name}'s answer after cell {index + 1} took too long: " \
                                           "the kernel was stopped", notes
                for index, exercise in enumerate(lesson.exercises, first_grading):
                    where = f"while grading {exercise.name}"
                    free = kernel.run(index, cell_timeout + TIME_LIMIT)
                    grades[exercise.name] = grade_from(*_result(nb.cells[index], nonce), kernel.timed_out.get(index))
                    if not free:
                        return grades, f"grading {exercise.name} ignored the interrupt: the kernel was stopped", notes
        except DeadKernelError:
            return grades, f"the kernel died {where} (a crash, os._exit or out of memory)", notes
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot start, a broken connection: the row says which
            return grades, f"the kernel failed {where}: {type(exc).__name__}: " \
                           f"{(str(exc).strip().splitlines() or [''])[-1]}", notes
    return grades, "", notes


# --- the gradebook ---------------------------------------------------------------------------------------------


def submissions(folder: Path, skip: Sequence[Path] = ()) -> list[Path]:
    """Every file of `folder` but hidden ones and those in `skip`, by name."""
    skipped = {path.resolve() for path in skip}
    return sorted((path for path in folder.iterdir() if path.is_file() and not path.name.startswith(".")
                   and path.resolve() not in skipped), key=lambda path: (path.stem, path.name))


def _grade_one(path: str, nb: dict, lesson: Lesson, nonce: str, cell_timeout: float, timeout: float) -> Row:
    """A row for one readable submission, run and graded (in a worker process)."""
    started, row = time.monotonic(), Row(Path(path).stem, Path(path).name)
    row.grades, row.reason, row.notes = run_submission(nbformat.from_dict(nb), lesson, nonce, cell_timeout, timeout)
    row.seconds = time.monotonic() - started
    return row


def check_arguments(folder: Any, cell_timeout: Any, timeout: Any, jobs: Any, out: Any = None) -> None:
    """ValueError, naming the argument, for a value the gradebook cannot use."""
    if not Path(folder).is_dir():
        raise ValueError(f"SUBMISSIONS_DIR must be a folder; {str(folder)!r} is not")
    for name, value in (("--cell-timeout", cell_timeout), ("--timeout", timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be a number of seconds above 0; got {value!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"--jobs must be a whole number of at least 1; got {jobs!r}")
    if out is not None and Path(out).is_dir():
        raise ValueError(f"--out must be a file to write, not the folder {str(out)!r}")


def grade(folder: Path | str, lesson: str | Lesson, cell_timeout: float = CELL_TIMEOUT, timeout: float = TIMEOUT,
          jobs: int = JOBS, skip: Sequence[Path] = (),
          log=lambda line: print(line, flush=True)) -> tuple[Lesson, list[Row]]:
    """Grade every submission in `folder` as lesson `lesson`; the lesson and the rows, sorted by learner.

    `lesson` is a lesson's number ("01") or what :func:`load_lesson` made of it. ValueError, naming the
    argument, before anything runs, for an argument that is not valid.
    """
    check_arguments(folder, cell_timeout, timeout, jobs)
    spec = lesson if isinstance(lesson, Lesson) else load_lesson(lesson)
    nonce = "course-grade-" + secrets.token_hex(16)  # made here, in no file: the learner's code cannot know it
    rows, pending = [], []
    for path in submissions(Path(folder), skip):
        nb, reason = read_submission(path, spec)
        row = Row(path.stem, path.name, reason=reason)
        if nb is None:
            rows.append(row)
        else:
            pending.append((path, nb, flags(nb, spec)))
    if pending:
        with ProcessPoolExecutor(max_workers=min(jobs, len(pending)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            lean = dataclasses.replace(spec, others=())  # what a worker needs: not the other lessons' text
            futures = [pool.submit(_grade_one, str(path), nb, lean, nonce, cell_timeout, timeout)
                       for path, nb, _ in pending]
            for done, ((path, _, flagged), future) in enumerate(zip(pending, futures), 1):
                try:
                    row = future.result()
                except BrokenProcessPool as exc:  # the worker itself died: this row and those after it say so
                    row = Row(path.stem, path.name, reason=f"the grader's process died ({exc})")
                except Exception as exc:  # noqa: BLE001 - a bug here must cost one row, not the gradebook
                    row = Row(path.stem, path.name, reason=f"the grader failed: {type(exc).__name__}: {exc}")
                row.flags = flagged
                rows.append(row)
                log(f"[{done}/{len(pending)}] {row.file}: "
                    + (row.reason or f"{row.correct} of {len(spec.exercises)} ✓") + f" ({row.seconds:.0f} s)")
    return spec, sorted(rows, key=lambda row: (row.learner, row.file))


def columns(lesson: Lesson) -> list[str]:
    """The CSV's header."""
    per_exercise = [f"{e.name}{part}" for e in lesson.exercises for part in ("", " mistake", " diagnosis")]
    return ["learner", "file", *per_exercise, "correct", "reason", "notes", "flags"]


def _inert(cell: Any) -> Any:
    """A text cell a spreadsheet would run as a formula (it starts with =, +, -, @, a tab or a return), quoted with '.

    Examples
    --------
    >>> _inert("=1+2"), _inert("alice"), _inert(3)
    ("'=1+2", 'alice', 3)
    """
    return "'" + cell if isinstance(cell, str) and cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell


def write_csv(path: Path, lesson: Lesson, rows: Sequence[Row]) -> None:
    """The gradebook, one row per submission (see the module's docstring)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8-sig", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(columns(lesson))
        for row in rows:
            cells = []
            for exercise in lesson.exercises:
                grade = row.grades.get(exercise.name, Graded())
                cells += [grade.verdict, grade.mistake, grade.diagnosis]
            writer.writerow([_inert(cell) for cell in [row.learner, row.file, *cells, row.counted, row.reason,
                                                        "; ".join(row.notes), "; ".join(row.flags)]])


def summary(lesson: Lesson, rows: Sequence[Row], width: int = 60) -> str:
    """A short table for the terminal: each learner's verdicts, ✓ count, and the reason, notes or flags."""
    names = [e.name for e in lesson.exercises]
    table = [["learner", *names, "✓", "reason / notes / flags"]]
    for row in rows:
        said = row.reason or "; ".join([*row.notes, *(["flags: " + ", ".join(row.flags)] if row.flags else [])])
        said = said if len(said) <= width else said[:width - 1] + "…"
        table.append([row.learner, *(row.grades.get(n, Graded()).verdict or "-" for n in names),
                      row.counted or "-", said])
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table]
    graded = sum(1 for row in rows if not row.reason)
    lines.append(f"{len(rows)} submission{'s' if len(rows) != 1 else ''} of lesson {lesson.lesson}: "
                 f"{graded} graded, {len(rows) - graded} with a reason")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="The columns and the rules: the docstring of tools/grade.py.")
    parser.add_argument("submissions", metavar="SUBMISSIONS_DIR", type=Path,
                        help="a folder with one file per learner, named after the learner")
    parser.add_argument("--lesson", required=True, help="the lesson the submissions are of: 01, 05b, ...")
    parser.add_argument("--out", required=True, type=Path, help="the CSV to write")
    parser.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT,
                        help="seconds per cell before it is interrupted (default: %(default)g)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT,
                        help="seconds for all of one submission's cells (default: %(default)g)")
    parser.add_argument("--jobs", type=int, default=JOBS, help="submissions at once (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        check_arguments(args.submissions, args.cell_timeout, args.timeout, args.jobs, args.out)
        lesson = load_lesson(args.lesson)
    except ValueError as exc:
        parser.error(str(exc))
    lesson, rows = grade(args.submissions, lesson, args.cell_timeout, args.timeout, args.jobs, skip=[args.out])
    write_csv(args.out, lesson, rows)
    print(summary(lesson, rows))
    print(f"gradebook: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
