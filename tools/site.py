"""Build the course's website, and its handout, from the notebooks' stored outputs.

    python tools/site.py site OUT       # the website: OUT/index.html (make site: build/site)
    python tools/site.py handout OUT    # OUT/notebooks without the answers to discuss, and OUT/site from them
                                        # (make handout: build/handout)

Nothing is re-executed and nothing is fetched: the pages show the outputs stored in the notebooks (``make outputs``
stores them, ``make test`` checks them), with Sphinx, myst-nb and the Sphinx Book theme (docs/conf.py says why).
Before Sphinx runs, every notebook is checked for its outputs: one whose code cells were not run fails the build,
named. Each build starts afresh in a work folder beside OUT (OUT.work: the staged sources, the notebooks and
docs/index.md, and Sphinx's files), and the site then takes OUT's place.

A handout is the course without the answers to the questions to discuss: each ``<details><summary>Answer</summary>
... </details>`` block is removed, its question kept. Its folder of notebooks holds an empty file named
``.course-handout``, which turns ``solution()`` and the hints off in a notebook run there; its site links no Binder,
whose notebooks hold the answers.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from course_utils.exercises.handout import MARKER, VARIABLE

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
DOCS = ROOT / "docs"
#: The file whose presence in a notebook's folder makes it a handout (course_utils.exercises.handout reads it).
HANDOUT_MARKER = MARKER
#: An answer to a question to discuss, as every lesson writes it (tests/test_notebooks.py checks each has one).
ANSWER = re.compile(r"[ \t]*<details>\s*<summary>Answer</summary>.*?</details>[ \t]*\n?", re.S)


def unrun_cells(nb: dict[str, Any]) -> list[int]:
    """The code cells (numbered from 1 among the notebook's cells) that should have run but were not.

    A code cell with code, not tagged ``skip-execution``, has an execution count once run, outputs or none. A
    notebook saved with its outputs cleared (JupyterLab's *Clear All Outputs*, nbstripout) has none.

    Examples
    --------
    >>> cell = lambda source, count, tags=(): {"cell_type": "code", "source": source, "execution_count": count,
    ...                                        "outputs": [], "metadata": {"tags": list(tags)}}
    >>> unrun_cells({"cells": [cell("x = 1", 1), cell("", None), cell("y = 2", None), cell("z", None, ["skip-execution"])]})
    [3]
    """
    return [i for i, cell in enumerate(nb["cells"], 1)
            if cell["cell_type"] == "code" and "".join(cell["source"]).strip() and cell.get("execution_count") is None
            and "skip-execution" not in cell.get("metadata", {}).get("tags", [])]


def check_outputs(paths: list[Path]) -> None:
    """Stop, naming each notebook whose outputs are missing (and its first unrun cells) or that cannot be read."""
    problems = []
    for path in paths:
        try:
            missing = unrun_cells(json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, KeyError, TypeError) as error:  # not JSON, or JSON but not a notebook
            problems.append(f"{path.name}: not a notebook ({type(error).__name__}: {error})")
            continue
        if missing:
            shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
            problems.append(f"{path.name}: {len(missing)} code cell(s) without their outputs (cells {shown})")
    if problems:
        raise SystemExit("error: the site shows each notebook's stored outputs, and these notebooks cannot give them "
                         "(store a notebook's outputs with `python tools/notebooks.py execute NOTEBOOK`, or make "
                         "outputs):\n  " + "\n  ".join(problems))


def without_answers(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of the notebook whose Markdown cells keep their questions but not their ``<details>`` answers.

    Examples
    --------
    >>> md = {"cell_type": "markdown", "metadata": {}, "source": "1. Why?\\n<details><summary>Answer</summary>\\n\\nBecause.\\n</details>\\n\\n2. How?\\n"}
    >>> without_answers({"cells": [md]})["cells"][0]["source"]
    '1. Why?\\n\\n2. How?\\n'
    """
    cells = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            cell = {**cell, "source": ANSWER.sub("", "".join(cell["source"]))}
        cells.append(cell)
    return {**nb, "cells": cells}


def write_notebook(nb: dict[str, Any], path: Path) -> None:
    """Write a notebook as the course stores them (nbformat's layout: indent 1, UTF-8, a final newline)."""
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


#: The first line of a handout notebook's first code cell: hints and solutions stay off wherever the notebook goes
#: (downloaded alone, uploaded to a learning platform), not only in the folder that holds the marker.
HANDOUT_LINE = f'import os; os.environ["{VARIABLE}"] = "1"  # your instructor\'s handout: hints and solutions are off'


def marked(nb: dict[str, Any]) -> dict[str, Any]:
    """A copy of the notebook whose first code cell starts by turning hints and solutions off (`HANDOUT_LINE`).

    Examples
    --------
    >>> code = {"cell_type": "code", "metadata": {}, "source": "rng = cu.setup()", "outputs": []}
    >>> marked({"cells": [code]})["cells"][0]["source"].splitlines()[1]
    'rng = cu.setup()'
    """
    cells, done = [], False
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and not done:
            cell, done = {**cell, "source": HANDOUT_LINE + "\n" + "".join(cell["source"])}, True
        cells.append(cell)
    return {**nb, "cells": cells}


def build_site(notebooks: Path, out: Path, *, handout: bool = False) -> None:
    """Build the website of the notebooks in `notebooks` into `out`, from their stored outputs."""
    paths = sorted(notebooks.glob("*.ipynb"))
    if not paths:
        raise SystemExit(f"error: no notebooks in {notebooks}")
    check_outputs(paths)
    work = out.with_name(out.name + ".work")
    source, html = work / "src", work / "html"
    shutil.rmtree(work, ignore_errors=True)
    source.mkdir(parents=True)
    for path in paths:
        shutil.copy2(path, source / path.name)
    shutil.copy2(DOCS / "index.md", source / "index.md")
    # -W: a warning (a link to a lesson that does not exist, an output it cannot show) fails the build. Sphinx builds
    # in the work folder (myst-nb writes files beside its output folder), and the site then takes OUT's place.
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-c", str(DOCS),
               "-d", str(work / "doctrees"), *(["-t", "handout"] if handout else []), str(source), str(html)]
    if subprocess.run(command).returncode:
        raise SystemExit(f"error: sphinx-build failed ({' '.join(command[1:])})")
    shutil.rmtree(out, ignore_errors=True)
    html.rename(out)
    print(f"site: {out / 'index.html'}")


def build_handout(out: Path, notebooks: Path = NOTEBOOKS) -> None:
    """`out`/notebooks: the notebooks without their answers, with the handout marker; `out`/site: their website."""
    check_outputs(sorted(notebooks.glob("*.ipynb")))
    folder = out / "notebooks"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for path in sorted(notebooks.glob("*.ipynb")):
        write_notebook(marked(without_answers(json.loads(path.read_text(encoding="utf-8")))), folder / path.name)
    (folder / HANDOUT_MARKER).touch()
    print(f"handout notebooks: {folder}")
    build_site(folder, out / "site", handout=True)


def main(argv: list[str]) -> None:
    if len(argv) != 2 or argv[0] not in {"site", "handout"}:
        raise SystemExit(__doc__)
    out = Path(argv[1])
    if argv[0] == "site":
        build_site(NOTEBOOKS, out)
    else:
        build_handout(out)


if __name__ == "__main__":
    main(sys.argv[1:])
