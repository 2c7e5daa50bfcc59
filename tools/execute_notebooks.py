"""Execute notebooks top to bottom in this environment and store their outputs.

Run through ``make outputs``: a clean Restart & Run All for each notebook,
with the working directory set to the notebook's folder, as in JupyterLab.
Cells tagged ``skip-execution`` are not run; ``raises-exception`` cells may raise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def execute(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    nbformat.write(nb, path)
    print(f"executed {path}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        execute(Path(arg))
