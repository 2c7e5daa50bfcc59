"""Every solution shows its code as code and passes its own check where the learner would paste it.

The fast half of tools/solutions.py (``make solutions``), which runs each notebook with the solution
cells inserted. Here nothing runs in a kernel: each solution cell runs in the namespace of the notebook's
first code cell and its imports up to the exercise, and what a kernel would add is read from the cells
with ``ast``: the names each solution uses must be bound by the notebook by then.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import inspect
import random
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

from course_utils import exercises
from course_utils.exercises import FunctionExercise, all_exercises
from course_utils.exercises.core import Case, ChoiceExercise, ValueExercise

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import solutions  # noqa: E402

ALL = list(all_exercises())
IDS = [f"{ex.lesson}.{ex.name}" for ex in ALL]
FUNCTIONS = [ex for ex in ALL if isinstance(ex, FunctionExercise)]


@functools.lru_cache(maxsize=None)
def _notebook(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


SITES = [site for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
         for site in solutions.check_sites(_notebook(path), path.stem)]
FUNCTION_SITES = [site for site in SITES
                  if isinstance(getattr(exercises.load(site.lesson), site.name), FunctionExercise)]


def _exercise(site: solutions.Site):
    return getattr(exercises.load(site.lesson), site.name)  # a fresh one: no hint or verdict of another test


def _nb(site: solutions.Site) -> nbformat.NotebookNode:
    return _notebook(ROOT / "notebooks" / f"{site.notebook}.ipynb")


@contextlib.contextmanager
def _global_state_kept():
    """Undo what a notebook's set-up (cu.setup) does to this process: seeds and thread counts."""
    states = random.getstate(), np.random.get_state(), torch.random.get_rng_state(), torch.get_num_threads()
    with threadpool_limits(limits=None):  # restores BLAS's threads on exit
        try:
            yield
        finally:
            random.setstate(states[0])
            np.random.set_state(states[1])
            torch.random.set_rng_state(states[2])
            torch.set_num_threads(states[3])


@functools.lru_cache(maxsize=None)
def _setup_namespace(notebook: str, source: str) -> dict:
    """The namespace of `source` (a notebook's first code cell and its imports), run in the notebook's folder."""
    namespace: dict = {"__name__": "__main__"}
    with _global_state_kept(), contextlib.chdir(ROOT / "notebooks"), contextlib.redirect_stdout(None):
        exec(compile(source, f"{notebook} (first code cell and imports)", "exec"), namespace)
    return namespace


def _namespace(site: solutions.Site) -> dict:
    """A fresh copy of the namespace at `site`, with its own exercises under the notebook's name for them."""
    namespace = dict(_setup_namespace(site.notebook, solutions.setup_source(_nb(site), site.cell)))
    namespace[site.loader] = exercises.load(site.lesson)
    return namespace


def _code(site: solutions.Site) -> str:
    code = solutions.solution_code(_exercise(site))
    if code is None:
        pytest.fail("the solution shows no ```python code")
    return code


def _solution_function(site: solutions.Site):
    namespace = _namespace(site)
    exec(_code(site), namespace)
    return namespace[site.answer]


# --- every exercise is checked in a notebook, and its solution shows its code as code --------------------------


def test_every_exercise_is_checked_in_a_notebook():
    checked = {(site.lesson, site.name) for site in SITES}
    assert [f"{ex.lesson}.{ex.name}" for ex in ALL if (ex.lesson, ex.name) not in checked] == []


def _statement(text: str) -> bool:
    """Whether one line of text is a Python statement other than a bare expression (prose can be one)."""
    for source, body in ((text, 0), (text + "\n    pass", 0), ("def _():\n    " + text, 1)):
        try:  # the line alone, as a block's header (`def f(x):`), in a function (`return p - y`)
            tree = ast.parse(source)
        except SyntaxError:
            continue
        statement = tree.body[0].body[0] if body else tree.body[0]
        if not isinstance(statement, ast.Expr) or isinstance(statement.value, (ast.Yield, ast.YieldFrom)):
            return True
    return False


def _unfenced_code(markdown: str) -> list[str]:
    """The lines of `markdown` outside its fences that are Python statements: Jupyter would join them into prose."""
    return [line for line in solutions.prose(markdown).splitlines()
            if line.strip() and not line.strip().startswith("|") and "`" not in line and _statement(line.strip())]


def test_code_outside_a_fence_is_found():
    unfenced = ("\ndef paired_summary(loss_arm, loss_ref):\n    diff = loss_arm - loss_ref  # per seed\n"
                "    return np.array([diff.mean(), diff.std(ddof=1)])\n\nThe seeds are paired: tau = (0.4 - 1) / 2.\n")
    assert len(_unfenced_code(unfenced)) == 3
    assert _unfenced_code("\n```python\n" + unfenced.split("\n\nThe")[0] + "\n```\nThe seeds are paired.\n") == []
    prose = ("`0.1875` = (1/4)(1 - 1/4) = 3/16. With s = p the formula is softmax's; a row with no key\n"
             "return zeros, as SDPA does, and if every key is masked:\nimport nothing: softmax")
    assert _unfenced_code(prose) == []


@pytest.mark.parametrize("ex", ALL, ids=IDS)
def test_a_solution_shows_its_code_in_python_fences_only(ex):
    assert _unfenced_code(ex._solution) == [], "code outside a ```python fence renders as one paragraph"
    assert all(language == "python" for language, _ in solutions.code_blocks(ex._solution))
    if isinstance(ex, FunctionExercise):
        assert solutions.solution_code(ex), "a function exercise's solution shows the function"


# --- the solution, where the notebook checks the exercise --------------------------------------------------------


def test_the_names_a_solution_reads_are_found():
    code = "def ssmax(x, s):\n    n = x.shape[-1]\n    return course_utils.softmax(x * (s * np.log(n)), axis=-1)\n"
    assert solutions.free_names(code) == {"course_utils", "np"}
    assert solutions.free_names("import math\n\ndef f(x):\n    return [math.e * y for y in x] + g(x)\n") == {"g"}
    nb = _notebook(ROOT / "notebooks" / "09b_long_context_and_logit_growth.ipynb")
    bound = solutions.bound_names(nb, solutions.check_sites(nb)[0].cell)
    assert {"np", "cu", "softmax", "toy_row"} <= set(bound) and "course_utils" not in bound


@pytest.mark.parametrize("site", FUNCTION_SITES, ids=[site.label for site in FUNCTION_SITES])
def test_a_solution_reads_only_names_its_notebook_has_bound_by_then(site):
    used = solutions.free_names(_code(site)) - set(dir(builtins))
    bound = solutions.bound_names(_nb(site), site.cell + 1)
    assert sorted(used - set(bound)) == [], "pasted into the exercise's cell, the solution raises NameError"
    later = sorted(name for name in used if name not in _namespace(site))
    assert later == [], (f"the solution reads {later}, bound only in cell(s) {sorted({bound[n] for n in later})}: "
                         "use what the lesson imports or sets up in its first code cell")


@pytest.mark.parametrize("site", FUNCTION_SITES, ids=[site.label for site in FUNCTION_SITES])
def test_a_solution_defines_the_starters_function_with_its_parameters(site):
    check_cell = solutions.parse_cell(_nb(site).cells[site.cell].source)
    starters = {node.name: node for node in check_cell.body if isinstance(node, ast.FunctionDef)}
    assert site.answer in starters, "the check cell passes the function its starter defines"
    defined = solutions.defined_functions(_code(site))
    assert site.answer in defined, f"the solution defines {list(defined)}; the check cell checks {site.answer!r}"

    def parameters(node):
        return [arg.arg for arg in node.args.args], len(node.args.defaults)

    assert parameters(defined[site.answer]) == parameters(starters[site.answer])


@pytest.mark.parametrize("site", SITES, ids=[site.label for site in SITES])
def test_the_solution_passes_its_check_in_the_namespace_of_its_exercise(site, capsys):
    cell = solutions.solution_cell(site, _exercise(site))  # the cell make solutions inserts after the check cell
    exec(compile(cell, f"solution cell of {site.label}", "exec"), _namespace(site))
    printed = capsys.readouterr().out
    assert printed.startswith("✓"), printed


def renamed(function, name="my_answer"):
    """`function` as a learner might write it: another name, and other names for every parameter."""
    parameters = list(inspect.signature(function).parameters.values())
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)
    names = [f"renamed_{i}" for i in range(len(parameters))]
    defaults = {n: p.default for n, p in zip(names, parameters) if p.default is not p.empty}
    header = ", ".join(f"{n}=defaults[{n!r}]" if n in defaults else n for n in names)
    scope = {"function": function, "defaults": defaults}
    exec(f"def {name}({header}):\n    return function({', '.join(names)})\n", scope)
    return scope[name]


def test_a_check_that_passes_an_argument_by_name_fails_on_a_renamed_parameter():
    reference = lambda x, temperature: np.asarray(x) / temperature  # noqa: E731
    ex = FunctionExercise("xx", "q1", "t", reference=reference, starter=exercises.core.starter, wrong_answers={},
                          hints=["h"], solution="s", cases=[Case((np.ones(3),), {"temperature": 2.0})])
    assert ex.evaluate(reference).status == "correct"
    assert ex.evaluate(renamed(reference)).status == "incorrect"


FIRST_SITES = list({(s.lesson, s.name): s for s in reversed(FUNCTION_SITES)}.values())


@pytest.mark.parametrize("site", FIRST_SITES, ids=[f"{s.lesson}.{s.name}" for s in FIRST_SITES])
def test_the_check_does_not_depend_on_the_names_the_learner_chooses(site):
    verdict = _exercise(site).evaluate(renamed(_solution_function(site)))
    assert verdict.status == "correct", verdict.message


# --- what a prediction's solution states, and the tool's notebook -----------------------------------------------


def test_a_predictions_stated_answer_is_read_from_its_first_inline_code():
    def value(text):
        return solutions.stated_answer(ValueExercise("xx", "q1", "t", reference=1, wrong_answers={}, hints=["h"],
                                                     solution=text))

    assert value("`0.1875` = (1/4)(1 - 1/4) = 3/16.") == "0.1875"
    assert value("`[0, ln 2] = [0, 0.6931]`: query i sees i + 1 keys.") == "[0, 0.6931]"
    for text in ("16 * 8192**2 scores = 5120 MiB.", "`ln 2`, about 0.69."):
        with pytest.raises(ValueError):
            value(text)
    table = "| mask | outcome |\n|---|---|\n| bool | zeros |\n| additive -inf | uniform |\n"
    choice = ChoiceExercise("xx", "q1", "t", reference={"bool (True=attend)": "zeros", "additive -inf": "uniform"},
                            choices=("zeros", "uniform"), why={}, wrong_answers={}, hints=["h"], solution=table)
    assert solutions.stated_answer(choice) == "{'bool (True=attend)': 'zeros', 'additive -inf': 'uniform'}"


def test_the_tool_inserts_a_solution_cell_after_each_check_and_runs_nothing_after_the_last():
    nb = nbformat.from_dict(_notebook(ROOT / "notebooks" / "01_softmax_basics.ipynb"))
    sites = solutions.check_sites(nb, "01_softmax_basics")
    ids = solutions.instrument(nb, {s: solutions.solution_cell(s, _exercise(s)) for s in sites})
    positions = [next(i for i, c in enumerate(nb.cells) if c.get("id") == ids[s]) for s in sites]
    assert [nb.cells[p - 1].source for p in positions] == [_notebook(ROOT / "notebooks" / "01_softmax_basics.ipynb")
                                                           .cells[s.cell].source for s in sites]
    assert positions[-1] == len(nb.cells) - 1 and all(c.get("outputs") in (None, []) for c in nb.cells)
    def printed(text):
        return {"outputs": [{"output_type": "stream", "name": "stdout", "text": text}]}

    assert solutions.cell_verdict(printed("✓ Correct!\n")) == (True, "✓ Correct!")
    assert solutions.cell_verdict(printed("✗ Not yet: on\ninput 1\n")) == (False, "✗ Not yet: on input 1")
    assert solutions.cell_verdict({"outputs": [{"output_type": "error", "ename": "NameError", "evalue": "x"}]}) == (
        False, "error: NameError: x")


def test_make_solutions_runs_the_tool_and_ci_runs_it_after_make_robust():
    target = (ROOT / "Makefile").read_text().split("\nsolutions:", 1)[1].split("\n\n", 1)[0]
    assert "\t@$(PY) tools/solutions.py" in target
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make")]
    assert ci[:3] == ["make test", "make robust", "make solutions"]
