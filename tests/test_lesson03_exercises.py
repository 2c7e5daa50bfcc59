"""Lesson 03's exercises: q3's checker draws fresh shapes at every check, so special-casing the shapes fails."""

from __future__ import annotations

import math

import numpy as np

from course_utils import exercises


def test_q3_an_answer_that_special_cases_the_fixed_shapes_fails_on_the_fresh_ones():
    ex = exercises.load("03").q3
    seen = {case.args[0].shape[-1] for case in ex.cases}

    def special(Q, K):
        return Q @ K.T / (math.sqrt(Q.shape[-1]) if Q.shape[-1] in seen else 1.0)

    for _ in range(5):  # every check draws new shapes; each must catch it
        assert ex.evaluate(special).status == "incorrect"


def test_q3_each_check_uses_new_key_lengths_and_keeps_its_fixed_cases():
    ex = exercises.load("03").q3
    fixed = ex.cases
    lengths = []

    def spy(Q, K):
        lengths.append(Q.shape[-1])
        return Q @ K.T / np.sqrt(Q.shape[-1])

    for _ in range(3):
        assert ex.evaluate(spy).passed
    assert ex.cases == fixed
    drawn = set(lengths) - {case.args[0].shape[-1] for case in fixed}
    assert len(drawn) >= 3 and all(math.isqrt(d) ** 2 != d for d in drawn)


def test_q3_the_next_step_for_a_root_rounded_down_names_every_way_to_write_it():
    """Review 33, N4: `int(...)` and `math.isqrt` round down as `math.floor` does; the step names what to look for."""
    ex = exercises.load("03").q3
    for answer in (lambda Q, K: Q @ K.T / int(np.sqrt(Q.shape[-1])), lambda Q, K: Q @ K.T / math.isqrt(Q.shape[-1])):
        verdict = ex.evaluate(answer)
        assert verdict.mistake == "rounding √d_k down"
        assert "`int(...)`" in verdict.next_step and "`math.isqrt(...)`" in verdict.next_step
