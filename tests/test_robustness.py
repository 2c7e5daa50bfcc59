"""The robustness check (tools/robustness.py): which lines are conclusions, the seed sets, the table, the exit status.

No lesson is run here (make robust runs them all); one tiny notebook made in tmp_path is executed twice.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_utils import check_claim, conclude, cross_check, exercises

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import robustness  # noqa: E402
import run_checks  # noqa: E402


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_only_the_lines_of_conclude_are_conclusions(capsys):
    conclude("the unscaled arm ends higher: in all 5 seeds", True)
    conclude("every loss is below 1", np.array([0.75, 1.18]) < 1, numbers=[0.75, 1.18])
    conclude("nothing measured", np.array([], dtype=bool))
    held, failed, explanation, empty, _ = _lines(capsys)
    assert [robustness.classify(line) for line in (held, failed, empty)] == ["conclusion"] * 3
    assert explanation.startswith("  ") and robustness.classify(explanation) is None, "the line under a ✗ is no verdict"
    assert robustness.conclusion(held) == ("the unscaled arm ends higher: in all 5 seeds", True)
    assert robustness.conclusion(failed) == ("every loss is below 1", False)
    assert robustness.conclusion(empty) == ("nothing measured", False)

    cross_check([0.1 + 0.2], [0.3], "float sum")
    cross_check([0.5], [0.5], "halves", exact=True)
    cross_check([1.0], [1.0 + 1e-7], "loosely", rtol=1e-6, atol=0)
    assert {robustness.classify(line) for line in _lines(capsys)} == {"cross_check"}
    check_claim("e^1", "2.718", np.e)
    check_claim("softmax(-5) as a percentage", "0.0003%", 3.059e-7)
    assert [robustness.classify(line) for line in _lines(capsys)] == ["claim", "claim"]

    ex = exercises.load("01")
    ex.q2.check(...)
    ex.q2.check([0, 1, 0, 0])
    printed = _lines(capsys)
    printed += ["✓ Correct!", "✓ Correct! Your function passed all 6 test inputs.", "✗ Not yet: 1 of 2 wrong.",
                "✗ The checker could not use your answer (TypeError: no).",
                "✗ Pass your function itself (no parentheses), not a float."]
    assert {robustness.classify(line) for line in printed} == {"exercise"}
    assert robustness.classify("plain text") is None and robustness.classify("✓no space") is None


def test_a_cells_conclusions_are_read_from_stdout_in_order():
    cell = new_code_cell("")
    cell.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text="✓ first\n✓ halves: exact\n✗ sec"),
        nbformat.v4.new_output("stream", name="stdout", text="ond: does NOT hold on this run\n  On this run ...\n"),
        nbformat.v4.new_output("stream", name="stderr", text="✓ not from conclude\n"),
        nbformat.v4.new_output("display_data", data={"text/plain": "✓ not printed"}),
    ]
    assert robustness.cell_conclusions(cell) == [("first", True), ("second", False)]


def _notebook(first: str, *later: str) -> nbformat.NotebookNode:
    return new_notebook(cells=[new_markdown_cell("# a lesson"), new_code_cell(first, id="first"),
                               *(new_code_cell(source, id=f"later{i}") for i, source in enumerate(later))])


SEEDED_LATER = (
    "name = '√d_k'; g = torch.Generator().manual_seed(0)  # non-ASCII before the seed\n"
    "G = np.random.default_rng(4).standard_normal(3)\n"
    "w_q, w_k, labels = init_retrieval_params(D_K, 0); stream = retrieval_batches(0)\n"
    "D_K, SEEDS = 256, [0, 1, 2, 3, 4]\n"
    "explorer = dk_explorer(seed=2); unseeded = np.random.default_rng(); other = f(0)"
)


def test_seed_set_k_shifts_a_lessons_seeds_list_by_k_lengths_and_set_0_is_the_lesson():
    nb = _notebook("import course_utils as cu\nrng = cu.setup(seed=0)\nSEEDS = [0, 1, 2, 3, 4]", "train(SEEDS)")
    for k, seeds in ((0, [0, 1, 2, 3, 4]), (1, [5, 6, 7, 8, 9]), (9, [45, 46, 47, 48, 49])):
        seeded, changes = robustness.seed_notebook(nb, k)
        assert [c.get("id") for c in seeded.cells] == [nb.cells[0].get("id"), "first", robustness.SEED_CELL_ID, "later0"]
        assert seeded.cells[2].source.splitlines()[1:] == [f"rng = cu.setup(seed={k})", f"SEEDS = {seeds}"]
        assert seeded.cells[3].source == "train(SEEDS)" and seeded.cells[1].source == nb.cells[1].source
    assert len(nb.cells) == 3, "the notebook itself is left as it is"
    assert changes == ["first code cell: `rng = cu.setup(seed=0)` → seed 0 + k",
                       "first code cell: `SEEDS = [0, 1, 2, 3, 4]` → that list + 5·k"]


def test_a_lessons_seed_moves_with_the_set_and_what_its_first_cell_draws_from_it_is_redone():
    first = ("SEED = 0  # every draw follows from it\nimport course_utils as cu\nrng = cu.setup(seed=SEED)\n"
             "SEEDS = list(range(5 * SEED, 5 * SEED + 5))\nex = cu.exercises.load('03')\ndraw = rng.normal()\n"
             "def f():\n    return SEED")
    seeded, changes = robustness.seed_notebook(_notebook(first, "g = torch.Generator().manual_seed(SEED)"), 2)
    assert seeded.cells[2].source.splitlines()[1:] == [
        "SEED = 2", "rng = cu.setup(seed=SEED)", "SEEDS = list(range(5 * SEED, 5 * SEED + 5))", "draw = rng.normal()"]
    assert seeded.cells[3].source == "g = torch.Generator().manual_seed(SEED)", "it follows SEED: nothing to shift"
    assert changes[0] == "first code cell: `SEED = 0` → 0 + k" and changes[1].endswith("→ redone after those")


def test_seed_set_k_reseeds_setup_and_every_later_literal_seed():
    nb = _notebook("import course_utils as cu\nrng = cu.setup(threads=1)", SEEDED_LATER, "%timeit f(0)")
    seeded, changes = robustness.seed_notebook(nb, 3)
    assert seeded.cells[2].source.splitlines()[1] == "rng = cu.setup(seed=3, threads=1)"
    assert seeded.cells[3].source == (
        "name = '√d_k'; g = torch.Generator().manual_seed(3)  # non-ASCII before the seed\n"
        "G = np.random.default_rng(7).standard_normal(3)\n"
        "w_q, w_k, labels = init_retrieval_params(D_K, 3); stream = retrieval_batches(3)\n"
        "D_K, SEEDS = 256, [15, 16, 17, 18, 19]\n"
        "explorer = dk_explorer(seed=5); unseeded = np.random.default_rng(); other = f(0)")
    assert seeded.cells[4].source == "%timeit f(0)"
    assert len(changes) == 1 + 6 + 1 and "not varied" in changes[-1]
    assert robustness.seed_notebook(nb, 0)[0].cells[3].source == SEEDED_LATER


@pytest.mark.parametrize(("first", "message"), [
    ("import numpy as np\nrng = np.random.default_rng(0)", "nothing to vary"),
    ("import course_utils as cu\nrng = cu.setup(seed=OTHER)", "which no SEED sets"),
])
def test_a_notebook_whose_first_cell_seeds_nothing_it_can_vary_is_refused(first, message):
    with pytest.raises(ValueError, match=message):
        robustness.seed_notebook(_notebook(first), 1)


@pytest.mark.parametrize("name", robustness.NOTEBOOKS)
def test_every_checked_notebook_can_be_seeded(name):
    plan = robustness.seeding(nbformat.read(ROOT / "notebooks" / f"{name}.ipynb", as_version=4))
    kinds = {kind for kind, _, _ in plan.steps}
    assert kinds & {"SEED", "SEEDS", "setup"}
    if name.startswith("08"):
        assert kinds & {"SEED", "SEEDS"}, "lessons 08 and 08b vary their SEEDS"


def _run(seed_set: int, path: str, verdicts: dict, error: str | None = None) -> robustness.Run:
    return robustness.Run("nb", seed_set, path, {key: (f"statement {key[1]}", ok) for key, ok in verdicts.items()}, error)


def test_the_table_counts_every_seed_set_on_every_path_and_names_the_failing_ones():
    runs = [_run(k, p, {("c", 0): True, ("c", 1): not (k == 3 and p == "avx2")} | ({("d", 0): True} if k != 7 else {}))
            for k in range(10) for p in ("native", "avx2")]
    rows = robustness.rows(runs, ["native", "avx2"])
    assert [row.key for row in rows] == [("c", 0), ("c", 1), ("d", 0)]
    assert [row.holds for row in rows] == [True, False, False]
    sets = range(10)
    assert robustness.verdict_cell(rows[0], "native", sets) == "10/10"
    assert robustness.verdict_cell(rows[1], "avx2", sets) == "9/10 (fails: set 3)"
    assert robustness.verdict_cell(rows[2], "avx2", sets) == "9/10 (missing: set 7)"
    text, failures = robustness.report(runs, {"nb": ["first code cell: ..."]}, 10, {"native": {}, "avx2": {"X": "1"}},
                                       "cmd", 1.0, "a CPU", "versions", "today")
    assert "| 2 | statement 1 (c·2) | 10/10 | 9/10 (fails: set 3) | ✗ 19/20 |" in text
    assert "| 1 | statement 0 (c·1) | 10/10 | 10/10 | ✓ |" in text
    assert len(failures) == 2 and "9/10 (fails: set 3)" in failures[0]
    assert robustness.report(runs[:1], {}, 1, {"native": {}}, "cmd", 1.0, "", "", "")[1] == []


def test_an_error_fails_the_check():
    text, failures = robustness.report([_run(0, "native", {}, error="cell x: NameError: y")], {}, 1, {"native": {}},
                                       "cmd", 1.0, "", "", "")
    assert failures == ["nb: set 0, native: cell x: NameError: y"] and "No `conclude` line" in text


def test_the_kernel_gets_the_paths_settings_and_no_others():
    env = robustness.kernel_environment({"ATEN_CPU_CAPABILITY": "default"},
                                        {"MKL_CBWR": "AVX2", "HOME": "/h", "OMP_NUM_THREADS": "4"})
    assert env["ATEN_CPU_CAPABILITY"] == "default" and env["HOME"] == "/h" and env["OMP_NUM_THREADS"] == "1"
    assert "MKL_CBWR" not in env, "a setting of the caller's must not leak into another path"


def test_the_paths_are_native_avx2_and_baseline_and_each_is_named_once():
    assert doctest.testmod(run_checks).failed == 0
    assert doctest.testmod(robustness).failed == 0
    avx512 = (["X86_V3", "X86_V4", "AVX512_ICL"], ["AVX", "AVX2", "X86_V3", "X86_V4", "AVX512_ICL"])
    paths = run_checks.cpu_paths(*avx512, "x86_64", {})
    assert paths == {"native": {}, "avx2": run_checks.other_cpu_path(*avx512, "x86_64", {}),
                     "baseline": {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL", "ATEN_CPU_CAPABILITY": "default",
                                  "MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Sandybridge"}}
    avx2 = (avx512[0], ["AVX", "AVX2", "X86_V3"])
    assert run_checks.cpu_paths(*avx2, "x86_64", {}) == {"native": {}, "baseline": run_checks.other_cpu_path(*avx2, "x86_64", {})}
    assert "OPENBLAS_CORETYPE" not in run_checks.baseline_cpu_path(*avx512, "x86_64", {"OPENBLAS_CORETYPE": "Zen"})
    arm = run_checks.baseline_cpu_path(["ASIMDHP", "SVE"], ["ASIMDHP"], "aarch64", {})
    assert arm == {"ATEN_CPU_CAPABILITY": "default", "NPY_DISABLE_CPU_FEATURES": "ASIMDHP", "OPENBLAS_CORETYPE": "ARMV8"}


def test_a_conclusion_failing_on_one_seed_set_fails_the_check_with_its_table(tmp_path):
    """Executed: two seed sets of a tiny notebook, at once; the second breaks a conclusion and raises later on."""
    nb = new_notebook(cells=[
        new_markdown_cell("# tiny"),
        new_code_cell("import os\nimport numpy as np\nfrom course_utils import conclude\nSEEDS = [0, 1]", id="setup"),
        new_code_cell("print('✓ halves: exact')\nconclude(f'every seed is below 2 (seeds {SEEDS})', np.array(SEEDS) < 2)\n"
                      "conclude('one thread, and no code path setting on the native path',\n"
                      "         os.environ['OMP_NUM_THREADS'] == '1' and 'NPY_DISABLE_CPU_FEATURES' not in os.environ)",
                      id="checks"),
        new_code_cell("1 / 0", id="skipped", metadata={"tags": ["skip-execution"]}),
        new_code_cell("1 / 0", id="allowed", metadata={"tags": ["raises-exception"]}),
        new_code_cell("assert SEEDS[0] == 0, 'boom'\nconclude('the last cell ran', True)", id="late"),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "tiny.ipynb"
    nbformat.write(nb, path)
    output = tmp_path / "robustness.md"
    code = robustness.main(["--notebooks", str(path), "--seed-sets", "2", "--paths", "native", "--output", str(output)])
    text = output.read_text(encoding="utf-8")
    assert code == 1
    assert "| 1 | every seed is below 2 (seeds [0, 1]) (text varies by set) (checks·1) | 1/2 (fails: set 1) | ✗ 1/2 |" in text
    assert "| 2 | one thread, and no code path setting on the native path (checks·2) | 2/2 | ✓ |" in text
    assert "| 3 | the last cell ran (late·1) | 1/2 (missing: set 1) | ✗ 1/2 |" in text
    assert "- set 1, native: cell late: AssertionError: boom" in text
    assert "| tiny | 2 |" in text and "first code cell: `SEEDS = [0, 1]` → that list + 2·k" in text


def test_make_robust_runs_the_check_and_ci_runs_it_after_make_test():
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split("\nrobust:", 1)[1].split("\n\n", 1)[0]
    assert "tools/robustness.py --unit-tests" in target and "tools/robustness.py $(ROBUST_ARGS)" in target
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.strip().startswith("make")]
    assert ci[:2] == ["make test", "make robust"]  # then make solutions (tests/test_solutions.py)
