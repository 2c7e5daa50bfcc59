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


def test_q1_reference_is_the_epsilon_that_makes_adam_on_w_exactly_g_times_adam_on_v():
    """Adam on W = g V with the gradients divided by g, the learning rate times g and epsilon times the reference,
    stays exactly g times Adam on V; any other factor on epsilon does not, where epsilon matters."""
    from course_utils.training import adam_steps

    gen = np.random.default_rng(0)
    v0, grads, g, lr = gen.normal(size=6), gen.normal(size=(50, 6)) * np.logspace(-9, 1, 6), 0.25, 6e-3
    v_path = adam_steps(v0, grads, lr=lr)
    w_path = lambda factor: adam_steps(g * v0, grads / g, lr=lr * g, eps=1e-8 * factor)  # noqa: E731
    np.testing.assert_allclose(w_path(EX.q1.reference), g * v_path, rtol=1e-15, atol=0)
    for factor in (1.0, 0.25, 16.0, 2.0):
        assert np.abs(w_path(factor) - g * v_path).max() > 1e-6, factor


@pytest.mark.parametrize("answer", [4, 4.0, "4", np.float64(4), torch.tensor(4.0), 4.0005])
def test_q1_the_answer_passes_however_it_is_written(answer, capsys):
    assert EX.q1.check(answer), capsys.readouterr().out


@pytest.mark.parametrize("answer", [1, 0.25, 16, 1 / 16, 0, 2])
def test_q1_each_likely_wrong_factor_is_named_with_a_next_step(answer, capsys):
    verdict = EX.q1.check(answer)
    assert not verdict and verdict.mistake is not None
    assert "`" in verdict.next_step
    capsys.readouterr()


def test_q1_no_next_step_gives_the_answer():
    for label in EX.q1.wrong_answers:
        step = EX.q1.next_steps[label].replace(" ", "")
        assert "eps_W=4" not in step and "4*eps`" not in step and "4ε" not in step, label


def test_q1_is_a_prediction_lesson_08_does_not_print():
    """Lesson 08 prints (d)'s learning-rate factor, 0.25, and never an epsilon factor: the question is new."""
    import json
    import re
    from pathlib import Path

    notebook = json.loads((Path(__file__).parents[1] / "notebooks" / "08_scale_in_training.ipynb").read_text())
    cells = [json.dumps(cell, ensure_ascii=False) for cell in notebook["cells"]]  # source and outputs
    # the table of the arms: (d)'s row ends with its learning-rate factor, in the column "lr ×"
    assert any("lr ×" in cell and re.search(r"\(d\) init\+lr matched[^\\]*0\.25\\n", cell) for cell in cells)
    assert EX.q1.reference != 0.25
    assert not [cell for cell in cells if "adam" in cell.lower() and re.search(r"epsilon|\beps\b|ε", cell)]


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


# --- q2: the epsilons learners bring from libraries are named, not blamed on float32 -----------------


def _rms_norm_scores(eps):
    """QK-norm scores through torch's own `F.rms_norm`, in float64, with the given epsilon."""
    def answer(q, k):
        q, k = torch.from_numpy(q), torch.from_numpy(k)
        d = q.shape[-1]
        rms = lambda x: torch.nn.functional.rms_norm(x, (d,), eps=eps)  # noqa: E731
        return rms(q) @ rms(k).transpose(-1, -2) / d**0.5

    return answer


def _numpy_scores(eps, outside=False):
    def answer(q, k):
        def norm(x):
            mean_square = (x * x).mean(axis=-1, keepdims=True)
            return x / (np.sqrt(mean_square) + eps) if outside else x / np.sqrt(mean_square + eps)

        return norm(q) @ np.swapaxes(norm(k), -1, -2) / np.sqrt(q.shape[-1])

    return answer


@pytest.mark.parametrize(
    ("answer", "eps", "where"),
    [(_rms_norm_scores(1e-5), "1e-05", "inside the square root"), (_rms_norm_scores(1e-7), "1e-07", "inside the square root"),
     (_numpy_scores(1e-8), "1e-08", "inside the square root"), (_numpy_scores(1e-9), "1e-09", "inside the square root"),
     (_numpy_scores(1e-6, outside=True), "1e-06", "added to the RMS")],
    ids=["F.rms_norm 1e-5", "F.rms_norm 1e-7", "numpy 1e-8", "numpy 1e-9", "numpy 1e-6 outside"],
)
def test_q2_a_library_epsilon_is_named_with_its_value_and_not_blamed_on_float32(answer, eps, where, capsys):
    verdict = EX.q2.check(answer)
    out = rejected_text(capsys)
    assert not verdict
    assert f"an epsilon of {eps} {where}" in out and "float32" not in out
    assert f"`+ {eps}`" in verdict.next_step


def rejected_text(capsys) -> str:
    return _unwrapped(capsys.readouterr().out)


@pytest.mark.parametrize(
    "answer",
    [_rms_norm_scores(None), _rms_norm_scores(1e-12), _numpy_scores(1e-12), _numpy_scores(1e-9, outside=True),
     lambda q, k: np.sqrt(q.shape[-1]) * (q / np.linalg.norm(q, axis=-1, keepdims=True)) @ np.swapaxes(k / np.linalg.norm(k, axis=-1, keepdims=True), -1, -2)],
    ids=["F.rms_norm eps=None", "F.rms_norm 1e-12", "numpy 1e-12", "1e-9 added to the RMS", "sqrt(d) cosine"],
)
def test_q2_right_answers_and_negligible_epsilons_pass(answer, capsys):
    assert EX.q2.check(answer), capsys.readouterr().out


def test_q2_normalizing_the_keys_only_is_named_as_lesson_08s_arm_g(capsys):
    def keys_only(q, k):
        k_hat = k / np.sqrt((k * k).mean(axis=-1, keepdims=True))
        return q @ np.swapaxes(k_hat, -1, -2) / np.sqrt(q.shape[-1])

    verdict = EX.q2.check(keys_only)
    assert not verdict and "normalizing k only (arm (g)" in rejected_text(capsys)
    assert "`q_hat = q / np.sqrt((q * q).mean(axis=-1, keepdims=True))`" in verdict.next_step


# --- rerun 33: the bound sqrt(d_k) has the comparison's slack, and its message shows the gap (C6) ----


def test_q2_scores_within_the_tolerance_are_not_rejected_for_touching_the_bound(capsys):
    # Case 1 has a score exactly at sqrt(d_k) = 2: 1e-7 relative above it is within rtol 1e-6 everywhere.
    assert EX.q2.check(lambda q, k: EX.q2.reference(q, k) * (1 + 1e-7)), capsys.readouterr().out


def test_q2_a_score_above_sqrt_d_is_printed_with_the_digits_that_show_the_gap(capsys):
    out = rejected(EX.q2, lambda q, k: EX.q2.reference(q, k) * (1 + 2e-4), capsys)
    assert "a score of size 2.0004, above sqrt(d_k) = 2:" in out


def test_q2_adams_epsilon_added_to_the_rms_is_rejected_and_named():
    """Review 33, A3: `rms + 1e-8` moves a query of RMS 0.002 by 5e-6, five times the tolerance."""
    rms = lambda x: np.sqrt((x * x).mean(axis=-1, keepdims=True))  # noqa: E731
    verdict = EX.q2.evaluate(lambda q, k: (q / (rms(q) + 1e-8)) @ np.swapaxes(k / (rms(k) + 1e-8), -1, -2)
                             / np.sqrt(q.shape[-1]))
    assert verdict.mistake == "an epsilon of 1e-08 added to the RMS"
    assert "loses digits" not in verdict.message  # named: no guess about lost digits beside it
