"""Run every notebook on the oldest versions the course declares it supports.

    python tools/oldest.py requirements   # pyproject.toml's lower bounds, as exact pins, one per line
    python tools/oldest.py run            # every notebook, Run All with this Python's kernel: errors only

``make oldest`` builds ``.venv-oldest`` from the first and runs the second in it.
The lower bound of each package of the learner's set (the dependencies and the
``lab`` extra) is installed exactly; torch, whose lower bound is the pin of
constraints.txt, is installed as the CPU build by tools/install_torch.py. The
stored outputs are not compared (they are made with the pinned versions): a
notebook passes when every cell runs without an error.
"""

from __future__ import annotations

import re
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELL_LIMIT = 120  # seconds: a hang guard, not a speed target


def lowest_requirements(pyproject: Path = ROOT / "pyproject.toml") -> list[str]:
    """``name==lowest`` for every package of the learner's set but torch, from its ``>=`` bound.

    Examples
    --------
    >>> any(line.startswith("numpy==") for line in lowest_requirements())
    True
    """
    project = tomllib.loads(pyproject.read_text())["project"]
    pins = []
    for requirement in project["dependencies"] + project["optional-dependencies"]["lab"]:
        match = re.match(r"^([A-Za-z0-9_.\-]+)\s*>=\s*([0-9][0-9.]*)", requirement)
        if not match:
            raise ValueError(f"pyproject.toml: {requirement!r} has no lower bound (>=)")
        if match.group(1) != "torch":
            pins.append(f"{match.group(1)}=={match.group(2)}")
    return pins


def run_all(folder: Path = ROOT / "notebooks") -> int:
    """Execute every notebook of `folder` in memory (nothing is written); print one line each; the count that failed."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    failed = 0
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        started = time.monotonic()
        try:
            NotebookClient(nb, timeout=CELL_LIMIT, kernel_name="python3",
                           resources={"metadata": {"path": str(folder)}}).execute()
        except CellExecutionError as error:
            failed += 1
            print(f"FAILED {path.name}: {str(error).strip().splitlines()[-1]}", flush=True)
        else:
            print(f"ok     {path.name} ({time.monotonic() - started:.0f} s)", flush=True)
    return failed


if __name__ == "__main__":
    if sys.argv[1:] == ["requirements"]:
        print("\n".join(lowest_requirements()))
    elif sys.argv[1:] == ["run"]:
        sys.exit(1 if run_all() else 0)
    else:
        raise SystemExit(__doc__)
