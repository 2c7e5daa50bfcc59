"""Exercises for lesson 05c, masking on a GPU: predict a backend from its mechanism, and guard the empty rows.

q1's answer is a measurement: the H100 run of ``python -m benchmarks.gpu`` in
``course_utils/data/gpu_h100.json``. The learner predicts it from the mechanism the lesson
states (the mask is added in float32; the kernel multiplies scores by log2 e for exp2; a row of
-inf is written as zeros), and every wrong prediction is told which step of that mechanism
decides its case.

q2 is NumPy: the guard takes whatever a backend returned (NaN, zeros, or the output of no
mask at all) and zeroes exactly the queries that may attend to nothing. Its outputs are copies
of the input or exact zeros, so the checker compares all but exactly (rtol 0, atol 1e-12): every
wrong guard leaves a NaN, a nonzero row or a zeroed real row, which no tolerance would forgive.
"""

from __future__ import annotations

import numpy as np

from ..backends import MASK_KINDS, OUTCOMES
from ..measured import load_measurements
from .core import Case, ChoiceExercise, FunctionExercise, starter

#: The backend and dtype q1 asks about.
Q1_BACKEND, Q1_DTYPE = "cudnn", "bfloat16"


def q1_measured() -> dict[str, str]:
    """What the empty row got on the H100's cuDNN backend in bfloat16, per mask kind (from the data)."""
    rows = load_measurements()["fully_masked_cuda"]
    return {r["mask"]: r["row"] for r in rows if (r["backend"], r["dtype"]) == (Q1_BACKEND, Q1_DTYPE)}


_Q1_WHY = {
    "bool (True=attend)": (
        "For cuDNN, PyTorch turns a bool mask into an additive -65504, added to the scores in float32. "
        "Does float32 keep the differences between -65504 + s for scores s of size 1?"
    ),
    "additive -inf": "The row's scores are all -inf. What does the kernel write for such a row?",
    "additive finfo.min": (
        "bfloat16's finfo.min is about -3.39e38, and the kernel multiplies every score by log2(e) = 1.4427 "
        "in float32 before exp2. What is -3.39e38 * 1.4427 in float32, and what does the row become?"
    ),
    "additive -1e9": (
        "Near -1e9, float32 numbers are 64 apart, so -1e9 + s is the same number for every score s of size 1, "
        "and -1e9 * 1.4427 is still finite. Equal finite scores give what weights?"
    ),
}

_Q1_SOLUTION = """
The H100's cuDNN backend, bfloat16, query 3 with no key:

| mask | what the mechanism does | outcome |
|---|---|---|
| bool | becomes -65504, added in float32: the scores keep their differences | as if unmasked |
| additive -inf | a row of -inf, detected | zeros |
| additive finfo.min | -3.39e38 * log2(e) overflows float32 to -inf: a row of -inf | zeros |
| additive -1e9 | -1e9 + s rounds to -1e9 for every score: equal finite scores | uniform mean of V |

The CPU gives "zeros" for the bool mask (there it becomes -inf) and "uniform mean of V" for
finfo.min (its kernels compute exp(s - max) without the log2(e) multiply, so nothing overflows).
"""


def _q1() -> ChoiceExercise:
    measured = q1_measured()
    cpu = {"bool (True=attend)": "zeros", "additive -inf": "zeros",
           "additive finfo.min": "uniform mean of V", "additive -1e9": "uniform mean of V"}
    return ChoiceExercise(
        "05c",
        "q1",
        "Predict the cuDNN backend's empty row in bfloat16",
        reference=measured,
        choices=OUTCOMES,
        why=_Q1_WHY,
        wrong_answers={
            "the CPU's answer, as if every device did the same": cpu,
            "NaN for every fill, as torch.softmax gives": {kind: "nan" for kind in MASK_KINDS},
            "zeros for every fill": {kind: "zeros" for kind in MASK_KINDS},
            "a bool mask read as -inf, as on the other backends": cpu | {"additive finfo.min": "zeros"},
        },
        hints=[
            "The feedback asked one question per mask. Answer each with section 2's printout: -65504 in float32 keeps "
            "differences of 0.004 and more; bfloat16's finfo.min times log2(e) printed as -inf; near 1e9 the spacing is 64.",
            "Then map each row to a word: a row of -inf is written as zeros; equal finite scores give uniform weights; "
            "scores that keep their differences give the weights of no mask at all.",
            "One fill is -inf from the start and one overflows to -inf; of the two that stay finite, only one "
            "is small enough for float32 to keep the scores' differences.",
        ],
        solution=_Q1_SOLUTION,
        next_steps={
            "the CPU's answer, as if every device did the same": (
                "Redo the bool row and the finfo.min row on cuDNN's path: print "
                "`np.float32(-65504) + np.float32([0.3, -0.7])` and `np.float32(-3.39e38) * np.float32(1.4427)`."
            ),
            "NaN for every fill, as torch.softmax gives": (
                "Start from what the kernel writes for a row of -inf, `-inf - (-inf)` guarded to zeros, then redo "
                "`-65504 + s` in float32 for the bool mask."
            ),
            "zeros for every fill": (
                "Work the two rows you got wrong in NumPy: print `np.float32(-65504) + np.float32([0.3, -0.7])` and "
                "`np.float32(-1e9) + np.float32([0.3, -0.7])`, then take the softmax of each result."
            ),
            "a bool mask read as -inf, as on the other backends": (
                "Redo the bool row with cuDNN's fill: compute `np.float32(-65504) + np.float32(0.3)` and "
                "`np.float32(-65504) + np.float32(-0.7)`, and see whether they differ."
            ),
        },
        aliases={"UNMASKED": "as if unmasked", "uniform": "uniform mean of V", "NaN": "nan", "other": "finite other"},
    )


# --- q2: the guard ----------------------------------------------------------------------------------


def _q2_reference(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask.any(axis=-1, keepdims=True), out, 0.0)


def _q2_multiply(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return out * mask.any(axis=-1, keepdims=True)


def _q2_nan_to_num(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.nan_to_num(out, nan=0.0)


def _q2_nan_to_num_multiply(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.nan_to_num(out) * mask.any(axis=-1, keepdims=True)  # rewrites a NaN in a row that has a key


def _q2_finite_rows(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    ok = mask.any(axis=-1, keepdims=True) & np.isfinite(out).all(axis=-1, keepdims=True)
    return np.where(ok, out, 0.0)  # also zeroes a row with a key that holds a NaN or an inf


#: nan_to_num and the mask together, multiplied or selected: the same outputs on every input.
_Q2_NAN_TO_NUM_KEYS = "replacing NaN by 0 (`nan_to_num`) in the rows that have a key too"
#: Zeroing the rows that hold a NaN: the values decide, as with nan_to_num alone.
_Q2_NAN_ROWS = "zeroing the rows that hold a NaN (deciding by the values, not the mask)"
_Q2_BY_VALUES_ADVICE = (
    "A backend may return a finite row for a query with no key (cuDNN returns the output of no mask at all), and "
    "nan_to_num, or a test for NaN, keeps it: decide by the mask, not by the values."
)
_Q2_BY_VALUES_STEP = (
    "Delete the `np.nan_to_num(out)` (or the test `np.isnan(out)`) and build `has_key = mask.any(axis=-1, "
    "keepdims=True)`; return `np.where(has_key, out, 0.0)`: the condition reads the mask, never `out`."
)
#: A guard that tests the values as well as the mask.
_Q2_FINITE_ROWS = "testing the values as well as the mask (`np.isfinite(out)` in the condition)"


def _q2_probes() -> list[Case]:
    """A row with a key that holds one NaN among finite values: nan_to_num rewrites only that entry, a test of the
    values zeroes the whole row."""
    out = np.array([[0.5, np.nan, -1.0], [0.1, 0.2, 0.3], [np.nan, np.nan, np.nan]])
    return [Case((out, np.array([[True, False], [True, True], [False, False]])))]


def _q2_nan_rows(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(out).any(axis=-1, keepdims=True), 0.0, out)


def _q2_all(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask.all(axis=-1, keepdims=True), out, 0.0)


def _q2_inverted(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where((~mask).any(axis=-1, keepdims=True), out, 0.0)


def _q2_no_keepdims(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return np.where(mask.any(axis=-1), out, 0.0)  # shape (..., L) against (..., L, d): fails or misaligns


def _q2_query_axis(out: np.ndarray, mask: np.ndarray) -> np.ndarray:
    has_key = np.swapaxes(mask.any(axis=-2, keepdims=True), -1, -2)  # one flag per key, used as one per query
    return np.where(has_key, out, 0.0)


_Q2_SOLUTION = """
```python
def guard(out, mask):
    has_key = mask.any(axis=-1, keepdims=True)   # one flag per query: may it see any key?
    return np.where(has_key, out, 0.0)           # select, never multiply: nan * 0 is nan
```
`keepdims=True` keeps the flag a column, shape (..., L, 1), which broadcasts over the
output's last axis and over any batch axes of a key-padding mask such as (B, 1, 1, S).
In PyTorch the same line is `torch.where(mask.any(-1, keepdim=True), out, 0.0)`; it sends
no gradient into a guarded row. That is not enough where the kernel itself met the empty row:
on the `torch.softmax` path `v`'s gradient is still NaN, and a kernel's backward can make NaN
by itself (section 5's bug report). So give the kernel no empty row first, `mask | ~has_key`,
and select after it (section 5).
"""


def _q2_cases() -> list[Case]:
    rng = np.random.default_rng(5)
    L, D = 5, 3
    causal_left_pad = np.tril(np.ones((L, L), dtype=bool)) & np.array([False, False, True, True, True])
    base = rng.normal(size=(L, D))
    nan_rows = base.copy()
    nan_rows[:2] = np.nan  # what torch.softmax's path returns for the empty rows
    unmasked = base.copy()
    unmasked[:2] = rng.normal(size=(2, D)) * 300.0  # cuDNN-like: finite, and far from 0
    nan_with_key = base.copy()
    nan_with_key[[1, 3]] = np.nan  # row 3 may attend (a NaN from upstream, say): a guard must leave it as it is
    pad = np.ones((2, 1, 1, 4), dtype=bool)
    pad[1] = False  # the second sequence is all padding: all its queries are empty
    batch = rng.normal(size=(2, 2, 4, D))
    return [
        Case((base, np.ones((L, L), dtype=bool))),  # nothing to guard
        Case((nan_rows, causal_left_pad)),
        Case((unmasked, causal_left_pad)),
        Case((np.where(causal_left_pad.any(-1, keepdims=True), base, 0.0), causal_left_pad)),  # already zeros
        Case((nan_with_key, causal_left_pad)),  # NaN in an empty row and in a row with keys
        Case((batch, pad)),  # a key-padding mask (B, 1, 1, S)
        Case((rng.normal(size=(4, 2)), np.ones((4, 6), dtype=bool) & (np.arange(6) < 1))),  # one key each
        Case((rng.normal(size=(3, 2)), ~np.eye(3, dtype=bool))),  # every query may attend, but not to itself
    ]


def _q2() -> FunctionExercise:
    return FunctionExercise(
        "05c",
        "q2",
        "Zero the queries with no key, whatever the backend returned",
        reference=_q2_reference,
        starter=starter,
        cases=_q2_cases(),
        # Copies of the input and exact zeros: no rounding at all to bound, so all but exact.
        rtol=0.0,
        atol=1e-12,
        wrong_answers={
            "multiplying by has_key": _q2_multiply,
            # Zeroing the rows that hold a NaN (`_q2_nan_rows`) gives the same outputs: a backend's empty row is
            # all NaN or all finite, so one label names both.
            "replacing NaN by 0 (deciding by the values, not the mask)": _q2_nan_to_num,
            _Q2_NAN_ROWS: _q2_nan_rows,  # the same outputs on every case; the probes, with a row part NaN, differ
            _Q2_NAN_TO_NUM_KEYS: _q2_nan_to_num_multiply,
            _Q2_FINITE_ROWS: _q2_finite_rows,
        },
        probes=_q2_probes(),
        variants={
            "testing mask.all instead of mask.any": _q2_all,
            "reading True as blocked": _q2_inverted,
            "reducing over the queries' axis instead of the keys'": _q2_query_axis,
            "forgetting keepdims=True": _q2_no_keepdims,
        },
        advice={
            _Q2_NAN_ROWS: _Q2_BY_VALUES_ADVICE,
            "multiplying by has_key": "Select with np.where(has_key, out, 0.0) instead of multiplying.",
            "forgetting keepdims=True": (
                "mask.any(axis=-1) has shape (..., L), which NumPy lines up with the output's last axis, d. "
                "keepdims=True keeps it a column, (..., L, 1)."
            ),
            "replacing NaN by 0 (deciding by the values, not the mask)": _Q2_BY_VALUES_ADVICE,
            _Q2_NAN_TO_NUM_KEYS: (
                "Every query that has a key must keep its row exactly as the backend returned it, NaN included: "
                "nan_to_num rewrites it. Only the rows with no key change, chosen by the mask alone."
            ),
            _Q2_FINITE_ROWS: (
                "A row whose query has a key must keep its values, even a NaN or an inf (a NaN from upstream is "
                "a bug to see, not to hide): decide by the mask alone, never by the values."
            ),
            "testing mask.all instead of mask.any": "A query needs one allowed key, not all of them: use mask.any.",
            "reading True as blocked": "Here True means may attend, as in SDPA: a query has a key where any entry is True.",
            "reducing over the queries' axis instead of the keys'": (
                "The keys are the mask's last axis: reduce with axis=-1 and keepdims=True."
            ),
        },
        nonfinite_hint=(
            "A query with no key still holds nan here. If you multiplied by a 0/1 flag, nan * 0 is nan: "
            "select with np.where instead."
        ),
        hints=[
            "Decide from the mask alone which queries have no key: the outputs may be NaN, zeros or finite there, "
            "depending on the backend.",
            "mask.any(axis=-1, keepdims=True) is True for a query with at least one allowed key, with shape (..., L, 1).",
            "Return np.where(mask.any(axis=-1, keepdims=True), out, 0.0).",
        ],
        solution=_Q2_SOLUTION,
        next_steps={
            "multiplying by has_key": (
                "Try `np.nan * 0.0` and `np.where(False, np.nan, 0.0)` in a cell: only the second is 0, so the "
                "multiplication on your return line has to become a `np.where`."
            ),
            "replacing NaN by 0 (deciding by the values, not the mask)": _Q2_BY_VALUES_STEP,
            _Q2_NAN_ROWS: (
                "Replace the test on the values, `np.isnan(out).any(axis=-1, keepdims=True)`, by one on the mask: "
                "`has_key = mask.any(axis=-1, keepdims=True)`, and return `np.where(has_key, out, 0.0)`."
            ),
            _Q2_NAN_TO_NUM_KEYS: (
                "Delete the `np.nan_to_num(...)`: return `np.where(mask.any(axis=-1, keepdims=True), out, 0.0)` "
                "with `out` as it came, which leaves every row with a key untouched, NaN included."
            ),
            _Q2_FINITE_ROWS: (
                "Take `np.isfinite(out)` out of your condition: the condition is `mask.any(axis=-1, keepdims=True)` "
                "alone, so that a row with a key keeps whatever the backend put in it."
            ),
            "testing mask.all instead of mask.any": "Change `mask.all(axis=-1, keepdims=True)` to `mask.any(axis=-1, keepdims=True)`.",
            "reading True as blocked": "Remove the `~` in front of `mask` (or of `mask.any(...)`) in your condition.",
            "reducing over the queries' axis instead of the keys'": (
                "Change `axis=-2` to `axis=-1` in your `mask.any(...)`, and drop any `swapaxes` after it."
            ),
            "forgetting keepdims=True": "Add `keepdims=True` to `mask.any(axis=-1)`, giving shape (..., L, 1).",
        },
    )


def exercises() -> list:
    return [_q1(), _q2()]
