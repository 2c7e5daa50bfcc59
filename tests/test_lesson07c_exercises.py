"""Lesson 07c's exercises: the predicted memory of each backend against the H100's measurements."""

from __future__ import annotations

import pytest

from course_utils import exercises
from course_utils.measured import load_measurements

EX = exercises.load("07c")
DATA = load_measurements()


@pytest.mark.parametrize("row", [r for r in DATA["flash_vs_math"] if r["backend"] == "flash"], ids=lambda r: f"L={r['L']}")
def test_q1_the_output_and_logsumexp_are_the_flash_backends_extra_memory_at_every_length(row):
    assert EX.q1.reference(row["B"], row["H"], row["L"], row["D"]) == pytest.approx(row["extra_peak_MiB"], abs=0.1)


@pytest.mark.parametrize("backend", ["efficient", "cudnn"])
def test_without_a_backward_pass_the_other_fused_backends_allocate_the_output_only(backend):
    for row in (r for r in DATA["flash_vs_math"] if r["backend"] == backend):
        assert row["B"] * row["H"] * row["L"] * row["D"] * 2 / 2**20 == pytest.approx(row["extra_peak_MiB"], abs=0.1)
        assert EX.q1.reference(row["B"], row["H"], row["L"], row["D"]) == pytest.approx(row["kept_MiB_grad"], abs=0.1)


def test_q2_five_bytes_per_score_and_one_bfloat16_tensor_of_qs_size_are_the_measurement():
    per_score = 16 * 8192**2 * (2 + 2 + 1) / 2**20
    assert per_score + 16 * 8192 * 128 * 2 / 2**20 == pytest.approx(EX.q2.reference, abs=0.2)
    assert EX.q2.evaluate(per_score).passed and EX.q2.evaluate(per_score + 32).passed


@pytest.mark.parametrize("bytes_per_score", [3, 4, 6, 7, 8, 9])
def test_q2_every_other_whole_number_of_bytes_per_score_is_rejected(bytes_per_score):
    assert EX.q2.evaluate(16 * 8192**2 * bytes_per_score / 2**20).status == "incorrect"


def test_the_default_math_backend_keeps_nine_bytes_per_score_and_float32_copies():
    for row in (r for r in DATA["flash_vs_math"] if r["backend"] == "math"):
        B, H, L, D = row["B"], row["H"], row["L"], row["D"]
        predicted = (B * H * L * L * (4 + 4 + 1) + 4 * B * H * L * D * 4) / 2**20
        assert predicted == pytest.approx(row["extra_peak_MiB"], abs=0.5)


# --- q1 draws two new shapes for each check (review 33, A3): a table of the fixed cases' results fails ---------------


def _q1_right(B, H, L, D):
    return (B * H * L * D * 2 + B * H * L * 4) / 2**20


FIXED = {tuple(case.args): _q1_right(*case.args) for case in EX.q1.cases}


def test_q1_a_lookup_table_of_the_fixed_cases_is_rejected_on_a_fresh_shape(capsys):
    for _ in range(3):
        verdict = EX.q1.check(lambda B, H, L, D: FIXED.get((B, H, L, D), 0.0))
        out = " ".join(capsys.readouterr().out.split())
        assert verdict.status == "incorrect" and "the result 0.0 differs from the expected" in out
        shape = tuple(int(v) for v in out.split("on input (")[1].split(")")[0].split(", "))
        assert shape not in FIXED


def test_q1_each_check_draws_two_new_shapes_and_right_answers_pass_on_them():
    import numpy as np
    import torch

    seen = []

    def spy(B, H, L, D):
        seen.append((B, H, L, D))
        return _q1_right(B, H, L, D)

    fixed = EX.q1.cases
    drawn = set()
    for _ in range(4):
        seen.clear()
        verdict = EX.q1.evaluate(spy)
        assert verdict.passed and f"all {len(fixed) + 2} test inputs" in verdict.message
        new = {shape for shape in seen if shape not in FIXED}
        assert len(new) == 2 and all(isinstance(v, int) for shape in new for v in shape)
        drawn |= new
    assert len(drawn) > 2 and EX.q1.cases is fixed
    # float32 holds every answer exactly, the fresh ones too: an answer in float32 passes as it did before
    for answer in (lambda B, H, L, D: np.float32(_q1_right(B, H, L, D)),
                   lambda B, H, L, D: torch.tensor(B * H * L * (2 * D + 4)) / 2**20):
        assert all(EX.q1.evaluate(answer).passed for _ in range(5))


def test_q1_four_bytes_per_output_number_is_named_by_both_readings():
    """Review 33, N8: the bfloat16 output counted twice gives what float32 does; the label names both."""
    verdict = EX.q1.evaluate(lambda B, H, L, D: B * H * L * (4 * D + 4) / 2**20)
    assert "counted twice" in verdict.message and "counted once" in verdict.message
