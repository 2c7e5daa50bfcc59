"""Lesson 09's exercise references agree with torch, and each checker rejects whole families of near misses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_utils import exercises, sigmoid_attention, softmax, softmax_with_sink

EX = exercises.load("09")


# --- q1: the sink softmax ------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_torch_softmax_over_the_padded_scores_with_the_sink_column_dropped(case):
    x, sink = case.args
    t = torch.from_numpy(x)
    padded = torch.cat([t, torch.full((*t.shape[:-1], 1), sink, dtype=t.dtype)], dim=-1)
    np.testing.assert_allclose(EX.q1.reference(x, sink), torch.softmax(padded, -1)[..., :-1].numpy(), rtol=1e-14, atol=1e-300)


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
    "label", ["shifting by the sink only (overflows for scores far above it)", "one maximum for the whole array, not one per row"]
)
def test_q1_rejects_shifts_that_are_right_on_moderate_rows_and_says_to_shift_each_row(label, capsys):
    answer = EX.q1.wrong_answers[label]
    assert all(np.isfinite(answer(*c.args)).all() for c in EX.q1.cases[:3])  # a plausible answer: fine on small rows
    assert not EX.q1.check(answer)
    assert "in each row" in capsys.readouterr().out


def test_q1_names_the_property_a_renormalized_answer_breaks(capsys):
    EX.q1.check(EX.q1.wrong_answers["renormalizing the weights to sum to 1"])
    assert "less than 1" in capsys.readouterr().out


def test_q1_says_how_to_shift_when_a_fully_masked_row_gives_nan(capsys):
    EX.q1.check(EX.q1.wrong_answers["shifting by the max of x only (nan for a fully masked row)"])
    assert "max(max x, s)" in capsys.readouterr().out


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


# --- q3: Scalable-Softmax ---------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q3.cases, ids=lambda c: c.describe())
def test_q3_reference_equals_torch_softmax_of_the_logits_times_s_log_n(case):
    x, s = case.args
    expected = torch.softmax(torch.from_numpy(x) * (s * math.log(x.shape[-1])), dim=-1).numpy()
    np.testing.assert_allclose(EX.q3.reference(x, s), expected, rtol=1e-12, atol=1e-300)


def _q3_near_misses():
    """Wrong SSMax: other s, other n, other logs, rounding, float16, the first axis."""
    misses = {}
    for factor in (0.9, 1.1, 0.5, 2.0):
        misses[f"s times {factor:g}"] = lambda x, s, f=factor: softmax(x * (s * f) * math.log(np.shape(x)[-1]))
    for dn in (-1, 1, 2):
        misses[f"n {dn:+d}"] = lambda x, s, d=dn: softmax(x * s * math.log(max(np.shape(x)[-1] + d, 1)))
    misses["log10"] = lambda x, s: softmax(x * s * math.log10(np.shape(x)[-1]))
    misses["1 + s log n"] = lambda x, s: softmax(x * (1 + s * math.log(np.shape(x)[-1])))
    misses["rounded to 3 decimals"] = lambda x, s: np.round(softmax(x * s * math.log(np.shape(x)[-1])), 3)
    misses["computed in float16"] = lambda x, s: softmax(np.asarray(x * s * math.log(np.shape(x)[-1]), np.float16)).astype(float)
    misses["size of the whole array as n"] = lambda x, s: softmax(x * s * math.log(np.size(x)))
    misses["softmax over the first axis"] = lambda x, s: softmax(x * s * math.log(np.shape(x)[-1]), axis=0)
    return misses


NEAR_MISSES = [("q1", label, f) for label, f in _q1_near_misses().items()] + [
    ("q3", label, f) for label, f in _q3_near_misses().items()
]


@pytest.mark.parametrize("name,label,answer", NEAR_MISSES, ids=[f"{n}: {l}" for n, l, _ in NEAR_MISSES])
def test_the_function_checkers_reject_every_generated_near_miss(name, label, answer, capsys):
    assert not getattr(EX, name).check(answer)
    assert capsys.readouterr().out.startswith("✗ Not yet")
