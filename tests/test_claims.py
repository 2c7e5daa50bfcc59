"""check_claim judges a source's number by the digits it states; conclude asserts a lesson's conclusion."""

import math

import numpy as np
import pytest

from course_utils import ConclusionError, check_claim, conclude


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
def test_a_conclusion_that_fails_raises_and_prints_nothing(holds, capsys):
    with pytest.raises(ConclusionError, match="does NOT hold"):
        conclude("the claim", holds)
    assert capsys.readouterr().out == ""


def test_a_failed_array_says_how_many_elements_failed():
    with pytest.raises(ConclusionError, match=r"1 of 3 false"):
        conclude("every seed", np.array([True, False, True]))


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
