"""Lesson 06b's exercise references agree with the entmax package, torch autograd and the course's backward passes."""

from __future__ import annotations

import entmax
import numpy as np
import pytest
import torch

from course_utils import entmax15_backward, entmax_bisect, exercises, softmax_backward, sparsemax_backward
from course_utils.exercises.lesson06b import _Q2_PROBE_SETUPS, _Q2_SETUPS
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("06b")
CASES_AND_PROBES = list(zip(_Q2_SETUPS, EX.q2.cases)) + list(zip(_Q2_PROBE_SETUPS, EX.q2.probes))


def test_q1_reference_is_where_the_row_turns_one_hot():
    row = np.array([1.0, 0.2, -0.5])
    alpha = EX.q1.reference
    assert alpha == pytest.approx(2.25)
    assert np.count_nonzero(entmax_bisect(row, alpha=alpha - 0.01)) == 2
    np.testing.assert_array_equal(entmax_bisect(row, alpha=alpha + 1e-9), [1.0, 0.0, 0.0])
    below = entmax.entmax_bisect(torch.from_numpy(row), alpha=alpha - 0.01, dim=-1).numpy()
    assert np.count_nonzero(below) == 2


@pytest.mark.parametrize("setup,case", CASES_AND_PROBES, ids=lambda v: f"alpha={v.args[2]}, n={v.args[0].size}" if hasattr(v, "args") else "")
def test_q2_reference_equals_autograd_through_the_entmax_package(setup, case):
    row, alpha = setup
    g, p, _ = case.args
    x = torch.from_numpy(row).requires_grad_(True)
    out = torch.softmax(x, -1) if alpha == 1.0 else entmax.entmax_bisect(x, alpha, dim=-1, n_iter=60)
    out.backward(torch.from_numpy(g))
    # The package finds tau by 60 halvings (2^-60 ≈ 1e-18) and rounds it by u·|tau|, so its p differs from ours by
    # about 1e-16 relative, and J g by a few 1e-16·max|g| (float64 rounding, u = 2^-53); atol 1e-10 holds with a
    # wide margin and still rejects every wrong reference (1e-8 or more).
    np.testing.assert_allclose(EX.q2.reference(g, p, alpha), x.grad.numpy(), atol=1e-10)


@pytest.mark.parametrize(
    "alpha,backward", [(1.0, softmax_backward), (1.5, entmax15_backward), (2.0, sparsemax_backward)], ids=["softmax", "entmax15", "sparsemax"]
)
def test_q2_reference_unifies_the_three_backward_passes_of_course_utils(alpha, backward):
    case = next(c for c in EX.q2.cases if c.args[2] == alpha)  # the first, on the five-key row
    g, p, _ = case.args
    np.testing.assert_allclose(EX.q2.reference(g, p, alpha), backward(g, p), atol=1e-14)


def test_q2_cases_include_rows_with_exact_zeros_and_rows_without():
    zeros = {case.args[2]: bool((case.args[1] == 0).any()) for case in EX.q2.cases[:5]}
    assert zeros == {1.0: False, 1.3: False, 1.5: True, 1.8: True, 2.0: True}


def test_q2_a_case_has_a_weight_that_is_tiny_but_positive():
    tiny = [p[(p > 0) & (p < np.finfo(np.float64).eps)] for _, p, _ in (c.args for c in EX.q2.cases)]
    assert any(t.size for t in tiny)


SMALL = [1e-3, 1e-6, 1e-9, 1e-12, 1e-15, np.finfo(np.float64).eps]


# The tiny weight is 9.8e-17, so its s = sqrt(p) is 1e-8 at alpha = 1.5: "s > 1e-9" keeps it, rightly.
@pytest.mark.parametrize(
    "how,eps",
    [("p > eps", e) for e in SMALL] + [("p >= eps", e) for e in SMALL] + [("s > eps", 1e-3), ("s > eps", 1e-6), ("~isclose", None)],
)
def test_q2_a_support_test_against_a_small_number_instead_of_0_is_rejected_by_name(eps, how):
    def answer(g, p, alpha):
        s_all = np.where(p > 0, p ** (2.0 - alpha), 0.0)
        if how == "~isclose":
            keep = ~np.isclose(p, 0)
        else:
            keep = {"p > eps": p > eps, "p >= eps": p >= eps, "s > eps": s_all > eps}[how]
        s = np.where(keep, np.where(keep, p, 1.0) ** (2.0 - alpha), 0.0)
        return s * g - (s @ g) / s.sum() * s

    message = EX.q2.evaluate(answer).message
    assert "is tiny but positive" in message
    # The family is named, never one cut-off that the answer did not use (once "p > 0.001" for p > 1e-12).
    if "This is exactly what" in message:
        assert "the support taken as p > a small number instead of p > 0" in message
    assert "0.001" not in message and "1e-06" not in message


def _torch_float32(g, p, alpha):
    g, p = torch.tensor(g.tolist()), torch.tensor(p.tolist())  # lists: torch's default dtype, float32
    s = torch.where(p > 0, p.clamp_min(1e-38) ** (2 - alpha), 0.0)
    return s * g - (s @ g) / s.sum() * s


def _numpy_float32(g, p, alpha):
    g, p = g.astype(np.float32), p.astype(np.float32)
    s = np.where(p > 0, np.where(p > 0, p, 1) ** np.float32(2 - alpha), 0).astype(np.float32)
    return s * g - (s @ g) / s.sum() * s


@pytest.mark.parametrize("answer", [_torch_float32, _numpy_float32], ids=["torch", "numpy"])
def test_q2_a_float32_answer_is_told_it_is_float32_not_that_its_formula_is_wrong(answer):
    assert answer(*EX.q2.cases[0].args).dtype in (np.float32, torch.float32)
    message = EX.q2.evaluate(answer).message
    # Named as float32, by the dtype check or by this exercise's own property, whichever speaks first.
    assert "float32" in message and "sums to" not in message and "differs from" not in message


@pytest.mark.parametrize(
    "answer",
    [
        lambda g, p, a: (np.diag(s := np.where(p > 0, np.where(p > 0, p, 1.0) ** (2 - a), 0.0)) - np.outer(s, s) / s.sum()) @ g,
        lambda g, p, a: (lambda s: s * (g - (s @ g) / s.sum()))(np.where(p > 0, np.abs(p) ** (2 - a), 0.0)),
    ],
    ids=["the full Jacobian", "factored"],
)
def test_q2_other_correct_float64_answers_pass(answer):
    assert EX.q2.evaluate(answer).status == "correct"


# --- q1: where the smallest key leaves; q2: a flipped sign and 1.5-entmax's s -----------------------


def test_q1_the_alpha_where_the_smallest_key_leaves_is_where_the_band_is_centred():
    from course_utils.exercises.lesson06b import _Q1_ROW, _Q1_SMALLEST_BAND, _Q1_SMALLEST_LEAVES
    from course_utils.sparse import entmax_bisect

    assert entmax_bisect(_Q1_ROW, _Q1_SMALLEST_LEAVES - 1e-3)[2] > 0 and entmax_bisect(_Q1_ROW, _Q1_SMALLEST_LEAVES + 1e-3)[2] == 0
    assert _Q1_SMALLEST_BAND[0] < _Q1_SMALLEST_LEAVES < _Q1_SMALLEST_BAND[1] < EX.q1.reference


@pytest.mark.parametrize("answer", [1.5805, 1.58, 1.6, "1.58", np.float32(1.58)])
def test_q1_a_reading_of_where_the_smallest_key_leaves_is_named_with_its_next_step(answer, capsys):
    verdict = EX.q1.check(answer)
    assert not verdict
    assert "where the smallest score, -0.5, leaves the support" in _unwrapped(capsys.readouterr().out)
    assert "`(alpha - 1) * (1.0 - 0.2) = 1`" in verdict.next_step


@pytest.mark.parametrize("answer", [[1.58], 1.5, 2.2])
def test_q1_answers_outside_the_band_or_of_another_shape_are_not_called_the_smallest_key(answer, capsys):
    verdict = EX.q1.check(answer)
    assert not verdict and verdict.mistake is None
    assert "smallest score" not in capsys.readouterr().out


def test_q1_one_plus_the_gap_to_the_smallest_score_is_named(capsys):
    verdict = EX.q1.check(2.5)
    assert not verdict and "`alpha = 1 + 1 / 0.8`" in verdict.next_step
    assert "the gap from 1.0 to the smallest score" in _unwrapped(capsys.readouterr().out)


def test_q2_a_flipped_sign_is_named_with_softmaxs_form_as_the_check(capsys):
    def flipped(g, p, alpha):
        s = np.where(p > 0, p ** (2 - alpha), 0.0)
        return (s @ g) / s.sum() * s - s * g

    verdict = EX.q2.check(flipped)
    assert not verdict and "the sign flipped" in _unwrapped(capsys.readouterr().out)
    assert "`p * g - (p @ g) * p`" in verdict.next_step


def test_q2_the_square_root_for_every_alpha_is_named(capsys):
    verdict = EX.q2.check(lambda g, p, alpha: np.sqrt(p) * g - (np.sqrt(p) @ g) / np.sqrt(p).sum() * np.sqrt(p))
    assert not verdict and "s = sqrt(p) for every alpha" in _unwrapped(capsys.readouterr().out)
    assert "`s = np.where(p > 0, p ** (2 - alpha), 0.0)`" in verdict.next_step


# --- rerun 33: nan or inf is explained by this formula, which has no exp (B6) ------------------------


def test_q2_nan_from_swapped_arguments_is_not_told_to_subtract_the_maximum(capsys):
    def swapped(p, g, alpha):  # the right body, g and p in the other order: s.sum() is 0 on the first case
        s = np.where(p > 0, p ** (2 - alpha), 0.0)
        return s * g - (s @ g) / s.sum() * s

    with np.errstate(all="ignore"):
        verdict = EX.q2.check(swapped)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and "nan" in out
    assert "overflow" not in out and "maximum" not in out
    assert "`s.sum()`" in out and "(g, p, alpha)" in out


def test_q2_a_division_that_is_0_at_alpha_1_is_traced_to_its_line():
    """Review 33, N3: the inf comes from `/ (alpha - 1)`; NumPy's own report names the operation and the line."""
    def divided(g, p, alpha):
        s = np.where(p > 0, p ** (2 - alpha), 0.0)
        return (s * g - (s @ g) / s.sum() * s) / (alpha - 1)

    message = _unwrapped(EX.q2.evaluate(divided).message)
    assert "NumPy reports 'divide by zero encountered in divide'" in message and "(alpha - 1)" in message
