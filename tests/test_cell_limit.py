"""The hang check of `make test` and `make stress`: strict nbval with the Makefile's cell limit fails a cell that outlasts it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()


def test_the_makefile_gives_every_cell_at_most_30_seconds():
    assert re.search(r"^CELL_LIMIT := 30$", MAKEFILE, re.MULTILINE)
    nbval = re.search(r"^NBVAL := (.*)$", MAKEFILE, re.MULTILINE).group(1)
    assert "--nbval-cell-timeout=$(CELL_LIMIT)" in nbval and "--nbval " in nbval + " "


def test_a_cell_that_outlasts_the_limit_fails_nbval(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(8)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "hangs.ipynb")
    nbval = re.search(r"^NBVAL := (.*)$", MAKEFILE, re.MULTILINE).group(1)
    args = nbval.replace("$(CELL_LIMIT)", "2").replace("tests/sanitize.cfg", str(ROOT / "tests" / "sanitize.cfg")).split()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *args, "hangs.ipynb"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "1 failed" in done.stdout
