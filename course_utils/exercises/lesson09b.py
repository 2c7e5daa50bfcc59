"""Exercises for lesson 09b, long context and logits that grow: Scalable-Softmax and soft-capping."""

from __future__ import annotations

import math

import numpy as np

from ..softmax import softmax
from ..variants import scalable_softmax, softcap
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    describe,
    first_float_error,
    float32_rounding,
    non_negative,
    shift_and_clip_advice,
    shift_and_clip_next_steps,
    shift_examples,
    shift_invariant,
    shift_variants,
    starter,
    sums_to_one,
)



# --- q1: Scalable-Softmax (exercise 3 of lesson 09 before the split) ----------------------


def _q1_reference(x: np.ndarray, s: float) -> np.ndarray:
    return scalable_softmax(x, s)


def _q1_plain_softmax(x, s):
    return softmax(x)


def _q1_s_times_n(x, s):
    return softmax(x * s * np.shape(x)[-1])


def _q1_log_n_without_s(x, s):
    return softmax(x * math.log(np.shape(x)[-1]))


def _q1_divides(x, s):
    n = np.shape(x)[-1]
    return softmax(x / (s * math.log(n))) if n > 1 else softmax(x)


def _q1_log2(x, s):
    return softmax(x * s * math.log2(np.shape(x)[-1]))


def _q1_n_plus_one(x, s):
    return softmax(x * s * math.log(np.shape(x)[-1] + 1))


def _q1_scaled_after(x, s):
    # (A power of the softmax, renormalized, would be right: p_i^c is proportional to e^{c x_i}.)
    return softmax(x) * (s * math.log(np.shape(x)[-1]))


def _q1_first_axis_length(x, s):
    return softmax(x * s * math.log(np.shape(x)[0]))


def _q1_size(x, s):
    return softmax(x * (s * math.log(np.size(x))), axis=-1)  # every entry of a batch counted, not one row's keys


def _q1_log10(x, s):
    return softmax(x * (s * math.log10(np.shape(x)[-1])), axis=-1)


def _q1_shifted_by(shift):
    # Lesson 02's family of wrong shifts, applied to the scaled logits z = s log(n) x.
    def wrong(x, s):
        z = np.asarray(x, dtype=np.float64) * (s * math.log(np.shape(x)[-1]))
        e = np.exp(z - shift(z))
        return e / e.sum(axis=-1, keepdims=True)

    return wrong


_Q1_FLOAT32_ADVICE = "compute in float64 (the inputs are float64; a float32 array or np.float32(s) along the way loses the digits)"
_Q1_SCALED = " Here the row to shift is the scaled logits z = s·log(n)·x; each input below uses s = 1/log n, so z = x."


def _q1_sqrt_n(x, s):
    return softmax(x * s * math.sqrt(np.shape(x)[-1]))


_Q1_SOLUTION = """
```python
def ssmax(x, s):
    n = x.shape[-1]                                  # the number of keys in each row
    return cu.softmax(x * (s * np.log(n)), axis=-1)  # cu: the lesson's `import course_utils as cu`
```
Scalable-Softmax is a softmax of the logits multiplied by s·log n. At n = e^{1/s} the factor is 1
and it equals softmax; for larger n it sharpens, by just enough that a fixed score gap keeps
picking out one key (its weight is n^{s·a} / (n^{s·a} + n - 1) for a gap a over n - 1 equal keys).
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "09b",
        "q1",
        "Implement Scalable-Softmax, softmax(s · log(n) · x) with n the length of the last axis",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((np.array([2.0, 0.0, 0.0, 0.0]), 1.0)),
            Case((np.array([1.0, -0.5, 0.25, 0.0, 2.0, -1.0, 0.5]), 0.4)),
            Case((np.array([[3.0, 0.0, 1.0, 0.0, -2.0], [0.0, 0.0, 0.0, 0.0, 1.0]]), 0.7)),
            Case((np.array([300.0, 299.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]), 2.0)),
            Case((np.array([5.0]), 0.5)),
            # s = 1/log n makes z = x: lesson 02's inputs for each wrong shift. Rows far apart catch one
            # maximum for the whole batch, the first-axis maximum and a constant; the first row catches no
            # shift but not the row mean; the third the mean and minimum but not the median or first entry.
            Case((np.array([[1000.0, 999.0], [0.0, -1.0]]), 1 / math.log(2))),
            Case((np.array([0.0, 1000.0, 2000.0]), 1 / math.log(3))),
            Case((np.array([1000.0, 990.0, 980.0, -3000.0]), 1 / math.log(4))),
            Case((np.array([0.0, 2000.0]), 1 / math.log(2))),
            Case((np.array([0.0, -26.0]), 1 / math.log(2))),  # a weight of e^-26 = 5e-12: a flush of small weights shows
            Case((np.array([-1000.0, -1001.0]), 1 / math.log(2))),  # every score far below 0: a shift clamped at 0 gives 0/0
            # ... and far below any finite floor a learner may take from a mask fill (-1e4, -1e9): 1000 apart, so the
            # weights are exactly 1 and 0 whatever the rounding of s * log(n) * x at 2e10 (spacing 3.8e-6).
            Case((np.array([-2e10, -2e10 - 1000.0]), 1 / math.log(2))),
        ],
        properties=[non_negative, sums_to_one, shift_invariant, float32_rounding(_Q1_FLOAT32_ADVICE)],
        wrong_answers={
            "plain softmax": _q1_plain_softmax,
            "s · n instead of s · log n": _q1_s_times_n,
            "log n without s": _q1_log_n_without_s,
            "dividing by s · log n": _q1_divides,
            "log base 2": _q1_log2,
            "log(n + 1)": _q1_n_plus_one,
            "the weights scaled after the softmax, not the logits before it": _q1_scaled_after,
            "n from the first axis": _q1_first_axis_length,
            "sqrt(n) instead of log n": _q1_sqrt_n,
            "n = x.size, every entry of the batch, instead of the keys of one row": _q1_size,
            "log base 10": _q1_log10,
        },
        variants=shift_variants(_q1_shifted_by),
        probes=[Case((example, 1 / math.log(example.shape[-1]))) for example in shift_examples()],  # lesson 02's shift family
        advice={label: text + _Q1_SCALED for label, text in shift_and_clip_advice().items() if label.startswith("shifting")},
        next_steps={
            **{label: step for label, step in shift_and_clip_next_steps(scores="z").items() if label.startswith("shifting")},
            "plain softmax": "Multiply the logits by `s * np.log(x.shape[-1])` before the softmax.",
            "s · n instead of s · log n": "Change the factor `s * n` to `s * np.log(n)`.",
            "log n without s": "Multiply your `np.log(n)` by `s`: the factor is `s * np.log(n)`.",
            "dividing by s · log n": "Change `x / (s * np.log(n))` to `x * (s * np.log(n))`.",
            "log base 2": "Change `np.log2(n)` to `np.log(n)`, the natural log.",
            "log(n + 1)": "Change `np.log(n + 1)` to `np.log(n)`.",
            "the weights scaled after the softmax, not the logits before it": (
                "Move the factor inside: `softmax(x * (s * np.log(n)))`, not `softmax(x) * (s * np.log(n))` or a power of it."
            ),
            "n from the first axis": "Take `n = x.shape[-1]`, not `x.shape[0]` or `len(x)`.",
            "sqrt(n) instead of log n": "Change `np.sqrt(n)` to `np.log(n)`.",
            "n = x.size, every entry of the batch, instead of the keys of one row": (
                "Take `n = x.shape[-1]`, not `x.size`: on a (2, 5) batch `x.size` is 10, but each row has 5 keys."
            ),
            "log base 10": "Change `np.log10(n)` to `np.log(n)`, the natural log.",
        },
        hints=[
            "n is the number of keys, the length of the last axis: x.shape[-1].",
            "Multiply every logit by s * log(n) (natural log), then take a stable softmax along the last axis.",
            "`cu.softmax` (the lesson imports course_utils as cu) is stable; with n = 1, log n = 0 and the single key gets weight 1.",
        ],
        solution=_Q1_SOLUTION,
        own=[scalable_softmax],
        # float64 rounding (u = 2^-53): y = x·s·log(n) within 3u·|y|, then each weight within 3(D + M)u + (n + 3)·4 ulp
        # relative (spread D and size M of y, n keys, and y's own error twice): under 8e-12 for both sides with |y| up
        # to 3000. rtol 1e-9 covers that; float32 (rel. error ~1e-7), other s or n and every near miss do not pass.
        rtol=1e-9,
        atol=1e-12,
    )


# --- q2: soft-capping -------------------------------------------------------------------------


def _q2_reference(x: np.ndarray, c: float) -> np.ndarray:
    return softcap(x, c)


#: Other smooth caps: slope 1 at 0 and bounded by c like c·tanh(x/c), so they agree with it on
#: small logits and differ only where |x| is near c or beyond.
_OTHER_CAPS = {
    "the softsign cap c·x / (c + |x|) instead of c·tanh(x/c)": lambda x, c: c * x / (c + np.abs(x)),
    "the arctan cap (2c/π)·arctan(πx / 2c) instead of c·tanh(x/c)": lambda x, c: 2 * c / np.pi * np.arctan(np.pi * x / (2 * c)),
    "the algebraic cap x / sqrt(1 + (x/c)²) instead of c·tanh(x/c)": lambda x, c: x / np.sqrt(1 + (x / c) ** 2),
    "the hard cap clip(x, -c, c) instead of c·tanh(x/c)": lambda x, c: np.clip(x, -c, c),
}

#: Factors a misplaced c could end up multiplied by, inside tanh, outside it, or both.
_FACTORS = (0.5, 2.0, 10.0)


def _q2_scaled(inside: float, outside: float):
    def wrong(x, c):
        x = np.asarray(x, dtype=np.float64)
        return outside * c * np.tanh(x / (inside * c))

    return wrong


def _q2_variants() -> dict:
    variants = dict(_OTHER_CAPS)
    for k in _FACTORS:
        variants[f"the cap {k:g}·c, inside and outside tanh"] = _q2_scaled(k, k)
        variants[f"{k:g}·c outside tanh, c inside"] = _q2_scaled(1.0, k)
        variants[f"c outside tanh, {k:g}·c inside"] = _q2_scaled(k, 1.0)
    return variants


def _within_the_cap(run: Run) -> str | None:
    # Every capped logit lies in [-c, c]: the whole point of the cap.
    _, c = run.case.args
    beyond = np.abs(run.output) > c * (1 + 1e-12)
    if beyond.any():
        return f"gives {describe(run.output[beyond].flat[0])}, beyond the cap c = {describe(c)}: every output must lie in [-c, c]"
    return None


def _cap_not_lost(run: Run) -> str | None:
    """Property: a logit far beyond the cap gives about ±c, not 0 (an overflow hidden by nan_to_num or a guard)."""
    c = float(run.case.args[1])
    lost = (np.abs(run.expected) > 0.9 * c) & (run.output == 0)
    if not lost.any():
        return None
    error = first_float_error(run.function, run.case)
    why = (f"NumPy reports {error}: an exponential of a large logit overflowed to inf, inf / inf is nan, and "
           "something turned the nan into 0" if error else
           "a value near the cap came back as 0 (an overflow hidden by `np.nan_to_num` or a guard, say)")
    return f"gives 0 where the expected is {describe(run.expected[lost][0])}, near the cap: {why}"


_cap_not_lost.next_step = (  # type: ignore[attr-defined]
    "Use `c * np.tanh(x / c)`: np.tanh never overflows, while an exp form such as (e - 1) / (e + 1) with "
    "`e = np.exp(2 * x / c)` does for large x, and `np.nan_to_num` only hides the nan."
)


def _odd(run: Run) -> str | None:
    # A cap treats a logit and its negative alike: softcap(-x) = -softcap(x).
    x, c = run.case.args
    mirrored = run.call(-np.asarray(x), c)
    if mirrored.shape != run.output.shape or not np.allclose(mirrored, -run.output, rtol=1e-9, atol=1e-12):
        return "gives softcap(-x) != -softcap(x): a negative logit must be capped like a positive one, with its sign kept"
    return None


_Q2_SOLUTION = """
```python
def soft_cap(x, c):
    return c * np.tanh(x / c)  # nearly x where |x| << c, never beyond c
```
tanh has slope 1 at 0 and tends to ±1, so dividing x by c and multiplying the result by c keeps
small logits as they are and bounds every logit by c. np.tanh(±inf) is ±1, so a masked logit (-inf)
becomes -c: mask after capping, as Gemma 2 does.
"""


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "09b",
        "q2",
        "Implement soft-capping, c · tanh(x / c), elementwise",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([0.0, 1.0, -1.0, 3.0]), 2.5)),
            # Logits near and beyond the cap: where the other smooth caps part from tanh.
            Case((np.array([10.0, 25.0, 50.0, -75.0, 100.0, -200.0]), 50.0)),
            Case((np.array([[0.5, -2.0, 3.0], [30.0, -30.0, 0.0]]), 30.0)),
            Case((np.array([1.0, 2.0, 4.0, -8.0]), 2.5)),
            Case((np.array([1000.0, -1000.0, 0.1]), 0.5)),
            Case((np.array([0.5, -2.0, 3.0]), 0.3)),  # a cap no float16 or float32 holds: a float32 c shows
        ],
        properties=[_within_the_cap, _cap_not_lost, _odd, float32_rounding(
            "compute in float64, and do not round (the inputs are float64; a float32 array, np.float32(c) or np.round along the way loses the digits)")],
        wrong_answers={
            "the identity, no cap": lambda x, c: np.asarray(x, dtype=np.float64),
            "tanh(x / c) without the factor c": lambda x, c: np.tanh(np.asarray(x) / c),
            "c · tanh(x), x not divided by c": lambda x, c: c * np.tanh(np.asarray(x)),
            "tanh(c · x) / c": lambda x, c: np.tanh(c * np.asarray(x)) / c,
            "c · sigmoid(x / c) instead of c · tanh(x / c)": lambda x, c: c / (1 + np.exp(-np.asarray(x) / c)),
            "capping only the positive logits": lambda x, c: np.where(np.asarray(x) > 0, c * np.tanh(np.asarray(x) / c), x),
            "the sign lost, c · tanh(|x| / c)": lambda x, c: c * np.tanh(np.abs(np.asarray(x)) / c),
        },
        variants=_q2_variants(),
        probes=[
            Case((np.linspace(-150.0, 150.0, 13), 50.0)),
            Case((np.array([-np.inf, np.inf, 0.0]), 50.0)),
            Case((np.array([[60.0, -7.0], [0.3, 12.0]]), 8.0)),
        ],
        advice={
            label: (
                f"You used another smooth cap. It also has slope 1 at 0 and stays within c, so it agrees with "
                f"c·tanh(x/c) on small logits; near the cap they differ (try x = 50, c = 50: tanh gives "
                f"{50 * math.tanh(1.0):.4f}). Use np.tanh."
            )
            for label in _OTHER_CAPS if "hard cap" not in label
        }
        | {
            label: ("You clipped: a hard cap equals x below c, has a kink at c and derivative 0 beyond it, so a capped "
                    "logit learns nothing. Soft-capping is smooth everywhere: use c·np.tanh(x / c).")
            for label in _OTHER_CAPS if "hard cap" in label
        }
        | {
            label: "The same c must divide x inside tanh and multiply the result outside it: c·tanh(x/c) has slope 1 at 0 and bound c."
            for label in _q2_variants()
            if label not in _OTHER_CAPS
        },
        next_steps={
            "the identity, no cap": "Return `c * np.tanh(x / c)` instead of `x`.",
            "tanh(x / c) without the factor c": "Multiply your `np.tanh(x / c)` by `c`.",
            "c · tanh(x), x not divided by c": "Divide x by c inside the tanh: `c * np.tanh(x / c)`.",
            "tanh(c · x) / c": "Swap the roles of c: `c * np.tanh(x / c)`, not `np.tanh(c * x) / c`.",
            "c · sigmoid(x / c) instead of c · tanh(x / c)": "Change the sigmoid to `np.tanh`: `c * np.tanh(x / c)`.",
            "capping only the positive logits": "Delete the `np.where(x > 0, ..., x)`: apply `c * np.tanh(x / c)` to every logit.",
            "the sign lost, c · tanh(|x| / c)": "Remove the `np.abs(...)`: `np.tanh` is odd, so `c * np.tanh(x / c)` keeps the sign.",
            **{label: f"Replace `{code}` by `c * np.tanh(x / c)`." for label, code in (
                ("the softsign cap c·x / (c + |x|) instead of c·tanh(x/c)", "c * x / (c + np.abs(x))"),
                ("the arctan cap (2c/π)·arctan(πx / 2c) instead of c·tanh(x/c)", "2 * c / np.pi * np.arctan(np.pi * x / (2 * c))"),
                ("the algebraic cap x / sqrt(1 + (x/c)²) instead of c·tanh(x/c)", "x / np.sqrt(1 + (x / c) ** 2)"),
                ("the hard cap clip(x, -c, c) instead of c·tanh(x/c)", "np.clip(x, -c, c)"),
            )},
            **{label: step for k in _FACTORS for label, step in (
                (f"the cap {k:g}·c, inside and outside tanh", f"Drop the factor `{k:g}` in both places: `c * np.tanh(x / c)`."),
                (f"{k:g}·c outside tanh, c inside", f"Drop the `{k:g}` outside: `c * np.tanh(x / c)`, not `{k:g} * c * np.tanh(x / c)`."),
                (f"c outside tanh, {k:g}·c inside", f"Drop the `{k:g}` inside: `np.tanh(x / c)`, not `np.tanh(x / ({k:g} * c))`."),
            )},
        },
        hints=[
            "Check one value by hand: at x = c the answer is c·tanh(1), about 0.76·c; x is divided by c inside tanh, and the result multiplied by c.",
            "np.tanh works elementwise on the whole array, for any shape; no loop or axis is needed.",
            "Check two limits: for |x| << c the answer is nearly x; for x -> ±inf it tends to ±c.",
        ],
        solution=_Q2_SOLUTION,
        own=[softcap],
        nonfinite_hint="c·tanh(x/c) is finite for every x: np.tanh(±inf) is ±1. Did you divide by x, or exponentiate a large logit?",
        # rtol 1e-9: any float64 evaluation passes, as c·tanh(x/c) rounds within 10u relative on each side (x/c, tanh's
        # 4 ulp, c·; u = 2^-53); float32 (rel. error ~1e-7) and the other caps do not.
        rtol=1e-9,
        atol=1e-12,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
