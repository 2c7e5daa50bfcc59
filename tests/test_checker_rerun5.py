"""The fifth expert rerun of the checkers (issue 33): each wrong name and wrong acceptance it found, and the one
wrong rejection, stays fixed. Every test here failed before its fix.

The answers are the reviewers' own (the fourth rerun's reports, the fifth's /tmp/r5 reports), shortened.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils import exercises
from test_exercises import _unwrapped  # the printed text, before it was wrapped

L = {lesson: exercises.load(lesson) for lesson in ("01", "02", "03", "04", "05", "05b", "05c", "06", "06b", "07",
                                                   "07b", "07c", "08b", "09", "09b")}


def _verdict(lesson: str, question: str, answer):
    verdict = getattr(L[lesson], question).evaluate(answer)
    assert not verdict.passed, f"{lesson} {question} accepted a wrong answer"
    return _unwrapped(verdict.message), _unwrapped(verdict.next_step or "")


# --- wrong answers that several tests put to several exercises ------------------------------------------------


def _flushed(p, threshold):
    p = np.array(p, dtype=float)
    p[p < threshold] = 0.0
    return p


def _merge_answer(*, floor=None, flush=0.0):
    """07b q3's merge of chunk outputs: right, or its shift floored at `floor`, or its shares below `flush` set to 0."""
    def merge(outs, lses):
        top = lses.max(axis=0)
        shift = np.where(np.isneginf(top), 0.0, top) if floor is None else np.maximum(top, floor)
        w = np.exp(lses - shift)
        share = w / np.where(w.sum(axis=0) > 0, w.sum(axis=0), 1.0)
        return (_flushed(share, flush)[..., None] * outs).sum(axis=0)

    return merge


def _ssmax_answer(*, floor=-np.inf, flush=0.0, flush_exponentials=0.0):
    """09b q1's scalable softmax: right, or with its shift floored at `floor`, or small values set to 0 after (`flush`)
    or before (`flush_exponentials`) normalizing."""
    def ssmax(x, s):
        z = s * np.log(x.shape[-1]) * x
        e = _flushed(np.exp(z - np.maximum(z.max(axis=-1, keepdims=True), floor)), flush_exponentials)
        return _flushed(e / e.sum(-1, keepdims=True), flush)

    return ssmax


def _state_merge_answer(floor):
    """07 q1's merge of two (m, ell) states with its shift floored at `floor`: right only while max(m1, m2) >= floor."""
    def merge(m1, ell1, m2, ell2):
        m = max(m1, m2)
        shift = max(m, floor)
        return m, ell1 * np.exp(m1 - shift) + ell2 * np.exp(m2 - shift)

    return merge


def _flash_forward_answer(flush):
    """07 q2's tiled loop: the lesson's own solution, with every tile weight below `flush` set to 0."""
    return _edited_flash_forward("p = np.exp(s - shift[:, None])", f"p = np.exp(s - shift[:, None]); p[p < {flush!r}] = 0.0")


def _edited_flash_forward(line, replacement):
    """07 q2's tiled loop: the lesson's own solution, with `line` replaced."""
    from course_utils.exercises.lesson07 import _Q2_SOLUTION
    import re

    code = re.search(r"```python\n(.*?)```", _Q2_SOLUTION, re.S).group(1)
    edited = code.replace(line, replacement)
    assert edited != code
    namespace = {"np": np}
    exec(edited, namespace)  # noqa: S102 - the lesson's own solution, with one line changed
    return next(v for k, v in namespace.items() if callable(v) and k != "np")


# --- lesson 05 q2: masked softmax ------------------------------------------------------------------------------


def _masked_softmax(scores, mask, *, axis=-1):
    mask = np.broadcast_to(mask, scores.shape)
    s = np.where(mask, scores, -np.inf)
    m = s.max(axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    t = e.sum(axis, keepdims=True)
    return np.where(t > 0, e / np.where(t > 0, t, 1), 0.0)


def test_05_q2_exponentiating_the_blocked_scores_is_named_as_an_overflow_not_a_blocked_maximum():
    def answer(scores, mask):
        mask = np.broadcast_to(mask, scores.shape)
        m = np.where(mask, scores, -np.inf).max(-1, keepdims=True)  # the allowed maximum: right
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(scores - m) * mask  # exp(800 - 1) = inf, and inf * 0 = nan
        t = e.sum(-1, keepdims=True)
        return np.where(t > 0, e / np.where(t > 0, t, 1), 0.0)

    message, step = _verdict("05", "q2", answer)
    assert "overflow encountered in exp" in message and "blocked scores" not in message
    assert "exponentiate `s - m`, not `scores - m`" in step


@pytest.mark.parametrize("guard", [lambda m: m.all(-1, keepdims=True), lambda m: ~m.any(-1, keepdims=True)],
                         ids=["all", "inverted"])
def test_05_q2_a_guard_that_zeroes_rows_with_keys_is_named_as_the_guard_not_underflow(guard):
    def answer(scores, mask):
        return np.where(guard(np.broadcast_to(mask, scores.shape)), _masked_softmax(scores, mask), 0.0)

    message, step = _verdict("05", "q2", answer)
    assert "zeroed a row that has one" in message and "underflow" not in message.replace("can underflow", "")
    assert "`any`, not `all`" in step


def test_05_q2_a_softmax_down_the_queries_is_named_as_the_axis():
    message, step = _verdict("05", "q2", lambda scores, mask: _masked_softmax(scores, mask, axis=0))
    assert "runs down axis 0" in message
    assert "axis=-1" in step and "overflow" not in step


# --- lesson 05b: a float mask of 0 and -1 -------------------------------------------------------------------------


def test_05b_q3_a_mask_of_0_and_minus_1_is_named_without_calling_it_tril_of_ones():
    def answer(q, k, v):
        n = q.shape[-2]
        mask = torch.tril(torch.ones(n, n, dtype=q.dtype)) - 1  # 0 allowed, -1 blocked
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    message, step = _verdict("05b", "q3", answer)
    assert "or 0 and -1" in message
    assert "torch.tril(torch.ones(L, L))" not in step and "is_causal=True" in step


def test_05b_q1_a_padding_mask_of_0_and_minus_1_is_named_and_its_step_quotes_no_line_it_lacks():
    def answer(mha, x, lengths):
        pads = torch.arange(x.shape[1])[None, :] >= torch.as_tensor(lengths)[:, None]
        return mha(x, x, x, key_padding_mask=pads.to(x.dtype) * -1.0)[0]

    message, step = _verdict("05b", "q1", answer)
    assert "0 and -1" in message
    assert "Drop the `.to(x.dtype)`" not in step and "no arithmetic on it" in step


# --- lesson 05c q2: the guard -------------------------------------------------------------------------------------


def test_05c_q2_a_guard_that_also_tests_isfinite_is_named_as_that():
    def answer(out, mask):
        ok = mask.any(-1, keepdims=True) & np.isfinite(out).all(-1, keepdims=True)
        return np.where(ok, out, 0.0)

    message, step = _verdict("05c", "q2", answer)
    assert "`np.isfinite(out)` in the condition" in message and "nan_to_num" not in message
    assert "Take `np.isfinite(out)` out of your condition" in step


def test_05c_q2_nan_to_num_inside_np_where_is_not_told_it_multiplied():
    message, step = _verdict("05c", "q2", lambda out, mask: np.where(mask.any(-1, keepdims=True),
                                                                     np.nan_to_num(out), 0.0))
    assert "replacing NaN by 0 (`nan_to_num`)" in message
    assert "multiply" not in step and "Delete the `np.nan_to_num(...)`" in step


# --- lesson 07 q2: a running maximum started at 0 -----------------------------------------------------------------


def test_07_q2_a_running_maximum_started_at_0_is_named_as_0_over_0_not_overflow():
    def answer(q, k, v, block_q, block_k):
        n_q, n_k = q.shape[0], k.shape[0]
        out = np.zeros((n_q, v.shape[1]))
        scale = 1 / math.sqrt(q.shape[1])
        for i0 in range(0, n_q, block_q):
            i1 = min(i0 + block_q, n_q)
            m, ell, acc = np.zeros(i1 - i0), np.zeros(i1 - i0), np.zeros((i1 - i0, v.shape[1]))  # m: not -inf
            for j0 in range(0, n_k, block_k):
                j1 = min(j0 + block_k, n_k)
                s = q[i0:i1] @ k[j0:j1].T * scale
                m_new = np.maximum(m, s.max(axis=1))
                alpha, p = np.exp(m - m_new), np.exp(s - m_new[:, None])
                ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + p @ v[j0:j1], m_new
            out[i0:i1] = acc / ell[:, None]
        return out

    message, _ = _verdict("07", "q2", answer)
    assert "nothing overflowed before it" in message and "started at 0" in message
    assert "overflows once the scores jump" not in message


@pytest.mark.parametrize("floor", [-1e4, -1e9])
def test_07_q2_a_running_maximum_floored_at_a_finite_number_is_caught_and_named(floor):
    answer = _edited_flash_forward("m_new = np.maximum(m, s.max(axis=1))",
                                   f"m_new = np.maximum(np.maximum(m, s.max(axis=1)), {floor!r})")
    message, _ = _verdict("07", "q2", answer)
    assert "-2e10" in message and "floored at any finite number" in message


# --- lesson 06 q1: Michelot's algorithm, flushes ------------------------------------------------------------------


@pytest.mark.parametrize("rounds", [6, 10, 13])
def test_06_q1_michelot_cut_after_6_to_13_rounds_is_named(rounds):
    from course_utils.exercises.lesson06 import _q1_michelot_steps as michelot

    message, step = _verdict("06", "q1", michelot(rounds))
    assert f"refining the support {rounds} times" in message and f"stops after {rounds} rounds" in step


def _sparsemax(x):
    x = np.asarray(x, float)
    z = np.sort(x)[::-1]
    cs, k = np.cumsum(z), np.arange(1, x.size + 1)
    s = (1 + k * z > cs).sum()
    return np.maximum(x - (cs[s - 1] - 1) / s, 0)


@pytest.mark.parametrize("renormalized", [False, True])
def test_06_q1_small_weights_flushed_to_0_are_rejected_and_not_called_rounding(renormalized):
    def answer(x):
        p = _sparsemax(x)
        p[p < 1e-3] = 0
        return p / p.sum() if renormalized else p

    message, _ = _verdict("06", "q1", answer)
    assert "rounded" not in message
    assert L["06"].q1.evaluate(_sparsemax).passed


def test_06b_q2_a_support_cut_off_at_1e_30_is_rejected():
    def answer(g, p, alpha):
        s = np.where(p > 1e-30, p ** (2 - alpha), 0.0)
        return s * g - (s @ g) / s.sum() * s

    _verdict("06b", "q2", answer)


# --- lesson 04 q3: float32 accepted, flushes rejected, shifts not misnamed ----------------------------------------


def _ce_gradient(logits, targets, *, dtype=np.float64, shift=None, flush=0.0):
    z = np.asarray(logits, dtype)
    z = z - (z.max(-1, keepdims=True) if shift is None else shift(z, targets))
    e = np.exp(z)
    p = e / e.sum(-1, keepdims=True)
    p[p < flush] = 0.0
    return p - targets


def test_04_q3_float32_passes_and_a_flush_below_1e_6_is_rejected():
    assert L["04"].q3.evaluate(lambda x, t: _ce_gradient(x, t, dtype=np.float32)).passed
    _verdict("04", "q3", lambda x, t: _ce_gradient(x, t, flush=1e-6))


@pytest.mark.parametrize("shift", [lambda z, t: (z * t).sum(-1, keepdims=True),
                                   lambda z, t: (z.max(-1, keepdims=True) + z.min(-1, keepdims=True)) / 2],
                         ids=["target logit", "midrange"])
def test_04_q3_a_shift_that_is_no_named_shift_is_not_named(shift):
    message, _ = _verdict("04", "q3", lambda x, t: _ce_gradient(x, t, shift=shift))
    assert "This is exactly what" not in message


# --- lessons 01, 02, 03: labels that named what the answer did not write ------------------------------------------


def test_01_q1_max_plus_88_is_not_named_minus_80():
    def answer(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True) + 88)
        return e / e.sum(-1, keepdims=True)

    message, step = _verdict("01", "q1", answer)
    assert "minus a constant" in message and "80 gives" not in message and "`- 80`" not in step


@pytest.mark.parametrize("floor", [lambda r: np.maximum(r, -700), lambda r: np.clip(r, -100, 0)],
                         ids=["maximum", "clip"])
def test_02_q2_a_floor_on_the_result_is_named_as_a_floor(floor):
    def answer(x):
        s = x - x.max(axis=-1, keepdims=True)
        return floor(s - np.log(np.exp(s).sum(axis=-1, keepdims=True)))

    message, step = _verdict("02", "q2", answer)
    assert "the result stops at" in message and "is the log of the probabilities" not in message
    assert "`np.maximum` or `np.clip`" in step


def test_03_q3_q_and_k_each_divided_by_the_root_is_named_as_that_too():
    message, step = _verdict("03", "q3", lambda Q, K: (Q / np.sqrt(Q.shape[-1])) @ (K / np.sqrt(Q.shape[-1])).T)
    assert "dividing both Q and K by √d_k" in message and "not Q and K each" in step


# --- lessons 07b, 07c, 09 -----------------------------------------------------------------------------------------


def test_09_q1_a_finite_fill_for_masked_keys_is_rejected():
    def answer(x, sink):
        x = np.where(np.isneginf(x), -1e4, x)
        m = np.maximum(x.max(axis=-1, keepdims=True), sink)
        e = np.exp(x - m)
        return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))

    _verdict("09", "q1", answer)


def test_07b_q2_a_clip_of_the_score_gradient_is_rejected():
    _verdict("07b", "q2", lambda p, d_p, out, d_out: np.clip(p * (d_p - (d_out * out).sum(-1)[:, None]), -1, 1))


def test_07b_q1_expm1_plus_1_is_not_told_it_flushed():
    message, _ = _verdict("07b", "q1", lambda s, lse: np.expm1(s - np.where(np.isneginf(lse), np.inf, lse)[..., None])
                          + 1.0)
    assert "or a formula that loses small values" in message


def test_07c_q1_one_more_tensor_of_the_outputs_size_is_among_the_readings_named():
    message, step = _verdict("07c", "q1", lambda B, H, L_, D: (B * H * L_ * D * 2 * 2 + B * H * L_ * 4) / 2**20)
    assert "a copy of Q" in message and "remove any other term" in step


# --- the regression sweep and the rerun of 05, 05b, 05c and 07 on the fixed checkers -------------------------------


def _sink_answer(*, fill=None, clip=None):
    def answer(x, sink):
        if fill is not None:
            x = np.where(np.isneginf(x), fill, x)
        if clip is not None:
            x = np.clip(x, -clip, clip)
        m = np.maximum(x.max(axis=-1, keepdims=True), sink)
        e = np.exp(x - m)
        return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))

    return answer


@pytest.mark.parametrize("clip", [3000.0, 5000.0, 1e4])
def test_09_q1_a_clip_at_a_limit_of_its_own_keeps_the_clips_name(clip):
    message, step = _verdict("09", "q1", _sink_answer(clip=clip))
    assert "clipping the scores at a fixed limit" in message and "np.clip" in step


@pytest.mark.parametrize("fill", [-1e4, -3e4, -1e6, -1e9])
def test_09_q1_every_finite_fill_a_learner_writes_is_rejected_and_told_to_keep_minus_inf(fill):
    message, step = _verdict("09", "q1", _sink_answer(fill=fill))
    assert "keep -inf as it is" in message or "finite number" in step


def test_07b_q1_a_finite_fill_for_masked_scores_is_rejected():
    _verdict("07b", "q1", lambda s, lse: np.exp(np.where(np.isneginf(s), -1e4, s)
                                                - np.where(np.isneginf(lse), np.inf, lse)[..., None]))


@pytest.mark.parametrize("limit", [3.0, 5.0])
def test_07b_q2_a_clip_of_the_score_gradient_at_a_few_units_is_rejected(limit):
    _verdict("07b", "q2", lambda p, d_p, out, d_out: np.clip(p * (d_p - (d_out * out).sum(-1)[:, None]), -limit, limit))


def test_07c_q1_a_do_buffer_and_a_float32_dq_are_not_called_q_k_and_v_alone():
    message, step = _verdict("07c", "q1", lambda B, H, L_, D: (B * H * L_ * D * 2 + B * H * L_ * 4 + B * H * L_ * D * 2
                                                               + B * H * L_ * D * 4) / 2**20)
    assert "or other tensors of Q's size" in message and "a buffer such as dO or dQ" in step


def test_07_q1_rescaling_through_the_first_maximum_is_rejected():
    def merge(m1, ell1, m2, ell2):
        m = max(m1, m2)
        if m == -np.inf:
            return m, 0.0
        if m1 == -np.inf:
            return m2, ell2
        return m, (ell1 + ell2 * np.exp(m2 - m1)) * np.exp(m1 - m)  # exp(m2 - m1) overflows 710 apart

    _verdict("07", "q1", merge)


def test_05b_q2_an_input_transposed_in_place_is_named_as_changed_in_place():
    def answer(q, k, v):
        n = q.shape[-2]
        k.transpose_(-2, -1)
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=q.dtype)
        return torch.softmax(q @ k / math.sqrt(q.shape[-1]) + mask, dim=-1) @ v

    message, _ = _verdict("05b", "q2", answer)
    assert "in place" in message and "could not use your answer" not in message


def test_05_q2_rows_that_sum_below_1_get_a_step_that_fits_an_epsilon_in_the_sum():
    def answer(scores, mask):
        mask = np.broadcast_to(mask, scores.shape)
        e = np.exp(np.where(mask, scores, -np.inf) - np.where(mask, scores, -np.inf).max(-1, keepdims=True))
        return e / (e.sum(-1, keepdims=True) + 1e-3)

    _, step = _verdict("05", "q2", answer)
    assert "anything added to, or multiplied into, the row sum" in step


def test_05b_q2_a_softmax_over_the_queries_gets_a_step_that_names_the_axis():
    def answer(q, k, v):
        n = q.shape[-2]
        mask = torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=q.dtype)
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask, dim=-2) @ v

    _, step = _verdict("05b", "q2", answer)
    assert "`dim=-2`" in step


# --- the sixth rerun -----------------------------------------------------------------------------------------------


def test_09_q1_a_logsumexp_form_passes_on_the_rows_far_below_0():
    import scipy.special

    def answer(x, sink):
        lse = np.logaddexp(sink, scipy.special.logsumexp(x, axis=-1, keepdims=True))
        return np.exp(x - lse)

    assert L["09"].q1.evaluate(answer).passed


def test_01_q1_a_shift_by_a_high_percentile_is_rejected():
    def answer(x):
        e = np.exp(x - np.percentile(x, 90, axis=-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    _verdict("01", "q1", answer)


def test_02_q2_a_floor_at_minus_1e4_is_rejected():
    def answer(x):
        s = x - x.max(axis=-1, keepdims=True)
        return np.maximum(s - np.log(np.exp(s).sum(axis=-1, keepdims=True)), -1e4)

    _verdict("02", "q2", answer)


@pytest.mark.parametrize("lesson,question,answer", [
    ("07b", "q3", _merge_answer(flush=1e-5)),
    ("06", "q1", lambda x: _flushed(_sparsemax(x), 1e-8)),
], ids=["07b q3 shares below 1e-5", "06 q1 weights below 1e-8"])
def test_flushes_of_small_weights_left_by_the_fifth_rerun_are_rejected(lesson, question, answer):
    _verdict(lesson, question, answer)


def test_07_q2_a_flush_of_tile_weights_is_rejected():
    _verdict("07", "q2", _flash_forward_answer(1e-6))


def test_07b_q1_a_finite_fill_gets_a_remedy_that_names_the_fill():
    message, _ = _verdict("07b", "q1", lambda s, lse: np.exp(np.where(np.isneginf(s), -1e9, s)
                                                              - np.where(np.isneginf(lse), np.inf, lse)[..., None]))
    assert "finite fill for a masked -inf" in message


def test_05b_q3_dropout_left_on_is_named_as_randomness():
    message, step = _verdict("05b", "q3", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                                                          dropout_p=0.1))
    assert "different result each time" in message and "dropout_p" in step


def test_05b_q1_a_float_fill_of_minus_10_on_the_pads_is_named():
    def answer(mha, x, lengths):
        pads = torch.arange(x.shape[1])[None, :] >= torch.as_tensor(lengths)[:, None]
        return mha(x, x, x, key_padding_mask=pads.to(x.dtype) * -10.0)[0]

    message, step = _verdict("05b", "q1", answer)
    assert "a finite -10" in message and "float('-inf')" in step


def test_05b_q2_a_scale_taken_from_the_values_is_rejected():
    def answer(q, k, v):
        n = q.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool).tril()
        scores = (q @ k.transpose(-2, -1) / math.sqrt(v.shape[-1])).masked_fill(~mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v

    _verdict("05b", "q2", answer)


def test_05_q1_pad_rows_opened_by_an_or_get_a_step_about_that_input_and_the_or():
    def answer(lengths, max_len):
        j = np.arange(max_len)
        real = j[None, :] < np.asarray(lengths)[:, None]
        mask = (j[None, :] <= j[:, None])[None] & real[:, None, :]
        return mask | ~real[:, :, None]  # pad queries see everything

    _, step = _verdict("05", "q1", answer)
    assert "([3], 3)" not in step and "`|`" in step


# --- the seventh rerun: flushes below the thresholds the sixth rerun's cases caught ----------------------------------


def test_07b_q3_a_flush_of_shares_below_1e_6_is_rejected():
    _verdict("07b", "q3", _merge_answer(flush=1e-6))


def test_09b_q1_a_flush_of_weights_below_1e_9_is_rejected():
    _verdict("09b", "q1", _ssmax_answer(flush=1e-9))


def test_07_q2_a_flush_of_tile_weights_below_1e_8_is_rejected():
    _verdict("07", "q2", _flash_forward_answer(1e-8))


def test_04_q2_a_wrong_answer_that_builds_the_jacobian_is_not_called_right():
    def answer(g, p):
        s = (g[..., :, None] * p[..., None, :]).sum(-1).sum(-1, keepdims=True) / p.shape[-1]
        return p * (g - s)

    message, _ = _verdict("04", "q2", answer)
    assert "is right, but" not in message


def test_05_q2_masking_after_the_softmax_with_np_where_gets_a_step_that_fits_it():
    def answer(scores, mask):
        e = np.exp(scores - scores.max(-1, keepdims=True))
        return np.where(mask, e, 0.0) / e.sum(-1, keepdims=True)

    _, step = _verdict("05", "q2", answer)
    assert "`np.where(mask, ..., 0)`" in step


# --- the eighth rerun ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [1e-7, 1e-8], ids=["eighth rerun", "ninth rerun"])
def test_05_q2_a_flush_of_small_weights_is_rejected(threshold):
    _verdict("05", "q2", lambda scores, mask: _flushed(_masked_softmax(scores, mask), threshold))


def test_05b_q1_a_mask_built_from_zero_embeddings_is_not_told_to_add_a_mask():
    _, step = _verdict("05b", "q1", lambda mha, x, lengths: mha(x, x, x, key_padding_mask=x.abs().sum(-1) == 0)[0])
    assert "Add `key_padding_mask" not in step and "built from `lengths`" in step


def test_09b_q1_a_flush_is_not_called_float32():
    message, _ = _verdict("09b", "q1", _ssmax_answer(flush=1e-9))
    assert "float32" not in message


def test_07_q1_a_guard_that_empties_the_merge_for_one_empty_block_is_named():
    def merge(m1, ell1, m2, ell2):
        if m1 == -np.inf or m2 == -np.inf:
            return -np.inf, 0.0
        m = max(m1, m2)
        return m, ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)

    message, _ = _verdict("07", "q1", merge)
    assert "overflows" not in message and "the other block's state" in message


def test_09_q1_uniform_weights_for_a_fully_masked_row_are_named():
    def answer(x, sink):
        m = np.maximum(x.max(-1, keepdims=True), sink)
        e = np.exp(x - m)
        w = e / (np.exp(sink - m) + e.sum(-1, keepdims=True))
        return np.where(np.isneginf(x).all(-1, keepdims=True), 1.0 / x.shape[-1], w)

    message, step = _verdict("09", "q1", answer)
    assert "uniform weights for a fully masked row" in message and "1 / n" in step


@pytest.mark.parametrize("threshold", [1e-9, 1e-10])
def test_flushes_below_1e_9_are_rejected_in_07b_q3_and_09b_q1(threshold):
    _verdict("07b", "q3", _merge_answer(flush=threshold))
    _verdict("09b", "q1", _ssmax_answer(flush=threshold))


# --- the ninth rerun -----------------------------------------------------------------------------------------------


def test_01_q1_the_last_weight_as_1_minus_the_others_passes():
    def answer(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        p[..., -1] = 1 - p[..., :-1].sum(-1)  # -2.2e-16 where the last weight is 0: a rounding
        return p

    assert L["01"].q1.evaluate(answer).passed


def test_a_shift_clamped_at_0_is_rejected_in_07_q1_and_09b_q1():
    _verdict("07", "q1", _state_merge_answer(0.0))
    _verdict("09b", "q1", _ssmax_answer(floor=0.0))


def test_05b_q4_nan_weights_replaced_by_1_over_s_are_named_among_the_missing_guards():
    def answer(Q, K, V, mask=None):
        scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        w = torch.softmax(scores, -1)
        return torch.where(torch.isnan(w), 1.0 / w.shape[-1], w) @ V

    message, _ = _verdict("05b", "q4", answer)
    assert "NaN weights replaced by 1/S" in message


# --- the tenth rerun -----------------------------------------------------------------------------------------------


def test_01_q3_a_floor_on_the_temperature_is_rejected():
    def answer(x, temperature):
        z = x / max(temperature, 1e-2)
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    _verdict("01", "q3", answer)


def test_01_q1_a_float32_input_is_named_as_float32_in_the_message():
    message, _ = _verdict("01", "q1", lambda x: np.exp(x - np.logaddexp.reduce(x, axis=-1, keepdims=True)))
    assert "(float32)" in message


@pytest.mark.parametrize("floor", [-1e4, -1e9])
def test_a_shift_floored_at_a_finite_number_is_rejected_in_07b_q3(floor):
    _verdict("07b", "q3", _merge_answer(floor=floor))


@pytest.mark.parametrize("floor", [-1e4, -1e9])
def test_09b_q1_a_shift_floored_at_a_finite_number_is_rejected(floor):
    _verdict("09b", "q1", _ssmax_answer(floor=floor))


def test_09b_q2_the_exp_form_with_nan_to_num_is_named_as_a_hidden_overflow():
    def soft_cap(x, c):
        e = np.exp(2 * x / c)
        return np.nan_to_num(c * (e - 1) / (e + 1))

    message, step = _verdict("09b", "q2", soft_cap)
    assert "something turned the nan into 0" in message and "softcap(-x)" not in message and "np.tanh" in step


# --- the eleventh rerun --------------------------------------------------------------------------------------------


def test_07b_q3_logsumexp_forms_of_the_merge_pass():
    import scipy.special

    def merge(outs, lses):
        total = scipy.special.logsumexp(lses, axis=0)
        with np.errstate(invalid="ignore"):
            w = np.nan_to_num(np.exp(lses - total))
        return (w[..., None] * outs).sum(0)

    assert L["07b"].q3.evaluate(merge).passed


def test_06_q1_the_sum_to_1_step_names_a_float16_step_too():
    """Rerun 11: a float16 cast whose first failure is the sum (0.999) was sent only to the support size."""
    from course_utils.exercises.lesson06 import _q1_sums_to_one

    assert "float16" in _q1_sums_to_one.next_step and "`.dtype`" in _q1_sums_to_one.next_step


# --- the twelfth rerun ---------------------------------------------------------------------------------------------


def test_07b_q3_a_finite_fill_for_an_empty_chunks_lse_is_rejected():
    def merge(outs, lses):
        filled = np.nan_to_num(lses, neginf=-1e4)
        w = np.exp(filled - filled.max(0))
        return ((w / w.sum(0))[..., None] * outs).sum(0)

    _verdict("07b", "q3", merge)


def test_07_q1_a_shift_floored_at_minus_1e4_is_rejected():
    _verdict("07", "q1", _state_merge_answer(-1e4))


def test_09b_q1_a_flush_before_normalizing_is_not_called_rounding():
    message, _ = _verdict("09b", "q1", _ssmax_answer(flush_exponentials=1e-10))
    assert "rounded to" not in message


def test_05_q2_an_additive_minus_inf_mask_is_rejected_on_blocked_inf_and_nan_and_told_adding_reads_them():
    def answer(scores, mask):
        s = scores + np.where(mask, 0.0, -np.inf)
        m = s.max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(s - m)
        t = e.sum(-1, keepdims=True)
        return e / np.where(t > 0, t, 1.0)

    message, _ = _verdict("05", "q2", answer)
    assert "adding a mask reads the blocked scores" in message


def test_05_q2_an_answer_under_its_own_errstate_is_not_told_it_underflowed_for_sure():
    def answer(scores, mask):
        mask = np.broadcast_to(mask, np.shape(scores))
        m = np.where(mask, scores, -np.inf).max(-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)
        with np.errstate(all="ignore"):
            e = np.exp(scores - m) * mask
            t = e.sum(-1, keepdims=True)
            return np.where(t > 0, e / t, 0.0)

    message, _ = _verdict("05", "q2", answer)
    assert "an `np.errstate` of yours hides it" in message


# --- found while the thirteenth rerun ran: a pair of scalars (07 q1's (m, ell)) -----------------------------------


def _torch_merge(dtype):
    def merge(m1, ell1, m2, ell2):
        m1, ell1, m2, ell2 = (torch.tensor(x, dtype=dtype) for x in (m1, ell1, m2, ell2))
        m = torch.maximum(m1, m2)
        if torch.isneginf(m):
            return m, torch.tensor(0.0, dtype=dtype)
        return m, ell1 * torch.exp(m1 - m) + ell2 * torch.exp(m2 - m)

    return merge


def test_07_q1_a_pair_of_float64_torch_scalars_is_a_right_answer():
    assert L["07"].q1.evaluate(_torch_merge(torch.float64)).passed


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_07_q1_a_pair_of_low_precision_torch_scalars_is_named_by_its_dtype(dtype):
    message, _ = _verdict("07", "q1", _torch_merge(dtype))
    assert f"returned {str(dtype).removeprefix('torch.')} values" in message and "tuple" not in message


def test_07_q1_a_pair_of_numpy_float32_scalars_is_named_as_float32():
    def merge(m1, ell1, m2, ell2):
        m = np.float32(max(m1, m2))
        if m == -np.inf:
            return m, np.float32(0.0)
        return m, np.float32(ell1) * np.exp(np.float32(m1) - m) + np.float32(ell2) * np.exp(np.float32(m2) - m)

    message, _ = _verdict("07", "q1", merge)
    assert "returned float32 values" in message


# --- the thirteenth rerun -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("decimals", [7, 8])
def test_06_q1_a_result_rounded_to_7_or_8_decimals_is_named_so_not_as_rounded_inputs(decimals):
    """Only the case with a weight of 4.6e-9 fails; the answer rounds every case, so it is no flush."""
    def sparsemax_row(x):
        z = np.sort(x)[::-1]
        cs = np.cumsum(z)
        k = np.arange(1, len(z) + 1)
        kk = np.sum(1 + k * z > cs)
        return np.round(np.maximum(x - (cs[kk - 1] - 1) / kk, 0), decimals)

    message, step = _verdict("06", "q1", sparsemax_row)
    assert f"rounded to {decimals} decimals" in message and "inputs" not in message + step


def test_06b_q2_a_result_rounded_to_1_decimal_is_not_named_as_a_support_mistake():
    def entmax_backward_row(g, p, alpha):
        s = np.where(p > 0, p, 0.0) ** (2 - alpha) * (p > 0)
        return np.round(s * g - (s @ g) / s.sum() * s, 1)

    message, _ = _verdict("06b", "q2", entmax_backward_row)
    assert "support" not in message and "tiny" not in message


def test_01_q1_a_softmax_computed_in_float16_and_cast_back_is_named_as_float16():
    def softmax(x, axis=-1):
        x16 = np.asarray(x, dtype=np.float16)
        e = np.exp(x16 - x16.max(axis=axis, keepdims=True))
        return (e / e.sum(axis=axis, keepdims=True)).astype(np.float64)

    message, step = _verdict("01", "q1", softmax)
    assert "float64 values that are all 16-bit floats (float16 or bfloat16)" in message and ".half()" in step


# --- the fourteenth rerun ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("threshold", [1e-9, 1e-12, 1e-15])
def test_09_q1_a_flush_before_normalizing_is_not_called_rounding(threshold):
    """The flush moves the sink's weight of 0.5 by one ulp; that is no rounding of the other cases."""
    def sink_softmax(x, sink):
        m = np.maximum(x.max(-1, keepdims=True), sink)
        e = np.exp(x - m)
        e = np.where(e < threshold, 0.0, e)
        return e / (np.exp(sink - m) + e.sum(-1, keepdims=True))

    message, step = _verdict("09", "q1", sink_softmax)
    assert "rounded to" not in message and "flush of small weights" in message and "rounding" not in step


@pytest.mark.parametrize("make", ["bfloat16", "subtract"])
def test_04_q3_and_02_q2_bfloat16_steps_are_never_called_float16_alone(make):
    if make == "bfloat16":
        def answer(logits, targets):
            return torch.softmax(torch.as_tensor(logits), -1).bfloat16().double().numpy() - targets
        message, step = _verdict("04", "q3", answer)
    else:
        def answer(x):
            m = x.max(-1, keepdims=True)
            return x - m - torch.logsumexp(torch.as_tensor(x - m).bfloat16(), -1, keepdim=True).double().numpy()
        message, step = _verdict("02", "q2", answer)
    assert "float16 numbers" not in message and "shows float16 is" not in step


def test_01_q1_a_softmax_in_bfloat16_is_named_as_bfloat16():
    def softmax(x, axis=-1):
        return torch.softmax(torch.tensor(x).to(torch.bfloat16), dim=axis).double().numpy()

    message, step = _verdict("01", "q1", softmax)
    assert "float64 values that are all bfloat16 numbers" in message and ".bfloat16()" in step


# --- the fifteenth rerun -------------------------------------------------------------------------------------------


def _softmax_then(step):
    """01 q1's softmax with `step` applied to its result (a rounding, a flush, a grid)."""
    def stable_softmax(x):
        x = np.asarray(x, dtype=float)
        e = np.exp(x - x.max(-1, keepdims=True))
        return step(e / e.sum(-1, keepdims=True))

    return stable_softmax


def test_07_q2_a_wrong_torch_loop_is_not_told_its_result_is_right():
    answer = _edited_flash_forward("alpha = np.exp(m - shift)", "alpha = np.ones_like(m)")  # no rescaling

    def in_torch(q, k, v, block_q, block_k):
        return answer(*(torch.from_numpy(a).numpy() for a in (q, k, v)), block_q, block_k)

    message, _ = _verdict("07", "q2", in_torch)
    assert "is right, but" not in message and "is not right either, and your function uses PyTorch" in message


@pytest.mark.parametrize("decimals", [2, 4, 6, 8])
def test_06_q1_rounded_inputs_are_named_as_rounded_inputs(decimals):
    def sparsemax_row(x):
        x = np.round(x, decimals)
        z = np.sort(x)[::-1]
        cs = np.cumsum(z)
        k = np.arange(1, len(z) + 1)
        kk = np.sum(1 + k * z > cs)
        return np.maximum(x - (cs[kk - 1] - 1) / kk, 0)

    message, step = _verdict("06", "q1", sparsemax_row)
    assert "Your function rounds its inputs" in message and "rounding of the inputs" in step


@pytest.mark.parametrize(("lesson", "question", "answer", "named"), [
    ("07c", "q1", lambda B, H, L_, D: round((B * H * L_ * D * 2 + B * H * L_ * 4) / 2**20, 5), "rounded to 5 decimals"),
    ("09b", "q2", lambda x, c: np.round(c * np.tanh(x / c), 1), "rounded to 1 decimal:"),
    ("01", "q3", lambda x, t: _softmax_then(lambda p: np.round(p, 1))(np.asarray(x) / t), "rounded to 1 decimal:"),
    ("01", "q1", _softmax_then(np.vectorize(lambda v: float(f"{v:.3g}"))), "rounded to 3 significant digits"),
    ("06", "q1", lambda x: np.vectorize(lambda v: float(f"{v:.5g}"))(L["06"].q1.reference(x)), "rounded to 5 significant digits"),
], ids=["07c q1 round 5", "09b q2 round 1", "01 q3 round 1", "01 q1 3 significant digits", "06 q1 5 significant digits"])
def test_a_rounding_is_named_by_the_fewest_digits_that_give_every_case(lesson, question, answer, named):
    message, _ = _verdict(lesson, question, answer)
    assert named in message


def test_07c_q1_a_result_rounded_to_halves_is_never_named_bfloat16():
    """07c q1 draws two random cases on each check: 0.5-steps below 128 fit bfloat16, but they are short decimals."""
    for _ in range(20):
        message, _ = _verdict("07c", "q1", lambda B, H, L_, D: round((B * H * L_ * D * 2 + B * H * L_ * 4) / 2**20 * 2) / 2)
        assert "bfloat16" not in message


def test_06b_q2_reading_p_in_float32_is_named_as_float32_not_as_a_support_mistake():
    def entmax_backward_row(g, p, alpha):
        p = p.astype(np.float32)
        s = np.where(p > 0, p, 0) ** (2 - alpha) * (p > 0)
        return s * g - (s @ g) / s.sum() * s

    message, _ = _verdict("06b", "q2", entmax_backward_row)
    assert "reads p in float32" in message and "however small" not in message


@pytest.mark.parametrize("lesson", ["01", "02", "04"])
@pytest.mark.parametrize("cast", ["float16", "bfloat16"])
def test_shifted_scores_rounded_to_16_bits_are_rejected(lesson, cast):
    def rounded(z):
        return (z.astype(np.float16).astype(np.float64) if cast == "float16"
                else torch.as_tensor(z).bfloat16().double().numpy())

    def shifted(x):
        x = np.asarray(x, dtype=float)
        return rounded(x - x.max(-1, keepdims=True))

    answers = {
        "01": ("q1", lambda x: np.exp(shifted(x)) / np.exp(shifted(x)).sum(-1, keepdims=True)),
        "02": ("q2", lambda x: shifted(x) - np.log(np.exp(shifted(x)).sum(-1, keepdims=True))),
        "04": ("q3", lambda logits, targets: np.exp(shifted(logits)) / np.exp(shifted(logits)).sum(-1, keepdims=True) - targets),
    }
    question, answer = answers[lesson]
    _verdict(lesson, question, answer)


@pytest.mark.parametrize("threshold", [1e-2, 1e-3, 1e-4])
def test_01_q1_pruning_small_weights_before_normalizing_is_not_called_rounding(threshold):
    def stable_softmax(x):
        x = np.asarray(x, dtype=float)
        e = np.exp(x - x.max(-1, keepdims=True))
        e = np.where(e < threshold, 0.0, e)
        return e / e.sum(-1, keepdims=True)

    message, step = _verdict("01", "q1", stable_softmax)
    assert "rounded to" not in message and "rounding" not in step


@pytest.mark.parametrize("steps", [256, 1024])
def test_01_q1_a_fixed_grid_is_not_named_a_16_bit_float(steps):
    message, step = _verdict("01", "q1", _softmax_then(lambda p: np.round(p * steps) / steps))
    assert "16" not in message and "bfloat16" not in step


# --- the sixteenth rerun -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("lesson", "question", "answer"), [
    ("04", "q3", lambda logits, targets: _softmax_then(lambda p: p)(np.round(logits, 2)) - targets),
    ("01", "q3", lambda x, t: _softmax_then(lambda p: p)(np.round(np.asarray(x) / t, 2))),
    ("09", "q1", lambda x, s: _sink_softmax_rounded(x, s, lambda z: z.astype(np.float16).astype(np.float64))),
    ("09", "q1", lambda x, s: _sink_softmax_rounded(x, s, lambda z: np.round(z, 3))),
], ids=["04 q3 logits to 2 decimals", "01 q3 x/T to 2 decimals", "09 q1 x - m in float16", "09 q1 x - m to 3 decimals"])
def test_scores_rounded_to_a_few_decimals_or_16_bits_are_rejected(lesson, question, answer):
    _verdict(lesson, question, answer)


def _sink_softmax_rounded(x, sink, rounded):
    """09 q1's sink softmax with its shifted scores passed through `rounded`."""
    m = np.maximum(x.max(axis=-1, keepdims=True), sink)
    with np.errstate(invalid="ignore"):
        e = np.exp(rounded(x - m))
    return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))


def test_05c_q2_a_rounded_result_is_named_as_rounded_not_as_rounded_inputs():
    message, step = _verdict("05c", "q2", lambda out, mask: np.round(np.where(mask.any(-1, keepdims=True), out, 0.0), 4))
    assert "rounded to 4 decimals" in message and "inputs" not in message + step


def test_05_q2_a_result_cast_to_float16_is_named_though_its_values_are_large():
    message, _ = _verdict("05", "q2", lambda scores, mask: _masked_softmax(scores, mask).astype(np.float16).astype(np.float64))
    assert "16-bit floats (float16 or bfloat16)" in message


@pytest.mark.parametrize("cut", [1e-200, float(np.finfo(np.float32).tiny)])
def test_06b_q2_a_fixed_cut_off_is_not_named_float32(cut):
    def entmax_backward_row(g, p, alpha):
        s = np.where(p > cut, np.where(p > cut, p, 1.0) ** (2 - alpha), 0.0)
        return s * g - (s @ g) / s.sum() * s

    message, _ = _verdict("06b", "q2", entmax_backward_row)
    assert "float32" not in message


def test_06_q1_a_result_truncated_to_6_decimals_is_not_named_float32():
    message, step = _verdict("06", "q1", lambda x: np.trunc(L["06"].q1.reference(x) * 1e6) / 1e6)
    assert "float32" not in message + step


def test_06b_q2_rounding_s_is_not_named_as_rounding_the_input_p():
    def entmax_backward_row(g, p, alpha):
        s = np.round(np.where(p > 0, np.where(p > 0, p, 1.0) ** (2 - alpha), 0.0), 6)
        return s * g - (s @ g) / s.sum() * s

    message, step = _verdict("06b", "q2", entmax_backward_row)
    assert "rounds its input" not in message and "rounding of the inputs" not in step


def test_06_q1_inputs_rounded_to_6_significant_digits_are_not_named_float32():
    from course_utils.exercises.core import _significant

    message, step = _verdict("06", "q1", lambda x: L["06"].q1.reference(_significant(x, 6)))
    assert "float32" not in message + step


# --- the seventeenth rerun -----------------------------------------------------------------------------------------


def test_09b_q2_a_float32_cap_is_rejected():
    _verdict("09b", "q2", lambda x, c: np.float32(c) * np.tanh(x / np.float32(c)))


def test_01_q3_x_over_t_rounded_to_float32_is_rejected():
    def softmax_with_temperature(x, temperature):
        z = (np.asarray(x, dtype=float) / temperature).astype(np.float32).astype(np.float64)
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    _verdict("01", "q3", softmax_with_temperature)


def test_01_q3_scores_rounded_to_6_significant_digits_are_not_named_float32():
    from course_utils.exercises.core import _significant

    message, step = _verdict("01", "q3", lambda x, t: L["01"].q3.reference(_significant(np.asarray(x, dtype=float), 6), t))
    assert "float32" not in message + step


def test_09_q1_a_float32_sink_is_named_float32_not_a_lost_minus_inf():
    def sink_softmax(x, sink):
        s = float(np.float32(sink))
        m = np.maximum(x.max(axis=-1, keepdims=True), s)
        e = np.exp(x - m)
        return e / (np.exp(s - m) + e.sum(axis=-1, keepdims=True))

    message, step = _verdict("09", "q1", sink_softmax)
    assert "rounded to float32" in message and "keep -inf as it is" not in message and "float32" in step


def test_05c_q2_rounding_the_input_out_gets_a_step_for_both_places():
    message, step = _verdict("05c", "q2", lambda out, mask: np.where(mask.any(-1, keepdims=True), np.round(out, 4), 0.0))
    assert "rounded to 4 decimals" in message and "on your return line or where you read an input" in step


def test_07c_q1_a_float16_result_is_never_named_a_rounding():
    answer = lambda B, H, L_, D: float(torch.tensor((B * H * L_ * D * 2 + B * H * L_ * 4) / 2**20).half().double())  # noqa: E731
    for _ in range(20):  # two of its cases are drawn at random on each check
        message, _ = _verdict("07c", "q1", answer)
        assert "rounded to" not in message


# --- the eighteenth rerun ------------------------------------------------------------------------------------------


def test_07_q1_a_merge_wrong_only_when_the_second_block_is_empty_is_rejected():
    def merge(m1, ell1, m2, ell2):
        if m1 == -np.inf:
            return m2, ell2
        if m2 == -np.inf:
            return m2, ell2  # a copy-paste slip: the first block's state was meant
        m = max(m1, m2)
        return m, ell1 * np.exp(m1 - m) + ell2 * np.exp(m2 - m)

    _verdict("07", "q1", merge)


def test_09_q1_shifted_scores_rounded_to_4_decimals_are_not_named_float32():
    def sink_softmax(x, sink):
        m = np.maximum(x.max(axis=-1, keepdims=True), sink)
        e = np.exp(np.round(x - m, 4))
        return e / (np.exp(np.round(sink - m, 4)) + e.sum(axis=-1, keepdims=True))

    message, step = _verdict("09", "q1", sink_softmax)
    assert "float32" not in message + step


def test_08b_q2_inputs_truncated_to_5_decimals_are_not_named_float32():
    message, step = _verdict("08b", "q2", lambda q, k: L["08b"].q2.reference(np.trunc(q * 1e5) / 1e5, np.trunc(k * 1e5) / 1e5))
    assert "float32" not in message + step



def test_04_q2_row_sums_through_a_rows_by_rows_matrix_are_rejected_and_not_called_the_jacobian():
    def softmax_vjp(g, p):
        g2, p2 = np.atleast_2d(g), np.atleast_2d(p)
        return (p2 * (g2 - np.diag(g2 @ p2.T)[:, None])).reshape(np.shape(p))

    message, _ = _verdict("04", "q2", softmax_vjp)
    assert "shape (64, 64)" in message and "Jacobian" not in message


def test_05c_q2_out_read_at_4_significant_digits_gets_a_step_for_both_places():
    message, step = _verdict("05c", "q2", lambda out, mask: np.where(mask.any(-1, keepdims=True),
                                                                     np.vectorize(lambda v: float(f"{v:.4g}"))(out), 0.0))
    assert "4 significant digits" in message and "on your return line or where you read an input" in step


@pytest.mark.parametrize("decimals", [7, 8])
def test_01_q1_a_result_rounded_to_7_or_8_decimals_is_named_despite_the_float32_case(decimals):
    message, _ = _verdict("01", "q1", _softmax_then(lambda p: np.round(p, decimals)))
    assert f"rounded to {decimals} decimals" in message


def test_05b_q1_a_negated_mask_of_real_tokens_built_with_le_is_told_to_change_le():
    def encode(mha, x, lengths):
        real = torch.arange(x.shape[1])[None, :] <= torch.as_tensor(lengths)[:, None]
        return mha(x, x, x, key_padding_mask=~real)[0]

    _, step = _verdict("05b", "q1", encode)
    assert "change `<=` to `<`" in step
