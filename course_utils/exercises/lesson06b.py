"""Exercises for lesson 06b, entmax and sparse attention in transformers."""

from __future__ import annotations

import numpy as np

from ..softmax import softmax
from ..sparse import entmax_bisect
from .core import Case, Exercise, FunctionExercise, Run, ValueExercise, Verdict, first_float_error, starter


# --- q1: the alpha at which a row becomes one-hot -----------------------------------


_Q1_ROW = np.array([1.0, 0.2, -0.5])


def _one_hot_alpha(row: np.ndarray) -> float:
    """The smallest alpha for which alpha-entmax of `row` is one-hot: 1 + 1 / (top gap)."""
    top = -np.sort(-row)
    return float(1 + 1 / (top[0] - top[1]))


#: Where the smallest key, -0.5, leaves the support: alpha = 1.5805 (bisection in alpha). The scan after the exercise
#: shows it between 1.55 and 1.60, so a learner who read the scan for the wrong key answers anywhere in that range.
_Q1_SMALLEST_LEAVES = 1.5805
_Q1_SMALLEST_LABEL = "where the smallest key leaves, not the second-largest"
_Q1_SMALLEST_BAND = (1.55, 1.61)


class _BandedPrediction(ValueExercise):
    """A prediction whose one wrong answer is a range, not a value: a reading of a scan, to 2 or 3 digits."""

    def __init__(self, *args: object, band: tuple[str, float, float, str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.band = band

    def evaluate(self, answer: object) -> Verdict:
        verdict = super().evaluate(answer)
        if verdict.status != "incorrect" or verdict.mistake is not None:
            return verdict
        label, lo, hi, text = self.band
        try:
            got = np.asarray(answer, dtype=np.float64)
        except (TypeError, ValueError):  # text such as "9/4", or not numbers: the verdict above said why
            return verdict
        if got.shape == np.shape(self.reference) and lo <= float(got) <= hi:
            return Verdict("incorrect", f"✗ Not yet: {text}", mistake=label, next_step=self.next_steps.get(label))
        return verdict


_Q1_SMALLEST_TEXT = (
    "about 1.58 is where the smallest score, -0.5, leaves the support (the scan after this exercise finds it "
    "between 1.55 and 1.60). The row is one-hot only once the second-largest score, 0.2, has left as well, at a "
    "larger alpha."
)


def _q1() -> ValueExercise:
    return _BandedPrediction(
        "06b",
        "q1",
        "Predict the alpha at which entmax of [1.0, 0.2, -0.5] becomes one-hot",
        reference=_one_hot_alpha(_Q1_ROW),
        wrong_answers={
            "sparsemax": (
                2.0,
                "sparsemax (alpha = 2) makes a row one-hot only when the top gap is at least 1; here it is 0.8.",
            ),
            "1 + gap": (1.8, "that is 1 + 0.8. The condition is (alpha - 1) * gap >= 1: solve it for alpha."),
            "1 / gap": (1.25, "that is 1 / 0.8; the condition is (alpha - 1) * gap >= 1, so add the 1 back."),
            "gap to the smallest score": (
                1 + 1 / 1.5,
                "that uses the gap to the smallest score, -0.5. The second-largest score, 0.2, is the last to leave.",
            ),
            "1 + the gap to the smallest score": (
                2.5,
                "that is 1 + 1.5, the gap from 1.0 to the smallest score added to 1. The condition is "
                "(alpha - 1) * gap >= 1, and the gap is to the second-largest score, the last to leave.",
            ),
            # Also every answer in _Q1_SMALLEST_BAND, matched by _BandedPrediction.evaluate.
            _Q1_SMALLEST_LABEL: (_Q1_SMALLEST_LEAVES, _Q1_SMALLEST_TEXT),
        },
        band=(_Q1_SMALLEST_LABEL, *_Q1_SMALLEST_BAND, _Q1_SMALLEST_TEXT),
        next_steps={
            "sparsemax": "Solve `(alpha - 1) * 0.8 = 1` for alpha: the top gap here is 1.0 - 0.2 = 0.8, not 1.",
            "1 + gap": "Divide instead of adding: `alpha - 1 = 1 / 0.8`, so `alpha = 1 + 1 / 0.8`.",
            "1 / gap": "Add the 1 back: `alpha = 1 + 1 / 0.8`.",
            "gap to the smallest score": "Use the top gap `1.0 - 0.2 = 0.8` in `alpha = 1 + 1 / gap`, not `1.0 - (-0.5)`.",
            "1 + the gap to the smallest score": (
                "Two changes: the gap to the second-largest score, `1.0 - 0.2 = 0.8`, and its reciprocal, "
                "`alpha = 1 + 1 / 0.8`."
            ),
            _Q1_SMALLEST_LABEL: (
                "Follow the second key instead: solve `(alpha - 1) * (1.0 - 0.2) = 1`, or read the scan where the "
                "weight of 0.2 reaches 0."
            ),
        },
        hints=[
            "alpha-entmax gives p_i = [(alpha - 1) x_i - tau]_+ ^ (1 / (alpha - 1)). One-hot means the top weight alone is 1.",
            "The top weight alone is 1 when tau = (alpha - 1) x_max - 1. Every other score must then be at or below tau.",
            "The second-largest score is the last to leave: (alpha - 1)(x_max - x_second) >= 1.",
        ],
        solution=(
            "`2.25`. One-hot means tau = (alpha - 1) * 1.0 - 1, and the second score 0.2 must get 0: "
            "(alpha - 1) * 0.2 <= tau, that is (alpha - 1)(1.0 - 0.2) >= 1, so alpha >= 1 + 1 / 0.8 = 2.25."
        ),
    )



# --- q2: one backward pass for the whole family -------------------------------------


def _q2_reference(g: np.ndarray, p: np.ndarray, alpha: float) -> np.ndarray:
    s = np.where(p > 0, p ** (2.0 - alpha), 0.0)  # s = p^(2 - alpha) on the support
    return s * g - (s @ g) / s.sum() * s


def _q2_softmax_form(g, p, alpha):
    return p * g - (p @ g) * p


def _q2_wrong_power(g, p, alpha):
    s = np.where(p > 0, p ** (alpha - 1.0), 0.0)
    return s * g - (s @ g) / s.sum() * s


def _q2_no_support(g, p, alpha):
    s = np.power(p, 2.0 - alpha)  # 0 ** 0 = 1: at alpha = 2 every key counts as in the support
    return s * g - (s @ g) / s.sum() * s


def _q2_count_not_sum(g, p, alpha):
    s = np.where(p > 0, np.where(p > 0, p, 1.0) ** (2.0 - alpha), 0.0)
    return s * g - (s @ g) / np.count_nonzero(s) * s


def _q2_sum_of_squares(g, p, alpha):
    s = np.where(p > 0, np.where(p > 0, p, 1.0) ** (2.0 - alpha), 0.0)
    return s * g - (s @ g) / (s @ s) * s


def _q2_normalized_s(g, p, alpha):
    s = np.where(p > 0, np.where(p > 0, p, 1.0) ** (2.0 - alpha), 0.0)
    s = s / s.sum()  # normalizing s first scales J by 1 / sum(s)
    return s * g - (s @ g) * s


def _q2_mean_under_p(g, p, alpha):
    s = np.where(p > 0, np.where(p > 0, p, 1.0) ** (2.0 - alpha), 0.0)
    return s * (g - p @ g)


def _q2_sign_flipped(g, p, alpha):
    return -_q2_reference(g, p, alpha)  # (s . g) / sum(s) * s - s * g: the two terms swapped


def _q2_sqrt_p(g, p, alpha):
    s = np.sqrt(p)  # 1.5-entmax's s for every alpha (sqrt(0) = 0 keeps the support)
    return s * g - (s @ g) / s.sum() * s


def _q2_unweighted(g, p, alpha):
    s = (p > 0).astype(float)
    return s * g - (s @ g) / s.sum() * s


def _q2_support_above(eps: float):
    """The reference with the support taken as p > eps: keys with a tiny positive weight are dropped.

    On the cases every eps from 1e-3 down to float64's machine epsilon drops the same key (weight
    9.8e-17) and no other, so they are one mistake with one label: the family, not a value of eps.
    """

    def thresholded(g, p, alpha):
        s = np.where(p > eps, np.where(p > eps, p, 1.0) ** (2.0 - alpha), 0.0)
        return s * g - (s @ g) / s.sum() * s

    return thresholded


def _q2_float32(g, p, alpha):
    g32, p32 = np.asarray(g, dtype=np.float32), np.asarray(p, dtype=np.float32)
    s = np.where(p32 > 0, np.where(p32 > 0, p32, np.float32(1)) ** np.float32(2.0 - alpha), np.float32(0))
    return s * g32 - (s @ g32) / s.sum() * s


def _float32_only(run: Run) -> str | None:
    """Property: an answer computed in float32 is told so, not blamed on its formula.

    The result is float32 when every entry is a float32 number; it is blamed on float32 when it
    also agrees with the reference to float32's precision but not to the checker's 1e-12. An answer
    that reads p in float32 loses a weight below float32's range (1e-300): it is told so where it
    keeps a weight of 1e-44 and drops one of 1e-46, as float32 does.
    """
    out, expected = run.output, run.expected
    g, p, alpha = run.case.args
    lost = (p > 0) & (p < np.finfo(np.float32).smallest_subnormal)
    if lost.any() and not np.array_equal(out, expected):
        # A weight float32 cannot hold: an answer that reads p in float32 sees 0 there, and drops the key. It keeps
        # a weight of 1e-44 (float32's subnormal 1.4e-44) and drops one of 1e-46, which a fixed cut-off does not.
        def with_weight(weight: float) -> np.ndarray | None:
            try:
                return run.call(g, np.where(lost, weight, p), alpha)
            except Exception:  # noqa: BLE001 - the answer's own failure on other inputs: no evidence
                return None

        kept, dropped = with_weight(1e-44), with_weight(1e-46)
        if kept is not None and dropped is not None and np.array_equal(dropped, out) and not np.array_equal(kept, out):
            return (f"drops the key whose weight {p[lost].min():.2g} float32 cannot hold, keeps one of 1e-44 and drops one "
                    "of 1e-46, as float32 does (it holds nothing below 1.4e-45): your function reads p in float32, so that key drops out "
                    "of the support. Keep p in float64 (drop the `astype(np.float32)`, or pass dtype=torch.float64)")
    if not np.array_equal(out, out.astype(np.float32).astype(np.float64)):
        return None
    if np.allclose(out, expected, rtol=1e-9, atol=1e-12) or not np.allclose(out, expected, rtol=1e-4, atol=1e-6):
        return None
    return (
        "is float32: it agrees with J g to float32's precision (about 7 digits), and the checker asks for float64's "
        "precision (1e-12). Your formula may well be right: compute in float64 (NumPy's default; torch.tensor(...) of a list is float32, "
        "pass dtype=torch.float64)"
    )


# Checked also for a nearly right answer (core: `precise`): it names float32 values, which no rounding explains.
_float32_only.precise = True  # type: ignore[attr-defined]


def _tiny_weight_kept(run: Run) -> str | None:
    """Property: a key whose weight is tiny but positive is in the support and gets its gradient.

    Tiny: below 1e-3. A result rounded to a few decimals (every entry at most 4) has 0s of its own, and is
    not named here.
    """
    p = np.asarray(run.case.args[1])
    dropped = (p > 0) & (p < 1e-3) & (run.expected != 0) & (run.output == 0)
    rounded = np.array_equal(np.round(run.output, 4), run.output) and not np.array_equal(np.round(run.expected, 4), run.expected)
    if dropped.any() and not rounded:
        return (
            f"gives gradient exactly 0 to a key whose weight {p[dropped].min():.2g} is tiny but positive: "
            "the support is every key with p > 0, however small"
        )
    return None


# Checked also for a nearly right answer (core: `precise`): an exact 0 where the reference is not, which no rounding explains.
_tiny_weight_kept.precise = True  # type: ignore[attr-defined]


def _sums_to_zero(run: Run) -> str | None:
    """Property: the gradient sums to 0 (the weights always sum to 1, so no gradient can move their sum)."""
    if abs(float(run.output.sum())) > 1e-9:
        return f"sums to {run.output.sum():.4g}, not 0: adding the same number to every score changes nothing"
    return None


def _zero_off_support(run: Run) -> str | None:
    """Property: keys with weight 0 get gradient exactly 0."""
    p = np.asarray(run.case.args[1])
    if (run.output[p == 0] != 0).any():
        return "gives a gradient to a key whose weight is exactly 0: s must be 0 off the support"
    return None


# Checked also for a nearly right answer (core: `precise`): exact zeros off the support, which no rounding explains.
_zero_off_support.precise = True  # type: ignore[attr-defined]


_Q2_SOLUTION = """
```python
def entmax_backward_row(g, p, alpha):
    s = np.where(p > 0, p ** (2 - alpha), 0.0)   # s = p^(2 - alpha) on the support, 0 off it
    return s * g - (s @ g) / s.sum() * s          # J g with J = Diag(s) - s s^T / sum(s)
```
With s = p the formula is softmax's backward pass (lesson 04), with s = sqrt(p) 1.5-entmax's,
and with s the support's indicator sparsemax's. The `np.where` matters at alpha = 2: there
p^0 would be 1 for every key, also for the keys outside the support. The test is p > 0, not
p > a small number: a weight of 1e-16 is still in the support.
"""


_Q2_ROW = np.array([0.2, 1.4, -0.5, 0.9, 0.6])

#: (scores, alpha) of each case: the checker gets g, p = entmax(scores) and alpha. The last row's
#: extra key sits just above 1.5-entmax's threshold: its weight is about 9.8e-17, below float64's
#: machine epsilon (2.2e-16) and still positive, and its s = sqrt(p) about 1e-8.
_Q2_SETUPS = [(_Q2_ROW, alpha) for alpha in (1.0, 1.5, 2.0, 1.3, 1.8)] + [
    (np.append(_Q2_ROW, -0.12395771), 1.5),
]

#: Probes, for the tests: tiny positive weights at other alphas (about 6e-7, 1.2e-6 and 6.7e-13).
_Q2_PROBE_SETUPS = [
    (np.append(_Q2_ROW, -12.0), 1.0),
    (np.append(_Q2_ROW, 0.476), 1.8),
    (np.append(_Q2_ROW, 0.650000000001), 2.0),
]


#: One representative of the learners' small cut-offs (1e-3 ... machine epsilon, ~np.isclose(p, 0)):
#: the cases cannot tell them apart, and the tests try the others.
_Q2_SMALL_CUT = 1e-12
_Q2_SMALL_LABEL = "the support taken as p > a small number instead of p > 0"


def _q2_cases(setups, seed: int) -> list[Case]:
    gen = np.random.default_rng(seed)
    cases = []
    for row, alpha in setups:
        p = softmax(row) if alpha == 1.0 else entmax_bisect(row, alpha)
        cases.append(Case((gen.normal(size=row.size), p, alpha)))
    return cases


def _q2_nonfinite(run: Run) -> str:
    """Where the nan or inf comes from: NumPy's first invalid operation on this input, and its line, if NumPy sees it."""
    error = first_float_error(run.function, run.case)
    seen = f"NumPy reports {error}. " if error else ""
    return (seen + "This formula has no exp(): look for a division by 0 (by `s.sum()` with no key of p > 0 in your "
            "s, or by a factor that is 0 at some alpha, such as `alpha - 1` at alpha = 1) or a power: `(-0.5) ** 0.5` "
            "is nan and `0.0 ** -0.5` is inf (g has negative entries and p none: the parameters come in the order "
            "(g, p, alpha)). Print each intermediate on this input.")


def _q2() -> FunctionExercise:
    cases = _q2_cases(_Q2_SETUPS, 62)
    # A weight of 1e-25 at alpha = 2: it is in the support (p > 0), so a cut-off of p > 1e-20 drops a key that counts.
    cases.append(Case((np.array([0.3, -1.0, 2.0]), np.array([0.6, 0.4, 1e-25]), 2.0)))
    # At alpha = 2 every key of the support counts alike however small its p: any fixed cut-off fails somewhere,
    # and 1e-300 catches every cut-off a learner writes (p > tiny, the smallest normal float, is right).
    cases.append(Case((np.array([0.3, -1.0, 2.0]), np.array([0.6, 0.4, 1e-300]), 2.0)))
    return FunctionExercise(
        "06b",
        "q2",
        "One backward pass for softmax, 1.5-entmax and sparsemax: J g with s = p^(2 - alpha)",
        reference=_q2_reference,
        starter=starter,
        cases=cases,
        probes=_q2_cases(_Q2_PROBE_SETUPS, 63),
        properties=[_float32_only, _tiny_weight_kept, _zero_off_support, _sums_to_zero],
        wrong_answers={
            "softmax's form p g - (p . g) p for every alpha": _q2_softmax_form,
            "s = p^(alpha - 1)": _q2_wrong_power,
            "s = p^(2 - alpha) without restricting it to the support": _q2_no_support,
            "dividing by the support size instead of the sum of s": _q2_count_not_sum,
            "dividing by the sum of squares of s": _q2_sum_of_squares,
            "the support indicator for every alpha (sparsemax's Jacobian)": _q2_unweighted,
            "normalizing s to sum 1 before using it twice": _q2_normalized_s,
            "subtracting the p-weighted mean of g instead of the s-weighted one": _q2_mean_under_p,
            "the sign flipped (the two terms swapped)": _q2_sign_flipped,
            "1.5-entmax's s = sqrt(p) for every alpha": _q2_sqrt_p,
        },
        variants={
            _Q2_SMALL_LABEL: _q2_support_above(_Q2_SMALL_CUT),
            "the right formula computed in float32": _q2_float32,
        },
        advice={
            _Q2_SMALL_LABEL: (
                "However small the cut-off (1e-12, machine epsilon, np.isclose), a weight of 1e-16 falls below it, and it "
                "is not 0: its s = p^(2 - alpha) is 1e-8 at alpha = 1.5, and at alpha = 2 it is 1. Test p > 0."
            ),
            "the right formula computed in float32": (
                "Nothing is wrong with the formula; float32 keeps about 7 digits. Build your arrays in float64."
            ),
        },
        next_steps={
            "softmax's form p g - (p . g) p for every alpha": (
                "Put `s = np.where(p > 0, p ** (2 - alpha), 0.0)` in place of p: return "
                "`s * g - (s @ g) / s.sum() * s`."
            ),
            "s = p^(alpha - 1)": "Change the exponent in `p ** (alpha - 1)` to `2 - alpha`.",
            "s = p^(2 - alpha) without restricting it to the support": (
                "Wrap your power in `np.where(p > 0, p ** (2 - alpha), 0.0)`: at alpha = 2, `0.0 ** 0` is 1."
            ),
            "dividing by the support size instead of the sum of s": "Change `(p > 0).sum()` in the denominator to `s.sum()`.",
            "dividing by the sum of squares of s": "Change `(s ** 2).sum()` (or `s @ s`) in the denominator to `s.sum()`.",
            "the support indicator for every alpha (sparsemax's Jacobian)": (
                "Replace `s = (p > 0).astype(float)` by `s = np.where(p > 0, p ** (2 - alpha), 0.0)`."
            ),
            "normalizing s to sum 1 before using it twice": (
                "Delete `s = s / s.sum()`: keep s unnormalized in `s * g`, and divide only the second term by `s.sum()`."
            ),
            "subtracting the p-weighted mean of g instead of the s-weighted one": (
                "Change `p @ g` to `(s @ g) / s.sum()` in the subtracted term."
            ),
            "the sign flipped (the two terms swapped)": (
                "Swap the two terms back: `s * g - (s @ g) / s.sum() * s`, the diagonal part first. At alpha = 1 it "
                "must equal softmax's `p * g - (p @ g) * p`."
            ),
            "1.5-entmax's s = sqrt(p) for every alpha": (
                "Make the exponent depend on alpha: `s = np.where(p > 0, p ** (2 - alpha), 0.0)`; `np.sqrt(p)` is "
                "the case alpha = 1.5 only."
            ),
            _Q2_SMALL_LABEL: f"Change the test `p > {_Q2_SMALL_CUT:g}` (or `np.isclose(p, 0)`) to `p > 0`.",
            "the right formula computed in float32": (
                "Remove `dtype=np.float32` / `astype(np.float32)`; print `s.dtype` and your result's dtype: both "
                "should read float64."
            ),
        },
        hints=[
            "J = Diag(s) - s s^T / sum(s), so J g = s * g - (s . g) / sum(s) * s.",
            "s = p^(2 - alpha) on the support and 0 off it: with alpha = 1 that is p, with alpha = 2 the indicator.",
            "At alpha = 2, p ** 0 is 1 even where p = 0: restrict s to p > 0 with np.where.",
        ],
        solution=_Q2_SOLUTION,
        # No exp here: nan or inf comes from a division (by sum(s) = 0, by alpha - 1 at alpha = 1), or a power of a
        # negative "weight"; NumPy says which operation, and where.
        nonfinite_hint=_q2_nonfinite,
        # Tight on purpose, but a float64 bound (u = 2^-53): in any form of J g (the full matrix, masking after
        # the power) s = p^(2 - alpha) is within a pow's 4 ulp, the sums s.g and sum(s) within γ_n, so an entry is
        # off by at most 2·(8u + γ_(n+2))·max|g| ≈ 1e-14 on each side for these rows of at most 6 keys (|g| < 3.1);
        # while the wrong answers above miss by 1e-2 or more, and a dropped weight of 9.8e-17 by about 1e-8.
        # A float32 answer is not accepted, and is told so by its own message.
        atol=1e-12,
        rtol=1e-9,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
