"""Run every check of ``make test`` in about two minutes on two cores.

    python tools/run_checks.py NBVAL_OPTION...   # what `make test` runs, with the Makefile's $(NBVAL)
    python tools/run_checks.py --stage NAME NBVAL_OPTION...   # one stage alone: make unit, nbval, browser

Three stages start together:

- **unit**: pytest on ``tests/`` and the doctests of ``course_utils``;
- **nbval**: strict nbval with the given options (the Makefile's, which allow
  no cell more than ``CELL_LIMIT`` seconds) of every notebook the browser does
  not run, with ``OMP_NUM_THREADS=2`` and NumPy, its BLAS and PyTorch sent down
  the code paths of another CPU (:func:`other_cpu_path`), while the stored
  outputs are made with one thread on the machine's own paths
  (``tools/notebooks.py execute``): no stored output may depend on the thread
  count or the instruction set;
- **browser**: the notebooks with sliders, and the start page
  (:func:`browser_notebooks`), in JupyterLab in headless Chromium, Run All,
  three at a time, with the same two threads and other CPU's code paths as
  nbval; each notebook's outputs are then compared with the stored ones as
  strict nbval compares them. So every notebook is rerun once, on the other
  paths; running the browser's notebooks in nbval as well cost 40 s of CPU.
  (``make nbval`` alone runs every notebook.)

So nbval runs its notebooks while the browser runs the slider notebooks
and the unit tests keep the CPUs busy: the load under which an ipykernel 7
widget cell used to hang (issue 16), and the hang check. When the unit tests end before nbval, a
CPU burner takes their place until nbval ends. Only then, with the machine
quiet again, does the browser stage time its sliders (it waits for the file
named by ``COURSE_QUIET_FILE`` to disappear).

Each stage's output is printed when it ends, then one line per stage with
its time and the CPU time it and its processes used; the exit status is 0 only if every stage passed.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
BURNER = [sys.executable, "-c", "while True: pass"]
NICENESS = 19  # of every stage but "unit"
Stages = dict[str, tuple[list[str], dict[str, str]]]


def _numpy_features() -> tuple[list[str], list[str]]:
    """NumPy's dispatched CPU features (in its order, lowest first) and those this CPU has."""
    from numpy._core import _multiarray_umath as umath

    return list(umath.__cpu_dispatch__), [name for name, found in umath.__cpu_features__.items() if found]


def other_cpu_path(dispatch: list[str] | None = None, found: list[str] | None = None,
                   machine: str | None = None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Environment that sends NumPy, its BLAS and PyTorch down the code paths of an older CPU than this one.

    One level down: on an x86-64 CPU with AVX-512 (NumPy's ``X86_V4``), the
    paths of an AVX2 CPU, such as many AMD EPYC and Ryzen; on any other CPU,
    the baseline paths with no dispatched feature at all. Each setting was
    measured to change results here (on a CPU with AVX-512), in the last bits:

    - ``NPY_DISABLE_CPU_FEATURES``: NumPy's ``exp`` and ``log`` (float64; float32
      and ``tanh`` too at baseline). Only features this CPU has are named.
    - ``ATEN_CPU_CAPABILITY``: PyTorch's ``softmax`` kernels.
    - ``MKL_CBWR``: PyTorch's ``exp``, ``log``, ``tanh`` (through MKL's vector
      maths) and its float64 matmul.
    - ``OPENBLAS_CORETYPE``: NumPy's float32 matmul. Left alone where it is
      set already: some machines set it because other kernels compute wrong
      results on them.

    Examples
    --------
    >>> env = other_cpu_path(["X86_V3", "X86_V4", "AVX512_ICL"], ["AVX", "X86_V3", "X86_V4"], "x86_64", {})
    >>> env["NPY_DISABLE_CPU_FEATURES"], env["ATEN_CPU_CAPABILITY"], env["OPENBLAS_CORETYPE"]
    ('X86_V4', 'avx2', 'Haswell')
    """
    if dispatch is None or found is None:
        dispatch, found = _numpy_features()
    machine = (machine or platform.machine()).lower()
    x86 = machine in {"x86_64", "amd64"}
    avx512 = x86 and "X86_V4" in found
    have = [name for name in dispatch if name in found]
    disable = have[have.index("X86_V4"):] if avx512 else have
    env = {"ATEN_CPU_CAPABILITY": "avx2" if avx512 else "default"}
    if disable:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(disable)
    if x86:
        env["MKL_CBWR"] = "AVX2" if avx512 else "COMPATIBLE"
    if "OPENBLAS_CORETYPE" not in environ:
        coretype = ("Haswell" if avx512 else "Sandybridge" if "AVX" in found else "Nehalem") if x86 else \
            "ARMV8" if machine in {"aarch64", "arm64"} else None
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
    return env


def baseline_cpu_path(dispatch: list[str] | None = None, found: list[str] | None = None,
                      machine: str | None = None, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Environment that sends NumPy, its BLAS and PyTorch down their baseline code paths: no dispatched feature.

    The bottom of the ladder whose first step down is :func:`other_cpu_path`,
    with the same four settings: every dispatched NumPy feature this CPU has
    turned off (``NPY_DISABLE_CPU_FEATURES``; on x86-64, NumPy's baseline is
    SSE4.2), PyTorch's ``default`` kernels (``ATEN_CPU_CAPABILITY``), MKL's
    ``COMPATIBLE`` results on x86, and the OpenBLAS core type that
    :func:`other_cpu_path` picks for a CPU without AVX-512, left alone where
    ``OPENBLAS_CORETYPE`` is set already. On a CPU without AVX-512 it is
    :func:`other_cpu_path` itself.

    Examples
    --------
    >>> env = baseline_cpu_path(["X86_V3", "X86_V4", "AVX512_ICL"], ["AVX", "X86_V3", "X86_V4"], "x86_64", {})
    >>> env["NPY_DISABLE_CPU_FEATURES"], env["ATEN_CPU_CAPABILITY"], env["MKL_CBWR"], env["OPENBLAS_CORETYPE"]
    ('X86_V3 X86_V4', 'default', 'COMPATIBLE', 'Sandybridge')
    """
    if dispatch is None or found is None:
        dispatch, found = _numpy_features()
    machine = (machine or platform.machine()).lower()
    x86 = machine in {"x86_64", "amd64"}
    have = [name for name in dispatch if name in found]
    env = {"ATEN_CPU_CAPABILITY": "default"}
    if have:
        env["NPY_DISABLE_CPU_FEATURES"] = " ".join(have)
    if x86:
        env["MKL_CBWR"] = "COMPATIBLE"
    if "OPENBLAS_CORETYPE" not in environ:
        coretype = ("Sandybridge" if "AVX" in found else "Nehalem") if x86 else \
            "ARMV8" if machine in {"aarch64", "arm64"} else None
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
    return env


def cpu_paths(dispatch: list[str] | None = None, found: list[str] | None = None,
              machine: str | None = None, environ: Mapping[str, str] = os.environ) -> dict[str, dict[str, str]]:
    """The distinct code paths this CPU offers, by name, each with the environment that selects it.

    ``native`` (this CPU's own paths: no setting), then one level down
    (:func:`other_cpu_path`, named after the PyTorch kernels it selects:
    ``avx2`` on a CPU with AVX-512), then ``baseline``
    (:func:`baseline_cpu_path`). Where one level down already is the baseline
    (a CPU without AVX-512), the baseline is named once.

    Examples
    --------
    >>> avx512 = cpu_paths(["X86_V3", "X86_V4", "AVX512_ICL"], ["AVX", "X86_V3", "X86_V4"], "x86_64", {})
    >>> list(avx512), avx512["native"], avx512["avx2"]["ATEN_CPU_CAPABILITY"]
    (['native', 'avx2', 'baseline'], {}, 'avx2')
    >>> list(cpu_paths(["X86_V3", "X86_V4", "AVX512_ICL"], ["AVX", "X86_V3"], "x86_64", {}))
    ['native', 'baseline']
    """
    if dispatch is None or found is None:
        dispatch, found = _numpy_features()
    down = other_cpu_path(dispatch, found, machine, environ)
    bottom = baseline_cpu_path(dispatch, found, machine, environ)
    paths: dict[str, dict[str, str]] = {"native": {}}
    if down != bottom:
        paths[down["ATEN_CPU_CAPABILITY"] if down["ATEN_CPU_CAPABILITY"] != "default" else "one level down"] = down
    paths["baseline"] = bottom
    return paths


#: The notebook a learner opens first, which the browser runs beside the slider notebooks.
START = "00_start_here.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def browser_notebooks(folder: Path = ROOT / "notebooks") -> list[str]:
    """The notebooks the browser stage runs in JupyterLab: those with a slider (a stored widget view), and the start page."""
    names = []
    for path in sorted(folder.glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        if path.name == START or any(WIDGET_VIEW in output.get("data", {}) for cell in cells
                                     if cell["cell_type"] == "code" for output in cell["outputs"]):
            names.append(path.name)
    return names


def stages(nbval_options: list[str], *, beside_browser: bool = True) -> Stages:
    """The three stages of make test: name -> (command, extra environment).

    With `beside_browser`, nbval leaves out the notebooks the browser stage runs (on the same code paths and
    threads); without it (``make nbval`` alone), it runs every notebook.
    """
    other = {"OMP_NUM_THREADS": "2", **other_cpu_path()}
    run_in_browser = set(browser_notebooks()) if beside_browser else set()
    notebooks = [f"notebooks/{p.name}" for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name not in run_in_browser]
    return {
        # nbval is not needed to collect the unit tests: without it, pytest starts 1 s sooner.
        "unit": (PYTEST + ["-p", "no:nbval", "-p", "no:logging", "-m", "not browser", "tests", "course_utils", "--doctest-modules"], {"OMP_NUM_THREADS": "1"}),
        "nbval": (PYTEST + nbval_options + (notebooks if beside_browser else ["notebooks"]), other),
        "browser": (PYTEST + ["-m", "browser", "tests/test_browser.py"], other),
    }


def _lower_priority() -> None:
    """Run a stage, and every process it starts, at a lower priority than the unit tests.

    The unit tests are one process, the longest job; the other stages spread over
    both cores. Put first, the unit tests end early and the others fill both
    cores after them, instead of the unit tests running on alone at the end.
    Where Linux groups processes by session for scheduling (autogroup), this
    reaches the stages' own processes (pytest, the server, Chromium) but not the
    notebook kernels, each of which Jupyter starts in a session of its own.
    """
    os.nice(NICENESS)


def run(stages: Stages, burner: list[str] = BURNER) -> int:
    """Start every stage at once; print each one's output as it ends; 0 if all passed.

    Every stage but "unit" runs at niceness ``NICENESS``. The stages named
    "unit" and "nbval" are the busy ones: the file named by
    ``COURSE_QUIET_FILE`` in every stage's environment exists until both have
    ended, and `burner` runs from the end of "unit" to the end of "nbval".
    """
    quiet = Path(tempfile.mkstemp(prefix="course-busy-")[1])  # exists while unit and nbval run
    logs, running, started, took, codes, cpu = {}, {}, time.monotonic(), {}, {}, {}
    for name, (command, env) in stages.items():
        logs[name] = tempfile.TemporaryFile(mode="w+")
        running[name] = subprocess.Popen(command, cwd=ROOT, stdout=logs[name], stderr=subprocess.STDOUT,
                                         env={**os.environ, **env, "COURSE_QUIET_FILE": str(quiet)},
                                         preexec_fn=None if name == "unit" else _lower_priority)
    burning = None
    try:
        while running:
            for name, process in list(running.items()):
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)  # rusage: with every process it reaped
                if pid:
                    process.returncode = codes[name] = os.waitstatus_to_exitcode(status)
                    took[name], cpu[name] = time.monotonic() - started, usage.ru_utime + usage.ru_stime
                    del running[name]
                    logs[name].seek(0)
                    print(f"--- {name}\n{logs[name].read()}", flush=True)
            if "unit" in codes and "nbval" in running and burning is None:
                burning = subprocess.Popen(burner)
            if "unit" in codes and "nbval" in codes and quiet.exists():
                quiet.unlink()  # the browser stage may time its sliders now
                if burning is not None:
                    burning.kill()
            time.sleep(0.1)
    finally:
        for process in [*running.values(), *([burning] if burning else [])]:
            process.kill()
        quiet.unlink(missing_ok=True)
    for name in stages:
        print(f"{name}: {'passed' if codes[name] == 0 else 'FAILED'} after {took[name]:.0f} s ({cpu[name]:.0f} s of CPU)")
    print(f"make test: {time.monotonic() - started:.0f} s")
    return 0 if all(code == 0 for code in codes.values()) else 1


def run_stage(name: str, stages: Stages) -> int:
    """Run one stage alone, in the foreground, with its environment; its exit status."""
    command, env = stages[name]
    return subprocess.call(command, cwd=ROOT, env={**os.environ, **env})


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if sys.argv[1] == "--stage":
        sys.exit(run_stage(sys.argv[2], stages(sys.argv[3:], beside_browser=False)))
    sys.exit(run(stages(sys.argv[1:])))
