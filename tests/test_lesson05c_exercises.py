"""Lesson 05c's exercises: q1 is the measurement, every wrong prediction is named case by case; q2's guard against every backend's empty row."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from course_utils import exercises
from course_utils.backends import MASK_KINDS, OUTCOMES
from course_utils.measured import load_measurements

EX = exercises.load("05c")


def test_q1_reference_is_the_h100_measurement():
    rows = load_measurements()["fully_masked_cuda"]
    measured = {r["mask"]: r["row"] for r in rows if r["backend"] == "cudnn" and r["dtype"] == "bfloat16"}
    assert EX.q1.reference == measured and set(measured) == set(MASK_KINDS)


def test_q1_every_wrong_prediction_of_the_whole_family_is_rejected_and_each_wrong_case_explained():
    for words in itertools.product(OUTCOMES, repeat=len(MASK_KINDS)):
        answer = dict(zip(MASK_KINDS, words))
        verdict = EX.q1.evaluate(answer)
        wrong = [kind for kind in MASK_KINDS if answer[kind] != EX.q1.reference[kind]]
        if not wrong:
            assert verdict.passed
            continue
        assert verdict.status == "incorrect" and f"{len(wrong)} of 4 wrong" in verdict.message
        for kind in wrong:
            assert f"- {kind}: you said {answer[kind]!r}. {EX.q1.why[kind]}" in verdict.message
        for kind in set(MASK_KINDS) - set(wrong):
            assert f"- {kind}:" not in verdict.message


def test_q1_feedback_never_gives_the_answer_away():
    for kind, text in EX.q1.why.items():
        assert EX.q1.reference[kind] not in text, f"the explanation for {kind} names the outcome"


@pytest.mark.parametrize(
    "answer,phrase",
    [
        ("zeros", "give a dict"),
        ({"bool (True=attend)": "zeros"}, "missing"),
        ({**dict.fromkeys(MASK_KINDS, "zeros"), "additive 0": "zeros"}, "is not one of the cases"),
        (dict.fromkeys(MASK_KINDS, "NaN!"), "is not one of"),
    ],
)
def test_q1_a_malformed_prediction_gets_a_sentence(answer, phrase):
    verdict = EX.q1.evaluate(answer)
    assert verdict.status == "incorrect" and phrase in verdict.message


def test_q1_a_partly_filled_starter_is_told_what_is_missing():
    answer = dict(EX.q1.starter) | {"additive -inf": "zeros"}
    assert "missing" in EX.q1.evaluate(answer).message


def test_q2_the_torch_guard_of_the_solution_passes_too():
    guard = lambda out, mask: torch.where(torch.from_numpy(mask).any(-1, keepdim=True), torch.from_numpy(out), 0.0).numpy()  # noqa: E731
    assert EX.q2.evaluate(guard).passed


def test_q2_cases_hold_every_kind_of_empty_row_a_backend_returns():
    kinds = set()
    for case in EX.q2.cases:
        out, mask = case.args
        empty = ~np.broadcast_to(mask.any(axis=-1, keepdims=True), out.shape[:-1] + (1,))[..., 0]
        rows = out[empty]
        if rows.size:
            kinds |= {"nan" if np.isnan(r).any() else "zeros" if (r == 0).all() else "finite" for r in rows}
    assert kinds == {"nan", "zeros", "finite"}


def test_q2_multiplying_by_the_flag_is_told_that_nan_times_0_is_nan():
    message = EX.q2.evaluate(EX.q2.wrong_answers["multiplying by has_key"]).message
    assert "nan * 0 is nan" in message


@pytest.mark.parametrize(
    "guard",
    [lambda out, mask: np.nan_to_num(out, nan=0.0),
     lambda out, mask: np.where(np.isnan(out).any(axis=-1, keepdims=True), 0.0, out)],
    ids=["nan_to_num", "zero the rows that hold a NaN"],
)
def test_q2_a_guard_that_decides_by_the_values_is_named_whichever_way_it_reads_them(guard):
    """The two give the same outputs on every case (a backend's empty row is all NaN or all finite): one name."""
    verdict = EX.q2.evaluate(guard)
    assert not verdict.passed
    assert "deciding by the values, not the mask" in verdict.message
    assert "`np.where(has_key, out, 0.0)`" in verdict.next_step


def test_q2_a_guard_that_rewrites_a_nan_in_a_row_with_a_key_is_rejected_and_named():
    """Review 33, A3: every query that has a key must be left as the backend returned it, NaN included."""
    verdict = EX.q2.evaluate(lambda out, mask: np.nan_to_num(out) * mask.any(axis=-1, keepdims=True))
    assert not verdict and verdict.mistake == "replacing NaN by 0 (`nan_to_num`) in the rows that have a key too"
    assert "they differ where one of them holds nan or inf" in verdict.message
    assert EX.q2.evaluate(lambda out, mask: np.where(mask.any(axis=-1, keepdims=True), out, 0.0)).passed


def test_q1_a_right_prediction_is_accepted_whatever_its_capitals_and_outer_spaces():
    """Review 33 (notes): 'Zeros' and 'as if unmasked ' name the same outcomes as 'zeros' and 'as if unmasked'."""
    answer = {kind: f" {word.capitalize()} " for kind, word in EX.q1.reference.items()}
    assert EX.q1.evaluate(answer).passed
