"""Maintain the course notebooks: rebuild their headers and re-execute them.

    python tools/notebooks.py headers NOTEBOOK...   # first cell <- metadata["course"]
    python tools/notebooks.py execute NOTEBOOK...   # headers, then a clean Restart & Run All

``make outputs`` runs ``execute`` on every notebook inside .venv. Execution
uses the python3 kernel of this environment, with the notebook's folder as
the working directory, as in JupyterLab. Cells tagged ``skip-execution`` are
not run; cells tagged ``raises-exception`` may raise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from course_utils.course import METADATA_KEY, Lesson, header_markdown, read_course


def sync_header(nb: nbformat.NotebookNode, folder: Path) -> None:
    """Rebuild the first cell from the notebook's lesson record (linking the lessons it requires)."""
    lesson = Lesson.from_metadata(nb.metadata[METADATA_KEY])
    first = nb.cells[0]
    if first.cell_type != "markdown":
        raise SystemExit("the first cell must be the Markdown header")
    first.source = header_markdown(lesson, read_course(folder))


def main(command: str, paths: list[str]) -> None:
    for name in paths:
        path = Path(name)
        nb = nbformat.read(path, as_version=4)
        sync_header(nb, path.parent)
        if command == "execute":
            NotebookClient(
                nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
            ).execute()
        nbformat.write(nb, path)
        print(f"{command}: {path}")


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in {"headers", "execute"}:
        raise SystemExit(__doc__)
    main(sys.argv[1], sys.argv[2:])
