"""Whether the course is handed out without its answers: then ``solution()`` and ``hint()`` say they are off.

An instructor turns them off in one of two ways: ``make handout`` puts an empty ``.course-handout`` file in the
handout's notebook folder (notebooks run from there find it in their working folder), or the environment variable
``COURSE_HANDOUT=1`` is set, for example for every kernel of a shared server. ``COURSE_HANDOUT=0`` turns them back on
whatever the folder holds. ``check()`` is never turned off: it still says whether an answer is right and names the
mistake.

Examples
--------
>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> handed_out(folder, environ={})
False
>>> open(os.path.join(folder, MARKER), "w").close()
>>> handed_out(folder, environ={}), handed_out(folder, environ={VARIABLE: "0"}), handed_out(None, environ={VARIABLE: "1"})
(True, False, True)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

__all__ = ["MARKER", "OFF", "VARIABLE", "handed_out"]

#: The file whose presence in the working folder marks a handout (tools/site.py writes it).
MARKER = ".course-handout"
#: The environment variable that turns hints and solutions off ("1") or on ("0") whatever the folder holds.
VARIABLE = "COURSE_HANDOUT"
#: What ``hint()`` and ``solution()`` say in a handout.
OFF = ("Hints and solutions are off for this course (your instructor's handout). `check()` still says whether "
       "your answer is right and names the mistake it finds.")
_NOT_HANDED_OUT, _HANDED_OUT = {"0", "false", "no", "off"}, {"1", "true", "yes", "on"}


def handed_out(folder: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None) -> bool:
    """Whether hints and solutions are off: `VARIABLE` if it is set, else `MARKER` in `folder` (the working folder).

    Raises
    ------
    ValueError
        If `VARIABLE` is set to something other than 1/0 (true/false, yes/no, on/off).
    """
    value = (os.environ if environ is None else environ).get(VARIABLE, "").strip().lower()
    if value in _HANDED_OUT:
        return True
    if value in _NOT_HANDED_OUT:
        return False
    if value:
        raise ValueError(f"the environment variable {VARIABLE} must be 1 (a handout) or 0; got {value!r}")
    return (Path.cwd() if folder is None else Path(folder)).joinpath(MARKER).exists()
