"""The robustness check: every conclusion drawn from random or chaotic work, over seed sets and CPU code paths.

    python tools/robustness.py                 # the lessons below, 10 seed sets, every code path; make robust
    python tools/robustness.py --notebooks 08_scale_in_training --seed-sets 2 --paths native avx2
    python tools/robustness.py --unit-tests    # the unit tests and doctests on the other code paths

The course's standard: a conclusion from random or chaotic work (training,
sampling) must hold on every seed set and CPU code path it could meet, or be
stated as the fraction of runs it holds in. A lesson states such a conclusion
with ``course_utils.conclude``, which prints ``✓ statement`` or ``✗ statement:
does NOT hold on this run ...``. This check executes each notebook of
:data:`NOTEBOOKS` once per seed set and per code path, and collects those lines.

**Seed sets.** A cell is inserted right after the notebook's first code cell.
It redoes, for seed set k, what that cell seeds:

- ``SEEDS = [...]`` (lessons 08 and 08b: 5 seeds): the list of the same
  length shifted by k times its length (``[0..4]``, then ``[5..9]``, ...);
- ``SEED = s`` (one seed from which every draw of the lesson follows): ``s + k``;
- ``rng = cu.setup(seed=s)``: ``seed=s + k`` (this reseeds Python's ``random``,
  NumPy's global generator and PyTorch's too);
- and every other assignment of that cell that reads a name set before it, as
  it stands: ``rng = cu.setup(seed=SEED)``, ``SEEDS = list(range(5 * SEED, ...))``.

Later cells may draw from generators of their own; their literal seeds are
shifted by k too, and so is a later ``SEED = s`` or ``SEEDS = [...]`` (as
above): ``torch.manual_seed(s)``, ``torch.Generator().manual_seed(s)``,
``np.random.default_rng(s)``, ``np.random.seed(s)``, ``random.seed(s)``, any
``seed=s`` argument, and the seed argument of every ``course_utils`` function
with a parameter named ``seed`` (``retrieval_batches(s)``,
``init_retrieval_params(d, s)``), each where ``s`` is an integer literal; a
seed computed from ``SEED`` or ``SEEDS`` follows them. Set 0 is the notebook as
it stands. The report names every seed each notebook's sets change.

**Code paths.** ``tools/run_checks.py``'s :func:`cpu_paths`: this CPU's own
(``native``), one level down (``avx2`` on a CPU with AVX-512:
:func:`other_cpu_path`) and ``baseline`` (no dispatched feature). Each kernel
runs with ``OMP_NUM_THREADS=1``, in the notebook's folder, with the path's
settings in its environment. Cells tagged ``skip-execution`` are not run;
those tagged ``raises-exception`` may raise (nbclient honours both tags).

**Verdicts.** Each conclusion is keyed by its cell's id and its place among the
cell's conclusions, so that a statement formatted from the seeds still lines up
across seed sets. Lines of ``cross_check`` (``: close (...)``, ``: exact``), of
``check_claim`` (``the source states``) and of the exercises (``✓ Correct``,
``✗ Not yet``, ``○ Not attempted``) are not conclusions. A conclusion passes
only where it printed ✓ in every (seed set, path). The report, a Markdown
table per notebook (conclusion × path, ``10/10`` or ``9/10 (fails: set 3)``)
with the CPU, the versions, the date and the cost, is written to
``benchmarks/robustness.md`` and printed. The exit status is 1 if any
conclusion failed or went missing anywhere, or any execution ended in an error.

``--unit-tests`` runs ``make test``'s unit stage (pytest on ``tests/`` and the
doctests of ``course_utils``) once on each code path but the native one, which
``make test`` covers, with ``OMP_NUM_THREADS=2``.
"""

from __future__ import annotations

import argparse
import ast
import copy
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tools"), str(ROOT)]
import run_checks  # noqa: E402
from notebooks import run_notebook  # noqa: E402
from benchmarks.sliders import cpu  # noqa: E402

#: The notebooks whose conclusions rest on training, sampling or random draws.
NOTEBOOKS = ["03_scaling_dk", "08_scale_in_training", "08b_scale_in_training_dynamics", "09_softmax_frontier",
             "09b_long_context_and_logit_growth", "sources"]
OUTPUT = ROOT / "benchmarks" / "robustness.md"
#: Settings a code path makes; the kernel gets them from its path alone, never from the caller's environment.
#: (``OPENBLAS_CORETYPE`` is the exception: where the machine sets it, every path keeps it, as in run_checks.)
PATH_SETTINGS = ("NPY_DISABLE_CPU_FEATURES", "ATEN_CPU_CAPABILITY", "MKL_CBWR")
CELL_TIMEOUT = 120  # s; make test's hang check is nbval's 30 s; here the baseline path may be slower
SEED_CELL_ID = "robustness-seed-set"

# --- the lines a notebook prints -------------------------------------------------------------------------------

NOT_HOLD = ": does NOT hold on this run"  # course_utils.claims.conclude
CLAIM = ": the source states "  # course_utils.claims.check_claim
CROSS_CHECK = re.compile(r": (?:exact|close \(.*\)|NOT exact: .*|NOT close: .*|shapes differ, .*|NaN in different places)$")
EXERCISE = re.compile(r"^(?:[✓✗] (?:Correct!|Not yet|The checker could not use your answer|Pass your function itself)|○ )")


def classify(line: str) -> str | None:
    """What printed `line`: ``"conclusion"``, ``"cross_check"``, ``"claim"``, ``"exercise"``, or None (no verdict).

    >>> classify("✓ (a) unscaled ends higher than (b) in all 5 seeds")
    'conclusion'
    >>> classify("✗ every loss is below 1: does NOT hold on this run (1 of 2 false: position 1)")
    'conclusion'
    >>> classify("✓ halves: exact"), classify("✓ e^1: the source states 2.718; computed 2.718"), classify("✗ Not yet: no")
    ('cross_check', 'claim', 'exercise')
    """
    if line.startswith("✗ ") and NOT_HOLD in line:
        return "conclusion"
    if EXERCISE.match(line):
        return "exercise"
    if not line.startswith(("✓ ", "✗ ")):
        return None
    if CLAIM in line:
        return "claim"
    if CROSS_CHECK.search(line):
        return "cross_check"
    return "conclusion"


def conclusion(line: str) -> tuple[str, bool]:
    """The statement of a conclusion line, and whether it held.

    >>> conclusion("✗ every loss is below 1: does NOT hold on this run (1 of 2 false: position 1)")
    ('every loss is below 1', False)
    """
    if line.startswith("✓ "):
        return line[2:], True
    return line[2:line.rindex(NOT_HOLD)], False


def cell_conclusions(cell: Mapping) -> list[tuple[str, bool]]:
    """The conclusions an executed code cell printed to stdout, in order."""
    text = "".join(out.get("text", "") for out in cell.get("outputs", [])
                   if out.get("output_type") == "stream" and out.get("name") == "stdout")
    return [conclusion(line) for line in text.splitlines() if classify(line) == "conclusion"]


# --- seed sets -------------------------------------------------------------------------------------------------


def _int(node: ast.AST | None) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _int_list(node: ast.AST) -> list[int] | None:
    if isinstance(node, ast.List) and node.elts and all(_int(e) is not None for e in node.elts):
        return [_int(e) for e in node.elts]
    return None


def _assigned(node: ast.Assign, name: str) -> list[ast.expr]:
    """The values `node` assigns to `name`, also in a tuple assignment (``D_K, SEEDS = 256, [0, 1]``)."""
    values = []
    for target in node.targets:
        pairs = [(target, node.value)]
        if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(target.elts) == len(node.value.elts):
            pairs = list(zip(target.elts, node.value.elts))
        values += [value for t, value in pairs if isinstance(t, ast.Name) and t.id == name]
    return values


def _seed_assignments(tree: ast.AST) -> list[ast.expr]:
    """The literals assigned to ``SEED`` (an int) or ``SEEDS`` (a list of ints) anywhere in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [v for v in _assigned(node, "SEED") if _int(v) is not None]
            found += [v for v in _assigned(node, "SEEDS") if _int_list(v)]
    return found


def _shift(node: ast.expr, k: int) -> str:
    """The literal seed `node` in seed set k: an int + k, a list of seeds as :func:`shifted` makes it."""
    return str(shifted(_int_list(node), k)) if isinstance(node, ast.List) else str(_int(node) + k)


def _callee(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(call.func, ast.Name) else None


def _is_setup(node: ast.AST) -> bool:
    """Whether `node` is ``name = cu.setup(...)`` (or ``setup(...)``)."""
    return isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _callee(node.value) == "setup"


def seed_parameters(package: Path = ROOT / "course_utils") -> dict[str, int | None]:
    """Every function of `package` (not its exercises) with a parameter named ``seed``: name -> its position, or None.

    Read from the source, without importing the package. None: ``seed`` is keyword-only.
    """
    found: dict[str, int | None] = {}
    for path in sorted(package.rglob("*.py")):
        if "exercises" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = [a.arg for a in node.args.posonlyargs + node.args.args]
                if "seed" in positional:
                    found[node.name] = positional.index("seed")
                elif "seed" in [a.arg for a in node.args.kwonlyargs]:
                    found[node.name] = None
    return found


#: Calls whose first argument is a seed, besides the course's own.
SEEDING_CALLS = {"manual_seed": 0, "default_rng": 0, "seed": 0, "RandomState": 0}


def _seed_literals(tree: ast.AST, course_seeds: Mapping[str, int | None]) -> list[ast.Constant]:
    """The integer literals of `tree` that seed a generator (see the module's docstring)."""
    found = []
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        name = _callee(call)
        position = SEEDING_CALLS.get(name, course_seeds.get(name)) if name else None
        if position is not None and len(call.args) > position and _int(call.args[position]) is not None:
            found.append(call.args[position])
        found += [kw.value for kw in call.keywords if kw.arg == "seed" and _int(kw.value) is not None]
    return found


def _replace(source: str, edits: Iterable[tuple[ast.AST, str]]) -> str:
    """`source` with each node's text replaced (ast's column offsets count UTF-8 bytes)."""
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    for node, text in sorted(edits, key=lambda e: (e[0].lineno, e[0].col_offset), reverse=True):
        first, last = node.lineno - 1, node.end_lineno - 1
        lines[first:last + 1] = [lines[first][:node.col_offset] + text.encode() + lines[last][node.end_col_offset:]]
    return b"".join(lines).decode()


def shifted(own: Sequence[int], k: int) -> list[int]:
    """Seed set k of a list of seeds: the list shifted by k times its length; set 0 is `own`.

    >>> shifted([0, 1, 2, 3, 4], 0), shifted([0, 1, 2, 3, 4], 2)
    ([0, 1, 2, 3, 4], [10, 11, 12, 13, 14])
    """
    return [seed + k * len(own) for seed in own]


@dataclass
class Seeding:
    """How a notebook's seed sets are made: what the seed cell redoes of the notebook's first code cell.

    Each step is (kind, statement, literal), in the first cell's order: ``"SEED"`` (``SEED = s``) and ``"SEEDS"``
    (``SEEDS = [...]``), whose literal moves with the set; ``"setup"`` (``rng = cu.setup(seed=s)``, `literal` the
    seed or None where none is given: 0); ``"redo"``, a statement redone as it stands because it reads a name
    set before it (``rng = cu.setup(seed=SEED)``).
    """

    first: int  # index of the first code cell
    steps: list[tuple[str, ast.Assign, ast.expr | None]] = field(default_factory=list)

    def cell(self, k: int) -> str:
        """The source of the cell inserted after the first code cell for seed set k."""
        lines = [f"# inserted by tools/robustness.py: seed set {k}"]
        for kind, statement, literal in self.steps:
            if kind in ("SEED", "SEEDS"):
                lines.append(f"{kind} = {_shift(literal, k)}")
            elif kind == "setup":
                statement = copy.deepcopy(statement)
                call = statement.value
                call.args, call.keywords = call.args[1:], [kw for kw in call.keywords if kw.arg != "seed"]
                call.keywords.insert(0, ast.keyword("seed", ast.Constant((_int(literal) or 0) + k)))
                lines.append(ast.unparse(statement))
            else:
                lines.append(ast.unparse(statement))
        return "\n".join(lines)

    def changes(self) -> list[str]:
        """What the inserted cell changes, in words."""
        said = []
        for kind, statement, literal in self.steps:
            if kind == "SEEDS":
                said.append(f"first code cell: `SEEDS = {_int_list(literal)}` → that list + {len(literal.elts)}·k")
            elif kind == "SEED":
                said.append(f"first code cell: `SEED = {literal.value}` → {literal.value} + k")
            elif kind == "setup":
                said.append(f"first code cell: `{ast.unparse(statement)}` → seed {_int(literal) or 0} + k")
            else:
                said.append(f"first code cell: `{ast.unparse(statement)}` → redone after those")
        return said


def _setup_seed(call: ast.Call) -> ast.expr | None:
    """The seed argument of a ``setup(...)`` call, if it has one."""
    return call.args[0] if call.args else next((kw.value for kw in call.keywords if kw.arg == "seed"), None)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def seeding(nb: nbformat.NotebookNode) -> Seeding:
    """Read how `nb` is seeded (its first code cell); ValueError where nothing there seeds it.

    In order, the first cell's top-level ``SEED = s`` and ``SEEDS = [...]`` (literals), its ``rng = cu.setup(...)``
    (a literal seed or none), and every assignment that reads a name one of those set, such as
    ``rng = cu.setup(seed=SEED)`` or ``SEEDS = list(range(5 * SEED, 5 * SEED + 5))``.
    """
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()), None)
    if first is None:
        raise ValueError("no code cell")
    plan, redone = Seeding(first), set()
    for statement in ast.parse(nb.cells[first].source).body:
        if not isinstance(statement, ast.Assign):
            continue
        literals = [(name, v) for name in ("SEED", "SEEDS") for v in _assigned(statement, name)
                    if (_int(v) if name == "SEED" else _int_list(v)) is not None]
        if literals:
            plan.steps += [(name, statement, value) for name, value in literals]
            redone |= {name for name, _ in literals}
        elif _is_setup(statement) and not _names(_setup_seed(statement.value) or ast.Constant(0)) & redone:
            seed = _setup_seed(statement.value)
            if seed is not None and _int(seed) is None:
                raise ValueError(f"its first code cell seeds setup() with `{ast.unparse(seed)}`, which no SEED sets")
            plan.steps.append(("setup", statement, seed))
            redone |= {n for t in statement.targets for n in _names(t)}
        elif _names(statement.value) & redone:
            plan.steps.append(("redo", statement, None))
            redone |= {n for t in statement.targets for n in _names(t)}
    if not plan.steps:
        raise ValueError("its first code cell sets neither SEED = s, SEEDS = [...] nor rng = cu.setup(seed=s): "
                         "nothing to vary")
    return plan


def seed_notebook(nb: nbformat.NotebookNode, k: int,
                  course_seeds: Mapping[str, int | None] | None = None) -> tuple[nbformat.NotebookNode, list[str]]:
    """A copy of `nb` for seed set k, and what a seed set changes in it, in words.

    The seed cell is inserted after the first code cell, and every later literal seed shifted (see the module's
    docstring). ValueError where the first code cell seeds nothing.
    """
    course_seeds = seed_parameters() if course_seeds is None else course_seeds
    plan = seeding(nb)
    nb, changes = copy.deepcopy(nb), plan.changes()
    for cell in nb.cells[plan.first + 1:]:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:  # IPython syntax (%magic, !command): its seeds, if any, stay as they are
            changes.append(f"cell {cell.get('id')}: not Python (IPython syntax?), its seeds are not varied")
            continue
        edits = [(node, _shift(node, k)) for node in _seed_assignments(tree) + _seed_literals(tree, course_seeds)]
        for node, _ in edits:
            context = cell.source.splitlines()[node.lineno - 1].strip()
            rule = f"+ {len(_int_list(node))}·k" if isinstance(node, ast.List) else "+ k"
            changes.append(f"cell {cell.get('id')}: `{ast.get_source_segment(cell.source, node)}` "
                           f"in `{context[:90]}{'…' if len(context) > 90 else ''}` → {rule}")
        cell.source = _replace(cell.source, edits)
    nb.cells.insert(plan.first + 1, nbformat.v4.new_code_cell(plan.cell(k), id=SEED_CELL_ID))
    return nb, changes


# --- one execution ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One execution of one notebook on one seed set and one code path."""

    notebook: str
    seed_set: int
    path: str
    conclusions: dict[tuple[str, int], tuple[str, bool]] = field(default_factory=dict)  # (cell id, order) -> verdict
    error: str | None = None
    wall: float = 0.0
    cpu: float = 0.0


def kernel_environment(path_env: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The kernel's whole environment: the caller's, less any path setting, plus the path's, with one thread."""
    env = {key: value for key, value in environ.items() if key not in PATH_SETTINGS}
    return {**env, "OMP_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1", "JUPYTER_PREFER_ENV_PATH": "1",
            **path_env}


def _cpu_seconds() -> float:
    """CPU time of this process and of every child it has waited for (the kernels)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _error(nb: nbformat.NotebookNode, exc: Exception) -> str:
    for cell in nb.cells:
        if cell.cell_type == "code" and "raises-exception" not in cell.metadata.get("tags", []):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    return f"cell {cell.get('id')}: {out.get('ename')}: {out.get('evalue')}"
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"


def execute(notebook: str, nb: Mapping, folder: str, seed_set: int, path_name: str, path_env: Mapping[str, str],
            timeout: int = CELL_TIMEOUT) -> Run:
    """Execute `nb` (a notebook of `folder`, as a dict) on seed set `seed_set` with the code path's settings."""
    run = Run(notebook, seed_set, path_name)
    started, cpu_before = time.monotonic(), _cpu_seconds()
    nb = nbformat.from_dict(nb)
    try:
        nb, _ = seed_notebook(nb, seed_set)
        run_notebook(nb, folder, timeout=timeout, env=kernel_environment(path_env))  # as make outputs runs it
    except Exception as exc:  # noqa: BLE001 - a cell's error, a timeout, a dead kernel: all are reported
        run.error = _error(nb, exc)
    for index, cell in enumerate(nb.cells):  # a cell without an id (nbformat < 4.5): its place, seed cell included
        if cell.cell_type == "code":
            for order, verdict in enumerate(cell_conclusions(cell)):
                run.conclusions[cell.get("id") or f"cell {index}", order] = verdict
    run.wall, run.cpu = time.monotonic() - started, _cpu_seconds() - cpu_before
    return run


# --- all of them -----------------------------------------------------------------------------------------------


def notebook_path(name: str, folder: Path = ROOT / "notebooks") -> Path:
    """A notebook by name (``08_scale_in_training``), file name or path."""
    path = Path(name)
    if path.suffix == ".ipynb" and path.exists():
        return path
    return folder / (path.stem + ".ipynb")


def _execute_one(job: str) -> None:
    """Run one execution described by `job` (JSON: :func:`execute`'s arguments) here; print its :class:`Run` as JSON."""
    run = execute(**json.loads(job))
    run.cpu = _cpu_seconds()  # all of this process's work, its start and imports included, and its kernel's
    print(json.dumps({**asdict(run), "conclusions": [[*key, *verdict] for key, verdict in run.conclusions.items()]}))


def _in_subprocess(job: dict) -> Run:
    """:func:`execute` in a process of its own (whose CPU time includes its kernel's); wall time from here."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--execute-one"], input=json.dumps(job),
                          cwd=ROOT, capture_output=True, text=True)
    try:
        result = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return Run(job["notebook"], job["seed_set"], job["path_name"], error=f"the harness failed: {tail}",
                   wall=time.monotonic() - started)
    conclusions = {(cell, order): (statement, holds) for cell, order, statement, holds in result.pop("conclusions")}
    return Run(**{**result, "conclusions": conclusions, "wall": time.monotonic() - started})


def run_all(notebooks: Sequence[str | Path], seed_sets: int, paths: Mapping[str, Mapping[str, str]], jobs: int = 2,
            timeout: int = CELL_TIMEOUT, log=lambda line: print(line, flush=True)) -> tuple[list[Run], dict[str, list[str]]]:
    """Every (notebook, seed set, path), `jobs` at a time; the runs, and what each notebook's seed sets change."""
    course_seeds = seed_parameters()
    work, changes, runs = [], {}, []
    for name in notebooks:
        path = notebook_path(str(name))
        try:  # read once: every run executes this version, even if the file changes meanwhile
            nb = nbformat.read(path, as_version=4)
            changes[path.stem] = seed_notebook(nb, 1, course_seeds)[1]
        except (ValueError, SyntaxError, OSError) as exc:
            runs.append(Run(path.stem, 0, "-", error=f"cannot seed it: {exc}"))
            changes[path.stem] = []
            continue
        for cell in nb.cells:  # the stored outputs: not needed, and large
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        work += [dict(notebook=path.stem, nb=nb, folder=str(path.parent.resolve()), seed_set=k, path_name=p,
                      path_env=dict(env), timeout=timeout) for k in range(seed_sets) for p, env in paths.items()]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        pending = [pool.submit(_in_subprocess, job) for job in work]
        for done, future in enumerate(as_completed(pending), 1):
            run = future.result()
            runs.append(run)
            held = sum(ok for _, ok in run.conclusions.values())
            log(f"[{done}/{len(work)}] {run.notebook} set {run.seed_set} {run.path}: {held} ✓ {len(run.conclusions) - held} ✗"
                f"{' ERROR ' + run.error if run.error else ''} ({run.wall:.0f} s, {run.cpu:.0f} s of CPU)")
    return runs, changes


@dataclass
class Row:
    """One conclusion of one notebook over every run."""

    key: tuple[str, int]
    statement: str
    varies: bool = False
    fails: dict[str, list[int]] = field(default_factory=dict)  # path -> seed sets where it printed ✗
    missing: dict[str, list[int]] = field(default_factory=dict)  # path -> seed sets where it was not printed

    @property
    def holds(self) -> bool:
        return not any(self.fails.values()) and not any(self.missing.values())


def rows(runs: Sequence[Run], paths: Sequence[str]) -> list[Row]:
    """The conclusions of one notebook's runs, in notebook order (as the first run to print each one printed it)."""
    order = sorted(runs, key=lambda r: (r.seed_set, paths.index(r.path) if r.path in paths else len(paths)))
    table: dict[tuple[str, int], Row] = {}
    for run in order:
        for key, (statement, _) in run.conclusions.items():
            row = table.setdefault(key, Row(key, statement))
            row.varies |= statement != row.statement
    for row in table.values():
        for run in order:
            verdict = run.conclusions.get(row.key)
            if verdict is None:
                row.missing.setdefault(run.path, []).append(run.seed_set)
            elif not verdict[1]:
                row.fails.setdefault(run.path, []).append(run.seed_set)
    return list(table.values())


def verdict_cell(row: Row, path: str, sets: Sequence[int]) -> str:
    """``10/10``, or ``9/10 (fails: set 3)``, with the sets where the line was missing."""
    fails, missing = row.fails.get(path, []), row.missing.get(path, [])
    held = len(sets) - len(fails) - len(missing)
    notes = [f"{what}: set{'s' if len(which) > 1 else ''} {', '.join(map(str, which))}"
             for what, which in (("fails", fails), ("missing", missing)) if which]
    return f"{held}/{len(sets)}" + (f" ({'; '.join(notes)})" if notes else "")


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def versions() -> str:
    import numpy
    import torch

    return f"Python {platform.python_version()}, NumPy {numpy.__version__}, PyTorch {torch.__version__}"


def report(runs: Sequence[Run], changes: Mapping[str, Sequence[str]], seed_sets: int,
           paths: Mapping[str, Mapping[str, str]], command: str, wall: float, machine: str, software: str,
           date: str) -> tuple[str, list[str]]:
    """The Markdown report, and one line per failure (a conclusion that failed or went missing, an error)."""
    names = list(paths)
    sets = list(range(seed_sets))
    cpu_total = sum(r.cpu for r in runs)
    lines = [
        "# Robustness of the lessons' conclusions",
        "",
        "Every `conclude` line of each notebook below, over seed sets and this CPU's code paths "
        "(`tools/robustness.py`, run by `make robust` after `make test` in CI). A cell reads *held/runs*: "
        "a conclusion passes only where it holds in every seed set on every path.",
        "",
        f"- Command: `{command}`",
        f"- Machine: {machine}; {software}; {date}",
        f"- Cost: {len(runs)} executions in {wall:.0f} s of wall time, {cpu_total:.0f} s of CPU",
        "- Code paths: " + "; ".join(f"**{name}**: " + (", ".join(f"`{k}={v}`" for k, v in env.items()) or "no setting")
                                     for name, env in paths.items()),
        "",
        "| notebook | executions | wall per execution (s) | CPU per execution (s) | wall, all (s) | CPU, all (s) |",
        "|---|---|---|---|---|---|",
    ]
    by_notebook: dict[str, list[Run]] = {}
    for run in runs:
        by_notebook.setdefault(run.notebook, []).append(run)
    for name, group in by_notebook.items():
        walls, cpus = [r.wall for r in group], [r.cpu for r in group]
        lines.append(f"| {name} | {len(group)} | {sum(walls) / len(group):.1f} (max {max(walls):.1f}) | "
                     f"{sum(cpus) / len(group):.1f} | {sum(walls):.0f} | {sum(cpus):.0f} |")
    failures = []
    for name, group in by_notebook.items():
        lines += ["", f"## {name}", ""]
        lines += ["What seed set k changes:", ""] + [f"- {change}" for change in changes.get(name, [])] + [""]
        table = rows(group, names)
        if table:
            lines += ["| # | conclusion (cell id·place) | " + " | ".join(names) + " | all |",
                      "|---|---|" + "---|" * len(names) + "---|"]
            for i, row in enumerate(table, 1):
                total = len(sets) * len(names)
                held = total - sum(map(len, row.fails.values())) - sum(map(len, row.missing.values()))
                lines.append(f"| {i} | {_escape(row.statement)}{' (text varies by set)' if row.varies else ''} "
                             f"({row.key[0]}·{row.key[1] + 1}) | " + " | ".join(verdict_cell(row, p, sets) for p in names)
                             + f" | {'✓' if row.holds else f'✗ {held}/{total}'} |")
                if not row.holds:
                    failures.append(f"{name}: conclusion {i} ({row.key[0]}·{row.key[1] + 1}) {row.statement!r}: "
                                    + "; ".join(f"{p} {verdict_cell(row, p, sets)}" for p in names
                                                if row.fails.get(p) or row.missing.get(p)))
        else:
            lines.append("No `conclude` line: nothing to check.")
        errors = sorted((r for r in group if r.error), key=lambda r: (r.seed_set, r.path))
        if errors:
            lines += ["", "Errors:", ""] + [f"- set {r.seed_set}, {r.path}: {_escape(r.error)}" for r in errors]
            failures += [f"{name}: set {r.seed_set}, {r.path}: {r.error}" for r in errors]
    lines += ["", f"**{'Every conclusion held in every run.' if not failures else f'{len(failures)} failure(s).'}**", ""]
    if failures:
        lines += ["A conclusion that does not hold in every run is to be restated as what does hold: the fraction of "
                  "runs it holds in (the *all* column), or an interval that excludes 0 on every path.", ""]
    return "\n".join(lines), failures


# --- the unit tests on the other paths -------------------------------------------------------------------------


def unit_tests(paths: Mapping[str, Mapping[str, str]]) -> int:
    """make test's unit stage on each path but native, one after the other, with 2 threads; 0 if all passed."""
    command = run_checks.stages([])["unit"][0]
    results = []
    for name, env in paths.items():
        if name == "native":
            continue
        print(f"--- unit tests and doctests, {name} path: {' '.join(f'{k}={v}' for k, v in env.items())}", flush=True)
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=ROOT, env={**kernel_environment(env), "OMP_NUM_THREADS": "2"})
        _, status, usage = os.wait4(process.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        results.append((name, code, time.monotonic() - started, usage.ru_utime + usage.ru_stime))
    for name, code, took, cpu_s in results:
        print(f"unit tests, {name} path: {'passed' if code == 0 else 'FAILED'} after {took:.0f} s ({cpu_s:.0f} s of CPU)")
    return 0 if all(code == 0 for _, code, _, _ in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--execute-one"]:  # one execution, for run_all: the job comes on stdin
        _execute_one(sys.stdin.read())
        return 0
    available = run_checks.cpu_paths()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--notebooks", nargs="+", default=NOTEBOOKS, help="names, files or paths (default: %(default)s)")
    parser.add_argument("--seed-sets", type=int, default=10, help="seed sets per path (default: %(default)s)")
    parser.add_argument("--paths", nargs="+", default=list(available), choices=list(available),
                        help="code paths (default: every distinct path of this CPU: %(default)s)")
    parser.add_argument("--jobs", type=int, default=2, help="executions at once (default: %(default)s)")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="the Markdown report (default: benchmarks/robustness.md)")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT, help="seconds per cell (default: %(default)s)")
    parser.add_argument("--unit-tests", action="store_true", help="run the unit tests on the other code paths instead")
    args = parser.parse_args(argv)
    paths = {name: available[name] for name in args.paths}
    if args.unit_tests:
        return unit_tests(paths)
    if args.seed_sets < 1:
        parser.error("--seed-sets must be at least 1")
    started = time.monotonic()
    runs, changes = run_all(args.notebooks, args.seed_sets, paths, args.jobs, args.cell_timeout)
    command = "python tools/robustness.py " + " ".join(
        ["--notebooks", *map(str, args.notebooks), "--seed-sets", str(args.seed_sets), "--paths", *args.paths,
         "--jobs", str(args.jobs)])
    text, failures = report(runs, changes, args.seed_sets, paths, command, time.monotonic() - started, cpu(), versions(),
                            datetime.date.today().isoformat())
    args.output.write_text(text, encoding="utf-8")
    print(f"\n{text}\nwritten to {args.output}")
    if failures:
        print("\nFAILED:\n" + "\n".join(f"- {line}" for line in failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
