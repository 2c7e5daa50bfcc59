"""make test's driver (tools/run_checks.py): its stages run side by side, the sliders wait for quiet, any failure fails it."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import run_checks  # noqa: E402


def _stage(code: str) -> tuple[list[str], dict[str, str]]:
    return [sys.executable, "-c", code], {}


def _stages(tmp_path: Path, unit_exit: int = 0, nbval_seconds: float = 0.8) -> dict:
    """Stand-in stages that leave marks in tmp_path: when each ran, and what the browser saw.

    The stand-in for nbval outlasts the unit tests' by `nbval_seconds`, so that the burner has time to start.
    """
    mark = f"import os, pathlib, time; d = pathlib.Path({str(tmp_path)!r}); quiet = pathlib.Path(os.environ['COURSE_QUIET_FILE'])\n"
    return {
        "unit": _stage(mark + f"(d / 'unit-saw-busy').write_text(str(quiet.exists())); (d / 'unit-nice').write_text(str(os.nice(0)))\n"
                       "time.sleep(0.1)\n"
                       f"(d / 'unit-ended').touch(); raise SystemExit({unit_exit})"),
        "nbval": _stage(mark + f"(d / 'nbval-nice').write_text(str(os.nice(0))); time.sleep({nbval_seconds}); (d / 'nbval-ended').touch()"),
        "browser": _stage(mark + "(d / 'browser-started').touch()\n"
                          "while quiet.exists(): time.sleep(0.05)\n"
                          "(d / 'browser-timed-after').write_text(' '.join(sorted(p.name for p in d.glob('*-ended'))))"),
    }


def test_the_stages_start_together_and_the_sliders_wait_until_unit_and_nbval_have_ended(tmp_path, capsys):
    burner = [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(tmp_path)!r}, 'burned').touch(); time.sleep(60)"]
    assert run_checks.run(_stages(tmp_path), burner=burner) == 0
    assert (tmp_path / "unit-saw-busy").read_text() == "True"
    assert (tmp_path / "browser-timed-after").read_text() == "nbval-ended unit-ended"
    assert (tmp_path / "burned").exists(), "the burner must take over when the unit tests end before nbval"
    base = os.nice(0)
    assert int((tmp_path / "unit-nice").read_text()) == base
    assert int((tmp_path / "nbval-nice").read_text()) == min(base + run_checks.NICENESS, 19), "the unit tests go first"
    out = capsys.readouterr().out
    assert "unit: passed" in out and "nbval: passed" in out and "browser: passed" in out
    assert re.search(r"^nbval: passed after \d+ s \(\d+ s of CPU\)$", out, re.M), "each stage's time and CPU time"


@pytest.mark.parametrize("failing", ["unit", "nbval", "browser"])
def test_any_failing_stage_fails_make_test_and_says_which(tmp_path, capsys, failing):
    stages = _stages(tmp_path, unit_exit=3 if failing == "unit" else 0, nbval_seconds=0.1)
    if failing != "unit":
        command, env = stages[failing]
        stages[failing] = ([*command[:-1], command[-1] + "\nraise SystemExit(3)"], env)
    assert run_checks.run(stages, burner=[sys.executable, "-c", "pass"]) == 1
    assert f"{failing}: FAILED" in capsys.readouterr().out


def test_make_test_runs_the_driver_with_the_makefiles_nbval_options():
    makefile = (ROOT / "Makefile").read_text()
    assert "\t@$(PY) tools/run_checks.py $(NBVAL)\n" in makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0] + "\n"
    nbval = run_checks.stages(["--nbval", "--nbval-cell-timeout=30"], beside_browser=False)["nbval"]
    assert nbval[0][-3:] == ["--nbval", "--nbval-cell-timeout=30", "notebooks"] and nbval[1] == {"OMP_NUM_THREADS": "2", **run_checks.other_cpu_path()}


def test_every_notebook_is_rerun_once_by_nbval_or_by_the_browser_on_the_other_cpus_paths():
    import importlib

    beside = run_checks.stages(["--nbval"])
    by_nbval = {Path(a).name for a in beside["nbval"][0] if a.startswith("notebooks/")}
    by_browser = set(run_checks.browser_notebooks())
    every = {p.name for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert by_nbval | by_browser == every and not by_nbval & by_browser
    assert beside["browser"][1] == beside["nbval"][1] == {"OMP_NUM_THREADS": "2", **run_checks.other_cpu_path()}
    sys.path.insert(0, str(ROOT / "tests"))
    assert set(importlib.import_module("test_browser").NOTEBOOKS) == by_browser  # the browser runs just those


@pytest.mark.parametrize("name", ["unit", "nbval", "browser"])
def test_make_runs_each_stage_alone_as_the_driver_defines_it(tmp_path, name):
    makefile = (ROOT / "Makefile").read_text()
    target = makefile.split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]
    assert f"\t@$(PY) tools/run_checks.py --stage {name} $(NBVAL)" in target
    stages = {other: ([sys.executable, "-c", f"import os, pathlib; pathlib.Path({str(tmp_path)!r}, {other!r}).write_text("
                       f"os.environ.get('MARK', ''))"], {"MARK": other.upper()}) for other in ["unit", "nbval", "browser"]}
    assert run_checks.run_stage(name, stages) == 0
    assert [p.name for p in tmp_path.iterdir()] == [name] and (tmp_path / name).read_text() == name.upper()


def test_nbval_and_the_browser_run_the_notebooks_on_the_code_paths_of_another_cpu():
    _, env = run_checks.stages(["--nbval"])["nbval"]
    assert env["ATEN_CPU_CAPABILITY"] in {"avx2", "default"} and env["OMP_NUM_THREADS"] == "2"
    command, browser_env = run_checks.stages(["--nbval"])["browser"]
    assert command[-1] == "tests/test_browser.py" and browser_env == env


AVX512 = (["X86_V3", "X86_V4", "AVX512_ICL", "AVX512_SPR"], ["AVX", "AVX2", "X86_V3", "AVX512F", "X86_V4", "AVX512_ICL"])


@pytest.mark.parametrize(("dispatch", "found", "machine", "environ", "expected"), [
    # AVX-512 (an Intel Xeon): down to AVX2, the paths of an AMD EPYC; only the features it has are named.
    (*AVX512, "x86_64", {}, {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL", "ATEN_CPU_CAPABILITY": "avx2",
                             "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell"}),
    # AVX2 only: down to the baseline.
    (AVX512[0], ["AVX", "AVX2", "X86_V3"], "x86_64", {}, {"NPY_DISABLE_CPU_FEATURES": "X86_V3", "ATEN_CPU_CAPABILITY": "default",
                                                         "MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Sandybridge"}),
    # arm64: NumPy's baseline, no MKL; an OPENBLAS_CORETYPE set by the machine is left as it is.
    (["ASIMDHP", "ASIMDDP", "SVE"], ["ASIMDHP", "ASIMDDP"], "aarch64", {"OPENBLAS_CORETYPE": "NEOVERSEN1"},
     {"NPY_DISABLE_CPU_FEATURES": "ASIMDHP ASIMDDP", "ATEN_CPU_CAPABILITY": "default"}),
    # Nothing dispatched to disable.
    (["X86_V3"], [], "x86_64", {}, {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Nehalem"}),
])
def test_other_cpu_path_goes_one_level_down(dispatch, found, machine, environ, expected):
    assert run_checks.other_cpu_path(dispatch, found, machine, environ) == expected


def test_other_cpu_path_changes_what_numpy_runs_here():
    """The settings for this machine are accepted by NumPy, and turn off every feature they name."""
    import subprocess

    env = run_checks.other_cpu_path()
    code = "from numpy._core import _multiarray_umath as m; print(' '.join(k for k, v in m.__cpu_features__.items() if v))"
    found = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout.split()
    assert not set(env.get("NPY_DISABLE_CPU_FEATURES", "").split()) & set(found)
