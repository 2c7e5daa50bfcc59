"""The stress check of tools/stress.py fails a notebook whose cell outlasts the limit."""

from __future__ import annotations

import sys
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))  # the tools are scripts, not a package
import stress  # noqa: E402


def test_the_stress_check_fails_a_notebook_whose_cell_outlasts_the_limit(tmp_path, capsys):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time; time.sleep(5)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    code = stress.main([str(path), "--rounds", "1", "--parallel", "1", "--burners", "0", "--cell-limit", "2"])
    out = capsys.readouterr().out
    assert code == 1
    assert "HANG or FAILURE" in out and "slow.ipynb" in out
