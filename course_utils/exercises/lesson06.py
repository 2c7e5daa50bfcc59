"""Exercises for lesson 06, sparsemax and entmax."""

from __future__ import annotations

import numpy as np

from ..softmax import softmax
from ..sparse import sparsemax
from .core import (
    Case,
    Exercise,
    FunctionExercise,
    Run,
    float32_rounding,
    non_negative,
    shift_invariant,
    starter,
    sums_to_one,
    ValueExercise,
    Verdict,
    describe,
)


# --- q1: sparsemax of one row, by sorting -------------------------------------------


def _q1_reference(x: np.ndarray) -> np.ndarray:
    return sparsemax(x)


def _sorted_cumsum(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = -np.sort(-np.asarray(x, dtype=float))
    return z, np.cumsum(z), np.arange(1, z.size + 1)


def _q1_tau_from_all_entries(x: np.ndarray) -> np.ndarray:
    tau = (np.sum(x) - 1) / np.size(x)
    return np.maximum(x - tau, 0)


def _q1_no_clipping(x: np.ndarray) -> np.ndarray:
    z, cumsum, k = _sorted_cumsum(x)
    support = (1 + k * z > cumsum).sum()
    tau = (cumsum[support - 1] - 1) / support
    return x - tau


def _q1_no_plus_one(x: np.ndarray) -> np.ndarray:
    z, cumsum, k = _sorted_cumsum(x)
    support = max(int((k * z > cumsum).sum()), 1)
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)


def _q1_no_minus_one(x: np.ndarray) -> np.ndarray:
    z, cumsum, k = _sorted_cumsum(x)
    support = (1 + k * z > cumsum).sum()
    tau = cumsum[support - 1] / support
    return np.maximum(x - tau, 0)


def _q1_ascending_sort(x: np.ndarray) -> np.ndarray:
    z = np.sort(np.asarray(x, dtype=float))
    cumsum, k = np.cumsum(z), np.arange(1, z.size + 1)
    support = max(int((1 + k * z > cumsum).sum()), 1)
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)


def _q1_k_from_zero(x: np.ndarray) -> np.ndarray:
    z, cumsum, _ = _sorted_cumsum(x)
    k = np.arange(z.size)  # 0, 1, ...: the test then counts one key too few, and often none
    support = (1 + k * z > cumsum).sum()
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)


def _q1_michelot_steps(steps: int):
    """Michelot's algorithm stopped after a fixed number of refinements of the support, where it repeats until the
    support stops changing. It starts from tau of the whole row, as if every key were in the support."""

    def refined(x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        support = np.ones(x.size, dtype=bool)
        for _ in range(steps):
            support = x > (x[support].sum() - 1) / support.sum()
        return np.maximum(x - (x[support].sum() - 1) / support.sum(), 0)

    return refined


#: The fixed numbers of refinements a learner may try, each named: the row of powers of 5 below needs 14 (and a
#: 15th tau, which the answer computes after its loop), so that 14 refinements are right.
_MICHELOT_STEPS = tuple(range(2, 14))


def _michelot_label(steps: int) -> str:
    return f"refining the support {steps} times, not until it stops changing (Michelot's algorithm cut short)"


def _q1_one_hot(x: np.ndarray) -> np.ndarray:
    return (np.arange(np.size(x)) == np.argmax(x)).astype(float)  # sparsemax is one-hot only for a top gap >= 1


def _q1_sorted_order(x: np.ndarray) -> np.ndarray:
    z, cumsum, k = _sorted_cumsum(x)
    support = (1 + k * z > cumsum).sum()
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(z - tau, 0)  # the weights of the sorted copy, not of x


def _q1_renormalized_softmax(x: np.ndarray) -> np.ndarray:
    p = softmax(x)
    p = np.where(p < 0.1, 0.0, p)
    return p / p.sum()


def _q1_relu_normalization(x: np.ndarray) -> np.ndarray:
    r = np.maximum(x, 0)
    return r / r.sum()


def _q1_relu_first(x: np.ndarray) -> np.ndarray:
    return sparsemax(np.maximum(x, 0))  # negative scores clipped to 0 before the projection


def _q1_positive_support(x: np.ndarray) -> np.ndarray:
    support = x > 0  # the positive scores taken as the support: none in an all-negative row
    tau = (x[support].sum() - 1) / support.sum()
    return np.maximum(x - tau, 0)


def _q1_threshold_from_zero(x: np.ndarray) -> np.ndarray:
    z, cumsum, k = _sorted_cumsum(x)
    support = max(int(((1 + k * z > cumsum) & (z > 0)).sum()), 1)  # the test, and a score above 0
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)


def _q1_uniform_without_positive_scores(x: np.ndarray) -> np.ndarray:
    if (x <= 0).all():  # a special case for rows with no positive score, as if they had nothing to attend to
        return np.full(x.shape, 1 / x.size)
    return sparsemax(x)


def _q1_floor(eps: float):
    """Sparsemax with `eps` added to every weight, renormalized: every zero becomes a small positive weight."""

    def floored(x: np.ndarray) -> np.ndarray:
        p = sparsemax(x) + eps
        return p / p.sum()

    return floored


def _q1_clip_at(eps: float):
    """max(x - tau, eps) instead of max(x - tau, 0): the keys below tau keep a weight of eps."""

    def clipped(x: np.ndarray) -> np.ndarray:
        z, cumsum, k = _sorted_cumsum(x)
        support = (1 + k * z > cumsum).sum()
        return np.maximum(x - (cumsum[support - 1] - 1) / support, eps)

    return clipped


#: Below about 1e-9 (the checker's atol) every way of turning the zeros into small weights, added and
#: renormalized or used as the clip, agrees with sparsemax on every entry, so with every other such
#: answer too: the cases cannot tell them apart, and one label names the whole family.
_Q1_TINY = "small weights instead of exact zeros (a tiny number added and renormalized, or used as the clip)"


def _q1_not_exact(floors: tuple[float, ...], clips: tuple[float, ...]) -> dict:
    """The answers that turn sparsemax's exact zeros into weights of 1e-6 or more, by label: the cases tell them apart."""
    return {
        **{f"sparsemax plus {eps:g} on every weight, renormalized": _q1_floor(eps) for eps in floors},
        **{f"max(x - tau, {eps:g}) instead of max(x - tau, 0)": _q1_clip_at(eps) for eps in clips},
    }


def _q1_sums_to_one(run: Run) -> str | None:
    """Property: the weights sum to 1, as :func:`sums_to_one` checks, with sparsemax's own next step."""
    return sums_to_one(run)


_q1_sums_to_one.next_step = (  # type: ignore[attr-defined]
    "Print `support`, `tau` and `np.maximum(x - tau, 0).sum()` on that input: with the right support size k "
    "(the count of `1 + k * z > cumsum` for `k = np.arange(1, n + 1)`, from 1) and `tau = (cumsum[k - 1] - 1) / k`, "
    "the sum is 1 exactly; if you iterate, repeat until the support stops changing. A sum off by about 1e-3 with "
    "the right support is a float16 step: print `.dtype` after each line."
)
_q1_sums_to_one.coarse = getattr(sums_to_one, "coarse", False)  # type: ignore[attr-defined]


def _stray_weight(run: Run) -> float | None:
    """The largest weight the answer gives a key whose sparsemax weight is exactly 0 (-0.0 counts as 0), or None."""
    nonzero = (run.expected == 0) & (run.output != 0)
    return float(np.abs(run.output[nonzero]).max()) if nonzero.any() else None


def _q1_exact_zeros(run: Run) -> str | None:
    """Property: where sparsemax gives exactly 0, the answer gives no small weight (below 1e-3) either."""
    largest = _stray_weight(run)
    if largest is None or largest >= 1e-3:
        return None
    return f"gives weight {largest:.2g} to a key whose sparsemax weight is exactly 0: sparsemax's zeros are exact, not small"


def _q1_zeros_below_tau(run: Run) -> str | None:
    """Property: where sparsemax gives exactly 0, the answer gives no weight of 1e-3 or more (softmax's, say)."""
    largest = _stray_weight(run)
    if largest is None or largest < 1e-3:
        return None
    return f"gives weight {largest:.2g} to a key whose sparsemax weight is exactly 0"


# Checked also for a nearly right answer (core: `precise`): sparsemax's zeros are exact, which no rounding explains.
_q1_exact_zeros.precise = True  # type: ignore[attr-defined]


_q1_exact_zeros.next_step = (  # type: ignore[attr-defined]
    "Return `np.maximum(x - tau, 0)` as it is: remove the small number from the clip and the `+ eps` / "
    "renormalization after it."
)
_q1_zeros_below_tau.next_step = (  # type: ignore[attr-defined]
    "Print your weights beside `x - tau` on that input, with tau from the sorted test (`1 + k * z > cumsum`): every "
    "key with `x - tau <= 0` must get exactly 0, which `np.maximum(x - tau, 0)` gives; weights made by `np.exp` (a "
    "softmax) are never 0."
)


def _q1_sorts_in_place(x: np.ndarray) -> np.ndarray:
    x[::-1].sort()  # sorts x descending, in place: the caller's array is scrambled
    cumsum, k = np.cumsum(x), np.arange(1, x.size + 1)
    support = (1 + k * x > cumsum).sum()
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)


_Q1_SOLUTION = """
```python
def sparsemax_row(x):
    x = np.asarray(x, dtype=float)
    z = np.sort(x)[::-1]                  # descending; a sorted copy, x is untouched
    cumsum = np.cumsum(z)
    k = np.arange(1, x.size + 1)
    support = np.sum(1 + k * z > cumsum)  # the largest k that passes the test
    tau = (cumsum[support - 1] - 1) / support
    return np.maximum(x - tau, 0)
```
The test `1 + k z_(k) > z_(1) + ... + z_(k)` says: with the top k scores in the support,
the k-th one would still get a positive weight. It holds for k = 1, 2, ... up to the support
size and fails from then on. tau comes from the support only, and the clipping at 0 gives
the zeros.
"""


def _q1() -> FunctionExercise:
    return FunctionExercise(
        "06",
        "q1",
        "Sparsemax of one row, by sorting",
        reference=_q1_reference,
        starter=starter,
        cases=[
            Case((np.array([1.0, 0.8, 0.5, -1.0]),)),  # first a row with an exact zero: that property speaks first
            Case((np.array([0.5, 0.0]),)),
            Case((np.array([2.0, 0.0, -1.0]),)),
            Case((np.array([-1.0, 0.5, 1.0, 0.8, -0.2]),)),
            Case((np.array([0.3, 0.3, 0.3]),)),
            Case((np.array([-0.9, -1.8, -1.1, 0.5, -0.9, -2.8]),)),
            Case((np.array([1000.0, 999.4, 0.0, 999.9]),)),
            Case((np.array([-2.0, -1.3, -3.5, -1.1]),)),  # all negative: tau = -1.7, two keys in the support
            # Far below 0: an answer that special-cases rows whose maximum is below some threshold (-1.5, say) fails here.
            Case((np.array([-5.0, -5.5]),)),
            # A long tail far below: Michelot's refinement of the support drops a few keys at a time and needs 6
            # rounds here, so a loop cut after a fixed number of rounds (2, 3, 5) is off.
            Case((np.array([-2.05, 1.0, -21.0, 0.34, -0.93, -149.0, 0.79, -889.0, -0.13, -1114.0]),)),
            # Powers of 5 far below: Michelot needs 15 rounds here, so a loop cut after 6 or 10 rounds is off.
            Case((np.array([1.0, 0.9, -1.0, *(-(5.0**k) for k in range(1, 25))]),)),
            # Its own sparsemax (it sums to 1, tau = 0): a weight of 4.56e-9 that a flush of small weights removes,
            # beside weights with more decimals than a rounding would keep, so that the flush is not read as one.
            Case((np.array([0.61234, 0.38766 - 4.56e-9, 4.56e-9]),)),
        ],
        probes=[
            Case((np.array([-1.996, 1.055, 2.71, 0.282, -2.23]),)),  # 3 rounds of Michelot's algorithm
            Case((np.array([-0.2, -0.1, -0.4, -3.0, -0.3]),)),
            Case((np.array([-1000.0, -999.5, -1001.0]),)),
            Case((np.array([0.05, -0.5, -0.2]),)),
        ],
        properties=[
            non_negative,
            _q1_zeros_below_tau,
            _q1_exact_zeros,
            # After the exact zeros: sparsemax's zeros stay exact in float32, and the small-weight answers are named first.
            float32_rounding("compute in float64: sort and sum the row as it comes (float64), without astype(np.float32) or dtype=np.float32"),
            _q1_sums_to_one,
            shift_invariant,
        ],
        wrong_answers={
            "tau from all entries instead of the support": _q1_tau_from_all_entries,
            "no clipping at 0": _q1_no_clipping,
            "forgetting the 1 in the support test": _q1_no_plus_one,
            "forgetting the -1 in tau": _q1_no_minus_one,
            # Sorting ascending gives what tau from all entries gives (every k passes the test): that label names it.
            "counting k from 0 in the support test": _q1_k_from_zero,
            "one-hot on the largest score (argmax)": _q1_one_hot,
            "one refinement of the support instead of iterating it (one Michelot step)": _q1_michelot_steps(1),
            "returning the weights in sorted order instead of the order of x": _q1_sorted_order,
            "softmax with small weights dropped, renormalized": _q1_renormalized_softmax,
            "relu(x) / sum(relu(x))": _q1_relu_normalization,
            "sorting the input in place": _q1_sorts_in_place,
            # Within the tolerance of every entry, but not exact: only the exact-zero property rejects it.
            _Q1_TINY: _q1_floor(1e-10),
        },
        variants={
            "clipping the negative scores to 0 first": _q1_relu_first,
            "taking the positive scores as the support": _q1_positive_support,
            "requiring a positive score in the support test": _q1_threshold_from_zero,
            "uniform weights for a row without a positive score": _q1_uniform_without_positive_scores,
            **_q1_not_exact((1e-3, 1e-6), (1e-3, 1e-6)),
            **{_michelot_label(k): _q1_michelot_steps(k) for k in _MICHELOT_STEPS},
        },
        own=[sparsemax],
        advice={
            "one-hot on the largest score (argmax)": (
                "Sparsemax is one-hot only where the largest score leads the next by 1 or more; a smaller gap leaves "
                "several keys in the support."
            ),
            **dict.fromkeys(
                (
                    "clipping the negative scores to 0 first",
                    "taking the positive scores as the support",
                    "requiring a positive score in the support test",
                    "uniform weights for a row without a positive score",
                ),
                "A score at or below 0 is a score like any other: sparsemax is shift-invariant, so [-2, -1.3, -3.5, -1.1] "
                "gets the weights of that row plus 10. Clip only x - tau at 0, never the scores.",
            ),
            **dict.fromkeys(
                (_Q1_TINY, *_q1_not_exact((1e-3, 1e-6), (1e-3, 1e-6))),
                "A key at or below tau gets max(x - tau, 0) = 0 exactly. Adding a small number and renormalizing, "
                "or clipping at a small number, turns every such zero into a weight that is not 0.",
            ),
        },
        nonfinite_hint=(
            "Sparsemax takes no exp, so nan or inf comes from a division: by a support size of 0, or by a sum of 0. "
            "The support always holds the top score (k = 1 passes the test, 1 + z_(1) > z_(1)), even when every score is negative."
        ),
        hints=[
            "Sort a copy of the row in descending order, z_(1) >= z_(2) >= ..., and take its cumulative sum.",
            "The support size is the number of k = 1, 2, ... with 1 + k z_(k) > z_(1) + ... + z_(k).",
            "With support size k, tau = (z_(1) + ... + z_(k) - 1) / k, and the weights are max(x - tau, 0) in the original order.",
        ],
        solution=_Q1_SOLUTION,
        next_steps={
            "tau from all entries instead of the support": (
                "Compute tau from the top `support` sorted scores only: `tau = (cumsum[support - 1] - 1) / support`, "
                "not `(x.sum() - 1) / x.size`. If you sorted ascending, every k passes the support test and gives "
                "exactly this: sort descending, `z = np.sort(x)[::-1]`."
            ),
            "no clipping at 0": "Wrap your return value in `np.maximum(x - tau, 0)`.",
            "forgetting the 1 in the support test": "Change the test to `1 + k * z > cumsum`, with the `1 +`.",
            "forgetting the -1 in tau": "Change tau to `(cumsum[support - 1] - 1) / support`: subtract 1 before dividing.",
            "one-hot on the largest score (argmax)": (
                "Compute tau from the sorted scores (`np.sort`, `np.cumsum` and the test `1 + k * z > cumsum`) and "
                "return `np.maximum(x - tau, 0)`: on [1.0, 0.8, 0.5, -1.0] the top gap is 0.2, below 1, so three "
                "keys share the weight."
            ),
            "counting k from 0 in the support test": (
                "Count k from 1: `k = np.arange(1, x.size + 1)`, so that the top score alone (k = 1) always passes "
                "`1 + k * z > cumsum`."
            ),
            "one refinement of the support instead of iterating it (one Michelot step)": (
                "Repeat `support = x > tau` and `tau = (x[support].sum() - 1) / support.sum()` in a loop until "
                "`support` stops changing, or take the support size from the sorted test `1 + k * z > cumsum`."
            ),
            **{_michelot_label(k): (
                f"Your loop stops after {k} rounds: repeat `support = x > tau` and `tau = (x[support].sum() - 1) / "
                "support.sum()` in a `while` loop until `support` no longer changes (up to n rounds), or take the "
                "support size from the sorted test `1 + k * z > cumsum`.") for k in _MICHELOT_STEPS},
            "returning the weights in sorted order instead of the order of x": (
                "Return `np.maximum(x - tau, 0)` computed from the original `x`, not from the sorted `z`."
            ),
            "softmax with small weights dropped, renormalized": (
                "Drop `np.exp` altogether: sparsemax is `np.maximum(x - tau, 0)` with tau from the sorted scores "
                "and their `np.cumsum`."
            ),
            "relu(x) / sum(relu(x))": (
                "Replace the fixed threshold 0 in `np.maximum(x, 0)` by tau, found with `np.sort`, `np.cumsum` and "
                "the test `1 + k * z > cumsum`; then no division."
            ),
            "sorting the input in place": "Replace `x.sort()` by `z = np.sort(x)[::-1]`, a sorted copy.",
            _Q1_TINY: _q1_exact_zeros.next_step,
            "clipping the negative scores to 0 first": "Delete the `np.maximum(x, 0)` at the top: sort and threshold the raw `x`.",
            "taking the positive scores as the support": (
                "Replace the `x > 0` support by the count `np.sum(1 + k * z > cumsum)` over the sorted scores."
            ),
            "requiring a positive score in the support test": (
                "Remove the `& (z > 0)` from your support test, leaving `1 + k * z > cumsum`."
            ),
            "uniform weights for a row without a positive score": (
                "Delete the special case for `x.max() <= 0`: the test `1 + k * z > cumsum` always keeps k = 1, so "
                "the general code handles such rows."
            ),
            **{f"sparsemax plus {eps:g} on every weight, renormalized": (
                f"Delete the `+ {eps:g}` and the division by the new sum that follows it.") for eps in (1e-3, 1e-6)},
            **{f"max(x - tau, {eps:g}) instead of max(x - tau, 0)": (
                f"Change the `{eps:g}` in your `np.maximum(x - tau, {eps:g})` to `0`.") for eps in (1e-3, 1e-6)},
        },
    )


# --- q2: predict sparsemax of two scores --------------------------------------------


_Q2_ROWS = np.array([[0.4, 0.0], [1.5, 0.0]])

#: A prediction within the tolerance everywhere but not 0 where sparsemax is: softmax's "near zero", not sparsemax's zero.
_Q2_NOT_EXACT = "a small weight where sparsemax gives exactly 0"


class _ExactZeroPrediction(ValueExercise):
    """A prediction whose zeros must be exact: the tolerance admits rounded weights, never a small one for a 0.

    Sparsemax's point is that a key gets a weight of exactly 0. A prediction of 0.0003 there is softmax's "near
    zero" (source 002's word), within the tolerance of 5e-4 and yet the one thing the exercise asks to see.
    """

    def evaluate(self, answer: object) -> Verdict:
        verdict = super().evaluate(answer)
        if not verdict.passed:
            return verdict
        try:
            if type(answer).__module__.startswith("torch"):
                answer = answer.detach().cpu().numpy()  # type: ignore[attr-defined]
            got = np.asarray(answer, dtype=np.float64)
        except (TypeError, ValueError):  # accepted by the checker, so numbers; nothing more to say
            return verdict
        stray = (np.asarray(self.reference) == 0) & (got != 0)
        if not stray.any():
            return verdict
        return Verdict(
            "incorrect",
            f"✗ Not yet: you wrote {describe(got[stray].flat[0])} where sparsemax gives exactly 0. The rest is within "
            "the tolerance, but that zero is the point: once the gap reaches 1, the second key leaves the support and "
            "its weight is max(0 - tau, 0) = 0, not small. Softmax never gives 0; sparsemax does.",
            mistake=_Q2_NOT_EXACT,
            next_step=self.next_steps.get(_Q2_NOT_EXACT),
        )


def _q2() -> ValueExercise:
    return _ExactZeroPrediction(
        "06",
        "q2",
        "Predict sparsemax([0.4, 0]) and sparsemax([1.5, 0])",
        reference=sparsemax(_Q2_ROWS),
        wrong_answers={
            "softmax": (
                softmax(_Q2_ROWS),
                "that is softmax, the sigmoid of the gap. Sparsemax is piecewise linear: p_1 = (1 + t) / 2 while |t| < 1.",
            ),
            "no clipping": (
                [[0.7, 0.3], [1.25, -0.25]],
                "(1 + t) / 2 holds only while both scores are in the support. A weight cannot be negative: "
                "once the gap reaches 1 the second weight is clipped to 0.",
            ),
            "one-hot for both": (
                [[1.0, 0.0], [1.0, 0.0]],
                "a gap below 1 keeps both scores in the support: 0.4 is not enough to silence the second key.",
            ),
            "both in the support, no saturation, first row right": (
                [[0.7, 0.3], [0.75, 0.25]],
                "the second row's gap is 1.5, more than 1: the second key gets exactly 0.",
            ),
            # The right four numbers in the wrong places: the layout, not sparsemax, is the mistake.
            "the table transposed": (
                np.transpose(sparsemax(_Q2_ROWS)),
                "your four numbers are right, but transposed: each row is one input ([0.4, 0], then [1.5, 0]) and "
                "holds its two weights. You wrote the columns as rows.",
            ),
            "the rows swapped": (
                sparsemax(_Q2_ROWS)[::-1],
                "your four numbers are right, but the rows are swapped: the first row is sparsemax([0.4, 0]), the "
                "second sparsemax([1.5, 0]).",
            ),
            "the columns swapped": (
                np.fliplr(sparsemax(_Q2_ROWS)),
                "your four numbers are right, but the columns are swapped: in each row the first weight belongs to "
                "the first score (0.4 or 1.5), the second to the 0.",
            ),
            # Within the tolerance: rejected by _ExactZeroPrediction.evaluate, which writes its own feedback.
            _Q2_NOT_EXACT: (
                [[0.7, 0.3], [0.9997, 0.0003]],
                "sparsemax gives exactly 0 there, not a small weight.",
            ),
        },
        next_steps={
            "softmax": (
                "Use sparsemax's formula for two scores, `p_1 = (1 + t) / 2` clipped to [0, 1], with `t` the gap "
                "`x_1 - x_2`, instead of `1 / (1 + e^-t)`."
            ),
            "no clipping": "Clip your second row to [0, 1]: `-0.25` becomes `0`, and `1.25` becomes `1`.",
            "one-hot for both": "Compute `(1 + t) / 2` for the first row, t = 0.4: the gap is below 1, so both weights are positive.",
            "both in the support, no saturation, first row right": (
                "Apply `min((1 + t) / 2, 1)` to the second row, t = 1.5."
            ),
            "the table transposed": (
                "Write one row per input, `[[p_1, p_2] for [0.4, 0], [p_1, p_2] for [1.5, 0]]`, or apply "
                "`np.transpose` to yours."
            ),
            "the rows swapped": "Put the row of [0.4, 0] first: `[[0.4 row], [1.5 row]]`, or `your_answer[::-1]`.",
            "the columns swapped": (
                "Put the weight of the larger score first in each row, `[p_1, p_2]`, or apply `np.fliplr` to yours."
            ),
            _Q2_NOT_EXACT: (
                "Work the second row through the support test: `1 + 2 * 0 > 1.5 + 0` is False, so k = 1, "
                "`tau = (1.5 - 1) / 1 = 0.5`, and the weights `max([1.5, 0] - tau, 0)`: write each as it comes."
            ),
        },
        hints=[
            "For two scores [t, 0] in the support, tau = (t + 0 - 1) / 2 and p = [t - tau, 0 - tau].",
            "That gives p_1 = (1 + t) / 2, as long as p_2 = (1 - t) / 2 stays positive, i.e. |t| < 1.",
        ],
        solution=(
            "`[[0.7, 0.3], [1, 0]]`. For [0.4, 0]: tau = (0.4 - 1) / 2 = -0.3, so p = [0.7, 0.3]. For [1.5, 0] the "
            "support test fails for the second score (1 + 2 * 0 = 1 is not > 1.5): the support is the first score "
            "alone, tau = 1.5 - 1 = 0.5 and p = [1, 0]."
        ),
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
