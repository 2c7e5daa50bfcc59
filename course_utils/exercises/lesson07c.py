"""Exercises for lesson 07c, attention on a GPU measured: predict memory from the tensors a backend keeps.

q1 is checked against arithmetic, and the tests check that arithmetic against the H100 measurements
in ``course_utils/data/gpu_h100.json``: the flash backend's extra peak memory is its output plus its
logsumexp to 0.1 MiB at every length. q2's answer is the measurement itself: the math backend's
memory with reduced-precision reductions, two bfloat16 L x S matrices and one byte per score, plus a
bfloat16 tensor of Q's size that the learner is not asked to name.

q1 compares exactly up to float rounding (rtol 1e-9): the reference is a product of integers
divided by 2**20, and every wrong variant misses by a whole tensor, 0.25 MiB or more on the fixed cases.
Besides those, each check draws two new shapes, so that a table of the fixed cases' results fails.
"""

from __future__ import annotations


from typing import Sequence

import numpy as np

from ..measured import load_measurements
from .core import Case, FunctionExercise, ValueExercise, starter

MIB = 2**20
#: Two readings of one sum: the output stored in float32, or the bfloat16 output counted as returned and again as
#: kept for the backward pass (which reuses the same tensor).
#: 6 more bytes per output number: Q, K and V in bfloat16, or any other tensors of Q's size adding up to 6 bytes.
_QKV = "counting Q, K and V as well (or other tensors of Q's size, 6 bytes per number in all)"
_FOUR_BYTES_OUT = ("4 bytes per output number (the output in float32, the bfloat16 output counted twice, or one more "
                   "bfloat16 tensor of the output's size, such as a copy of Q)")


def _q1_reference(B: int, H: int, L: int, D: int) -> float:
    # The output, bf16 (2 bytes per number), and the logsumexp, float32 (4 bytes per query).
    return B * H * L * (2 * D + 4) / MIB


_Q1_SOLUTION = """
```python
def flash_extra_mib(B, H, L, D):
    output = B * H * L * D * 2        # bfloat16: 2 bytes per number
    lse = B * H * L * 4               # float32: one logsumexp per query, kept for the backward pass
    return (output + lse) / 2**20     # bytes to MiB
```
Nothing of size L x L is ever stored: the tiles of scores live on chip (lesson 07).
"""


#: The ranges (inclusive) from which each check draws the fresh shapes (B, H, L, D).
_FRESH_SHAPES = ((1, 8), (1, 32), (1, 8192), (1, 256))


def _fresh_shape(gen: np.random.Generator, fixed: set) -> tuple[int, int, int, int]:
    """A shape (B, H, L, D) of none of the fixed cases, whose answer float32 holds exactly, as the fixed cases' are
    (B * H * L * (2D + 4) with an odd part below 2**24): an answer in float32 passes or fails by its formula alone."""
    while True:
        shape = tuple(int(gen.integers(lo, hi, endpoint=True)) for lo, hi in _FRESH_SHAPES)
        mib = _q1_reference(*shape)
        if shape not in fixed and float(np.float32(mib)) == mib:
            return shape


def _fresh_shapes(gen: np.random.Generator, fixed: Sequence[Case]) -> list[Case]:
    """Two new shapes per check (as 03 q3 draws), so that an answer that looks up the fixed cases' results fails."""
    seen = {tuple(case.args) for case in fixed}
    fresh = []
    for _ in range(2):
        shape = _fresh_shape(gen, seen)
        seen.add(shape)
        fresh.append(Case(shape))
    return fresh


def _q1() -> FunctionExercise:
    def variant(per_query):
        return lambda B, H, L, D: B * H * L * per_query(D) / MIB

    return FunctionExercise(
        "07c",
        "q1",
        "The flash backend's extra memory, from the tensors it keeps",
        reference=_q1_reference,
        fresh=_fresh_shapes,
        starter=starter,
        cases=[Case((1, 16, 16384, 128)), Case((32, 16, 512, 128)), Case((3, 8, 1000, 64)), Case((1, 1, 7, 1))],
        # float64 rounding: products of integers below 2^53 and a division by 2**20 are exact; another order of
        # the same operations rounds a few times by u = 2^-53, far inside rtol 1e-9.
        rtol=1e-9,
        atol=1e-12,
        wrong_answers={
            "counting the output only": variant(lambda D: 2 * D),
            "counting an L x L matrix of scores too": lambda B, H, L, D: (B * H * L * (2 * D + 4) + 2 * B * H * L * L) / MIB,
        },
        variants={
            "storing the logsumexp in bfloat16": variant(lambda D: 2 * D + 2),
            _FOUR_BYTES_OUT: variant(lambda D: 4 * D + 4),
            _QKV: variant(lambda D: 8 * D + 4),
            "forgetting the heads": lambda B, H, L, D: B * L * (2 * D + 4) / MIB,
            "dividing by 10**6 (MB) instead of 2**20 (MiB)": lambda B, H, L, D: B * H * L * (2 * D + 4) / 1e6,
            "one logsumexp per head instead of one per query": lambda B, H, L, D: (B * H * L * 2 * D + B * H * 4) / MIB,
        },
        advice={
            "counting the output only": "The forward pass also computes one number per query for the backward pass (lesson 07b).",
            "one logsumexp per head instead of one per query": "Each query has its own row of scores, so its own logsumexp.",
            "storing the logsumexp in bfloat16": "The logsumexp is kept in float32: 4 bytes per query.",
            _FOUR_BYTES_OUT: (
                "The output is one tensor in the inputs' dtype, bfloat16: 2 bytes per number, counted once. The "
                "backward pass keeps that same tensor; it is not a second copy. And FlashAttention's kernel makes no "
                "other tensor of that size: no scaled copy of Q, no dO buffer."
            ),
            _QKV: (
                "Q, K and V exist before the call: extra memory counts what the call allocates, and the forward "
                "pass allocates only the output and the logsumexp."
            ),
            "dividing by 10**6 (MB) instead of 2**20 (MiB)": "A MiB is 2**20 bytes.",
        },
        nonfinite_hint="Memory is a finite count of bytes: return a number, in MiB.",
        next_steps={
            "counting the output only": "Add `lse = B * H * L * 4` bytes (one float32 per query and head) to your output's bytes.",
            "counting an L x L matrix of scores too": "Remove the `B * H * L * L * 2` bytes of scores from your total.",
            "storing the logsumexp in bfloat16": "Count the logsumexp at `4` bytes per number: `B * H * L * 4`.",
            _FOUR_BYTES_OUT: (
                "Count `B * H * L * D * 2` bytes once, for the output alone, plus the logsumexp's `B * H * L * 4`: "
                "remove any other term of size `B * H * L * D`, and any 4 bytes per output number."
            ),
            _QKV: (
                "Count the output and the logsumexp only: remove every other term of size `B * H * L * D` (the "
                "inputs, or a buffer such as dO or dQ)."
            ),
            "forgetting the heads": "Multiply every tensor's size by `H`: the output is (B, H, L, D), the logsumexp (B, H, L).",
            "dividing by 10**6 (MB) instead of 2**20 (MiB)": "Change the divisor `10**6` (or `1e6`) to `2**20`.",
            "one logsumexp per head instead of one per query": "Count the logsumexp as `B * H * L * 4` bytes, not `B * H * 4`.",
        },
        hints=[
            "List what the call must leave behind for the caller and for the backward pass, and the dtype of each.",
            "The output has shape (B, H, L, D) in bfloat16; the logsumexp has one float32 number per query and head.",
            "Return B * H * L * (2 * D + 4) / 2**20.",
        ],
        solution=_Q1_SOLUTION,
    )


def reduced_math_measured() -> float:
    """The math backend's extra peak memory at L = 8192 with reduced-precision reductions allowed (MiB, H100)."""
    return load_measurements()["math_upcast_L8192_B1_H16_D128"]["allow_reduced=True"]["extra_peak_MiB"]


def _q2() -> ValueExercise:
    scores = 16 * 8192 * 8192  # B * H * L * S
    measured = load_measurements()["math_upcast_L8192_B1_H16_D128"]
    return ValueExercise(
        "07c",
        "q2",
        "The math backend's memory with reduced-precision reductions",
        reference=measured["allow_reduced=True"]["extra_peak_MiB"],
        # 5 bytes per score is 5120 MiB; the measurement adds one bfloat16 tensor of Q's size (32 MiB),
        # which the lesson has not named: both are right. A missing or extra L x S tensor is 1024 MiB or more.
        atol=40.0,
        wrong_answers={
            "the default, with the float32 upcast": (
                measured["allow_reduced=False"]["extra_peak_MiB"],
                "that is the default, measured above. With reduced precision allowed nothing is upcast: scores and "
                "weights stay bfloat16.",
            ),
            "two bfloat16 matrices": (
                scores * 4 / MIB,
                "you counted the scores and the weights, but not the byte per score of _safe_softmax's test for -inf.",
            ),
            "one bfloat16 matrix and the byte": (
                scores * 3 / MIB,
                "the scores and the weights are both alive when the softmax finishes: two L x S matrices.",
            ),
            "float32 scores, bfloat16 weights": (
                scores * 7 / MIB,
                "with reduced precision allowed the scores are bfloat16 too.",
            ),
            "float32 scores and weights without the byte": (
                scores * 8 / MIB,
                "that is the float32 upcast (and without the byte per score): with reduced precision nothing is upcast.",
            ),
        },
        next_steps={
            "the default, with the float32 upcast": (
                "Redo the sum with scores and weights at `2` bytes each (bfloat16), plus the byte per score of the "
                "-inf test."
            ),
            "two bfloat16 matrices": "Add `L * S * 1` byte for the bool tensor that marks the rows of -inf.",
            "one bfloat16 matrix and the byte": "Count two L x S bfloat16 matrices, `2 * L * S * 2` bytes, plus the byte.",
            "float32 scores, bfloat16 weights": "Count the scores at `2` bytes too: `L * S * 2`.",
            "float32 scores and weights without the byte": (
                "Count the scores and weights at `2` bytes each instead of 4, and add `L * S` bytes for the -inf test."
            ),
        },
        hints=[
            "Count bytes per score: the scores, the weights and the test for -inf, each B * H * L * S numbers.",
            "bfloat16 is 2 bytes, a bool 1 byte: (2 + 2 + 1) bytes per score, times 16 * 8192 * 8192 scores, in MiB.",
        ],
        solution=(
            "`5120` MiB = 16 * 8192**2 scores * (2 + 2 + 1) bytes / 2**20. The measurement, printed below the "
            "exercise, is 32 MiB more: one bfloat16 tensor of Q's size, 16 * 8192 * 128 * 2 bytes."
        ),
    )


def exercises() -> list:
    return [_q1(), _q2()]


__all__ = ["exercises", "reduced_math_measured"]
