"""Lesson 08's exercises: references computed independently, and whole families of wrong answers rejected."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
import torch

from course_utils import exercises

EX = exercises.load("08")


def rejected(ex, answer, capsys) -> str:
    assert not ex.check(answer)
    return capsys.readouterr().out


# --- q1 ----------------------------------------------------------------------------------


def test_q1_reference_is_the_square_root_of_c():
    assert EX.q1.reference == pytest.approx((1 / 16) ** 0.5)


@pytest.mark.parametrize("power", [-1.0, -0.5, -0.25, 0.0, 0.125, 0.375, 0.5, 0.75, 1.0])
def test_q1_every_other_power_of_d_k_is_rejected(power, capsys):
    out = rejected(EX.q1, 256.0**-power, capsys)  # the answer is 256 ** -0.25
    assert "✗" in out


# --- q2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_matches_the_statistics_module(case):
    a, b = case.args
    diff = [float(x - y) for x, y in zip(a, b)]
    np.testing.assert_allclose(EX.q2.reference(a, b), [statistics.fmean(diff), statistics.stdev(diff)], rtol=1e-12)


def q2_variants():
    ref = EX.q2.reference
    yield "rounded to 2 decimals", lambda a, b: np.round(ref(a, b), 2)
    for ddof in (0, 2):
        yield f"ddof={ddof}", lambda a, b, ddof=ddof: np.array([(a - b).mean(), (a - b).std(ddof=ddof)])
    yield "swapped outputs", lambda a, b: ref(a, b)[::-1]
    yield "variance instead of sd", lambda a, b: np.array([(a - b).mean(), (a - b).var(ddof=1)])
    yield "pooled sd of both arms", lambda a, b: np.array([(a - b).mean(), np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)])
    yield "sd of the reference arm", lambda a, b: np.array([(a - b).mean(), b.std(ddof=1)])
    yield "difference of the means, sd of the arm", lambda a, b: np.array([a.mean() - b.mean(), a.std(ddof=1)])
    yield "pairs shifted by one seed", lambda a, b: ref(a, np.roll(b, 1))
    yield "first seed dropped", lambda a, b: ref(a[1:], b[1:])
    yield "float32", lambda a, b: ref(a.astype(np.float32), b.astype(np.float32)).astype(np.float32)
    yield "sd with ddof=1 of the absolute differences", lambda a, b: np.array([(a - b).mean(), np.abs(a - b).std(ddof=1)])


@pytest.mark.parametrize("label,answer", list(q2_variants()), ids=[v[0] for v in q2_variants()])
def test_q2_generated_wrong_variants_are_rejected(label, answer, capsys):
    out = rejected(EX.q2, answer, capsys)
    assert "on input" in out


def test_q2_a_known_mistake_is_reported_with_its_input(capsys):
    out = rejected(EX.q2, EX.q2.wrong_answers["ddof = 0"], capsys)
    assert "differs from the expected" in out


# --- q3 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q3.cases, ids=lambda c: c.describe())
def test_q3_reference_matches_torch_rms_norm_then_scaled_scores(case):
    q, k = (torch.from_numpy(a) for a in case.args)
    d = q.shape[-1]
    qn, kn = (torch.nn.functional.rms_norm(x, (d,), eps=0.0) for x in (q, k))
    expected = qn @ kn.transpose(-1, -2) / d**0.5
    np.testing.assert_allclose(EX.q3.reference(*case.args), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_q3_scores_are_sqrt_d_times_the_cosine():
    q, k = EX.q3.cases[1].args
    cos = (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ (k / np.linalg.norm(k, axis=-1, keepdims=True)).T
    np.testing.assert_allclose(EX.q3.reference(q, k), np.sqrt(q.shape[-1]) * cos, rtol=1e-12)


def q3_variants():
    ref = EX.q3.reference
    for power in (0.0, 0.25, 0.75, 1.0, -0.5):  # the reference divides by d_k ** 0.5
        yield f"divided by d_k**{power}", lambda q, k, p=power: ref(q, k) * q.shape[-1] ** 0.5 / q.shape[-1] ** p
    for eps in (1e-3, 1e-1):
        def with_eps(q, k, eps=eps):
            n = lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)  # noqa: E731
            return n(q) @ np.swapaxes(n(k), -1, -2) / np.sqrt(q.shape[-1])
        yield f"eps={eps} inside the root", with_eps
    yield "k normalized only", lambda q, k: ref(q, k) * np.sqrt((q * q).mean(axis=-1, keepdims=True))
    yield "rounded to 3 decimals", lambda q, k: np.round(ref(q, k), 3)
    yield "clipped to [-1, 1]", lambda q, k: np.clip(ref(q, k), -1, 1)
    yield "transposed", lambda q, k: np.swapaxes(ref(k, q), -1, -2) if q.shape[-2] == k.shape[-2] else ref(k, q)
    yield "RMS without the square root", lambda q, k: (q / (q * q).mean(-1, keepdims=True)) @ np.swapaxes(k / (k * k).mean(-1, keepdims=True), -1, -2) / np.sqrt(q.shape[-1])
    yield "max-abs normalization", lambda q, k: (q / np.abs(q).max(-1, keepdims=True)) @ np.swapaxes(k / np.abs(k).max(-1, keepdims=True), -1, -2) / np.sqrt(q.shape[-1])
    yield "softmax applied", lambda q, k: np.exp(ref(q, k)) / np.exp(ref(q, k)).sum(-1, keepdims=True)


@pytest.mark.parametrize("label,answer", list(q3_variants()), ids=[v[0] for v in q3_variants()])
def test_q3_generated_wrong_variants_are_rejected(label, answer, capsys):
    out = rejected(EX.q3, answer, capsys)
    assert "on input" in out


def test_q3_a_tiny_epsilon_as_in_torch_rms_norm_is_accepted(capsys):
    def with_tiny_eps(q, k):
        n = lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-12)  # noqa: E731
        return n(q) @ np.swapaxes(n(k), -1, -2) / np.sqrt(q.shape[-1])

    assert EX.q3.check(with_tiny_eps)


def test_q3_a_score_above_sqrt_d_is_named_as_such(capsys):
    out = rejected(EX.q3, EX.q3.wrong_answers["no division by sqrt(d_k)"], capsys)
    assert "above sqrt(d_k)" in out


def test_q3_dividing_by_the_standard_deviation_is_told_about_the_constant_row(capsys):
    out = rejected(EX.q3, lambda q, k: (q / q.std(-1, keepdims=True)) @ np.swapaxes(k / k.std(-1, keepdims=True), -1, -2) / 2.0, capsys)
    assert "constant row" in out and "overflow" not in out


def test_q3_a_transpose_that_fails_on_batches_names_the_input_by_its_shape(capsys):
    def plain_transpose(q, k):
        n = lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True))  # noqa: E731
        return n(q) @ n(k).T / np.sqrt(q.shape[-1])

    out = rejected(EX.q3, plain_transpose, capsys)
    assert "an array of shape (2, 3, 5, 8)" in out and len(out) < 600


def test_q2_a_float32_answer_is_told_it_is_float32():
    ex = exercises.load("08").q2

    def in_float32(a, b):
        d = (a - b).astype(np.float32)
        return np.array([d.mean(), d.std(ddof=1)])

    message = ex.evaluate(in_float32).message
    assert "float32" in message and "Not yet" in message


def test_q3_an_epsilon_inside_the_square_root_is_rejected_with_advice_that_names_it():
    ex = exercises.load("08").q3

    def with_eps(q, k):
        def norm(x):
            return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)

        return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])

    message = ex.evaluate(with_eps).message
    assert "epsilon" in message and "no epsilon" in message
