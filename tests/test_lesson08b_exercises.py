"""Lesson 08b's exercises: references computed independently, and whole families of wrong answers rejected."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils import exercises
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("08b")


def rejected(ex, answer, capsys) -> str:
    assert not ex.check(answer)
    return _unwrapped(capsys.readouterr().out)


# --- q1 ----------------------------------------------------------------------------------


def test_q1_reference_is_the_square_root_of_c():
    assert EX.q1.reference == pytest.approx((1 / 16) ** 0.5)


@pytest.mark.parametrize("power", [-1.0, -0.5, -0.25, 0.0, 0.125, 0.375, 0.5, 0.75, 1.0])
def test_q1_every_other_power_of_d_k_is_rejected(power, capsys):
    out = rejected(EX.q1, 256.0**-power, capsys)  # the answer is 256 ** -0.25
    assert "✗" in out


def test_q1_no_next_step_gives_the_answer():
    for label in EX.q1.wrong_answers:
        step = EX.q1.next_steps[label]
        assert "1/4" not in step and "0.25" not in step, label


# --- q2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_matches_torch_rms_norm_then_scaled_scores(case):
    q, k = (torch.from_numpy(a) for a in case.args)
    d = q.shape[-1]
    qn, kn = (torch.nn.functional.rms_norm(x, (d,), eps=0.0) for x in (q, k))
    expected = qn @ kn.transpose(-1, -2) / d**0.5
    np.testing.assert_allclose(EX.q2.reference(*case.args), expected.numpy(), rtol=1e-12, atol=1e-12)


def test_q2_scores_are_sqrt_d_times_the_cosine():
    q, k = EX.q2.cases[1].args
    cos = (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ (k / np.linalg.norm(k, axis=-1, keepdims=True)).T
    np.testing.assert_allclose(EX.q2.reference(q, k), np.sqrt(q.shape[-1]) * cos, rtol=1e-12)


def q2_variants():
    ref = EX.q2.reference
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


@pytest.mark.parametrize("label,answer", list(q2_variants()), ids=[v[0] for v in q2_variants()])
def test_q2_generated_wrong_variants_are_rejected(label, answer, capsys):
    out = rejected(EX.q2, answer, capsys)
    assert "on input" in out


def test_q2_a_tiny_epsilon_as_in_torch_rms_norm_is_accepted(capsys):
    def with_tiny_eps(q, k):
        n = lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-12)  # noqa: E731
        return n(q) @ np.swapaxes(n(k), -1, -2) / np.sqrt(q.shape[-1])

    assert EX.q2.check(with_tiny_eps)


def test_q2_a_score_above_sqrt_d_is_named_as_such(capsys):
    out = rejected(EX.q2, EX.q2.wrong_answers["no division by sqrt(d_k)"], capsys)
    assert "above sqrt(d_k)" in out


def test_q2_dividing_by_the_standard_deviation_is_told_about_the_constant_row(capsys):
    out = rejected(EX.q2, lambda q, k: (q / q.std(-1, keepdims=True)) @ np.swapaxes(k / k.std(-1, keepdims=True), -1, -2) / 2.0, capsys)
    assert "constant row" in out and "overflow" not in out


def test_q2_a_transpose_that_fails_on_batches_names_the_input_by_its_shape(capsys):
    def plain_transpose(q, k):
        n = lambda x: x / np.sqrt((x * x).mean(axis=-1, keepdims=True))  # noqa: E731
        return n(q) @ n(k).T / np.sqrt(q.shape[-1])

    out = rejected(EX.q2, plain_transpose, capsys)
    assert "an array of shape (2, 3, 5, 8)" in out and len(out) < 600


def test_q2_an_epsilon_inside_the_square_root_is_rejected_with_advice_that_names_it():
    ex = exercises.load("08b").q2

    def with_eps(q, k):
        def norm(x):
            return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)

        return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])

    message = ex.evaluate(with_eps).message
    assert "epsilon" in message and "no epsilon" in message


def test_q2_a_float32_answer_is_rejected_and_named_with_its_next_step(capsys):
    import course_utils as cu

    ex = cu.exercises.load("08b").q2

    def float32(q, k):
        q, k = q.astype(np.float32), k.astype(np.float32)
        q_hat = q / np.sqrt((q * q).mean(axis=-1, keepdims=True))
        k_hat = k / np.sqrt((k * k).mean(axis=-1, keepdims=True))
        return q_hat @ np.swapaxes(k_hat, -1, -2) / np.sqrt(q.shape[-1])

    verdict = ex.check(float32)
    assert not verdict.passed and "float32" in verdict.message and "compute in float64" in verdict.message
    ex.hint()
    assert "result.dtype" in capsys.readouterr().out
    for eps in (1e-6, 1e-4):  # an epsilon moves the scores about as much, and is named as itself
        message = ex.evaluate(ex.variants[f"an epsilon of {eps:g} inside the square root"]).message
        assert "float32" not in message and f"You added {eps:g} inside the square root" in message
