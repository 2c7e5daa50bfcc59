"""Exercises for lesson 02, the numerically stable softmax."""

from __future__ import annotations

import math

import numpy as np

from ..floats import exp_limits
from ..softmax import log_softmax, softmax
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    ValueExercise,
    Verdict,
    clip_variants,
    shift_and_clip_advice,
    shift_and_clip_next_steps,
    shift_variants,
    starter,
)
from .lesson01 import _ROW_PROBES


# --- q1: predict where float32 overflows ----------------------------------------

#: A number between 88 and 89, such as ln(3.4e38) = 88.72 itself: the limit, where the question asks for an integer.
_Q1_NOT_INTEGER = "a number between 88 and 89, not an integer"
_Q1_NOT_INTEGER_FEEDBACK = (
    "the question asks for an integer x, the largest whole number whose e^x is still finite in float32. "
    "ln(3.4e38), about 88.72, is the limit itself and not a whole number: round it down."
)


class _IntegerPrediction(ValueExercise):
    """A prediction that must be an integer: any number strictly between 88 and 89 is named as not one.

    ValueExercise names a wrong answer by one value; ln(3.4e38) may be written 88.72, 88.7 or 88.5.
    """

    def evaluate(self, answer: object) -> Verdict:
        verdict = super().evaluate(answer)
        if verdict.passed or verdict.mistake is not None:
            return verdict
        try:
            if type(answer).__module__.startswith("torch"):
                answer = answer.detach().cpu().numpy()  # type: ignore[attr-defined]
            got = np.asarray(float(answer) if isinstance(answer, str) else answer, dtype=np.float64)
        except (TypeError, ValueError):  # told by the checker already what it is not
            return verdict
        if got.size != 1 or not 88.0 < float(got.reshape(-1)[0]) < 89.0:
            return verdict
        return Verdict("incorrect", f"✗ Not yet: {_Q1_NOT_INTEGER_FEEDBACK}", mistake=_Q1_NOT_INTEGER,
                       next_step=self.next_steps.get(_Q1_NOT_INTEGER))


def _q1() -> ValueExercise:
    return _IntegerPrediction(
        "02",
        "q1",
        "The largest integer score x for which naive_softmax([x, 0]) in float32 is finite",
        reference=math.floor(exp_limits(np.float32).largest),
        wrong_answers={
            "the float64 limit": (math.floor(exp_limits(np.float64).largest), "that is the limit for float64."),
            "the float16 limit": (math.floor(exp_limits(np.float16).largest), "that is the limit for float16."),
            "1000": (1000, "e^1000 overflows even in float64."),
            "one too many": (
                math.floor(exp_limits(np.float32).largest) + 1,
                "one too many: e^89 is about 4.5e38, above float32's largest number.",
            ),
            # Any other number in (88, 89) is named by _IntegerPrediction.evaluate, with the same feedback.
            _Q1_NOT_INTEGER: (float(np.log(np.float64(np.finfo(np.float32).max))), _Q1_NOT_INTEGER_FEEDBACK),
        },
        hints=[
            "The textbook formula breaks as soon as e^x is inf.",
            "The largest float32 is about 3.4e38. Which x has e^x of that size?",
            "Take the natural log of 3.4e38 and round down.",
        ],
        solution="`88`: ln(3.4e38) is about 88.7, so e^88 is finite in float32 and e^89 is inf.",
        next_steps={
            "the float64 limit": (
                "Use float32's largest number, `np.finfo(np.float32).max` (about 3.4e38), not float64's 1.8e308, "
                "then take its natural log."
            ),
            "the float16 limit": (
                "Use float32's largest number, `np.finfo(np.float32).max` (about 3.4e38), not float16's 65504, "
                "then take its natural log."
            ),
            "1000": (
                "Find the x with `e^x = 3.4e38`: that is `x = ln(3.4e38)`, and you may check it with "
                "`np.exp(np.float32(x))`."
            ),
            "one too many": (
                "Round `ln(3.4e38)` down, not up: check with `np.exp(np.float32(89))`, which prints inf."
            ),
            _Q1_NOT_INTEGER: (
                "Write the whole number just below yours, and check it in a cell: `np.exp(np.float32(x))` must print "
                "a finite number, and `np.exp(np.float32(x + 1))` inf."
            ),
        },
        atol=0.0,
    )


# --- q2: a stable log-softmax ---------------------------------------------------


def _q2_reference(x: np.ndarray) -> np.ndarray:
    return log_softmax(x, axis=-1)


def _q2_log_of_softmax(x: np.ndarray) -> np.ndarray:
    return np.log(softmax(x, axis=-1))


def _q2_unshifted(x: np.ndarray) -> np.ndarray:
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _q2_shift_only(x: np.ndarray) -> np.ndarray:
    return x - x.max(axis=-1, keepdims=True)


def _q2_global_max(x: np.ndarray) -> np.ndarray:
    m = x.max()
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _q2_shifted_by(shift):
    def wrong(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x)
        z = x - shift(x)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))

    return wrong


def _q2_clipped(clip):
    def wrong(x: np.ndarray) -> np.ndarray:
        return log_softmax(clip(np.asarray(x)), axis=-1)

    return wrong


def _exp_sums_to_one(run: Run) -> str | None:
    total = np.exp(run.output).sum(axis=-1)
    if not np.allclose(total, 1.0, atol=1e-9):
        return f"does not exponentiate to probabilities: exp(result) sums to {np.round(total, 4)}"
    return None


def _not_positive(run: Run) -> str | None:
    # Above the checker's atol (1e-9): log(1 + 1e-12) = 1e-12 is 0 to the tolerance, not a positive entry.
    if (run.output > 1e-9).any():
        return "has positive entries, but a log-probability is at most 0"
    return None


def _log_of_probabilities(run: Run) -> str | None:
    """Property: the result is not log(p + eps), nor log(max(p, eps)): the probabilities formed, their zeros
    kept off log(0) by a small number, which turns a log-probability of -1000 into about log(eps)."""
    out, expected = run.output, run.expected
    far = np.isfinite(out) & np.isfinite(expected) & (out > expected + 1.0)
    if not far.any() or out.shape != expected.shape:
        return None
    p = np.exp(expected)
    for how, floor in (("as their floor", True), ("added to them", False)):
        eps = float(np.median(np.exp(out[far]) - (0.0 if floor else p[far])))
        if not 0.0 < eps < 1e-3:
            continue
        with np.errstate(divide="ignore"):
            model = np.log(np.maximum(p, eps) if floor else p + eps)
        if np.allclose(out, model, rtol=1e-6, atol=1e-9):
            worst = np.unravel_index(int(np.argmax(np.where(far, out - expected, -np.inf))), out.shape)
            if floor:  # log(max(p, eps)), a clip of the result, or a floor on the exponent: the same numbers
                return (f"stops at {np.log(eps):.4g}: {out[worst]:.4g} where the log-probability is "
                        f"{expected[worst]:.4g}, and every log-probability below it is lost. A floor like this "
                        "comes from `np.log` of the probabilities with a small number as their floor (or added), "
                        "or from an `np.maximum`/`np.clip` on the result or on the shifted scores")
            return (f"is the log of the probabilities with a small number, about {eps:.0e}, {how}: "
                    f"{out[worst]:.4g} where the log-probability is {expected[worst]:.4g}. The small number keeps "
                    "log(0) away, but every log-probability below log(eps) is lost")
    return None


_log_of_probabilities.next_step = (  # type: ignore[attr-defined]
    "Remove what holds the result up (a small number added to the probabilities or taken as their floor, an "
    "`np.maximum` or `np.clip` on the result or the shifted scores) and never form the probabilities: return "
    "`shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))` with `shifted = x - x.max(axis=-1, "
    "keepdims=True)`, so that nothing small ever goes into `np.log`."
)


_Q2_SOLUTION = """
```python
def stable_log_softmax(x):
    x = np.asarray(x, dtype=float)
    shifted = x - x.max(axis=-1, keepdims=True)        # every exponent is now <= 0
    tail = np.exp(shifted)
    top = shifted.argmax(axis=-1)[..., None]
    np.put_along_axis(tail, top, 0.0, axis=-1)          # leave the maximum's own e^0 = 1 out
    return shifted - np.log1p(tail.sum(axis=-1, keepdims=True))
```
log softmax(x) = x - lse(x), and lse(x) = m + log(1 + s), where m is the row
maximum and s sums the other terms e^(x_j - m). The result never goes through the
probabilities, so nothing underflows to log(0), and `log1p(s)` keeps a tail s
that `log(1 + s)` would round to 0 (for [0, -40], s = e^-40).
The checker also accepts `shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))`:
it differs from this only by the lost tail, below 1e-16.
"""

_Q2_NONFINITE = (
    "A log-probability of a finite score is finite: look for a log(0), of a probability or a sum that underflowed "
    "to 0, or for an exp() that overflowed. (x - m) - log(sum(exp(x - m))), with m each row's own maximum, has "
    "neither."
)


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "02",
        "q2",
        "Write a stable log-softmax",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.0, 1.0]),)),
            Case((np.array([0.0, -1000.0]),)),
            Case((np.array([0.0, -20000.0]),)),  # a log-probability of -20000: a floor at -1e4 shows
            Case((np.array([1000.0, 999.0, 0.0]),)),
            Case((np.array([[2.0, 4.0, 4.0], [-800.0, 0.0, 3.0]]),)),
            Case((np.array([[1000.0, 999.0], [0.0, -1.0]]),)),
            Case((np.array([2000.0, 0.0]),)),  # the mean, the median or the minimum overflows
            Case((np.array([0.0, 0.0, 2000.0]),)),  # the first entry overflows
            Case((np.array([[1e-3, 0.0, 0.0], [3000.0, 0.0, -3000.0], [-2000.0, -2001.5, -2003.0]]),)),
            Case((np.array([[100.0, 0.0, -1.0], [1.0, 2.0, 3.0]], dtype=np.float32),)),
            # Scores that no 16-bit float and no short decimal holds, even after the shift: rounding them to
            # float16, bfloat16 or a few decimals shows.
            Case((np.array([np.pi / 10, -np.sqrt(3), np.e]),)),
        ],
        # Tolerances: rtol=1e-6 admits answers computed in float32 (a few 6e-8 relative). atol=1e-9
        # admits log(1 + tail) in place of log1p(tail): they differ by the lost tail, below 1e-16
        # when it is lost at all. log(softmax) is caught by -inf where a weight underflows.
        rtol=1e-6,
        atol=1e-9,
        properties=[_log_of_probabilities, _not_positive, _exp_sums_to_one],
        nonfinite_hint=_Q2_NONFINITE,
        wrong_answers={
            "taking the log of softmax (which underflows)": _q2_log_of_softmax,
            "the logsumexp without the shift (which overflows)": _q2_unshifted,
            "the shift without the logsumexp": _q2_shift_only,
            "one max for the whole batch": _q2_global_max,
        },
        variants={**shift_variants(_q2_shifted_by), **clip_variants(_q2_clipped)},
        probes=[Case((x,)) for x in _ROW_PROBES] + [Case((np.array([0.0, -800.0, -1600.0]),))],
        advice={
            **shift_and_clip_advice(),
            "taking the log of softmax (which underflows)": (
                "You took the log of the probabilities. e^-1000 underflows to 0 and log(0) = -inf, although "
                "the exact log-probability is -1000: try [0, -1000]."
            ),
        },
        next_steps={
            **shift_and_clip_next_steps(),
            "taking the log of softmax (which underflows)": (
                "Replace `np.log(softmax(x))` by `shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))` "
                "with `shifted = x - x.max(axis=-1, keepdims=True)`: the log is then of a sum that is at least 1."
            ),
            "the logsumexp without the shift (which overflows)": (
                "Compute `m = x.max(axis=-1, keepdims=True)` and return `(x - m) - np.log(np.exp(x - m).sum(axis=-1, "
                "keepdims=True))`: the same value, but every exponent is at most 0."
            ),
            "the shift without the logsumexp": (
                "Subtract one more term from `x - m`: `np.log(np.exp(x - m).sum(axis=-1, keepdims=True))`, the log "
                "of the shifted row's normalizer."
            ),
            "one max for the whole batch": (
                "Give your `x.max()` an axis: `m = x.max(axis=-1, keepdims=True)`, one maximum per row, used in "
                "both the shift and the sum."
            ),
        },
        hints=[
            "log softmax(x)_i = x_i - log(sum_j exp(x_j)). Compute it without ever forming softmax(x).",
            "Subtract each row's maximum m first: log(sum exp(x)) = m + log(sum exp(x - m)).",
            "Keep the reduced axis (`keepdims=True`) so that 2-D batches broadcast row by row.",
        ],
        solution=_Q2_SOLUTION,
    )


# --- q3: predict where a float16 running sum stalls ------------------------------

#: How many ones the running sum of q3 adds: 65,536, where even the exact sum overflows float16.
Q3_TERMS = 65_536


def _float16_running_sum(n: int) -> float:
    """Add n ones one at a time, rounding the running sum to float16 after every addition."""
    return float(np.cumsum(np.ones(n, dtype=np.float16))[-1])


class _PredictionWithInf(ValueExercise):
    """A prediction exercise for which inf and -inf are plausible wrong answers, each with its own feedback (under
    the labels "overflow to inf" and "minus infinity"), where ValueExercise rejects any non-finite answer alike."""

    def evaluate(self, answer):
        try:
            is_inf = bool(np.isinf(np.asarray(answer, dtype=np.float64)).any())
        except (TypeError, ValueError):
            is_inf = False  # text, None and the like: the base class explains
        if is_inf and answer is not ...:
            label = "minus infinity" if (np.asarray(answer, dtype=np.float64) < 0).all() else "overflow to inf"
            text = next(text for name, _, text in self._feedback if name == label)
            return Verdict("incorrect", f"✗ Not yet: {text}", mistake=label, next_step=self.next_steps.get(label))
        return super().evaluate(answer)


_Q3_INF = (
    "inf is what NumPy's `.sum()` gives here: it adds in float32 and rounds the exact total, 65536, to "
    "float16 once. One at a time, the sum stops growing long before it could overflow."
)


def _q3() -> ValueExercise:
    stall = _float16_running_sum(Q3_TERMS)
    spacing = float(np.spacing(np.float16(stall)))
    return _PredictionWithInf(
        "02",
        "q3",
        f"The float16 running sum of {Q3_TERMS} ones, added one at a time",
        reference=stall,
        wrong_answers={
            "the exact sum": (
                float(Q3_TERMS),
                "that is the exact sum, which float16 cannot even hold (its largest number is 65504). "
                "Long before that, adding 1 stops changing the sum.",
            ),
            "the largest float16": (
                float(np.finfo(np.float16).max),
                "the sum never gets that far: adding 1 stops changing it much earlier.",
            ),
            "the bfloat16 stall": (
                2.0 ** (7 + 1),  # bfloat16 keeps 7 mantissa bits: integers are exact up to 2^8
                "that is where bfloat16 stalls (7 mantissa bits); float16 keeps 10.",
            ),
            "the float32 stall": (
                2.0 ** (np.finfo(np.float32).nmant + 1),
                "that is where a float32 running sum would stall (2^24); float16 keeps 10 mantissa bits.",
            ),
            "one past the stall": (
                stall + 1,
                "float16 cannot hold that number: above 2048 its neighbouring values are 2 apart.",
            ),
            "one short of the stall": (
                stall - 1,
                "one short: 2047 + 1 = 2048 is still exact in float16.",
            ),
            "one power of two too early": (
                stall / 2,
                "1024 + 1 = 1025 is exact in float16 (below 2048 the spacing is at most 1).",
            ),
            "one power of two too late": (
                stall * 2,
                "the sum never reaches that: at 2048, adding 1 rounds back to 2048.",
            ),
            "overflow to inf": (math.inf, _Q3_INF),
            "minus infinity": (
                -math.inf,
                "a sum of ones only grows: each addition adds +1, or, once the sum is large, nothing at all. It "
                "can never go below 0, let alone to -inf.",
            ),
        },
        next_steps={
            "the exact sum": (
                "Find the first n where `np.float16(n) + np.float16(1) == np.float16(n)`: with 11 significant bits, "
                "that happens at a power of two, 2^11."
            ),
            "the largest float16": (
                "Ask where `s + 1` first rounds back to `s` in float16, not where float16 ends: the spacing "
                "`np.spacing(np.float16(s))` reaches 2 at s = 2^11."
            ),
            "the bfloat16 stall": (
                "Redo your count with 10 mantissa bits instead of 7: integers are exact up to `2 ** (10 + 1)`."
            ),
            "the float32 stall": (
                "Redo your count with float16's 10 mantissa bits instead of float32's 23: integers are exact up to "
                "`2 ** (10 + 1)`."
            ),
            "one past the stall": (
                "Print `np.float16(2049)`: it rounds to an even neighbour, so the running sum can never hold 2049."
            ),
            "one short of the stall": (
                "Compute `np.float16(2047) + np.float16(1)` and then add 1 once more: the last step that still "
                "changes the sum is the answer."
            ),
            "one power of two too early": (
                "Print `np.spacing(np.float16(1024))`: it is 1, so 1024 + 1 is exact; find the first power of two "
                "where the spacing is 2."
            ),
            "one power of two too late": (
                "Run `np.float16(2048) + np.float16(1)`: it already gives 2048, so the sum stops there and never "
                "reaches 4096."
            ),
            "overflow to inf": (
                "Add the ones one at a time in float16, `s = np.float16(s + np.float16(1))`, and watch where `s` "
                "stops changing: far below 65504."
            ),
            "minus infinity": (
                "Run `s = np.float16(0)` and then `s = np.float16(s + np.float16(1))` a few times: `s` counts up "
                "1, 2, 3 ...; find the value where one more addition leaves it where it is."
            ),
        },
        hints=[
            "Print `np.spacing(np.float16(s))` for s = 256, 512, 1024, 2048 and 4096: it is the gap to the next "
            "float16 number. While it is 1, adding 1 to s is exact; where is it first more than 1?",
            f"Above 2^11 = 2048, neighbouring float16 values are {spacing:g} apart. What is 2048 + 1, rounded to float16?",
            "2049 is halfway between 2048 and 2050; ties round to the value with an even last bit, 2048.",
        ],
        solution=(
            "`2048`: float16 holds every integer up to 2^11 = 2048. Above it the spacing is 2, so "
            "2048 + 1 = 2049 is a tie between 2048 and 2050 and rounds to even, 2048. The sum never moves "
            "again, whatever number of ones follows."
        ),
        atol=0.0,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2(), _q3()]
