"""Lesson 05's exercise references agree with torch and course_utils, and each case catches what it is there for."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from course_utils import attention_entropy, causal_mask, exercises, scaled_dot_product_attention, softmax
from rounding_bounds import exponent_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("05")


@pytest.mark.parametrize("case", EX.q1.cases, ids=lambda c: c.describe())
def test_q1_reference_equals_torch_causal_and_key_padding_masks(case):
    lengths, max_len = case.args
    causal = torch.ones(max_len, max_len, dtype=torch.bool).tril()
    keys = torch.arange(max_len)[None, :] < torch.tensor(lengths)[:, None]
    np.testing.assert_array_equal(EX.q1.reference(*case.args), (causal[None] & keys[:, None, :]).numpy())


@pytest.mark.parametrize("case", [c for c in EX.q2.cases if np.isfinite(c.args[0]).all()], ids=lambda c: c.describe())
def test_q2_reference_equals_the_weights_of_scaled_dot_product_attention(case):
    # Scores through q @ I: a blocked score of inf or nan would spread through the product (the case that has them
    # is checked against torch below).
    scores, mask = case.args
    eye = np.eye(scores.shape[-1])
    # q @ I = scores, so with scale 1 the attention weights are the masked softmax of the scores.
    _, weights = scaled_dot_product_attention(np.atleast_2d(scores), eye, eye, np.atleast_2d(mask), scale=1.0)
    np.testing.assert_allclose(EX.q2.reference(scores, mask), weights.reshape(scores.shape), rtol=1e-15, atol=0)


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_equals_torch_softmax_where_a_key_is_allowed(case):
    scores, mask = (torch.from_numpy(np.asarray(a)) for a in case.args)
    ref = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).nan_to_num(0.0)
    # float64 rounding of two softmaxes: each weight within exponent_error of the allowed scores (relative), up to
    # 1.3e-12 for a row whose allowed scores spread over 2000; atol 1e-300 for weights that underflow.
    allowed = np.where(case.args[1], case.args[0], -np.inf)
    np.testing.assert_allclose(EX.q2.reference(*case.args), ref.numpy(), rtol=2 * exponent_error(allowed), atol=1e-300)


def test_q2_a_fully_masked_row_gives_zeros_not_nan():
    out = EX.q2.reference(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[True, False], [False, False]]))
    np.testing.assert_array_equal(out, [[1.0, 0.0], [0.0, 0.0]])


def test_q2_the_minus_1e9_fill_is_caught_by_scores_far_apart_and_by_the_fully_masked_row():
    wrong = EX.q2.wrong_answers["-1e9 as the fill value"]
    agrees = [np.allclose(wrong(*c.args), EX.q2.reference(*c.args), rtol=1e-12, atol=0) for c in EX.q2.cases]
    # The last case (blocked scores of inf and nan) a -1e9 put in with np.where also gets right.
    assert agrees == [True] * (len(agrees) - 3) + [False, False, True]


def _finite_fill_times_mask(scores, mask):
    return softmax(np.where(mask, scores, -1e9), axis=-1) * mask


def _additive_fill_times_mask(scores, mask):
    return softmax(scores + (1.0 - mask) * -10000.0, axis=-1) * mask  # BERT's additive -10000


def _finite_fill_guarded(scores, mask):
    weights = softmax(np.where(mask, scores, -1e4), axis=-1)
    return np.where(np.broadcast_to(mask, scores.shape).any(axis=-1, keepdims=True), weights, 0.0)


FINITE_FILLS = {  # review 33, A1: `* mask` repairs the fully masked row, so only scores far apart show the fill
    "np.where(mask, scores, -1e9), then * mask": _finite_fill_times_mask,
    "scores + (1 - mask) * -10000, then * mask": _additive_fill_times_mask,
    "np.where(mask, scores, -1e4), with a guard": _finite_fill_guarded,
}


@pytest.mark.parametrize("name", FINITE_FILLS)
def test_q2_a_finite_fill_is_rejected_and_named_even_when_repaired_by_times_mask(name):
    verdict = EX.q2.evaluate(FINITE_FILLS[name])
    assert not verdict and "a finite fill for the blocked scores" in _unwrapped(verdict.message)
    assert "`-np.inf`" in verdict.next_step


def test_q2_an_answer_in_float32_still_passes_on_the_scores_far_apart():
    """The tolerance admits float32: the far row's allowed scores are 2048 apart, float32's spacing at 2e10."""
    def in_float32(scores, mask):
        return EX.q2.reference(np.asarray(scores, dtype=np.float32), mask)

    assert EX.q2.evaluate(in_float32).passed


def test_q2_a_clip_that_fails_only_on_scores_far_apart_is_not_named_a_finite_fill():
    verdict = EX.q2.evaluate(lambda scores, mask: EX.q2.reference(np.clip(scores, -1e4, 1e4), mask))
    assert not verdict and "finite fill" not in verdict.message


def _additive_minus_inf(scores, mask):
    return softmax(scores + (1 - mask) * -np.inf, axis=-1)


def _unshifted_nan_to_num(scores, mask):
    e = np.exp(np.where(mask, scores, -np.inf))
    return np.nan_to_num(e / e.sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("answer,cause,not_said", [
    # review 33, N6 and N7: the nan of 0 * -inf is not an overflow, and a hidden overflow is not an underflow
    (_additive_minus_inf, "'invalid value encountered in multiply'", "overflowed"),
    (lambda scores, mask: np.nan_to_num(_additive_minus_inf(scores, mask)), "'invalid value encountered in multiply'",
     "underflowed"),
    (_unshifted_nan_to_num, "'overflow encountered in exp'", "underflowed"),
], ids=["(1 - mask) * -inf", "(1 - mask) * -inf, nan_to_num", "no shift, nan_to_num"])
def test_q2_a_nan_or_a_hidden_nan_is_traced_to_the_step_numpy_reports(answer, cause, not_said):
    verdict = EX.q2.evaluate(answer)
    message = _unwrapped(verdict.message)
    assert not verdict and f"NumPy reports {cause}" in message and not_said not in message


def test_q2_rows_made_uniform_where_no_key_is_allowed_are_not_called_a_minus_1e9_fill():
    def uniform_empty_rows(scores, mask):  # review 33, N8
        mask = np.broadcast_to(mask, scores.shape)
        s = np.where(mask, scores, -np.inf)
        return softmax(np.where(~mask.any(axis=-1, keepdims=True), 0.0, s), axis=-1)

    verdict = EX.q2.evaluate(uniform_empty_rows)
    assert not verdict and "-1e9" not in verdict.message and "gives weight to a masked key" in verdict.message
    assert "`np.where(mask.any(axis=-1, keepdims=True), weights, 0.0)`" in verdict.next_step


def test_q2_renormalizing_after_the_softmax_is_caught_by_a_dominant_masked_score(capsys):
    assert not EX.q2.check(EX.q2.wrong_answers["masking after the softmax, then renormalizing"])
    assert "800" in _unwrapped(capsys.readouterr().out)


def test_q3_reference_is_the_entropy_of_uniform_causal_rows():
    mask = causal_mask(5)
    uniform = mask / mask.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(attention_entropy(uniform), EX.q3.reference, rtol=1e-15, atol=1e-15)


# --- q2: lesson 02's shift family, on masked rows ----------------------------------------

SHIFTS = [label for label in EX.q2.variants if label.startswith("shifting by")]


@pytest.mark.parametrize("label", SHIFTS)
def test_q2_each_wrong_shift_is_rejected_and_named_as_itself(label):
    message = EX.q2.evaluate(EX.q2.variants[label]).message
    assert message.startswith("✗ Not yet")
    assert EX.q2.diagnose(EX.q2.variants[label]) == label
    assert EX.q2.advice[label] in message


def test_q2_the_shift_family_is_lesson_02s():
    from course_utils.exercises.core import ROW_SHIFTS

    for name in ROW_SHIFTS:
        assert f"shifting by {name} instead of each row's own maximum" in EX.q2.variants


def test_q2_a_maximum_over_blocked_keys_is_caught_by_a_dominant_blocked_score(capsys):
    assert not EX.q2.check(EX.q2.variants["shifting by the row maximum over every key, the blocked ones too"])
    out = _unwrapped(capsys.readouterr().out)
    assert "800" in out and "allowed scores only" in out


def test_q2_probes_include_rows_whose_largest_score_is_blocked():
    blocked_max = [c for c in EX.q2.probes if not np.broadcast_to(c.args[1], np.shape(c.args[0])).all()]
    assert len(blocked_max) >= 5, "the shift family must also be probed with masked rows"


def test_q2_a_row_with_no_allowed_key_gets_its_own_nan_hint():
    message = EX.q2.evaluate(EX.q2.wrong_answers["-inf with no care for a fully masked row"]).message
    assert "no allowed key" in message and "Return zeros" in message


# --- q1: a float mask, and the slips of a mask built by hand ------------------------------------


def test_q1_a_float_mask_of_ones_and_zeros_is_rejected_and_told_to_return_bool(capsys):
    """A 1.0/0.0 mask holds the right pattern, but PyTorch adds a float mask to the scores: it blocks nothing."""
    def float_mask(lengths, max_len):
        j = np.arange(max_len)
        return ((j[None, :] <= j[:, None])[None] & (j[None, :] < np.asarray(lengths)[:, None])[:, None, :]).astype(float)

    assert not EX.q1.check(float_mask)
    assert "bool" in _unwrapped(capsys.readouterr().out)


def _mask(causal_test, padding_test):
    """A learner's mask: `causal_test(j_key, i_query)` and `padding_test(j, lengths)` combined with `&`."""
    def mask(lengths, max_len):
        j = np.arange(max_len)
        causal = causal_test(j[None, :], j[:, None])
        keys = padding_test(j[None, :], np.asarray(lengths)[:, None])
        return causal[None, :, :] & keys[:, None, :]

    return mask


Q1_SLIPS = {
    "the diagonal blocked": (_mask(lambda j, i: j < i, lambda j, n: j < n), "j < i instead of j <= i", "`<=`"),
    "the causal mask alone": (_mask(lambda j, i: j <= i, lambda j, n: np.ones_like(j == n)), "no padding mask",
                              "`keys = j[None, :] < np.asarray(lengths)[:, None]`"),
    "the padding mask alone": (_mask(lambda j, i: np.ones_like(j == i), lambda j, n: j < n), "no causal mask",
                               "`causal = j[None, :] <= j[:, None]`"),
    "<= length": (_mask(lambda j, i: j <= i, lambda j, n: j <= n), "the first pad left visible",
                  "`j < lengths[:, None]`"),
}


@pytest.mark.parametrize("name", Q1_SLIPS)
def test_q1_each_slip_of_a_hand_built_mask_is_named_with_its_next_step(name, capsys):
    answer, named, step = Q1_SLIPS[name]
    verdict = EX.q1.check(answer)
    assert not verdict
    assert named in _unwrapped(capsys.readouterr().out)
    assert step in verdict.next_step


@pytest.mark.parametrize("lengths_as", [list, np.array, torch.tensor], ids=["list", "ndarray", "tensor"])
def test_q1_a_right_mask_passes_whatever_the_lengths_are_given_as(lengths_as, capsys):
    def right(lengths, max_len):
        j = np.arange(max_len)
        return (j[None, :] <= j[:, None])[None] & (j[None, :] < np.asarray(lengths_as(lengths))[:, None])[:, None, :]

    assert EX.q1.check(right), capsys.readouterr().out


def test_q3_entropies_truncated_to_two_decimals_are_named_and_told_to_round(capsys):
    verdict = EX.q3.check([0, 0.69, 1.09, 1.38, 1.60])
    assert not verdict
    assert "cut off after two decimals" in _unwrapped(capsys.readouterr().out)
    assert "`round(1.0986, 2)`" in verdict.next_step
    assert EX.q3.check([0, 0.69, 1.10, 1.39, 1.61]), capsys.readouterr().out


def test_q1_sorting_the_callers_list_of_lengths_is_named_as_changing_an_input():
    """Review 33 (notes): `lengths.sort()` reorders the caller's list, a slip of its own."""
    def sorts_lengths(lengths, max_len):
        lengths.sort()
        j = np.arange(max_len)
        return (j[None, :] <= j[:, None])[None] & (j[None, :] < np.asarray(lengths)[:, None])[:, None, :]

    verdict = EX.q1.evaluate(sorts_lengths)
    assert verdict.mistake == "changing an input in place" and "`lengths`" in verdict.message
