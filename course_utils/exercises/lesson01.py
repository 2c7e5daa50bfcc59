"""Exercises for lesson 01, softmax basics."""

from __future__ import annotations

import numpy as np

from ..softmax import softmax
from .core import (
    CLIP_LIMITS,
    Case,
    Exercise,
    FunctionExercise,
    Run,
    clip_variants,
    float32_rounding,
    float32_values,
    non_negative,
    rounded_inputs,
    shift_and_clip_advice,
    shift_and_clip_next_steps,
    shift_invariant,
    shift_variants,
    starter,
    sums_to_one,
    ValueExercise,
)


# --- q1: a stable softmax -----------------------------------------------------


def _q1_reference(x: np.ndarray) -> np.ndarray:
    return softmax(x, axis=-1)


def _q1_unstable(x: np.ndarray) -> np.ndarray:
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _q1_no_keepdims(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1))
    return e / e.sum(axis=-1)


def _q1_global_max(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max())
    return e / e.sum(axis=-1, keepdims=True)


def _q1_wrong_axis(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def _q1_plain_normalization(x: np.ndarray) -> np.ndarray:
    return x / x.sum(axis=-1, keepdims=True)


def _q1_in_place(x: np.ndarray) -> np.ndarray:
    x -= x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def _q1_shifted_by(shift):
    def wrong(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        e = np.exp(x - shift(x))
        return e / e.sum(axis=-1, keepdims=True)

    return wrong


def _q1_clipped(clip):
    def wrong(x: np.ndarray) -> np.ndarray:
        return softmax(clip(np.asarray(x)), axis=-1)

    return wrong


#: core.CLIP_LIMITS and the limits a learner might pick "large enough": each is wrong on a case below.
_CLIPS = CLIP_LIMITS + (3001.0, 1e4, 1e5)
#: Shifts by (row max - c): harmless for a small c, but e^c times the row's length must fit the dtype.
_MAX_MINUS = (80.0, 100.0, 710.0)


def _max_minus_variants() -> dict:
    return {f"shifting by the row maximum minus {c:g}": _q1_shifted_by(lambda z, c=c: np.max(z, axis=-1, keepdims=True) - c)
            for c in _MAX_MINUS}


def _max_minus_next_steps() -> dict[str, str]:
    return {f"shifting by the row maximum minus {c:g}": (
        "Delete the constant you subtract from the maximum (or add after the shift), so that the shift reads "
        "`x - x.max(axis=-1, keepdims=True)`; then `np.exp` of the shifted row's largest entry is `np.exp(0.0)`.")
        for c in _MAX_MINUS}


def _max_minus_advice() -> dict[str, str]:
    return {f"shifting by the row maximum minus {c:g}": (
        "You shifted by the row maximum minus a constant c, so the largest term is e^c, not 1. From c = 80 a "
        "float32 row of 8192 equal scores sums past float32's largest number, and from c = 710 e^c overflows even "
        "in float64: subtract the maximum itself.") for c in _MAX_MINUS}


_Q1_SOLUTION = """
```python
def stable_softmax(x):
    x = np.asarray(x)
    if x.dtype.kind != "f":                        # ints and lists become float64;
        x = x.astype(np.float64)                   # float32 stays float32
    shifted = x - x.max(axis=-1, keepdims=True)    # largest exponent is now e^0 = 1
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)
```
`keepdims=True` keeps the reduced axis with size 1, so a (2, 3) input minus its
(2, 1) row maxima broadcasts row by row. Each row subtracts *its own* maximum:
the mean, the first entry or one maximum for the whole batch all overflow on
some input, e.g. [2000, 0], [0, 2000] or [[1000, 999], [0, -1]].
"""

_OVERFLOW_HINT = (
    "exp() of a large score overflows to inf, and a row whose exponentials all underflow gives 0/0: "
    "subtract each row's own maximum first."
)

#: The inputs every softmax exercise of this lesson is tried on, beyond its cases: large scores
#: in each position, gaps of thousands from the mean, rows at very different scales, float32.
_ROW_PROBES = [
    np.array([0.0, 2000.0]),
    np.array([2000.0, 0.0, 0.0]),
    np.array([0.0, 1000.0, 2000.0]),
    np.array([5000.0, 0.0, -5000.0]),
    np.array([[-2000.0, -2001.0], [2000.0, 1999.0]]),
    np.array([[90.0, 0.0], [0.0, 90.0]], dtype=np.float32),
    np.array([[3.0], [1000.0]]),
    np.array([[[1.0, 2.0], [1500.0, 0.0]], [[0.0, -1500.0], [7.0, 7.0]]]),
]


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "01",
        "q1",
        "Write a numerically stable softmax",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.0, 1.0]),)),
            Case((np.array([10.0, 0.0, -5.0]),)),
            Case((np.array([[2.0, 4.0, 4.0], [2.0, 2.0, 3.0]]),)),
            Case((np.array([1000.0, 999.0, -1000.0]),)),
            Case((np.array([2000.0, 0.0]),)),  # the mean, the median or the minimum overflows
            Case((np.array([0.0, 0.0, 2000.0]),)),  # the first entry overflows
            Case((np.array([[1000.0, 999.0], [0.0, -1.0]]),)),  # one max for the batch: 0/0 in row 2
            Case((np.array([0.0, 0.0, 0.0, 3000.0, 3001.0]),)),  # two top scores far above the mean: clipping after any other shift ties them
            # Rows at very different scales: tiny gaps, gaps of thousands from the mean, all far below 0.
            Case((np.array([[1e-3, 0.0, 0.0], [3000.0, 0.0, -3000.0], [-2000.0, -2001.5, -2003.0]]),)),
            Case((np.array([[100.0, 0.0, -1.0], [1.0, 2.0, 3.0]], dtype=np.float32),)),  # float32's exp overflows at 88.7
            Case((np.array([5000.0, 4995.0, 0.0]),)),  # a clip at any limit below 5000 ties the top two
            Case((np.array([[1e6, 1e6 - 5.0, 0.0], [-1e6, 0.0, 5.0]]),)),  # and below a million
            # One score of a million above nine equal ones: a shift by a high percentile or quantile (the 90th is
            # 1e5 here) leaves e^(9e5), which overflows.
            Case((np.array([0.0] * 9 + [1e6]),)),
            # 8192 equal float32 scores: a shift that leaves the largest term at e^80 sums past float32's range.
            Case((np.zeros((2, 8192), dtype=np.float32) + np.array([[0.0], [50.0]], dtype=np.float32),)),
            Case((np.array([0.0, -18.0, -19.0]),)),  # weights near 1e-8: flushing small weights to 0 shows
            # Scores that no 16-bit float and no short decimal holds, even after the shift: rounding them to
            # float16, bfloat16 or a few decimals shows.
            Case((np.array([np.pi / 10, -np.sqrt(3), np.e]),)),
        ],
        # Tolerances: the reference computes in the input's dtype. A correct float64 answer differs
        # from it by a few units in the last place (1e-16 relative); a correct answer computed in
        # float32, or in float64 on the float32 case, by a few float32 units (6e-8 relative each),
        # hence rtol=1e-6. atol=1e-9 lets an entry like e^-2000 be 0 in one computation and a
        # denormal in the other. Every wrong variant below misses by far more (or gives nan).
        rtol=1e-6,
        atol=1e-9,
        properties=[non_negative, sums_to_one, shift_invariant],
        nonfinite_hint=_OVERFLOW_HINT,
        wrong_answers={
            "the textbook formula (which overflows)": _q1_unstable,
            "a max without keepdims": _q1_no_keepdims,
            "one max for the whole batch instead of one per row": _q1_global_max,
            "normalizing over the wrong axis": _q1_wrong_axis,
            "plain normalization x / sum(x)": _q1_plain_normalization,
            "modifying the input in place": _q1_in_place,
        },
        variants={**shift_variants(_q1_shifted_by), **clip_variants(_q1_clipped, _CLIPS), **_max_minus_variants()},
        probes=[Case((x,)) for x in _ROW_PROBES],
        advice={**shift_and_clip_advice(_CLIPS), **_max_minus_advice()},
        next_steps={
            "the textbook formula (which overflows)": (
                "Put `x = x - x.max(axis=-1, keepdims=True)` on the line before `e = np.exp(x)`; the division "
                "`e / e.sum(axis=-1, keepdims=True)` stays as it is."
            ),
            "a max without keepdims": (
                "Add `keepdims=True` to both `x.max(axis=-1)` and `e.sum(axis=-1)`: a (2, 3) input then meets "
                "(2, 1) columns, not (2,) rows that broadcast across the wrong axis."
            ),
            "one max for the whole batch instead of one per row": (
                "Give your `x.max()` an axis: `x.max(axis=-1, keepdims=True)` returns one maximum per row, "
                "shape (rows, 1)."
            ),
            "normalizing over the wrong axis": (
                "Change `axis=0` to `axis=-1` in both the `max` and the `sum`: the last axis holds one row's scores."
            ),
            "plain normalization x / sum(x)": (
                "Apply `np.exp` before you normalize: `e = np.exp(x - x.max(axis=-1, keepdims=True))`, then return "
                "`e / e.sum(axis=-1, keepdims=True)`."
            ),
            "modifying the input in place": (
                "Replace `x -= ...` by `shifted = x - ...` and `np.exp(x, out=x)` by `e = np.exp(shifted)`: "
                "each line then makes a new array."
            ),
            **shift_and_clip_next_steps(_CLIPS),
            **_max_minus_next_steps(),
        },
        hints=[
            "Softmax does not change if you subtract the same number from every score in a row.",
            "Subtract each row's maximum: `x - x.max(axis=-1, keepdims=True)`. Then exponentiate and normalize.",
            "Normalize along the same axis with `keepdims=True`, so the shapes broadcast for 2-D input.",
        ],
        solution=_Q1_SOLUTION,
    )


# --- q2: predict the T -> 0 limit ---------------------------------------------


def _q2() -> ValueExercise:
    scores = np.array([2.0, 5.0, 5.0, 1.0])
    return ValueExercise(
        "01",
        "q2",
        "Predict softmax([2, 5, 5, 1] / T) as T -> 0",
        # A temperature far below every gap between scores is the T -> 0 limit.
        reference=softmax(scores, temperature=1e-3),
        wrong_answers={
            "one winner despite the tie": (
                [0.0, 1.0, 0.0, 0.0],
                "the two 5s are tied; softmax treats equal scores equally. Who gets the mass?",
            ),
            "the T -> infinity limit": (
                [0.25, 0.25, 0.25, 0.25],
                "that is the limit for a very *high* temperature. Low T sharpens.",
            ),
            "plain normalization": (
                scores / scores.sum(),
                "that is plain normalization, x / sum(x), not softmax.",
            ),
        },
        hints=[
            "Dividing by a tiny T multiplies every gap between scores by a huge number.",
            "Entries below the maximum get weight e^{-(gap)/T} relative to it, which goes to 0.",
            "The entries tied at the maximum keep equal weights, and the weights still sum to 1.",
        ],
        solution="`[0, 0.5, 0.5, 0]`: the argmax, with the tie between the two 5s split equally.",
        next_steps={
            "one winner despite the tie": (
                "Write the limit as `e^((x_i - 5) / T)` for each entry: for both 5s it is `e^0 = 1` at every T, so "
                "their weights stay equal while the 2 and the 1 go to 0."
            ),
            "the T -> infinity limit": (
                "Compute `softmax([2, 5, 5, 1] / 0.01)` by hand: the gaps become 300 and 400, and `e^-300` is 0 "
                "to any precision you can write."
            ),
            "plain normalization": (
                "Exponentiate first: weight i is `e^(x_i / T) / sum_j e^(x_j / T)`; then let T shrink and see which "
                "terms survive."
            ),
        },
    )


# --- q3: softmax with a temperature -------------------------------------------


def _q3_reference(x: np.ndarray, temperature: float) -> np.ndarray:
    return softmax(x, axis=-1, temperature=temperature)


def _q3_times_t(x: np.ndarray, temperature: float) -> np.ndarray:
    return softmax(x * temperature, axis=-1)


def _q3_power_without_renormalizing(x: np.ndarray, temperature: float) -> np.ndarray:
    return softmax(x, axis=-1) ** (1.0 / temperature)


def _q3_unstable(x: np.ndarray, temperature: float) -> np.ndarray:
    e = np.exp(x / temperature)
    return e / e.sum(axis=-1, keepdims=True)


def _q3_global_max(x: np.ndarray, temperature: float) -> np.ndarray:
    z = np.asarray(x) / temperature
    e = np.exp(z - z.max())
    return e / e.sum(axis=-1, keepdims=True)


def _q3_divide_after(x: np.ndarray, temperature: float) -> np.ndarray:
    return softmax(x, axis=-1) / temperature


def _q3_shifted_by(shift):
    def wrong(x: np.ndarray, temperature: float) -> np.ndarray:
        z = np.asarray(x) / temperature
        e = np.exp(z - shift(z))
        return e / e.sum(axis=-1, keepdims=True)

    return wrong


def _q3_clipped(clip):
    def wrong(x: np.ndarray, temperature: float) -> np.ndarray:
        return softmax(clip(np.asarray(x) / temperature), axis=-1)

    return wrong


def _q3_arguments_swapped(run: Run) -> str | None:
    """Early property: a function that takes (temperature, x) is told so, not given advice about its formula.

    Its nan (T / x divides by the scores' zeros) would otherwise get the overflow hint, though it may well
    subtract the maximum.
    """
    x, temperature = run.case.args
    if run.output.shape == run.expected.shape and np.allclose(run.output, run.expected, rtol=1e-6, atol=1e-9):
        return None
    try:
        swapped = run.call(temperature, x)
    except Exception:  # noqa: BLE001 - the swapped call may fail in any way: then no evidence
        return None
    if swapped.shape == run.expected.shape and np.allclose(swapped, run.expected, rtol=1e-6, atol=1e-9):
        return ("is wrong, but your function called with its two arguments the other way round, f(temperature, x), "
                "gives exactly the expected result: it reads its first argument as the temperature. The checker "
                "calls f(x, temperature), scores first")
    return None


_q3_arguments_swapped.next_step = (  # type: ignore[attr-defined]
    "Swap the two parameters in your `def` line: `def softmax_with_temperature(x, temperature):`, the scores "
    "first; the body stays as it is."
)

_Q3_FLOAT32_ADVICE = (
    "compute in float64 (drop the `dtype=np.float32` or `astype(np.float32)` on the scores or on x / T): the inputs "
    "are float64, and at a small T such as 0.01 float32's rounding of x / T (about 6e-8 relative) grows into "
    "errors of the weights up to 1e-4"
)
_q3_float32_digits = float32_rounding(_Q3_FLOAT32_ADVICE)


def _q3_float32(run: Run) -> str | None:
    """Property: a result that misses only at float32's rounding names float32 (the tolerance needs float64).

    Named where the result is float32 values, or where it is the result of the scores rounded to float32 (with T
    kept, or T rounded too). Where only the rounded inputs give float32 away, the answer must also respond to a
    change of T larger than float32's rounding: one that floors T at 0.05 ignores T = 0.01 and 0.0099999998
    alike, and is not float32.
    """
    x, temperature = run.case.args
    out, expected = run.output, run.expected
    problem = _q3_float32_digits(run)
    if problem is not None:
        if run.dtype == "float32" or float32_values(out):
            return problem
        try:
            moved = run.call(x, temperature * (1 + 1e-5))
        except Exception:  # noqa: BLE001 - no evidence either way
            return None
        return None if np.array_equal(moved, out) else problem
    # float32_rounding rounds every input at once; a learner may round the scores alone, `x.astype(np.float32)`.
    if np.allclose(out, expected, rtol=1e-9, atol=1e-11) or not np.allclose(out, expected, rtol=1e-4, atol=1e-6):
        return None
    x32 = np.asarray(x).astype(np.float32).astype(np.float64)
    if np.array_equal(x32, x):
        return None
    try:
        again = run.call(x32, temperature)
    except Exception:  # noqa: BLE001 - no evidence either way
        return None
    if again.shape != out.shape or not np.array_equal(again, out) or rounded_inputs(run) is not None:
        return None  # (scores rounded to 7 decimals can also give the same result on the float32 scores)
    right = np.asarray(run.reference(x32, temperature), dtype=np.float64)
    computed_in_float32 = float32_values(out) and not np.array_equal(out, np.round(out))
    if right.shape != out.shape or not (np.allclose(out, right, rtol=1e-9, atol=1e-12) or computed_in_float32):
        return None  # a rounding coarser than float32's (6 significant digits) ignores it too, but is not softmax(x32 / T)
    return f"is exactly what softmax(x / T) gives with the scores x rounded to float32: {_Q3_FLOAT32_ADVICE}"


_q3_float32.next_step = _q3_float32_digits.next_step  # type: ignore[attr-defined]
_q3_float32.precise = True  # type: ignore[attr-defined]  # as float32_rounding's: it names float32 values


_Q3_SOLUTION = """
```python
def softmax_with_temperature(x, temperature):
    z = np.asarray(x, dtype=float) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
```
Divide the *scores* by T before the softmax, and keep the max-subtraction:
[10, 0, -5] / 0.01 contains 1000.
"""


def _q3() -> FunctionExercise:
    row = np.array([10.0, 0.0, -5.0])
    words = np.array([[1.0, 0.0, 1.0], [2.0, 4.0, 4.0], [2.0, 2.0, 3.0]])
    return FunctionExercise(
        "01",
        "q3",
        "Softmax with a temperature",
        reference=_q3_reference,
        starter=starter,
        cases=[
            Case((row, 1.0)),
            Case((row, 2.0)),
            Case((words, 0.5)),
            Case((words, 10.0)),
            Case((row, 0.01)),
            Case((np.array([0.0, 10.0, -5.0]), 0.01)),  # the largest score is not first
            Case((np.array([[10.0, 9.0], [0.0, -1.0]]), 0.01)),
            Case((np.array([[1e-3, 0.0, 0.0], [30.0, 0.0, -30.0], [-20.0, -20.015, -20.03]]), 0.01)),
            Case((np.array([1000.0, 900.0, 0.0]), 100.0)),  # clipping the scores before dividing changes them
            Case((np.array([0.0, 0.0, 0.0, 30.0, 30.01]), 0.01)),  # two top scores far above the mean
            Case((np.array([200.0, 199.95, 0.0]), 0.01)),  # x / T beyond 1e4: clipping there ties the top two
            Case((np.array([2000.0, 1999.95, 0.0]), 0.01)),  # and beyond 1e5
            Case((np.array([0.0, -0.18, -0.19]), 0.01)),  # weights near 1e-8: flushing small weights to 0 shows
            Case((np.array([0.0, -0.018, -0.019]), 1e-3)),  # the same weights at T = 1e-3: a floor on T shows
            # x / T of 314.159... and 310, 4.2 apart: rounding x / T to float32 moves the second weight (0.016)
            # by up to 1.5e-5 relative.
            Case((np.array([np.pi, 3.1, 0.0]), 0.01)),
            # Scores and a temperature whose x / T no short decimal or 16-bit float holds: rounding x / T shows.
            Case((np.array([np.pi / 10, -np.sqrt(3), np.e]), 0.7)),
        ],
        # Tolerances as in q1: float64 answers agree to 1e-16 relative. Unlike q1, the inputs are
        # float64, and casting them to float32 is wrong, not just less precise: it moves -20.015 and
        # -20.03 by up to 7e-7, which T = 0.01 turns into relative errors of the weights up to 8e-5.
        rtol=1e-6,
        atol=1e-9,
        early_properties=[_q3_arguments_swapped],
        # float32 last: the tolerance needs float64 (the case with T = 0.01 and -20.015 rejects float32).
        properties=[non_negative, sums_to_one, _q3_float32],
        nonfinite_hint=(
            "x / T can be far larger than x: if you did not subtract each row's own maximum before exp(), do so "
            "(exp() of a large score overflows to inf, and a row whose exponentials all underflow gives 0/0). "
            "If you did, print x / T on this input: nan or inf there comes from a division by 0."
        ),
        wrong_answers={
            "multiplying by T": _q3_times_t,
            "raising the probabilities to 1/T without renormalizing": _q3_power_without_renormalizing,
            "dividing by T but forgetting stability": _q3_unstable,
            "one max for the whole batch instead of one per row": _q3_global_max,
            "dividing the probabilities, not the scores": _q3_divide_after,
        },
        variants={**shift_variants(_q3_shifted_by), **clip_variants(_q3_clipped, _CLIPS)},
        probes=[Case((x, t)) for x in _ROW_PROBES for t in (0.01, 1.0, 100.0)],
        advice=shift_and_clip_advice(_CLIPS),
        next_steps={
            "multiplying by T": (
                "Change `x * temperature` to `x / temperature`: T = 0.5 must double the gaps between scores, "
                "T = 10 shrink them tenfold."
            ),
            "raising the probabilities to 1/T without renormalizing": (
                "Take your `p ** (1 / temperature)` and divide it by its sum, `q / q.sum(axis=-1, keepdims=True)`, "
                "or compute the softmax of `x / temperature` directly."
            ),
            "dividing by T but forgetting stability": (
                "After `z = x / temperature`, add `z = z - z.max(axis=-1, keepdims=True)` before `np.exp(z)`: at "
                "T = 0.01 a score of 10 becomes 1000."
            ),
            "one max for the whole batch instead of one per row": (
                "Give your `z.max()` an axis: `z.max(axis=-1, keepdims=True)`, one maximum per row."
            ),
            "dividing the probabilities, not the scores": (
                "Move `/ temperature` inside: compute the softmax of `x / temperature`, not `softmax(x) / temperature`."
            ),
            **shift_and_clip_next_steps(_CLIPS, scores="z"),
        },
        hints=[
            "Temperature divides the scores, not the probabilities.",
            "softmax(x / T) is still a softmax: reuse the stable recipe on x / T.",
        ],
        solution=_Q3_SOLUTION,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
