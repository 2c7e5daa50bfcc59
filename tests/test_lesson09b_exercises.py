"""Lesson 09b's exercise references agree with torch, and each checker rejects whole families of near misses."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from course_utils import exercises, softcap, softmax
from rounding_bounds import exponent_error, unit_roundoff
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("09b")


# --- q1: Scalable-Softmax (exercise 3 of lesson 09 before the split) ------------------


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_torch_softmax_of_the_logits_times_s_log_n(case):
    x, s = case.args
    expected = torch.softmax(torch.from_numpy(x) * (s * math.log(x.shape[-1])), dim=-1).numpy()
    # float64 rounding of two softmaxes: each side forms y = x·(s·log n) within 3u·|y| (a log, two products), and
    # each weight is then within exponent_error (relative): up to 7e-12 for |y| up to 3000, beyond rtol 1e-12.
    y = x * (s * math.log(x.shape[-1]))
    M = np.abs(y[np.isfinite(y)]).max(initial=0.0)
    rtol = 2 * exponent_error(y, input_error=3 * unit_roundoff(y) * M)
    np.testing.assert_allclose(EX.q1.reference(x, s), expected, rtol=rtol, atol=1e-300)


def _q1_near_misses():
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




NEAR_MISSES = list(_q1_near_misses().items())


@pytest.mark.parametrize("label,answer", NEAR_MISSES, ids=[l for l, _ in NEAR_MISSES])
def test_q1_rejects_every_generated_near_miss(label, answer, capsys):
    assert not EX.q1.check(answer)
    assert _unwrapped(capsys.readouterr().out).startswith("✗ Not yet")


@pytest.mark.parametrize("name", ["the row mean", "the row median", "the row's first entry", "one maximum for the whole batch",
                                  "nothing (the textbook formula)"])
def test_q1_names_each_wrong_shift_as_itself(name):
    label = f"shifting by {name} instead of each row's own maximum"
    assert EX.q1.diagnose(EX.q1.known_mistakes()[label]) == label


# --- q2: soft-capping -----------------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_equals_c_times_torch_tanh_of_x_over_c(case):
    x, c = case.args
    # float64 rounding of c·tanh(x/c), per side: x/c within u, tanh within 4 ulp (8u) and its argument's u (as
    # |z·tanh'(z)/tanh(z)| <= 1), c· within u: 10u; both sides 20u ≈ 2.2e-15, within rtol 1e-14.
    np.testing.assert_allclose(EX.q2.reference(x, c), (c * torch.tanh(torch.from_numpy(x) / c)).numpy(), rtol=1e-14, atol=0)


def test_q2_cases_hold_logits_far_beyond_the_cap_and_every_result_stays_within_it():
    assert any(np.max(np.abs(x)) >= 2 * c for x, c in (case.args for case in EX.q2.cases))
    for case in EX.q2.cases:
        x, c = case.args
        assert np.all(np.abs(EX.q2.reference(x, c)) <= c)


def _q2_near_misses():
    """Wrong caps: another c, a cap that is not tanh, a shifted or one-sided tanh, rounding, float16."""
    misses = {}
    for factor in (0.9, 1.1, 0.8, 1.25):
        misses[f"c times {factor:g}"] = lambda x, c, f=factor: softcap(x, c * f)
    misses["c + 1"] = lambda x, c: softcap(x, c + 1)
    misses["tanh to base 2, c * (2^(2x/c) - 1) / (2^(2x/c) + 1)"] = lambda x, c: c * np.tanh(x * math.log(2) / c)
    misses["the hard cap on |x| > c only"] = lambda x, c: np.where(np.abs(x) > c, np.sign(x) * c, x)
    misses["tanh of x shifted by 1"] = lambda x, c: c * np.tanh((x - 1) / c)
    misses["cubic approximation x - x^3 / (3c^2)"] = lambda x, c: np.clip(x - x**3 / (3 * c**2), -c, c)
    misses["rounded to 3 decimals"] = lambda x, c: np.round(softcap(x, c), 3)
    misses["computed in float16"] = lambda x, c: softcap(np.asarray(x, np.float16), c).astype(np.float64)
    misses["2c sigmoid(x/c) - c, a factor 2 missing inside"] = lambda x, c: 2 * c / (1 + np.exp(-x / c)) - c
    return misses


@pytest.mark.parametrize("label,answer", list(_q2_near_misses().items()), ids=list(_q2_near_misses()))
def test_q2_rejects_every_generated_near_miss(label, answer, capsys):
    assert not EX.q2.check(answer)
    assert _unwrapped(capsys.readouterr().out).startswith("✗ Not yet")


@pytest.mark.parametrize("label", sorted(EX.q2.variants))
def test_q2_names_each_generated_mistake_as_itself(label):
    assert EX.q2.diagnose(EX.q2.variants[label]) == label


@pytest.mark.parametrize("answer", [lambda x, c: c * np.tanh(x / c), lambda x, c: 2 * c / (1 + np.exp(-2 * x / c)) - c,
                                    lambda x, c: torch.tanh(torch.from_numpy(np.asarray(x, dtype=np.float64)) / c).numpy() * c],
                         ids=["numpy tanh", "2c sigmoid(2x/c) - c", "torch tanh"])
def test_q2_accepts_every_right_form_of_c_tanh_x_over_c(answer):
    assert EX.q2.evaluate(answer).status == "correct"


def test_q2_tells_a_learner_with_another_smooth_cap_to_use_tanh(capsys):
    EX.q2.check(lambda x, c: c * x / (c + np.abs(x)))
    assert "np.tanh" in _unwrapped(capsys.readouterr().out)


def test_q2_a_one_sided_cap_is_told_to_keep_the_sign(capsys):
    EX.q2.check(lambda x, c: np.where(x > 0, c * np.tanh(x / c), x))
    assert "sign" in _unwrapped(capsys.readouterr().out)


def test_float32_answers_are_told_to_compute_in_float64(capsys):
    for ex in (EX.q1, EX.q2):
        assert not ex.check(lambda x, s, ex=ex: ex.reference(np.asarray(x, np.float32), np.float32(s)).astype(np.float64))
        assert "float32" in _unwrapped(capsys.readouterr().out)


# --- q1: n from the whole batch, and the wrong logarithm ------------------------------------------


@pytest.mark.parametrize(
    ("answer", "named", "step"),
    [
        (lambda x, s: softmax(x * (s * np.log(x.size)), axis=-1), "n = x.size", "`n = x.shape[-1]`"),
        (lambda x, s: softmax(x * (s * np.log10(x.shape[-1])), axis=-1), "log base 10", "`np.log(n)`"),
    ],
    ids=["x.size", "log10"],
)
def test_q1_a_wrong_n_or_log_is_named_with_its_next_step(answer, named, step, capsys):
    verdict = EX.q1.check(answer)
    assert not verdict and named in _unwrapped(capsys.readouterr().out)
    assert step in verdict.next_step


def test_q1_right_answers_pass(capsys):
    for answer in (
        lambda x, s: softmax(x * (s * np.log(x.shape[-1])), axis=-1),
        lambda x, s: torch.softmax(torch.from_numpy(x) * (s * math.log(x.shape[-1])), dim=-1),
        lambda x, s: softmax(x * (s * np.log1p(x.shape[-1] - 1)), axis=-1),
    ):
        assert EX.q1.check(answer), capsys.readouterr().out
