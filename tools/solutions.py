"""Every exercise's solution, run where the learner would paste it: each notebook run with a cell per solution.

    python tools/solutions.py                      # every notebook with an exercise; make solutions
    python tools/solutions.py --notebooks 09b_long_context_and_logit_growth

A learner who gives up runs ``ex.qN.solution()`` and pastes its code into the
exercise's cell, where the notebook's namespace is what the cells above it made.
For each notebook, this inserts a cell right after each cell that checks an
exercise (``ex.qN.check(answer)``, :func:`check_sites`). The inserted cell
(:func:`solution_cell`) runs the solution's code in a copy of the notebook's
globals and checks what it binds under the name the check cell passes (the
starter's name); for a prediction it checks the answer the solution states
(:func:`stated_answer`). The notebook then runs as ``make outputs`` runs it
(:func:`notebooks.run_notebook`: a fresh python3 kernel, the notebook's folder as
the working directory, one thread), up to its last exercise, and each inserted
cell must print ``✓``.

The report, one row per exercise with the line its check printed, goes to
test-artifacts/solutions.md and to stdout. The exit status is 1 if any solution
failed, a notebook ended in an error, or an exercise of the course was checked
in none of the notebooks run (when all of them are).

The fast half of this check is tests/test_solutions.py, part of ``make test``: it
runs the same cells in the namespace of the notebook's imports and first code
cell, and checks what can be read without a kernel: every name a solution uses
is bound by the notebook at that point, its code is fenced as Python, and the
check does not depend on the names the learner gives the function or its
parameters.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import multiprocessing
import os
import re
import symtable
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT)]

OUTPUT = ROOT / "test-artifacts" / "solutions.md"
CELL_TIMEOUT = 120  # s per cell, as tools/robustness.py: the two kernels share the CPUs with each other
INSERTED = "inserted by tools/solutions.py"

# --- what a solution shows -------------------------------------------------------------------------------------

#: A fenced block of Markdown: its language and its code.
FENCE = re.compile(r"^```([\w+-]*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """The fenced blocks of `markdown`, as (language, code), in order.

    >>> code_blocks("Text.\\n\\n```python\\nx = 1\\n```\\nMore.")
    [('python', 'x = 1\\n')]
    """
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(markdown)]


def prose(markdown: str) -> str:
    """`markdown` without its fenced blocks: the text Jupyter renders as paragraphs and tables."""
    return FENCE.sub("", markdown)


def solution_code(exercise) -> str | None:
    """The Python code of `exercise`'s solution (its ```python blocks, joined), or None where it shows none."""
    blocks = [code for language, code in code_blocks(exercise._solution) if language == "python"]
    return "\n".join(blocks) if blocks else None


#: Nodes of an answer that is written out: numbers, lists and tuples of them, arithmetic on them.
_LITERAL = (ast.Expression, ast.Constant, ast.List, ast.Tuple, ast.UnaryOp, ast.BinOp, ast.USub, ast.UAdd, ast.Add,
            ast.Sub, ast.Mult, ast.Div, ast.Pow, ast.Load)


def _written_out(source: str) -> bool:
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        return False
    return all(isinstance(node, _LITERAL) for node in ast.walk(tree))


def stated_answer(exercise) -> str:
    """The answer a prediction's solution states, as the Python to write in place of ``...``.

    A value exercise's solution opens with its answer as inline code; where the code shows its working,
    the answer is what follows its last ``=``: `` `1/64 = 0.015625` `` states ``0.015625``. A choice
    exercise's solution holds a Markdown table with a row per case (its first cell the case, or the start
    of it before a space) and a column ``outcome``. ValueError where no answer is stated so.

    >>> from course_utils import exercises
    >>> stated_answer(exercises.load("03").q2)
    '0.015625'
    """
    if exercise.kind == "choice":
        return _table_answer(exercise)
    match = re.search(r"`([^`\n]+)`", prose(exercise._solution))
    if match is None:
        raise ValueError("the solution states no answer as inline code (`...`)")
    answer = match.group(1).split(" = ")[-1].strip()
    if not _written_out(answer):
        raise ValueError(f"the solution's first inline code, `{match.group(1)}`, does not end with an answer "
                         "written out in Python (numbers, lists, arithmetic)")
    return answer


def _table_answer(exercise) -> str:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in prose(exercise._solution).splitlines() if line.lstrip().startswith("|")]
    rows = [row for row in rows if not all(set(cell) <= set("-: ") for cell in row)]  # no |---| line
    if not rows or "outcome" not in rows[0]:
        raise ValueError("the solution has no Markdown table with a column `outcome`")
    column, answer = rows[0].index("outcome"), {}
    for row in rows[1:]:
        cases = [case for case in exercise.reference if case == row[0] or case.startswith(row[0] + " ")]
        if len(cases) != 1:
            raise ValueError(f"the table's row {row[0]!r} names {len(cases)} of the cases {list(exercise.reference)}")
        answer[cases[0]] = row[column]
    return "{" + ", ".join(f"{case!r}: {outcome!r}" for case, outcome in answer.items()) + "}"


def free_names(code: str) -> set[str]:
    """The names `code` reads that it does not bind itself, builtins included.

    >>> sorted(free_names("def f(x):\\n    y = np.exp(x)\\n    return y / total(y)"))
    ['np', 'total']
    """
    top = symtable.symtable(code, "<solution>", "exec")
    used: set[str] = set()
    tables = [top]
    while tables:
        table = tables.pop()
        tables += table.get_children()
        for symbol in table.get_symbols():
            if not symbol.is_referenced():
                continue
            if table is top or symbol.is_global():  # a function's global, read or declared
                used.add(symbol.get_name())
    bound = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    return used - bound


def defined_functions(code: str) -> dict[str, ast.FunctionDef]:
    """The functions `code` defines at its top level, by name."""
    return {node.name: node for node in ast.parse(code).body if isinstance(node, ast.FunctionDef)}


# --- where the notebook checks an exercise ---------------------------------------------------------------------


def parse_cell(source: str) -> ast.Module:
    """A code cell's syntax tree, as IPython runs it (line magics and ``!`` commands turned into calls)."""
    try:
        return ast.parse(source)
    except SyntaxError:
        from IPython.core.inputtransformer2 import TransformerManager

        return ast.parse(TransformerManager().transform_cell(source))


def runs(cell: nbformat.NotebookNode) -> bool:
    """Whether a cell runs when the notebook runs: a code cell not tagged ``skip-execution``."""
    return cell.cell_type == "code" and "skip-execution" not in cell.metadata.get("tags", [])


@dataclass(frozen=True)
class Site:
    """A cell that checks an exercise: ``loader.name.check(answer)``."""

    notebook: str  # the notebook's name, e.g. "01_softmax_basics"
    cell: int  # the check cell's index in the notebook's cells
    lesson: str  # "01"
    name: str  # "q1"
    loader: str  # the name the notebook binds to exercises.load(lesson): "ex"
    answer: str  # what the cell passes to check, as written: "stable_softmax", "prediction"

    @property
    def label(self) -> str:
        return f"{self.notebook}: {self.lesson}.{self.name}"


def _loaded_lesson(node: ast.AST) -> str | None:
    """The lesson of ``exercises.load("01")`` (``cu.exercises.load``, ``load``), else None."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)):
        return None
    callee = ast.unparse(node.func)
    return node.args[0].value if callee == "load" or callee.endswith("exercises.load") else None


def check_sites(nb: nbformat.NotebookNode, notebook: str = "") -> list[Site]:
    """Every call ``loader.qN.check(answer)`` of `nb`, in order, where ``loader = ...exercises.load("NN")``."""
    loaders: dict[str, str] = {}
    sites = []
    for index, cell in enumerate(nb.cells):
        if not runs(cell):
            continue
        tree = parse_cell(cell.source)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and (lesson := _loaded_lesson(node.value)):
                loaders.update({t.id: lesson for t in node.targets if isinstance(t, ast.Name)})
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "check"
                    and len(node.args) == 1 and isinstance(exercise := node.func.value, ast.Attribute)
                    and re.fullmatch(r"q\d+", exercise.attr) and isinstance(exercise.value, ast.Name)
                    and exercise.value.id in loaders):
                sites.append(Site(notebook, index, loaders[exercise.value.id], exercise.attr, exercise.value.id,
                                  ast.unparse(node.args[0])))
    return sites


class _Bindings(ast.NodeVisitor):
    """The names a cell binds in the notebook's global namespace, in order (``del`` unbinds)."""

    def __init__(self, bound: dict[str, int], cell: int) -> None:
        self.bound, self.cell = bound, cell

    def _bind(self, name: str) -> None:
        self.bound[name] = self.cell

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self._bind(node.id)
        elif isinstance(node.ctx, ast.Del):
            self.bound.pop(node.id, None)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._bind(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self._bind(alias.asname or alias.name)
                continue
            import importlib

            try:  # `from x import *`: what x exports, where x can be imported here
                module = importlib.import_module(node.module)
            except ImportError:
                continue
            for name in getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")]):
                self._bind(name)

    def _definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        for part in (*node.decorator_list, *getattr(node, "bases", ())):
            self.visit(part)  # a walrus there binds here; the body is a scope of its own
        self._bind(node.name)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _definition

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass  # its parameters and body are its own

    def _comprehension(self, node: ast.AST) -> None:
        for inner in ast.walk(node):  # its loop variables are its own; a walrus binds here
            if isinstance(inner, ast.NamedExpr):
                self._bind(inner.target.id)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        for statement in node.body:  # `except E as name`: name is deleted when the handler ends
            self.visit(statement)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        self.generic_visit(node)
        if node.name:
            self._bind(node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self._bind(node.rest)


def bound_names(nb: nbformat.NotebookNode, upto: int) -> dict[str, int]:
    """The global names of `nb` once its cells before `upto` ran: name -> the cell that bound it last."""
    bound: dict[str, int] = {}
    for index, cell in enumerate(nb.cells[:upto]):
        if runs(cell):
            _Bindings(bound, index).visit(parse_cell(cell.source))
    return bound


def setup_source(nb: nbformat.NotebookNode, upto: int) -> str:
    """The notebook's first code cell, then every import of the code cells after it and before `upto`."""
    cells = [(index, cell) for index, cell in enumerate(nb.cells[:upto]) if runs(cell) and cell.source.strip()]
    if not cells:
        return ""
    parts = [cells[0][1].source]
    for _, cell in cells[1:]:
        parts += [ast.unparse(node) for node in parse_cell(cell.source).body
                  if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(parts)


# --- the inserted cell -----------------------------------------------------------------------------------------


def solution_cell(site: Site, exercise) -> str:
    """The cell inserted after `site`'s check cell: the solution's code, run and checked as the learner would.

    A function exercise's code runs in a copy of the notebook's globals, so that the cells after it see the
    notebook as it stands; what it binds under `site.answer` (the starter's name) is checked. A prediction's
    stated answer is checked as written.
    """
    check = f"{site.loader}.{site.name}.check"
    head = f"# {INSERTED}: {site.loader}.{site.name}.solution()"
    if exercise.kind != "function":
        return f"{head}'s answer\n{check}({stated_answer(exercise)})"
    code = solution_code(exercise)
    if code is None:
        raise ValueError(f"{exercise.lesson}.{exercise.name}: the solution shows no ```python code")
    return (f"{head}'s code, run in a copy of this notebook's namespace\n"
            f"_solution_namespace = dict(globals())\n"
            f"exec(compile({code!r}, {f'{exercise.lesson}.{exercise.name} solution'!r}, 'exec'), _solution_namespace)\n"
            f"{check}(_solution_namespace[{site.answer!r}])\n"
            "del _solution_namespace")


def instrument(nb: nbformat.NotebookNode, cells: Mapping[Site, str]) -> dict[Site, str]:
    """Insert each site's solution cell after its check cell, drop the cells after the last one, clear outputs.

    An inserted cell is tagged ``raises-exception``: the notebook runs on past a solution that raises.
    `cells` maps sites of `nb` (:func:`check_sites`) to their cells' sources (:func:`solution_cell`).
    Returns each site's inserted cell id.
    """
    ids = {}
    for site in sorted(cells, key=lambda s: s.cell, reverse=True):
        cell = new_code_cell(cells[site], metadata={"tags": ["raises-exception"]})  # its error fails it, not the rest
        ids[site] = cell.id = f"solution-{site.lesson}-{site.name}-{site.cell}"
        nb.cells.insert(site.cell + 1, cell)
    last = max((i for i, cell in enumerate(nb.cells) if cell.get("id") in ids.values()), default=len(nb.cells) - 1)
    del nb.cells[last + 1:]  # nothing after the last exercise is needed
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return ids


def cell_verdict(cell: nbformat.NotebookNode) -> tuple[bool, str]:
    """Whether an executed solution cell printed ✓, and the first line it printed (or its error)."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return False, f"error: {out.get('ename')}: {out.get('evalue')}"
    text = "".join(out.get("text", "") for out in cell.get("outputs", []) if out.get("output_type") == "stream")
    said = " ".join(text.split()) or "(printed nothing: not run)"  # the check's message, unwrapped
    return said.startswith("✓"), said if len(said) <= 300 else said[:299] + "…"


# --- running them ----------------------------------------------------------------------------------------------


@dataclass
class Result:
    """One exercise's solution in one notebook."""

    site: Site
    kind: str
    passed: bool
    line: str


@dataclass
class NotebookRun:
    notebook: str
    results: list[Result] = field(default_factory=list)
    error: str | None = None
    wall: float = 0.0


def check_notebook(path: str, timeout: int = CELL_TIMEOUT) -> NotebookRun:
    """Run one notebook with its solution cells (see the module's docstring)."""
    from notebooks import run_notebook  # here: the tests import this module without running a kernel

    from course_utils.exercises import load

    started, path = time.monotonic(), Path(path)
    run = NotebookRun(path.stem)
    nb = nbformat.read(path, as_version=4)
    sites = check_sites(nb, path.stem)
    exercises = {(s.lesson, s.name): getattr(load(s.lesson), s.name) for s in sites}
    cells, unbuilt = {}, {}
    for site in sites:
        try:
            cells[site] = solution_cell(site, exercises[site.lesson, site.name])
        except ValueError as exc:
            unbuilt[site] = f"no solution cell: {exc}"
    ids = instrument(nb, cells)
    try:
        if cells:
            run_notebook(nb, path.parent, timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})
    except Exception as exc:  # noqa: BLE001 - a cell's error, a timeout, a dead kernel: each solution cell says which
        run.error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[-1]}"
    by_id = {cell.get("id"): cell for cell in nb.cells}
    for site in sites:
        passed, line = (False, unbuilt[site]) if site in unbuilt else cell_verdict(by_id[ids[site]])
        run.results.append(Result(site, exercises[site.lesson, site.name].kind, passed, line))
    run.wall = time.monotonic() - started
    return run


def notebook_path(name: str, folder: Path = ROOT / "notebooks") -> Path:
    """A notebook by name (``09b_long_context_and_logit_growth``), file name or path."""
    path = Path(name)
    return path if path.suffix == ".ipynb" and path.exists() else folder / (path.stem + ".ipynb")


def notebooks_with_exercises(folder: Path = ROOT / "notebooks") -> list[Path]:
    """The notebooks of `folder` that check at least one exercise."""
    return [path for path in sorted(folder.glob("*.ipynb")) if check_sites(nbformat.read(path, as_version=4))]


def run_all(paths: Iterable[Path], jobs: int = 2, timeout: int = CELL_TIMEOUT,
            log=lambda line: print(line, flush=True)) -> list[NotebookRun]:
    """:func:`check_notebook` on each notebook, `jobs` at a time, each in a process of its own."""
    paths = list(paths)
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(check_notebook, str(path), timeout) for path in paths]
        runs_ = []
        for done, future in enumerate(futures, 1):
            run = future.result()
            runs_.append(run)
            passed = sum(r.passed for r in run.results)
            log(f"[{done}/{len(paths)}] {run.notebook}: {passed} of {len(run.results)} solutions ✓"
                f"{' ERROR ' + run.error if run.error else ''} ({run.wall:.0f} s)")
    return runs_


def report(runs_: Sequence[NotebookRun], command: str, wall: float, machine: str, date: str,
           unchecked: Sequence[str] = ()) -> tuple[str, list[str]]:
    """The Markdown report, and one line per failure (a solution not ✓, a notebook's error, an exercise unchecked)."""
    lines = [
        "# Solutions run in their lessons",
        "",
        "Each exercise's `solution()`, run where the learner would paste it: right after the exercise's check cell, "
        "in the notebook's own kernel (`tools/solutions.py`, `make solutions`).",
        "",
        f"- Command: `{command}`",
        f"- Machine: {machine}; {date}",
        f"- Cost: {len(runs_)} notebook{'s' if len(runs_) != 1 else ''} in {wall:.0f} s of wall time",
        "",
        "| notebook | check cell | exercise | kind | ✓ | what the check printed |",
        "|---|---|---|---|---|---|",
    ]
    failures = []
    for run in runs_:
        for r in run.results:
            lines.append(f"| {run.notebook} | {r.site.cell} | {r.site.lesson}.{r.site.name} | {r.kind} | "
                         f"{'✓' if r.passed else '✗'} | "
                         f"{r.line.replace('|', '/')} |")
            if not r.passed:
                failures.append(f"{r.site.label} (check cell {r.site.cell}): {r.line}")
        if run.error:
            failures.append(f"{run.notebook}: {run.error}")
    failures += [f"{label}: checked in none of the notebooks" for label in unchecked]
    lines += ["", f"**{'Every solution passed its check.' if not failures else f'{len(failures)} failure(s):'}**", ""]
    lines += [f"- {failure}" for failure in failures]
    return "\n".join(lines).rstrip() + "\n", failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", nargs="+",
                        help="names, files or paths (default: every notebook with an exercise)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks at once (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=OUTPUT,
                        help="the Markdown report (default: test-artifacts/solutions.md)")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT,
                        help="seconds per cell (default: %(default)s)")
    args = parser.parse_args(argv)
    from benchmarks.sliders import cpu
    from course_utils.exercises import all_exercises

    paths = [notebook_path(name) for name in args.notebooks] if args.notebooks else notebooks_with_exercises()
    started = time.monotonic()
    runs_ = run_all(paths, args.jobs, args.cell_timeout)
    wall = time.monotonic() - started
    checked = {(r.site.lesson, r.site.name) for run in runs_ for r in run.results}
    unchecked = [] if args.notebooks else [f"{ex.lesson}.{ex.name}" for ex in all_exercises()
                                           if (ex.lesson, ex.name) not in checked]
    command = "python tools/solutions.py" + (" --notebooks " + " ".join(args.notebooks) if args.notebooks else "")
    text, failures = report(runs_, command, wall, cpu(), datetime.date.today().isoformat(), unchecked)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text, encoding="utf-8")
    print(text)
    print(f"report: {args.output.relative_to(ROOT) if args.output.is_relative_to(ROOT) else args.output}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
