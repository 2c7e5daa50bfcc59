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
