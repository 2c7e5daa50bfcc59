"""Exercises for lesson 09, beyond softmax (1): the sink softmax and sigmoid attention."""

from __future__ import annotations

import math

import numpy as np

from ..softmax import softmax
from ..variants import softmax_with_sink
from .core import _SHIFT_CODE  # the code each wrong shift most likely is, to name the line to change
from .core import _map_float_inputs, _reads_float32_inputs, _reference_on  # inputs read in float32
from .core import (
    CLIP_LIMITS,
    ROW_SHIFTS,
    Case,
    Exercise,
    FunctionExercise,
    Run,
    describe,
    ValueExercise,
    clip_variants,
    first_float_error,
    float32_rounding,
    non_negative,
    shift_and_clip_advice,
    shift_examples,
    shift_invariant,
    shift_variants,
    starter,
    sums_to_one,
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


def _q1_minus_sink(x, sink):
    return softmax_with_sink(x, -sink)


def _q1_drops_the_first_column(x, sink):
    padded = np.concatenate([x, np.full((*np.shape(x)[:-1], 1), sink)], axis=-1)
    return softmax(padded)[..., 1:]


def _q1_renormalized(x, sink):
    w = softmax_with_sink(x, sink)
    return w / w.sum(axis=-1, keepdims=True)


def _q1_uniform_for_masked_rows(x, sink):
    x = np.asarray(x, dtype=np.float64)
    return np.where(np.isneginf(x).all(axis=-1, keepdims=True), 1.0 / x.shape[-1], softmax_with_sink(x, sink))


def _q1_keeps_the_sink_column(x, sink):
    padded = np.concatenate([x, np.full((*np.shape(x)[:-1], 1), sink)], axis=-1)
    return softmax(padded)


def _q1_first_axis(x, sink):
    return softmax_with_sink(x, sink, axis=0)


def _q1_shift_by_the_sink_only(x, sink):
    # Right while every score stays within ~709 of the sink; e^{x - s} overflows beyond.
    e = np.exp(x - sink)
    return e / (1.0 + e.sum(axis=-1, keepdims=True))


def _padded(x, sink) -> np.ndarray:
    """The row with the sink as one more score: [x_1, ..., x_n, s]."""
    x = np.asarray(x, dtype=np.float64)
    return np.concatenate([x, np.full((*x.shape[:-1], 1), float(sink))], axis=-1)


def _q1_shifted_by(shift):
    # The sink is one more score of the row, whose own maximum is max(max x, s). Each wrong answer
    # of the family shifts the padded row by something else: no shift, its mean, its median, ...
    # It handles masked rows as lesson 05 taught (a shift that is not finite falls back to the
    # sink), so only the cases with large scores can catch it.
    def wrong(x, sink):
        padded = _padded(x, sink)
        with np.errstate(invalid="ignore"):
            m = shift(padded)
        m = np.where(np.isfinite(m), m, padded[..., -1:])
        e = np.exp(padded - m)
        return e[..., :-1] / e.sum(axis=-1, keepdims=True)

    return wrong


def _q1_floored(floor):
    # Exponents floored at `floor` (to dodge exp(-inf) or underflow): a masked key gets e^floor, not 0.
    def wrong(x, sink):
        x = np.asarray(x, dtype=np.float64)
        m = np.maximum(np.max(x, axis=-1, keepdims=True), sink)
        e = np.exp(np.maximum(x - m, floor))
        return e / (np.exp(np.maximum(sink - m, floor)) + e.sum(axis=-1, keepdims=True))

    return wrong


_FLOORS = (-30.0, -40.0)


def _float32_inputs(run: Run) -> str | None:
    """Property, before the exact zeros: the right computation on the inputs rounded to float32 (a sink of
    -19999999000 becomes -2e10 there, the score itself) is named float32, not a lost -inf or a flush."""
    if not _reads_float32_inputs(run):
        return None
    # ... and is exactly the right computation on them (a rounding of x - m to 4 decimals also ignores float32's)
    moved = _reference_on(run, _map_float_inputs(run.case, lambda a: a.astype(np.float32).astype(np.float64)))
    if moved is None or not np.allclose(run.output, moved, rtol=1e-9, atol=1e-300, equal_nan=True):
        return None
    sink = float(run.case.args[1])
    return (f"is what the right computation gives on the scores and the sink rounded to float32 (here the sink "
            f"{sink!r} becomes {float(np.float32(sink))!r}): keep them in float64")


_float32_inputs.precise = True  # type: ignore[attr-defined]
_float32_inputs.next_step = (  # type: ignore[attr-defined]
    "Print the `.dtype` of the scores and of the sink at each line of your function: the first float32 is the one "
    "to change (drop its `np.float32` or `astype`; `torch.tensor(...)` needs dtype=torch.float64)."
)


def _exact_zeros(run: Run) -> str | None:
    # A masked key (-inf) must get exactly 0, as the reference gives; 6e-14 passes atol but is not "nothing".
    # And the other way: a weight of e^-35 (3e-16), far below rtol's reach, is still not 0 (07b q1 says the same).
    stray = (run.expected == 0) & (run.output != 0)
    if stray.any():
        return (
            f"gives {describe(run.output[stray].max())} where the answer is exactly 0 (a masked key, or a score so far "
            "below the maximum that exp underflows): exp(-inf) is exactly 0, so keep -inf as it is (no finite number "
            "in its place) and do not floor or clip the exponents"
        )
    lost = (run.expected != 0) & (run.output == 0)
    if lost.any() and run.expected[lost].max() < 1e-3:  # a weight of 1e-3 or more is no flush: _weights_not_lost
        kept = run.expected[lost].max()
        return (
            f"gives 0 where the answer is {kept:.3g} = e^{np.log(kept):.1f} (a flush of small weights to 0, or a step "
            "that lost them, such as a clip of the sink): a small weight is not 0. Only a masked key (-inf) gets exactly 0; take np.exp of every exponent as it is, and "
            "let it underflow on its own, below about -745"
        )
    return None


def _weights_not_lost(run: Run) -> str | None:
    """Property: no weight of 1e-3 or more comes out as 0 (an overflow or a 0/0 turned into 0, say)."""
    lost = (run.expected >= 1e-3) & (run.output == 0)
    if not lost.any():
        return None
    error = first_float_error(run.function, run.case)
    seen = f": NumPy reports {error}, and what it made there became 0 further on" if error else ""
    return (f"gives 0 where the answer is {run.expected[lost].max():.3g}{seen}. Only a masked key (-inf), or a score "
            "far below the row's maximum, gets a weight of exactly 0")


_weights_not_lost.next_step = (  # type: ignore[attr-defined]
    "Run your function on that input after `np.seterr(all='raise')`: the first line that overflows or makes nan is "
    "the one to change (subtract `m = np.maximum(x.max(axis=-1, keepdims=True), sink)` before `np.exp`); an "
    "`np.nan_to_num` or a guard after it only hides the nan as 0."
)


# Checked also for a nearly right answer (core: `precise`): exact zeros where the answer is 0, which no rounding explains.
_exact_zeros.precise = True  # type: ignore[attr-defined]
_exact_zeros.next_step = (  # type: ignore[attr-defined]
    "Delete any finite number put in place of -inf (`np.where(np.isneginf(x), -1e4, x)`), any clip of the scores "
    "or the sink, any `np.where(w < eps, 0.0, w)` around your weights and any `np.maximum(x - m, floor)` around the "
    "exponents: return `e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))` with `e = np.exp(x - m)` as it is."
)


def _q1_clipped(clip):
    def wrong(x, sink):
        return softmax_with_sink(clip(np.asarray(x, dtype=np.float64)), sink)

    return wrong


#: Beyond lesson 02's row shifts: the largest |score|, which keeps every exponent <= 0 but
#: underflows a row far below 0 (and a masked row) to 0/0.
_LARGEST_ABS = "shifting by the largest |score| of the row, max(|x|, |s|)"
#: Lesson 02's clip limits, and limits above the scores of the lesson's text (up to 1000) but below 20000: the
#: case of scores near -20000 with a masked key tells 2000 from 1e4 (a clip turns -inf into -limit).
_CLIPS = CLIP_LIMITS + (2000.0, 1e4)



_FLOAT32_ADVICE = "compute in float64 (the inputs are float64; a float32 array or np.float32 sink along the way loses the digits)"

_SINK_IN_THE_ROW = " Here the sink is one more score of the row, so its maximum is m = max(max x, s); try that input with s = 0."


_SINK_MAX = "`m = np.maximum(x.max(axis=-1, keepdims=True), sink)`"


def _q1_shift_next_steps() -> dict[str, str]:
    """The line to change for each wrong shift of the row with its sink, and for each clip and floor."""
    steps = {}
    for label, name in zip(shift_variants(_q1_shifted_by), ROW_SHIFTS):
        code = _SHIFT_CODE[name]
        start = (f"Where you subtract {code}, subtract {_SINK_MAX} instead" if code else
                 f"Before `np.exp`, compute {_SINK_MAX}")
        steps[label] = f"{start}, and subtract it from the sink too: `np.exp(x - m)` and `np.exp(sink - m)`."
    steps[_LARGEST_ABS] = f"Replace `np.abs(...).max(...)` by {_SINK_MAX}: the largest score, signed."
    for c in _CLIPS:  # the limit is not named: clips at 1500 and 2000 give the same outputs on every case
        steps[f"clipping the scores to [-{c:g}, {c:g}]"] = (
            f"Delete the `np.clip(...)` on the scores and shift the raw scores and the sink by {_SINK_MAX}.")
    for f in _FLOORS:
        steps[f"flooring the exponents at {f:g}"] = (
            f"Delete the `np.maximum(..., {f:g})` around both exponents: use `np.exp(x - m)` and `np.exp(sink - m)` as they are.")
    return steps


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
            # Scores on both sides of the sink: the mean, the median, the minimum, the first entry
            # and no shift at all overflow, in one row or the other.
            Case((np.array([[1000.0, -1000.0], [-1000.0, 1000.0]]), 0.0)),
            # Every score far below 0: shifting by max(|x|, |s|) or by a constant underflows to 0/0.
            Case((np.array([-1000.0, -1001.0]), -1000.5)),
            # The mean (-6) overflows where the median (980) does not: feedback names the right one.
            Case((np.array([1000.0, 990.0, 980.0, -3000.0]), 0.0)),
            # Weights of e^-35 / 2 (3e-16) and e^-700 / 2 (5e-305): small, not 0, so a flush to 0 (w < 1e-15,
            # w < e^-30 ...) fails, as atol 1e-300 and `_exact_zeros` require.
            Case((np.array([0.0, -35.0, -700.0]), 0.0)),
            # Scores beyond any limit a learner may clip them to (2000 or 1e4, say), as the clip advice's
            # [20000, 19995]: the top two stay 5 apart.
            Case((np.array([20000.0, 19995.0]), 19990.0)),
            # A masked key in a row far below 0, and a fully masked row: a finite fill above -2e10 for -inf (-1e4,
            # -1e9) lies above this row's score, where -inf gives weight exactly 0; so does a clip of the scores. The
            # sink sits 1000 above the score, so every weight is exactly 0: at 2e10 one float64 spacing is 4e-6,
            # and a right logsumexp form would be off by that much in a weight of e^-10.
            Case((np.array([[-2e10, -np.inf], [-np.inf, -np.inf]]), -2e10 + 1000.0)),
            # Scores and a sink that no short decimal or 16-bit float holds: rounding x - m shows.
            Case((np.array([np.pi / 10, -np.sqrt(3), np.e]), 0.1)),
        ],
        properties=[non_negative, _float32_inputs, _exact_zeros, _weights_not_lost, _below_one, _shift_with_the_sink,
                    float32_rounding(_FLOAT32_ADVICE)],
        wrong_answers={
            "plain softmax, ignoring the sink": _q1_plain_softmax,
            "softmax₁ whatever the sink": _q1_softmax_one_whatever_the_sink,
            "s instead of e^s in the denominator": _q1_sink_not_exponentiated,
            "shifting the scores but not the sink": _q1_sink_not_shifted,
            "shifting by the max of x only (nan for a fully masked row)": _q1_shift_by_the_max_of_x_only,
            "e^{-s} instead of e^s": _q1_minus_sink,
            "padding the sink column but dropping the first column": _q1_drops_the_first_column,
            "renormalizing the weights to sum to 1": _q1_renormalized,
            "keeping the sink's column in the result": _q1_keeps_the_sink_column,
            "normalizing along the first axis": _q1_first_axis,
            "shifting by the sink only (overflows for scores far above it)": _q1_shift_by_the_sink_only,
            "uniform weights for a fully masked row": _q1_uniform_for_masked_rows,
        },
        # Lesson 02's family of wrong shifts (no shift, the mean, the median, one maximum for the
        # whole batch, ...) applied to the row with its sink, and its clipped scores.
        variants={
            **shift_variants(_q1_shifted_by),
            _LARGEST_ABS: _q1_shifted_by(lambda z: np.max(np.abs(z), axis=-1, keepdims=True)),
            **clip_variants(_q1_clipped, _CLIPS),
            **{f"flooring the exponents at {f:g}": _q1_floored(f) for f in _FLOORS},
        },
        probes=[Case((np.array([1000.0, -1000.0]), 0.0))]
        + [Case((example, 0.0)) for example in shift_examples()]  # where lesson 02's wrong shifts fail, with s = 0
        + [
            Case((np.array([-2000.0, -2001.0, -2002.0]), -2000.5)),
            Case((np.array([[0.0, -1.0], [-np.inf, -np.inf]]), 1000.0)),
            Case((np.array([[[1.0, 2.0], [1500.0, 0.0]], [[0.0, -1500.0], [7.0, 7.0]]]), -3.0)),
        ],
        advice={
            "uniform weights for a fully masked row": (
                "With a sink, a fully masked row puts its whole weight on the sink: every key gets 0, not 1/n."
            ),
            **{label: text + _SINK_IN_THE_ROW for label, text in shift_and_clip_advice(_CLIPS).items()},
            **{
                f"flooring the exponents at {f:g}": (
                    "You floored the exponents, so a masked key (score -inf), or one 1000 below the maximum, gets e^floor, about 1e-13 or 1e-18, not 0. "
                    "exp(-inf) is exactly 0 and m = max(max x, s) is finite: no floor is needed."
                )
                for f in _FLOORS
            },
            _LARGEST_ABS: (
                "You shifted by the largest |score|. That keeps every exponent <= 0, but a row far below 0 "
                "(try x = [-1000, -1001], s = -1000.5) then underflows to 0/0: shift by m = max(max x, s)."
            ),
        },
        next_steps={
            **_q1_shift_next_steps(),
            "plain softmax, ignoring the sink": "Add `np.exp(sink - m)` to the denominator: `e / (np.exp(sink - m) + e.sum(axis=-1, keepdims=True))`.",
            "uniform weights for a fully masked row": (
                "Delete the special case that returns `1 / n` for a fully masked row: the general formula already "
                "gives it zeros, as `np.exp(-np.inf - m)` is 0 and the sink keeps the denominator positive."
            ),
            "softmax₁ whatever the sink": "Replace the fixed `1` (that is, `e^0`) in the denominator by `np.exp(sink - m)`.",
            "s instead of e^s in the denominator": "Exponentiate the sink: `np.exp(sink - m)`, not `sink`.",
            "shifting the scores but not the sink": "Subtract m from the sink too: `np.exp(sink - m)`, not `np.exp(sink)`.",
            "shifting by the max of x only (nan for a fully masked row)": f"Let the sink into the maximum: {_SINK_MAX}.",
            "e^{-s} instead of e^s": "Change `np.exp(-sink ...)` to `np.exp(sink - m)`.",
            "padding the sink column but dropping the first column": "Keep the first columns and drop the sink's, the last one: `[..., :-1]`, not `[..., 1:]`.",
            "renormalizing the weights to sum to 1": "Delete the final `w / w.sum(axis=-1, keepdims=True)`: the sink keeps its share.",
            "keeping the sink's column in the result": "Slice the sink's column off the result: `[..., :-1]`.",
            "normalizing along the first axis": "Change `axis=0` to `axis=-1` in the max and the sum, with `keepdims=True`.",
            "shifting by the sink only (overflows for scores far above it)": f"Replace the shift `sink` by {_SINK_MAX}.",
        },
        hints=[
            "The sink is one more logit s in the denominator: e^{x_i} / (e^s + sum_j e^{x_j}). The numerators are the scores' own.",
            "For stability subtract m = max(max_j x_j, s) from every score and from the sink: every exponent is then <= 0.",
            "With every key masked (-inf), max x is -inf; taking the sink into the maximum keeps m finite, so the weights are 0, not nan.",
            "Take the maximum of each row (axis=-1, keepdims=True), not of the whole array: rows far apart need their own shift.",
        ],
        solution=_Q1_SOLUTION,
        own=[softmax_with_sink],
        # rtol 1e-9: float64 rounding (u = 2^-53) moves each weight of a right answer, and of the reference, by
        # at most 3(D + M)u + (n + 3)·4 ulp relative (spread D and size M of the row's scores and sink, n keys):
        # under 5e-12 for both sides on these cases, scores of 1000 and more included. float32 (rel. error ~1e-7)
        # does not pass.
        # A fully masked row must give zeros: nan there means the shift ignored the sink. atol ~0: where the
        # reference is 0 (exp(-inf), or underflow) the answer must be exactly 0, not a floored e^-40 ~ 4e-18.
        nonfinite_hint=(
            "exp() overflows for scores far above your shift, a row far below it underflows to 0/0, and a fully masked "
            "row gives exp(-inf - (-inf)) = nan: subtract, in each row, m = max(max x, s), the larger of the row's "
            "maximum and the sink."
        ),
        rtol=1e-9,
        atol=1e-300,
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
            # The right four numbers in the wrong places: the layout, not the sigmoid, is the mistake.
            "the table transposed": (
                np.transpose(table(ns / 2, ns / (ns + 1))),
                "your four numbers are right, but transposed: each row is one n (16, then 4096), each column one "
                "bias (none, then b = -log n). You wrote the columns as rows.",
            ),
            "the rows swapped": (
                table(ns / 2, ns / (ns + 1))[::-1],
                "your four numbers are right, but the rows are swapped: the first row is n = 16, the second n = 4096.",
            ),
            "the columns swapped": (
                np.fliplr(table(ns / 2, ns / (ns + 1))),
                "your four numbers are right, but the columns are swapped: the first column is without a bias, the "
                "second with b = -log n.",
            ),
        },
        next_steps={
            "softmax's 1 everywhere": "Add up `n` sigmoids, one per key: `n * sigma(0 + b)` for each (n, b).",
            "sigma(-log n) = 1/n": "Compute `sigma(-log n) = 1 / (1 + n)` exactly, then multiply by n: `n / (n + 1)`.",
            "sigma(0) = 1": "Use `sigma(0) = 1 / (1 + e^0) = 0.5`, so the unbiased total is `n * 0.5`.",
            "per-key weights instead of totals": "Multiply each of your weights by its row's `n` (16 or 4096).",
            "the bias ignored": "Put the bias into the sigmoid for the second column: `n * sigma(-log n)`.",
            "the bias as -n instead of -log n": "Use `b = -np.log(n)`, so `e^{-b} = n` and each weight is `1 / (1 + n)`.",
            "the table transposed": (
                "Write it as `[[total_16_no_bias, total_16_bias], [total_4096_no_bias, total_4096_bias]]`, or "
                "apply `np.transpose` to yours."
            ),
            "the rows swapped": "Put the row of n = 16 first: `[[n=16 ...], [n=4096 ...]]`, or `your_answer[::-1]`.",
            "the columns swapped": (
                "Put the total without a bias first in each row: `[no bias, b = -log n]`, or `np.fliplr(your_answer)`."
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


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
