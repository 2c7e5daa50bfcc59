"""Lesson 05b's bug exercises: the buggy code is really buggy, its fixes pass, and every wrong variant is named."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils import exercises
from course_utils.exercises import lesson05b
from course_utils.exercises.lesson05b import BUGGY_CODE
from rounding_bounds import attention_error, multihead_attention_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("05b")
NAMES = ["q1", "q2", "q3", "q4"]


def buggy(name: str):
    """The buggy function exactly as the notebook shows it (q4 with the d_k it lacks defined as a global)."""
    namespace = {"torch": torch, "F": F, "math": math}
    exec(BUGGY_CODE[name], namespace)
    return namespace, [v for k, v in namespace.items() if callable(v) and k not in {"torch", "F", "math"}][0]


@pytest.mark.parametrize("name", NAMES)
def test_the_buggy_code_as_shown_is_rejected(name, capsys):
    namespace, function = buggy(name)
    if name == "q4":
        assert not EX.q4.check(function)
        assert "NameError" in _unwrapped(capsys.readouterr().out)
        namespace["d_k"] = 3  # the seed leaves d_k undefined; give it the size of the first case's vectors
    assert not getattr(EX, name).check(function)
    assert "known mistake" in _unwrapped(capsys.readouterr().out) or name == "q4"


@pytest.mark.parametrize("name", NAMES)
def test_each_wrong_variant_is_named_in_the_feedback(name, capsys):
    ex = getattr(EX, name)
    for label, wrong in ex.wrong_answers.items():
        assert not ex.check(wrong), label
        out = _unwrapped(capsys.readouterr().out)
        assert "known mistake" in out or "changes when only" in out or "in place" in out, (label, out)
        assert "tensor of shape" in out and "[[" not in out, "the feedback names shapes, not contents"


@pytest.mark.parametrize("name", ["q2", "q3"])
def test_each_case_of_a_causal_exercise_is_checked_for_future_leaks(name):
    ex = getattr(EX, name)
    prop = ex.properties[0]
    from course_utils.exercises.core import Run

    for case in ex.cases:
        q, k, v = case.args
        leaky = F.scaled_dot_product_attention(q, k, v)  # no mask at all
        run = Run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), case, leaky.numpy(), leaky.numpy())
        assert prop(run) is not None


def test_q1_padding_invariance_catches_a_fix_that_only_looks_right():
    mha, x, lengths = EX.q1.cases[0].args
    # Off by one: the reference differs only through the first pad, which the invariance must notice.
    real = torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]
    assert not real.all(), "the first case must have pads"
    from course_utils.exercises.core import Run

    wrong = EX.q1.wrong_answers["the first pad left visible"]
    out = wrong(mha, x, lengths).detach().numpy()
    assert EX.q1.properties[0](Run(wrong, EX.q1.cases[0], out, out)) is not None


@pytest.mark.parametrize("name", NAMES)
def test_the_reference_is_torch_sdpa_or_multihead_attention(name):
    ex = getattr(EX, name)
    for case in ex.cases:
        args = case.args
        if name == "q1":
            mha, x, lengths = args
            pads = torch.arange(x.shape[1])[None, :] >= torch.as_tensor(lengths)[:, None]
            expected = mha(x, x, x, key_padding_mask=pads)[0]
            # float64 rounding: need_weights=False and True take two paths through the module, each within
            # multihead_attention_error.
            weights = [p.detach().numpy() for p in (mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)]
            bound = 2 * multihead_attention_error(x.numpy(), *weights, mha.num_heads, keep=~pads.numpy()[:, None, None, :])[1]
        elif name == "q4":
            expected = F.scaled_dot_product_attention(*args[:3], attn_mask=args[3])
            bound = 0.0  # the very same call: equal to the last bit
        else:
            expected = F.scaled_dot_product_attention(*args, is_causal=True)
            bound = 0.0  # the very same call: equal to the last bit
        np.testing.assert_allclose(ex.reference(*args).detach().numpy(), expected.detach().numpy(), rtol=0, atol=bound)


def test_q4_has_a_fully_masked_row_and_scores_beyond_the_weak_fill():
    Q, K, V, mask = EX.q4.cases[1].args
    assert (~mask.any(dim=-1)).any()
    Q, K, V, mask = EX.q4.cases[2].args
    allowed_scores = (Q @ K.T / math.sqrt(Q.shape[-1]))[mask]
    assert allowed_scores.max() < -1e5


def test_q4_the_seeds_own_fill_agrees_with_sdpa_where_a_key_is_allowed():
    Q, K, V, mask = EX.q4.cases[1].args
    seed = EX.q4.wrong_answers[lesson05b._Q4_SEED](Q, K, V, mask)
    sdpa = F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
    rows = mask.any(dim=-1)
    # float64 rounding of two attention computations (the seed's fill, and SDPA's), each within attention_error.
    bound = 2 * attention_error(Q.numpy(), K.numpy(), V.numpy(), mask=mask.numpy())
    torch.testing.assert_close(seed[..., rows, :], sdpa[..., rows, :], rtol=0, atol=bound)
    # A mean of S values, within γ_S·max|V| (1e-15) per side: torch's default float64 tolerance (1e-7) is far
    # looser, and still far below the 0.1 by which any other weighting of V would miss.
    torch.testing.assert_close(seed[..., ~rows, :], V.mean(dim=-2, keepdim=True).expand_as(seed[..., ~rows, :]))
    assert (sdpa[..., ~rows, :] == 0).all()


def test_the_solutions_pass(capsys):
    fixes = {
        "q1": lambda mha, x, lengths: mha(x, x, x, key_padding_mask=torch.arange(x.shape[1])[None, :] >= torch.as_tensor(lengths)[:, None])[0],
        "q2": lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype), dim=-1) @ v,
        "q3": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).tril()),
        "q4": lambda Q, K, V, mask=None: torch.softmax((Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))).masked_fill(torch.zeros((), dtype=torch.bool) if mask is None else mask == 0, float("-inf")), dim=-1).nan_to_num(0.0) @ V,
    }
    for name, fix in fixes.items():
        assert getattr(EX, name).check(fix), capsys.readouterr().out


@pytest.mark.parametrize(("fill", "accepted"), [(-1e9, True), (torch.finfo(torch.float64).min, True), (-1e5, False), (-1e4, False),
                                               (-6e5, False), (-1e6, False)])  # -6e5: review 33, A2; -1e6: rerun 13
# (after the scale, every allowed score of the case with scores of size 1e6 lies below -1e6)
def test_q4_a_finite_fill_with_the_empty_row_guard_passes_only_if_it_is_far_enough(fill, accepted, capsys):
    def fix(Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is None:
            return torch.softmax(scores, dim=-1) @ V
        # A finite fill never gives NaN, so here multiplying by has_key is a working guard.
        return torch.softmax(scores.masked_fill(~mask, fill), dim=-1) * mask.any(dim=-1, keepdim=True) @ V

    assert EX.q4.check(fix) == accepted, capsys.readouterr().out


def test_checkers_accept_other_correct_fixes(capsys):
    real = lambda x, lengths: torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]
    fixes = {
        # q1: a float key_padding_mask of -inf on the pads, the other mask kind nn.MultiheadAttention accepts.
        "q1": lambda mha, x, lengths: mha(x, x, x, key_padding_mask=torch.zeros(x.shape[:2], dtype=x.dtype).masked_fill(~real(x, lengths), -math.inf))[0],
        # q2: the additive mask handed to SDPA as what it is, a float mask.
        "q2": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)),
        # q3: log of the 1/0 triangle is the 0/-inf additive mask.
        "q3": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(q.shape[-2], q.shape[-2], dtype=q.dtype).tril().log()),
    }
    for name, fix in fixes.items():
        assert getattr(EX, name).check(fix), capsys.readouterr().out


def test_q2_accepts_a_finite_fill_of_minus_1e4_with_the_right_polarity_on_its_order_one_scores(capsys):
    def fix(q, k, v):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)
        return torch.softmax((q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).masked_fill(mask != 0, -1e4), dim=-1) @ v

    assert EX.q2.check(fix), capsys.readouterr().out


# --- q2: masking after the softmax, then renormalizing ---------------------------------------


def test_q2_a_future_score_dominates_in_one_case_so_renormalizing_after_gives_nan(capsys):
    q, k, v = EX.q2.cases[-1].args
    scores = q @ k.T / math.sqrt(q.shape[-1])
    assert scores[0, 1:].max() - scores[0, 0] > 745  # e^-745 underflows to 0 in float64
    renormalized = EX.q2.wrong_answers["masking after the softmax, then renormalizing"]
    assert renormalized(q, k, v)[0].isnan().all()
    assert not EX.q2.check(renormalized)
    assert "renormalizing divides 0 by 0" in _unwrapped(capsys.readouterr().out)


def test_q2_renormalizing_after_agrees_with_the_reference_on_the_order_one_cases():
    renormalized = EX.q2.wrong_answers["masking after the softmax, then renormalizing"]
    for case in EX.q2.cases[:-1]:
        # float64 rounding of two attention computations; the renormalized one exponentiates every score, so
        # its bound takes the spread of the whole row (attention_error without the causal mask).
        bound = 2 * attention_error(*(a.numpy() for a in case.args))
        torch.testing.assert_close(renormalized(*case.args), EX.q2.reference(*case.args), rtol=0, atol=bound)


# --- q4: a guard that multiplies, mask=None, and the scale ------------------------------------


def _learner_attention(guard):
    """An answer as a learner writes it: -inf fill, then `guard` on the weights."""

    def answer(Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        if mask is not None:
            weights = guard(weights, mask.any(dim=-1, keepdim=True))
        return weights @ V

    return answer


def test_q4_a_guard_that_multiplies_by_has_key_is_named_as_such(capsys):
    assert not EX.q4.check(_learner_attention(lambda w, has_key: w * has_key.float()))
    out = _unwrapped(capsys.readouterr().out)
    assert "multiplying by `mask.any(-1, keepdim=True)`" in out and "NaN × 0 is NaN" in out


def test_q4_an_answer_with_no_guard_is_not_told_it_multiplied(capsys):
    assert not EX.q4.check(_learner_attention(lambda w, has_key: w))
    out = _unwrapped(capsys.readouterr().out)
    assert "without a working guard" in out and "'zeroing' them by multiplying" not in out


def test_q4_a_guard_that_selects_passes(capsys):
    assert EX.q4.check(_learner_attention(lambda w, has_key: torch.where(has_key, w, 0.0))), capsys.readouterr().out


def test_q4_is_called_with_mask_none_and_an_answer_that_needs_a_mask_is_told(capsys):
    def needs_a_mask(Q, K, V, mask=None):
        scores = (Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))).masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1).nan_to_num(0.0) @ V

    assert any(len(c.args) == 4 and c.args[3] is None for c in EX.q4.cases)
    assert not EX.q4.check(needs_a_mask)
    out = _unwrapped(capsys.readouterr().out)
    assert "raised TypeError" in out and "None)" in out


def test_q4_scaling_by_the_square_root_of_d_v_is_rejected_and_named(capsys):
    assert any(c.args[2].shape[-1] != c.args[0].shape[-1] for c in EX.q4.cases)
    def by_d_v(Q, K, V, mask=None):
        return _learner_attention(lambda w, has_key: w.nan_to_num(0.0))(Q * math.sqrt(Q.size(-1) / V.size(-1)), K, V, mask)

    assert not EX.q4.check(by_d_v)
    assert "√d_v" in _unwrapped(capsys.readouterr().out)


def test_q4_an_answer_that_divides_the_callers_q_in_place_is_rejected(capsys):
    def in_place(Q, K, V, mask=None):
        Q /= math.sqrt(Q.size(-1))
        return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask, scale=1.0)

    assert not EX.q4.check(in_place)
    assert "in place" in _unwrapped(capsys.readouterr().out)


# --- q1: a fix that also zeroes the pads' outputs -----------------------------------------------


def test_q1_a_fix_that_also_zeroes_the_pad_outputs_is_named_with_its_next_step(capsys):
    def fixed_then_zeroed(mha, x, lengths):
        real = torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]
        out, _ = mha(x, x, x, key_padding_mask=~real)
        return out * real[..., None]

    verdict = EX.q1.check(fixed_then_zeroed)
    assert not verdict
    assert "the pads' own outputs were set to 0" in _unwrapped(capsys.readouterr().out)
    assert "output for every position as it comes" in verdict.next_step


# --- q4 and lesson 05c: one guard, selected on the mask ------------------------------------------


def test_q4_teaches_the_guard_that_lesson_05c_accepts_and_names_nan_to_num_only_as_a_caveat():
    """05c q2 rejects `nan_to_num` (it decides by the values): 05b q4 must not teach it as the guard."""
    ex = EX.q4
    taught = [*ex._hints, *ex.next_steps.values(), *ex.advice.values(), ex.nonfinite_hint]
    assert not [text for text in taught if "nan_to_num" in text]
    assert "torch.where(mask.any(-1, keepdim=True)" in ex._hints[-1]
    code, prose = ex._solution.split("```python")[1].split("```")
    assert "nan_to_num" not in code and "torch.where(has_key" in code
    assert "nan_to_num" not in prose or "lesson 05c" in prose
    guard_05c = exercises.load("05c").q2  # the same guard in NumPy: lesson 05c accepts it and rejects nan_to_num
    assert guard_05c.evaluate(lambda out, mask: np.where(mask.any(axis=-1, keepdims=True), out, 0.0)).passed
    assert not guard_05c.evaluate(lambda out, mask: np.nan_to_num(out, nan=0.0)).passed


@pytest.mark.parametrize("mistake", [lesson05b._Q4_SEED, "-inf with the rows that have no allowed key left NaN"])
def test_q4_the_next_step_for_an_unguarded_empty_row_selects_on_the_mask(mistake, capsys):
    label = next(label for label in EX.q4.wrong_answers if label.startswith(mistake))
    verdict = EX.q4.check(EX.q4.wrong_answers[label])
    capsys.readouterr()
    assert verdict.mistake == label
    assert "torch.where(mask.any(-1, keepdim=True), attention_weights, 0.0)" in verdict.next_step


def test_q1_a_bool_attn_mask_with_sdpas_polarity_gives_the_bugs_outputs_and_is_told_about_both_masks(capsys):
    """The two are one mistake for the checker (the same outputs), so its one explanation names both masks."""
    from course_utils.exercises.lesson05b import _q1_as_attn_mask, _q1_buggy

    for case in EX.q1.cases:
        torch.testing.assert_close(_q1_as_attn_mask(*case.args), _q1_buggy(*case.args), rtol=0, atol=1e-12, equal_nan=True)
    verdict = EX.q1.check(_q1_as_attn_mask)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and "key_padding_mask" in out and "a bool attn_mask" in out
    assert "no `attn_mask`" in verdict.next_step


def test_q4_multiplying_the_nan_rows_by_has_key_gives_the_outputs_of_no_guard():
    """Why one wrong answer names both: the outputs cannot tell them apart (the early property can, by watching)."""
    from course_utils.exercises.lesson05b import _q4_minus_inf, _q4_multiply_guard

    for case in EX.q4.cases:
        torch.testing.assert_close(_q4_multiply_guard(*case.args), _q4_minus_inf(*case.args), rtol=0, atol=0,
                                   equal_nan=True)


def test_q4_a_fill_of_minus_1e4_is_named_as_the_weak_fill(capsys):
    verdict = EX.q4.check(_learner_attention_with_fill(-1e4))
    assert not verdict and "not far enough below scores of size 1e6" in _unwrapped(capsys.readouterr().out)
    assert "`float('-inf')`" in verdict.next_step


def _learner_attention_with_fill(fill):
    def answer(Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
        if mask is None:
            return torch.softmax(scores, dim=-1) @ V
        weights = torch.softmax(scores.masked_fill(~mask, fill), dim=-1)
        return torch.where(mask.any(dim=-1, keepdim=True), weights, 0.0) @ V

    return answer


# --- q2 and q3: the scale by the number of tokens, a renormalization patched with nan_to_num ----------


def test_q2_dividing_by_the_square_root_of_the_number_of_tokens_is_named(capsys):
    def by_length(q, k, v):
        L = q.shape[-2]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=q.dtype)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(L) + mask, dim=-1) @ v

    verdict = EX.q2.check(by_length)
    assert not verdict and "the scale 1/√L" in _unwrapped(capsys.readouterr().out)
    assert "`math.sqrt(q.shape[-1])`" in verdict.next_step


def test_q3_dividing_by_the_square_root_of_the_number_of_tokens_is_named(capsys):
    verdict = EX.q3.check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=q.size(-2) ** -0.5))
    assert not verdict and "the number of tokens L" in _unwrapped(capsys.readouterr().out)
    assert "`q.size(-2)`" in verdict.next_step


def test_q2_renormalizing_after_the_softmax_then_zeroing_its_nan_rows_is_named(capsys):
    def patched(q, k, v):
        allowed = torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype) == 0
        kept = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) * allowed
        return (kept / kept.sum(dim=-1, keepdim=True)).nan_to_num(0.0) @ v

    verdict = EX.q2.check(patched)
    assert not verdict and "with the NaN rows set to 0" in _unwrapped(capsys.readouterr().out)
    assert "`torch.softmax(scores + mask, dim=-1)`" in verdict.next_step


@pytest.mark.parametrize("name", NAMES)
def test_each_invariance_property_has_a_next_step_about_its_own_mask(name):
    for prop in getattr(EX, name).properties:
        assert "`" in prop.next_step and "keepdims" not in prop.next_step, prop.__name__


# --- rerun 33: a finite fill and SDPA's polarity inverted are named, not sent after the softmax (B8) ----


def _minus_10_fill(q, k, v):
    mask = torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(mask != 0, -10.0), dim=-1) @ v


def _minus_10_float_mask(q, k, v):
    L = q.shape[-2]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(1 - torch.tril(torch.ones(L, L, dtype=q.dtype))) * -10)


def _true_on_the_future(q, k, v):
    L = q.shape[-2]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1))


@pytest.mark.parametrize(
    "name,answer,named,step",
    [
        ("q2", _minus_10_fill, "a finite number", "`float('-inf')`"),
        ("q3", _minus_10_float_mask, "-10 is finite", "`torch.zeros(L, L).masked_fill(~allowed, float('-inf'))`"),
        ("q2", _true_on_the_future, "reads a bool True as *may attend*", "`attn_mask=~blocked`"),
        ("q3", _true_on_the_future, "reads a bool True as *may attend*", "`attn_mask=~blocked`"),
    ],
    ids=["q2 fill -10", "q3 float mask -10", "q2 True = blocked", "q3 True = blocked"],
)
def test_a_mask_applied_before_the_softmax_is_not_told_to_move_it_there(name, answer, named, step, capsys):
    verdict = getattr(EX, name).check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict and named in out, out
    assert step in verdict.next_step and "after it" not in verdict.next_step


def test_the_future_leak_next_step_names_every_way_a_mask_before_the_softmax_leaks():
    step = EX.q2.properties[0].next_step
    assert "finite fill such as -10" in step and "True as *may attend*" in step and "not onto the weights after it" not in step


# --- review 33: each answer is named by the mistake it made ---------------------------------------------


def _q1_float_mask_with_pads_true(mha, x, lengths):
    real = torch.arange(x.shape[1])[None, :] < torch.as_tensor(lengths)[:, None]
    return mha(x, x, x, key_padding_mask=(~real).to(x.dtype))[0]


def _q2_fill(fill):
    def answer(q, k, v):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(q.shape[-2], dtype=q.dtype)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        return torch.softmax(scores.masked_fill(mask != 0, fill), dim=-1) @ v

    return answer


def _q3_additive_fill(q, k, v):
    allowed = torch.tril(torch.ones(q.shape[-2], q.shape[-2], dtype=q.dtype))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=(1 - allowed) * -20.0)


def _q3_scale_by_batch(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1 / math.sqrt(q.shape[0]))


def _q4_fill_inverted_guard_right(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is None:
        return torch.softmax(scores, dim=-1) @ V
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.where(mask.any(-1, keepdim=True), weights, 0.0) @ V


def _q4_nan_to_num_on_the_scores(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(mask == 0, float("-inf")).nan_to_num(0.0)  # -inf becomes -1.8e308
    return torch.softmax(scores, dim=-1) @ V


NAMED = {  # finding: (exercise, answer, what the feedback says, what it must not say)
    "N9 a float mask with 1.0 on the pads": ("q1", _q1_float_mask_with_pads_true, "as a float mask of 1.0/0.0",
                                             "key_padding_mask=True means"),
    "N10 q2 a fill of -20": ("q2", _q2_fill(-20.0), "earlier outputs must not depend on the future", "loses digits"),
    "N10 q3 a float mask of -20": ("q3", _q3_additive_fill, "earlier outputs must not depend on the future",
                                   "loses digits"),
    "N11 the scale 1/sqrt(batch)": ("q3", _q3_scale_by_batch, "differs from the expected", "no scale at all"),
    "N12 the fill inverted, the guard right": ("q4", _q4_fill_inverted_guard_right, "`masked_fill(mask, ...)`",
                                               "Give such rows zeros"),
    "N13 nan_to_num on the scores": ("q4", _q4_nan_to_num_on_the_scores, "-inf made finite by `nan_to_num`",
                                     "Change the fill `-1e9`"),
}


@pytest.mark.parametrize("finding", NAMED)
def test_an_answer_is_named_by_its_own_mistake_not_by_a_neighbour(finding):
    name, answer, said, not_said = NAMED[finding]
    verdict = getattr(EX, name).evaluate(answer)
    text = _unwrapped(verdict.message + " " + (verdict.next_step or ""))
    assert not verdict and said in text and not_said not in text, text
