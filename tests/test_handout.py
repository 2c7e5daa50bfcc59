"""A handout (make handout, or COURSE_HANDOUT=1 on a server) turns hint() and solution() off, never check()."""

from __future__ import annotations

import pytest

from course_utils.exercises import load
from course_utils.exercises.handout import MARKER, OFF, VARIABLE


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _shown(capsys, call) -> str:
    call()
    return capsys.readouterr().out


def test_in_a_handout_folder_hints_and_solutions_are_off_but_checking_works(folder, capsys):
    (folder / MARKER).touch()
    ex = load("01")
    for call in (ex.q2.hint, ex.q2.solution, ex.q1.hint, ex.q1.solution):
        shown = _shown(capsys, call)
        assert OFF.split(".")[0] in shown and "Hint 1" not in shown and "Solution to" not in shown and "np." not in shown
    wrong = ex.q2.check([0, 1, 0, 0])
    assert wrong.status == "incorrect" and "tied" in capsys.readouterr().out  # the mistake is still named
    assert ex.q2.check([0, 0.5, 0.5, 0]) and "✓" in capsys.readouterr().out
    assert not _shown(capsys, ex.q2.hint).startswith("Next step"), "no next step after a check, either"


def test_outside_a_handout_hints_and_solutions_are_shown(folder, capsys):
    ex = load("01")
    assert "Hint 1" in _shown(capsys, ex.q2.hint)
    assert "Solution to 01.q2" in _shown(capsys, ex.q2.solution)


@pytest.mark.parametrize("value,marker,off", [("1", False, True), ("0", True, False), ("true", False, True)])
def test_the_environment_variable_wins_over_the_folder(folder, capsys, monkeypatch, value, marker, off):
    if marker:
        (folder / MARKER).touch()
    monkeypatch.setenv(VARIABLE, value)
    shown = _shown(capsys, load("01").q2.hint)
    assert (OFF.split(".")[0] in shown) == off and ("Hint 1" in shown) != off


def test_a_value_that_is_not_on_or_off_is_an_error_that_names_the_variable(folder, monkeypatch):
    monkeypatch.setenv(VARIABLE, "maybe")
    with pytest.raises(ValueError, match=VARIABLE):
        load("01").q2.solution()
