"""Exercises for lesson 09, softmax at the frontier: the sink softmax, sigmoid attention and Scalable-Softmax."""

from __future__ import annotations

import math

import numpy as np

from ..softmax import softmax
from ..variants import scalable_softmax, softmax_with_sink
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    non_negative,
    shift_invariant,
    starter,
    sums_to_one,
    ValueExercise,
)


# --- q1: the sink softmax --------------------------------------------------------------


def _q1_reference(x: np.ndarray, sink: float) -> np.ndarray:
    return softmax_with_sink(x, sink)


def _q1_plain_softmax(x, sink):
    return softmax(x)


def _q1_softmax_one_whatever_the_sink(x, sink):
    return softmax_with_sink(x, 0.0)


def _q1_sink_not_exponentiated(x, sink):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / (sink * np.exp(-m) + e.sum(axis=-1, keepdims=True))


def _q1_sink_not_shifted(x, sink):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / (np.exp(sink) + e.sum(axis=-1, keepdims=True))


def _q1_shift_by_the_max_of_x_only(x, sink):
    # Right wherever some key is allowed; a fully masked row gives exp(-inf - (-inf)) = nan.
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))


def _q1_no_shift(x, sink):
    e = np.exp(x)
    return e / (np.exp(sink) + e.sum(axis=-1, keepdims=True))


def _q1_minus_sink(x, sink):
    return softmax_with_sink(x, -sink)


def _q1_drops_the_first_column(x, sink):
    padded = np.concatenate([x, np.full((*np.shape(x)[:-1], 1), sink)], axis=-1)
    return softmax(padded)[..., 1:]


def _q1_renormalized(x, sink):
    w = softmax_with_sink(x, sink)
    return w / w.sum(axis=-1, keepdims=True)


def _q1_keeps_the_sink_column(x, sink):
    padded = np.concatenate([x, np.full((*np.shape(x)[:-1], 1), sink)], axis=-1)
    return softmax(padded)


def _q1_first_axis(x, sink):
    return softmax_with_sink(x, sink, axis=0)


def _q1_shift_by_the_sink_only(x, sink):
    # Right while every score stays within ~709 of the sink; e^{x - s} overflows beyond.
    e = np.exp(x - sink)
    return e / (1.0 + e.sum(axis=-1, keepdims=True))


def _q1_one_max_for_the_whole_array(x, sink):
    # np.max without an axis: a row far below the largest score underflows to 0/0.
    m = max(np.max(x), sink)
    e = np.exp(x - m)
    return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))


def _below_one(run: Run) -> str | None:
    # Only rows whose sink share survives in float64: with scores ~1000 above the sink it rounds to 0.
    total = run.output.sum(axis=-1)
    if (total[run.expected.sum(axis=-1) < 1 - 1e-12] >= 1 - 1e-12).any():
        return (
            f"sums to {_rounded(total)} along the last axis, but the sink takes e^s / (e^s + sum e^x) > 0: "
            "every row must sum to less than 1"
        )
    return None


def _rounded(total: np.ndarray) -> str:
    return np.array2string(np.round(np.atleast_1d(total), 4), separator=" ")


def _shift_with_the_sink(run: Run) -> str | None:
    # Adding the same constant to every score AND the sink leaves the weights unchanged.
    x, sink = run.case.args
    moved = run.call(np.asarray(x) + 3.0, sink + 3.0)
    if moved.shape != run.output.shape or not np.allclose(moved, run.output, rtol=1e-6, atol=1e-9):
        return "changes when 3 is added to every score and to the sink; the sink is one more logit and must move with them"
    return None


_Q1_SOLUTION = """
```python
def sink_softmax(x, sink):
    m = np.maximum(x.max(axis=-1, keepdims=True), sink)  # the sink counts for the maximum too
    e = np.exp(x - m)                                   # every exponent <= 0; masked keys give 0
    return e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))
```
Shifting by max(max x, s) keeps every exponent at or below 0 and the denominator at least 1, even
when every key is masked: then m = s, the weights are exactly 0 and the whole mass is the sink's.
The same thing in gpt-oss's form: `softmax(np.concatenate([x, s_column], axis=-1))[..., :-1]`.
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "09",
        "q1",
        "Implement the sink softmax e^{x_i} / (e^s + sum_j e^{x_j}) along the last axis",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((np.array([0.0, 0.0]), 0.0)),
            Case((np.array([1.0, 2.0, 0.5]), 1.5)),
            Case((np.array([[2.0, -1.0, 0.0], [0.0, 0.0, 3.0]]), -2.0)),
            Case((np.array([1000.0, 999.0, 0.0]), 1000.0)),
            Case((np.array([-3.0, -4.0]), 5.0)),
            Case((np.array([[1.0, -np.inf], [-np.inf, -np.inf]]), 0.5)),
            # Rows 1000 apart: each needs its own shift, and e^{x - s} overflows in the first.
            Case((np.array([[1000.0, 999.0], [0.0, -1.0]]), 0.5)),
        ],
        properties=[non_negative, _below_one, _shift_with_the_sink],
        wrong_answers={
            "plain softmax, ignoring the sink": _q1_plain_softmax,
            "softmax₁ whatever the sink": _q1_softmax_one_whatever_the_sink,
            "s instead of e^s in the denominator": _q1_sink_not_exponentiated,
            "shifting the scores but not the sink": _q1_sink_not_shifted,
            "shifting by the max of x only (nan for a fully masked row)": _q1_shift_by_the_max_of_x_only,
            "no shift at all": _q1_no_shift,
            "e^{-s} instead of e^s": _q1_minus_sink,
            "padding the sink column but dropping the first column": _q1_drops_the_first_column,
            "renormalizing the weights to sum to 1": _q1_renormalized,
            "keeping the sink's column in the result": _q1_keeps_the_sink_column,
            "normalizing along the first axis": _q1_first_axis,
            "shifting by the sink only (overflows for scores far above it)": _q1_shift_by_the_sink_only,
            "one maximum for the whole array, not one per row": _q1_one_max_for_the_whole_array,
        },
        hints=[
            "The sink is one more logit s in the denominator: e^{x_i} / (e^s + sum_j e^{x_j}). The numerators are the scores' own.",
            "For stability subtract m = max(max_j x_j, s) from every score and from the sink: every exponent is then <= 0.",
            "With every key masked (-inf), max x is -inf; taking the sink into the maximum keeps m finite, so the weights are 0, not nan.",
            "Take the maximum of each row (axis=-1, keepdims=True), not of the whole array: rows far apart need their own shift.",
        ],
        solution=_Q1_SOLUTION,
        # rtol 1e-9: any float64 order of summation passes; float32 (rel. error ~1e-7) does not.
        # A fully masked row must give zeros: nan there means the shift ignored the sink.
        nonfinite_hint=(
            "Large scores overflow exp() and a fully masked row gives exp(-inf - (-inf)) = nan: subtract, in each row, "
            "m = max(max x, s), the larger of the row's maximum and the sink."
        ),
        rtol=1e-9,
        atol=1e-12,
    )


# --- q2: the total sigmoid weight of a row -------------------------------------------------


def _q2() -> ValueExercise:
    ns = np.array([16.0, 4096.0])[:, None]

    def table(no_bias: np.ndarray, with_bias: np.ndarray) -> list[list[float]]:
        return np.hstack([np.broadcast_to(no_bias, ns.shape), np.broadcast_to(with_bias, ns.shape)]).tolist()

    return ValueExercise(
        "09",
        "q2",
        "Rows of n = 16 and n = 4096 zero logits: their total sigmoid weight, [[n=16: no bias, b = -log n], [n=4096: no bias, b = -log n]], to 4 decimals?",
        reference=table(ns / 2, ns / (ns + 1)),
        wrong_answers={
            "softmax's 1 everywhere": (table(1.0, 1.0), "sigmoid attention has no normalizer: a row's total is not fixed at 1."),
            "sigma(-log n) = 1/n": (
                table(ns / 2, 1.0),
                "close: sigma(-log n) = 1 / (1 + e^{log n}) = 1 / (1 + n), not 1/n, so the total is n / (n + 1).",
            ),
            "sigma(0) = 1": (table(ns, ns / (ns + 1)), "sigma(0) = 1 / (1 + e^0) = 1/2, not 1."),
            "per-key weights instead of totals": (
                table(0.5, 1 / (ns + 1)),
                "those are the weights of one key; the question asks for the sum over the n keys of the row.",
            ),
            "the bias ignored": (table(ns / 2, ns / 2), "with b = -log n each weight is sigma(0 - log n) = 1 / (1 + n), not 1/2."),
            "the bias as -n instead of -log n": (
                table(ns / 2, ns * np.exp(-ns) / (1 + np.exp(-ns))),
                "the bias is -log n, so e^{-b} = n and each weight is 1 / (1 + n).",
            ),
        },
        hints=[
            "sigma(z) = 1 / (1 + e^{-z}), applied to each of the n logits on its own; nothing divides by a sum.",
            "Without a bias every logit is 0, and sigma(0) = 1/2.",
            "With b = -log n every weight is sigma(-log n) = 1 / (1 + e^{log n}) = 1 / (1 + n).",
        ],
        solution="`[[8, 0.9412], [2048, 0.9998]]`: without a bias, n * sigma(0) = n / 2, which grows with n. "
        "With b = -log n each weight is 1 / (1 + n), and the total is n / (n + 1): 16/17 and 4096/4097, "
        "just below 1 for every n.",
        # Four decimals are enough (0.9412, 0.9998), but 1.0, the "1/n per key" mistake, is 2.4e-4 from 4096/4097.
        atol=1e-4,
    )


# --- q3: Scalable-Softmax --------------------------------------------------------------------


def _q3_reference(x: np.ndarray, s: float) -> np.ndarray:
    return scalable_softmax(x, s)


def _q3_plain_softmax(x, s):
    return softmax(x)


def _q3_s_times_n(x, s):
    return softmax(x * s * np.shape(x)[-1])


def _q3_log_n_without_s(x, s):
    return softmax(x * math.log(np.shape(x)[-1]))


def _q3_divides(x, s):
    n = np.shape(x)[-1]
    return softmax(x / (s * math.log(n))) if n > 1 else softmax(x)


def _q3_log2(x, s):
    return softmax(x * s * math.log2(np.shape(x)[-1]))


def _q3_n_plus_one(x, s):
    return softmax(x * s * math.log(np.shape(x)[-1] + 1))


def _q3_scaled_after(x, s):
    # (A power of the softmax, renormalized, would be right: p_i^c is proportional to e^{c x_i}.)
    return softmax(x) * (s * math.log(np.shape(x)[-1]))


def _q3_first_axis_length(x, s):
    return softmax(x * s * math.log(np.shape(x)[0]))


def _q3_unshifted(x, s):
    e = np.exp(x * s * math.log(np.shape(x)[-1]))
    return e / e.sum(axis=-1, keepdims=True)


def _q3_sqrt_n(x, s):
    return softmax(x * s * math.sqrt(np.shape(x)[-1]))


_Q3_SOLUTION = """
```python
def ssmax(x, s):
    n = x.shape[-1]                                  # the number of keys in each row
    return course_utils.softmax(x * (s * np.log(n)), axis=-1)
```
Scalable-Softmax is a softmax of the logits multiplied by s·log n. At n = e^{1/s} the factor is 1
and it equals softmax; for larger n it sharpens, by just enough that a fixed score gap keeps
picking out one key (its weight is n^{s·a} / (n^{s·a} + n - 1) for a gap a over n - 1 equal keys).
"""


def _q3() -> FunctionExercise:
    return FunctionExercise(
        "09",
        "q3",
        "Implement Scalable-Softmax, softmax(s · log(n) · x) with n the length of the last axis",
        reference=_q3_reference,
        starter=starter,
        cases=[
            Case((np.array([2.0, 0.0, 0.0, 0.0]), 1.0)),
            Case((np.array([1.0, -0.5, 0.25, 0.0, 2.0, -1.0, 0.5]), 0.4)),
            Case((np.array([[3.0, 0.0, 1.0, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0, 1.0]]), 0.7)),
            Case((np.array([300.0, 299.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 2.0)),
            Case((np.array([5.0]), 0.5)),
        ],
        properties=[non_negative, sums_to_one, shift_invariant],
        wrong_answers={
            "plain softmax": _q3_plain_softmax,
            "s · n instead of s · log n": _q3_s_times_n,
            "log n without s": _q3_log_n_without_s,
            "dividing by s · log n": _q3_divides,
            "log base 2": _q3_log2,
            "log(n + 1)": _q3_n_plus_one,
            "the weights scaled after the softmax, not the logits before it": _q3_scaled_after,
            "n from the first axis": _q3_first_axis_length,
            "no shift before exp": _q3_unshifted,
            "sqrt(n) instead of log n": _q3_sqrt_n,
        },
        hints=[
            "n is the number of keys, the length of the last axis: x.shape[-1].",
            "Multiply every logit by s * log(n) (natural log), then take a stable softmax along the last axis.",
            "course_utils.softmax is stable; with n = 1, log n = 0 and the single key gets weight 1.",
        ],
        solution=_Q3_SOLUTION,
        rtol=1e-9,
        atol=1e-12,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
