"""Lesson 09's exercise references agree with torch, and each checker rejects whole families of near misses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_utils import exercises, sigmoid_attention, softmax_with_sink
from rounding_bounds import exponent_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("09")


# --- q1: the sink softmax ------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_torch_softmax_over_the_padded_scores_with_the_sink_column_dropped(case):
    x, sink = case.args
    t = torch.from_numpy(x)
    padded = torch.cat([t, torch.full((*t.shape[:-1], 1), sink, dtype=t.dtype)], dim=-1)
    # float64 rounding of two softmaxes of the padded row, each weight within exponent_error (relative): up to
    # 5e-12 for scores of size 1000 and more, where rtol 1e-14 held only because those subtractions were exact.
    rtol = 2 * exponent_error(padded.numpy())
    np.testing.assert_allclose(EX.q1.reference(x, sink), torch.softmax(padded, -1)[..., :-1].numpy(), rtol=rtol, atol=1e-300)


def test_q1_cases_include_a_fully_masked_row_huge_scores_and_a_sink_above_every_score():
    args = [c.args for c in EX.q1.cases]
    assert any(np.isneginf(x).all(axis=-1).any() for x, _ in args)
    assert any(np.max(x) >= 1000 for x, _ in args)
    assert any(s > np.max(x) for x, s in args)


def _q1_near_misses():
    """Wrong sink softmaxes: another sink, rounded or clipped weights, float16, another axis, a lost masked row."""
    ref = EX.q1.reference
    misses = {}
    for delta in (-1.0, -0.1, 0.1, math.log(2), 1.0):
        misses[f"sink shifted by {delta:g}"] = lambda x, s, d=delta: ref(x, s + d)
    for factor in (0.5, 2.0, -1.0):
        misses[f"sink times {factor:g}"] = lambda x, s, f=factor: ref(x, s * f)
    misses["rounded to 2 decimals"] = lambda x, s: np.round(ref(x, s), 2)
    misses["weights below 1e-3 clipped to 0"] = lambda x, s: np.where(ref(x, s) < 1e-3, 0.0, ref(x, s))
    misses["computed in float16"] = lambda x, s: ref(np.asarray(x, np.float16), s).astype(np.float64)
    misses["the last key dropped from the denominator"] = lambda x, s: np.exp(x - np.maximum(np.max(x, -1, keepdims=True), s)) / (
        np.exp(s - np.maximum(np.max(x, -1, keepdims=True), s)) + np.exp(x[..., :-1] - np.maximum(np.max(x, -1, keepdims=True), s)).sum(-1, keepdims=True)
    )
    misses["a fully masked row given uniform weights"] = lambda x, s: np.where(
        np.isneginf(x).all(-1, keepdims=True), 1.0 / np.shape(x)[-1], ref(x, np.float64(s))
    )
    misses["sink counted once per key"] = lambda x, s: ref(x, s + math.log(np.shape(x)[-1]))
    return misses


@pytest.mark.parametrize(
    "label",
    [
        "shifting by the sink only (overflows for scores far above it)",
        "shifting by one maximum for the whole batch instead of each row's own maximum",
    ],
)
def test_q1_rejects_shifts_that_are_right_on_moderate_rows_and_says_to_shift_each_row(label, capsys):
    answer = EX.q1.known_mistakes()[label]
    assert all(np.isfinite(answer(*c.args)).all() for c in EX.q1.cases[:3])  # a plausible answer: fine on small rows
    assert not EX.q1.check(answer)
    assert "in each row" in _unwrapped(capsys.readouterr().out)


def _masked_safe(shift):
    """A sink softmax shifted by `shift` of the row [x, s], falling back to s where that is not finite."""

    def answer(x, sink):
        padded = np.concatenate([x, np.full((*np.shape(x)[:-1], 1), sink)], axis=-1)
        with np.errstate(invalid="ignore"):
            m = shift(padded)
        m = np.where(np.isfinite(m), m, sink)
        e = np.exp(padded - m)
        return e[..., :-1] / e.sum(axis=-1, keepdims=True)

    return answer


# The shifts the issue found accepted, each handling a fully masked row correctly, so that only a
# case with scores far from the shift can catch it; and what the feedback must call each one.
ISSUE_SHIFTS = {
    "row mean": (lambda z: z.mean(-1, keepdims=True), "You shifted by the row mean"),
    "row median": (lambda z: np.median(z, -1, keepdims=True), "You shifted by the row median"),
    "max(|x|, |s|)": (lambda z: np.abs(z).max(-1, keepdims=True), "You shifted by the largest |score|"),
}


@pytest.mark.parametrize("name", ISSUE_SHIFTS)
def test_q1_rejects_the_shifts_that_give_nan_within_the_promised_range_and_names_each(name, capsys):
    shift, named = ISSUE_SHIFTS[name]
    answer = _masked_safe(shift)
    masked = next(c for c in EX.q1.cases if np.isneginf(c.args[0]).any())
    assert np.array_equal(answer(*masked.args), EX.q1.reference(*masked.args))  # masked rows: right
    assert not EX.q1.check(answer)
    assert named in _unwrapped(capsys.readouterr().out)


@pytest.mark.parametrize("name", ["row mean", "row median"])
def test_q1_the_issues_input_gives_nan_for_the_mean_and_the_median_and_is_a_probe(name):
    x, s = np.array([1000.0, -1000.0]), 0.0
    assert any(np.array_equal(c.args[0], x) and c.args[1] == s for c in EX.q1.probes)
    with np.errstate(over="ignore", invalid="ignore"):
        assert np.isnan(_masked_safe(ISSUE_SHIFTS[name][0])(x, s)).any()
    assert np.isfinite(EX.q1.reference(x, s)).all()


def test_q1_declares_lesson_02s_whole_shift_family_and_names_the_sink_in_its_advice():
    from course_utils.exercises.core import ROW_SHIFTS

    for name in ROW_SHIFTS:
        label = f"shifting by {name} instead of each row's own maximum"
        assert label in EX.q1.variants
        assert "max(max x, s)" in EX.q1.advice[label]


def test_q1_names_the_property_a_renormalized_answer_breaks(capsys):
    EX.q1.check(EX.q1.wrong_answers["renormalizing the weights to sum to 1"])
    assert "less than 1" in _unwrapped(capsys.readouterr().out)


def test_q1_says_how_to_shift_when_a_fully_masked_row_gives_nan(capsys):
    EX.q1.check(EX.q1.wrong_answers["shifting by the max of x only (nan for a fully masked row)"])
    assert "max(max x, s)" in _unwrapped(capsys.readouterr().out)


# --- q2: the total sigmoid weight ---------------------------------------------------------


def test_q2_reference_is_what_sigmoid_attention_gives():
    measured = [[sigmoid_attention(np.zeros(n)).sum(), sigmoid_attention(np.zeros(n), bias=-math.log(n)).sum()] for n in (16, 4096)]
    np.testing.assert_allclose(EX.q2.reference, measured, rtol=1e-12)


@pytest.mark.parametrize(
    "answer",
    [
        [[8, 1], [2048, 1]],  # 1/n per key
        [[8, 0.94], [2048, 1.0]],  # rounded to two decimals
        [[8, 0.9412], [2048, 1]],
        [[8, 0.9412], [4096, 0.9998]],
        [[16, 0.9412], [2048, 0.9998]],
        [[0.9412, 8], [0.9998, 2048]],  # columns swapped
        [[8, 0.5], [2048, 0.5]],
        [[8, 0.9375], [2048, 0.9998]],  # 15/16, (n - 1)/n
    ],
)
def test_q2_rejects_near_misses(answer):
    assert EX.q2.evaluate(answer).status == "incorrect"


@pytest.mark.parametrize("answer", [[[8, 0.9412], [2048, 0.9998]], [[8, 16 / 17], [2048, 4096 / 4097]]])
def test_q2_accepts_the_answer_to_four_decimals(answer):
    assert EX.q2.evaluate(answer).status == "correct"


NEAR_MISSES = [("q1", label, f) for label, f in _q1_near_misses().items()]


@pytest.mark.parametrize("name,label,answer", NEAR_MISSES, ids=[f"{n}: {l}" for n, l, _ in NEAR_MISSES])
def test_the_function_checkers_reject_every_generated_near_miss(name, label, answer, capsys):
    assert not getattr(EX, name).check(answer)
    assert _unwrapped(capsys.readouterr().out).startswith("✗ Not yet")


@pytest.mark.parametrize("floor", [-30.0, -40.0])
def test_q1_rejects_floored_exponents_that_leave_masked_keys_a_tiny_weight(floor, capsys):
    answer = EX.q1.known_mistakes()[f"flooring the exponents at {floor:g}"]
    assert np.allclose(answer(*EX.q1.cases[5].args), EX.q1.reference(*EX.q1.cases[5].args), atol=1e-12)  # close, yet not 0
    assert not EX.q1.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert "exactly 0" in out and f"flooring the exponents at {floor:g}" in out


def _sink_softmax(x, sink):
    m = np.maximum(np.max(x, axis=-1, keepdims=True), sink)
    e = np.exp(x - m)
    return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))


FLUSHES = {  # review 33, A4: the right weights, then the small ones flushed to 0
    "w < 1e-15": lambda x, s: np.where(_sink_softmax(x, s) < 1e-15, 0.0, _sink_softmax(x, s)),
    "w < e^-30": lambda x, s: np.where(_sink_softmax(x, s) < np.exp(-30), 0.0, _sink_softmax(x, s)),
    "w < 1e-300": lambda x, s: np.where(_sink_softmax(x, s) < 1e-300, 0.0, _sink_softmax(x, s)),
}


def test_q1_a_case_has_weights_far_below_rtol_that_are_not_0():
    weights = np.concatenate([EX.q1.reference(*c.args).ravel() for c in EX.q1.cases])
    assert ((weights > 0) & (weights < 1e-15)).any() and ((weights > 0) & (weights < 1e-300)).any()


@pytest.mark.parametrize("flush", FLUSHES)
def test_q1_flushing_small_weights_to_0_is_rejected_and_named_as_the_flush(flush, capsys):
    ex = exercises.load("09").q1
    assert ex.evaluate(_sink_softmax).passed
    verdict = ex.check(FLUSHES[flush])
    out = _unwrapped(capsys.readouterr().out)
    assert verdict.status == "incorrect" and verdict.mistake == "the property _exact_zeros"
    assert "(a flush of small weights to 0, or a step that lost them" in out and "This is exactly what" not in out
    ex.hint()
    step = _unwrapped(capsys.readouterr().out)
    assert step.startswith("Next step for this mistake: Delete any finite number put in place of -inf") \
        and "any `np.where(w < eps, 0.0, w)` around your weights" in step


@pytest.mark.parametrize("q", ["q1"])
def test_float32_answers_are_told_to_compute_in_float64(q, capsys):
    ex = getattr(EX, q)
    assert not ex.check(lambda x, s: ex.reference(np.asarray(x, np.float32), np.float32(s)).astype(np.float64))
    assert "float32" in _unwrapped(capsys.readouterr().out)


# --- q2: the right numbers in the wrong layout --------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "named", "step"),
    [
        ([[8, 2048], [0.9412, 0.9998]], "transposed", "`np.transpose`"),
        ([[2048, 0.9998], [8, 0.9412]], "the rows are swapped", "`your_answer[::-1]`"),
        ([[0.9412, 8], [0.9998, 2048]], "the columns are swapped", "`np.fliplr(your_answer)`"),
    ],
    ids=["transposed", "rows swapped", "columns swapped"],
)
def test_q2_the_right_numbers_in_the_wrong_layout_are_named_with_the_layout(answer, named, step, capsys):
    verdict = EX.q2.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and named in out and "max abs diff" not in out
    assert step in verdict.next_step


@pytest.mark.parametrize(
    "answer",
    [[[8, 0.9412], [2048, 0.9998]], [[8, 16 / 17], [2048, 4096 / 4097]], np.array([[8.0, 0.9411], [2048.0, 0.9997]])],
    ids=["4 decimals", "fractions", "truncated ndarray"],
)
def test_q2_right_answers_pass(answer, capsys):
    assert EX.q2.check(answer), capsys.readouterr().out


# --- review 33 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [2000.0, 1e4])
def test_q1_scores_clipped_above_the_lessons_range_are_rejected_and_named(limit):
    """A4: a clip at 2000 or 1e4 keeps every score of -1000 to 1000, and ties [20000, 19995]."""
    def clipped(x, sink):
        x = np.clip(x, -limit, limit)
        m = np.maximum(x.max(axis=-1, keepdims=True), sink)
        e = np.exp(x - m)
        return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))

    verdict = EX.q1.evaluate(clipped)
    assert not verdict and "clipping the scores at a fixed limit" in verdict.message
    assert "2000" not in verdict.next_step and "1e+04" not in verdict.next_step  # no limit is named


def test_q1_a_weight_of_1_lost_to_an_overflow_is_not_called_a_flush_of_small_weights():
    """N9: a mean shift overflows and nan_to_num makes the weight 0: NumPy's overflow is named, not a flush."""
    def mean_shift(x, sink):
        padded = np.concatenate([x, np.full(x.shape[:-1] + (1,), float(sink))], axis=-1)
        e = np.exp(padded - np.mean(np.where(np.isfinite(padded), padded, 0), axis=-1, keepdims=True))
        return np.nan_to_num(e[..., :-1] / e.sum(axis=-1, keepdims=True))

    verdict = EX.q1.evaluate(mean_shift)
    assert not verdict and "flushed" not in verdict.message and "'overflow encountered in exp'" in verdict.message
    assert "np.where(w < eps" not in verdict.next_step
