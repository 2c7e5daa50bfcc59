"""Exercises for lesson 08, does the scale matter in training? (the experiment)"""

from __future__ import annotations

import numpy as np

from .core import Case, Exercise, FunctionExercise, Run, ValueExercise, float32_rounding, starter

# --- q1: the init that matches the scaled start --------------------------------------------


def _q1_family() -> dict[str, tuple[float, str]]:
    """Every factor that is a power of d_k = 256 other than 256 ** -0.25, named by the mistake it makes."""
    why = {
        -1.0: "multiplied by d_k", -0.5: "multiplied by sqrt(d_k)", -0.25: "multiplied by d_k ** (1/4)",
        0.0: "unchanged", 0.125: "by d_k ** (-1/8)", 0.375: "by d_k ** (-3/8)", 0.5: "by c itself",
        0.75: "by d_k ** (-3/4)", 1.0: "by c squared",
    }
    family = {}
    for power, label in why.items():
        f = 256.0**-power
        if power == 0:
            text = "that is arm (a): with W_q and W_k unchanged the scores stay 16 times larger than the scaled arm's."
        elif power < 0:
            text = (f"a factor of {f:g} on each of W_q and W_k multiplies every score by {f * f:g}: larger scores, "
                    "while the scaled arm's are 16 times smaller than the unscaled ones.")
        else:
            text = (f"a factor of {f:g} on each of W_q and W_k multiplies every score by {f * f:.4g}, since a score is a "
                    "product of a query and a key; the scaled arm multiplies it by c = 1/16.")
        family[label] = (f, text)
    family["the negative root"] = (-0.25, "negative factors on both give the same scores, but the question asks for the "
                                   "positive factor: the arms keep their weights' signs.")
    return family


def _q1_next_step(label: str, f: float) -> str:
    """One step beyond the feedback for the factor `f`, without giving the answer."""
    if label == "the negative root":
        return "Keep the size you found and flip the sign: `abs(prediction)`."
    if label == "unchanged":
        return "Multiply both W_q and W_k by `f`: by what power of `f` is `(query @ W_q) · (x @ W_k)` multiplied?"
    if f > 1:
        return (f"Your `{f:g} ** 2 = {f * f:g}` makes the scores larger, but `c = 1/16` shrinks them: "
                "the factor must be below 1.")
    return f"Your `{f:g} ** 2 = {f * f:.4g}`, not `c = 0.0625`: solve `f ** 2 == c` for `f > 0`."


def _q1() -> ValueExercise:
    family = _q1_family()
    return ValueExercise(
        "08",
        "q1",
        "At d_k = 256 the scaled arm computes c · q · k with c = 1/16, the unscaled arm q · k. By what positive factor "
        "must W_q and W_k each be multiplied at initialization for the unscaled scores to start equal to the scaled ones?",
        reference=0.25,
        wrong_answers=family,
        next_steps={label: _q1_next_step(label, f) for label, (f, _) in family.items()},
        hints=[
            "A score is (query W_q) · (x W_k): a product of one factor from W_q and one from W_k.",
            "Multiplying W_q and W_k by f each multiplies every score by f². The scaled arm multiplies it by c = 1/16.",
            "Solve f² = c = 1/16 for f > 0; in powers of d_k, f = d_k ** (-1/4).",
        ],
        solution="`0.25`. A score (query W_q) · (x W_k) is multiplied by f · f = f² when W_q and W_k are each multiplied "
        "by f. The scaled arm multiplies the scores by c = 1/sqrt(d_k) = 1/16, so f² = 1/16 and f = 1/4 = d_k ** (-1/4): "
        "arm (c) starts exactly like arm (b).",
        atol=1e-3,
    )


# --- q2: paired differences -------------------------------------------------------------


def _q2_reference(loss_arm: np.ndarray, loss_ref: np.ndarray) -> np.ndarray:
    diff = np.asarray(loss_arm, dtype=float) - np.asarray(loss_ref, dtype=float)
    return np.array([diff.mean(), diff.std(ddof=1)])


def _q2_ddof0(a, b):
    d = a - b
    return np.array([d.mean(), d.std()])


def _q2_unpaired(a, b):
    return np.array([(a - b).mean(), np.sqrt(a.var(ddof=1) + b.var(ddof=1))])


def _q2_sign(a, b):
    d = b - a
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_absolute(a, b):
    d = np.abs(a - b)
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_sd_of_arm(a, b):
    return np.array([(a - b).mean(), a.std(ddof=1)])


def _q2_standard_error(a, b):
    d = a - b
    return np.array([d.mean(), d.std(ddof=1) / np.sqrt(d.size)])


def _q2_median(a, b):
    d = a - b
    return np.array([np.median(d), d.std(ddof=1)])


def _q2_ratio(a, b):
    d = a / b - 1
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_sorted(a, b):
    d = np.sort(a) - np.sort(b)
    return np.array([d.mean(), d.std(ddof=1)])


def _q2_divided_by_4(a, b):
    d = a - b
    return np.array([d.mean(), np.sqrt(((d - d.mean()) ** 2).sum() / 4)])  # n - 1 for the lesson's 5 seeds only


def _q2_swapped(a, b):
    d = a - b
    return np.array([d.std(ddof=1), d.mean()])


def _q2_t_half_width(a, b):
    from scipy import stats

    d = a - b
    return np.array([d.mean(), stats.t.ppf(0.975, d.size - 1) * d.std(ddof=1) / np.sqrt(d.size)])


def _finite_two_numbers(run: Run) -> str | None:
    if run.output.shape == (2,) and run.output[1] < 0:
        return "has a negative standard deviation"
    return None


_Q2_SOLUTION = """
```python
def paired_summary(loss_arm, loss_ref):
    diff = loss_arm - loss_ref            # one difference per seed: same weights, same batches
    return np.array([diff.mean(), diff.std(ddof=1)])
```
The seeds are paired: for each seed both arms start from the same weights and see the same batches,
so the seed's own luck cancels in the difference. ddof=1 divides by n - 1, because the mean was
estimated from the same n differences (with 5 seeds, ddof=0 would understate the spread by sqrt(4/5)).
"""


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "08",
        "q2",
        "The paired difference between two arms: its mean and standard deviation (ddof = 1) over seeds",
        reference=_q2_reference,
        starter=starter,
        cases=[
            Case((np.array([0.9, 1.0, 0.95, 1.1, 1.0]), np.array([0.7, 0.72, 0.69, 0.75, 0.71]))),
            Case((np.array([0.5, 0.8, 0.6]), np.array([0.52, 0.7, 0.61]))),
            # Sorting the seeds would pair them differently: the seed with the lowest arm loss is not that with the lowest reference.
            Case((np.array([1.3, 0.9, 1.1, 1.0]), np.array([0.8, 0.85, 0.7, 0.95]))),
            Case((np.array([2.0, 3.0]), np.array([2.5, 2.0]))),
        ],
        properties=[_finite_two_numbers, float32_rounding()],
        wrong_answers={
            "ddof = 0": _q2_ddof0,
            "unpaired standard deviation": _q2_unpaired,
            "reference minus arm": _q2_sign,
            "absolute differences": _q2_absolute,
            "the standard deviation of the arm alone": _q2_sd_of_arm,
            "the standard error instead of the standard deviation": _q2_standard_error,
            "the median difference": _q2_median,
            "relative differences": _q2_ratio,
            "sorted before pairing": _q2_sorted,
            "dividing by 4 (n - 1 for 5 seeds) whatever the number of seeds": _q2_divided_by_4,
            "the two numbers swapped, [sd, mean]": _q2_swapped,
            "the 95% interval's half-width instead of the standard deviation": _q2_t_half_width,
        },
        next_steps={
            "ddof = 0": "Divide the sum of squared deviations by n - 1, not n: `ddof=1` in whichever your line uses "
                        "(`d.std(ddof=1)`, `np.std(d, ddof=1)`, `np.var(..., ddof=1)` or `np.cov(..., ddof=1)`).",
            "unpaired standard deviation": (
                "Take the spread of the differences, `d = loss_arm - loss_ref; d.std(ddof=1)`, not "
                "`np.sqrt(a.var(ddof=1) + b.var(ddof=1))`."
            ),
            "reference minus arm": "Swap the operands: `d = loss_arm - loss_ref`.",
            "absolute differences": "Remove the `np.abs(...)` around `loss_arm - loss_ref`.",
            "the standard deviation of the arm alone": "Change `loss_arm.std(ddof=1)` to `d.std(ddof=1)` with `d = loss_arm - loss_ref`.",
            "the standard error instead of the standard deviation": "Delete the `/ np.sqrt(d.size)` after `d.std(ddof=1)`.",
            "the median difference": "Change `np.median(d)` to `d.mean()`.",
            "relative differences": "Change `loss_arm / loss_ref - 1` to `loss_arm - loss_ref`.",
            "sorted before pairing": "Delete the `np.sort(...)` calls: subtract `loss_arm - loss_ref` seed by seed, in the order given.",
            "dividing by 4 (n - 1 for 5 seeds) whatever the number of seeds": (
                "Replace the `/ 4` by `/ (d.size - 1)`, or use `d.std(ddof=1)`, which divides by n - 1 for any number "
                "of seeds: the checker also passes 2, 3 and 4 of them."
            ),
            "the two numbers swapped, [sd, mean]": "Return `np.array([d.mean(), d.std(ddof=1)])`: the mean first.",
            "the 95% interval's half-width instead of the standard deviation": (
                "Drop the factor `stats.t.ppf(0.975, n - 1) / np.sqrt(n)`: return `d.std(ddof=1)` itself, the spread "
                "of the differences; the interval comes later, from it."
            ),
        },
        hints=[
            "Subtract per seed: `diff = loss_arm - loss_ref` (arm minus reference, so a positive mean means the arm is worse).",
            "Return two numbers, `np.array([mean, sd])`, both of the differences, not of either arm.",
            "Use `diff.std(ddof=1)`: the sample standard deviation divides by n - 1.",
        ],
        solution=_Q2_SOLUTION,
        # No exp here: nan or inf comes from a division by 0 or the square root of a negative number.
        nonfinite_hint=(
            "Nothing here overflows: nan or inf comes from a division by 0 or the square root of a negative "
            "number. `d.std(ddof=k)` divides by n - k, which is 0 for ddof = n and negative beyond it; a variance "
            "written by hand divides by its own count (`len(d) - 1`). Print that divisor and the value under the "
            "square root on this input."
        ),
        rtol=1e-9,
        atol=1e-12,
    )


def exercises() -> list[Exercise]:
    """Fresh instances of this lesson's exercises, in order."""
    return [_q1(), _q2()]
