"""check_claim judges a source's number by the digits it states; conclude asserts a lesson's conclusion."""

import math

import numpy as np
import pytest

from course_utils import check_claim, conclude
from course_utils.claims import NOT_SUPPORTED


@pytest.mark.parametrize(
    "stated,computed",
    [
        ("0.422", 0.42232),
        ("[0.212, 0.212, 0.576]", [0.21194, 0.21194, 0.57612]),
        ("22,026", math.exp(10)),
        ("3.3e6", math.exp(15)),
        ("99.995%", 0.9999543),
        ("~0.9998", 0.99975),
    ],
)
def test_a_correctly_rounded_claim_agrees(stated, computed, capsys):
    check_claim("claim", stated, computed)
    assert capsys.readouterr().out.startswith("✓ claim: the source states")


@pytest.mark.parametrize(
    "stated,computed,shown",
    [
        ("0.9999545", 0.99995430, "0.9999543"),
        ("0.0003%", 3.059e-7, "0.000031%"),
        ("[0.106, 0.787, 0.106]", [0.0634, 0.4683, 0.4683], "[0.063, 0.468, 0.468]"),
        ("0.423", 0.42232, "0.422"),
    ],
)
def test_a_wrong_claim_is_flagged_with_the_computed_value(stated, computed, shown, capsys):
    check_claim("claim", stated, computed)
    out = capsys.readouterr().out
    assert out.startswith("✗ claim") and out.rstrip().endswith(f"computed {shown}")


def test_counts_must_match():
    with pytest.raises(ValueError, match="stated holds 2"):
        check_claim("claim", "[1.0, 2.0]", [1.0])


def test_a_claim_needs_a_number():
    with pytest.raises(ValueError, match="stated"):
        check_claim("claim", "a lot", 1.0)


def test_a_nan_or_infinite_computed_value_is_shown_not_crashed_on(capsys):
    check_claim("claim", "[0.5, 0.5]", [float("nan"), float("inf")])
    assert capsys.readouterr().out.rstrip().endswith("computed [nan, inf]")


# conclude: a lesson's conclusion, asserted on every run.

def test_a_conclusion_that_holds_prints_one_line(capsys):
    conclude("in all 5 seeds", np.array([0.4, 0.5, 0.3, 0.2, 0.1]) > 0)
    conclude("a plain bool", True)
    assert capsys.readouterr().out == "✓ in all 5 seeds\n✓ a plain bool\n"


@pytest.mark.parametrize("holds", [False, np.bool_(False), np.array([True, False, True]), np.array([], dtype=bool)])
def test_a_conclusion_that_fails_prints_a_cross_and_its_meaning_and_never_raises(holds, capsys):
    conclude("the claim", holds)  # returns (None) instead of raising: Run All goes on
    out = capsys.readouterr().out
    assert out.startswith("✗ the claim: does NOT hold on this run")
    assert NOT_SUPPORTED in out and "✓" not in out


def test_a_failed_array_says_which_elements_failed_and_shows_the_numbers(capsys):
    conclude("every seed", np.array([0.3, -0.027, 0.1]) > 0, numbers=[0.3, -0.027, 0.1])
    first = capsys.readouterr().out.splitlines()[0]
    assert "(1 of 3 false: position 1); the numbers: [0.3, -0.027, 0.1]" in first
    conclude("a table", np.array([[True, False], [False, True]]))
    assert "(2 of 4 false: positions (0, 1), (1, 0))" in capsys.readouterr().out
    conclude("nothing", np.array([], dtype=bool))
    assert "(nothing was measured)" in capsys.readouterr().out


def test_numbers_are_printed_only_with_a_cross(capsys):
    conclude("fine", True, numbers=[1.0])
    assert capsys.readouterr().out == "✓ fine\n"


def test_a_notebook_runs_on_after_a_failed_conclusion():
    """A learner's Run All must reach the next cell: nothing is raised, whatever the verdict."""
    for holds in (False, np.zeros(3, dtype=bool), np.array([], dtype=bool)):
        conclude("x", holds)  # no exception


@pytest.mark.parametrize(("statement", "holds", "name"), [
    ("", True, "statement"),
    (3, True, "statement"),
    ("ok", 1, "holds"),
    ("ok", np.array([0.5]), "holds"),
    ("ok", None, "holds"),
])
def test_bad_arguments_name_themselves(statement, holds, name):
    with pytest.raises(TypeError, match=name):
        conclude(statement, holds)


def test_numbers_that_are_not_numeric_name_themselves():
    with pytest.raises(TypeError, match="numbers"):
        conclude("ok", False, numbers=["a", "b"])
