"""Lesson 08's exercises: references computed independently, and whole families of wrong answers rejected."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from scipy import stats

from course_utils import exercises
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("08")


def rejected(ex, answer, capsys) -> str:
    assert not ex.check(answer)
    return _unwrapped(capsys.readouterr().out)


# --- q1 ----------------------------------------------------------------------------------


def test_q1_reference_squared_is_the_scale():
    assert EX.q1.reference**2 == pytest.approx(1 / 256**0.5)


@pytest.mark.parametrize("power", [-1.0, -0.5, -0.25, 0.0, 0.125, 0.375, 0.5, 0.75, 1.0])
def test_q1_every_other_power_of_d_k_is_rejected_with_a_named_mistake_and_a_next_step(power):
    f = 256.0**-power  # the answer is 256 ** -0.25
    verdict = EX.q1.evaluate(f)
    assert verdict.status == "incorrect" and verdict.mistake and verdict.next_step
    step = verdict.next_step.replace(f"= {f * f:.4g}`", "")  # the square of the wrong factor may be 0.25 itself
    assert "0.25" not in step and "1/4" not in step, "a next step must not give the answer"


def test_q1_the_negative_root_is_named():
    assert EX.q1.evaluate(-0.25).mistake == "the negative root"


def test_q1_the_answer_is_accepted():
    assert EX.q1.evaluate(0.25).status == "correct"


# --- q2 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases, ids=lambda c: c.describe())
def test_q2_reference_matches_the_statistics_module(case):
    a, b = case.args
    diff = [float(x - y) for x, y in zip(a, b)]
    np.testing.assert_allclose(EX.q2.reference(a, b), [statistics.fmean(diff), statistics.stdev(diff)], rtol=1e-12)


def q2_variants():
    ref = EX.q2.reference
    yield "rounded to 2 decimals", lambda a, b: np.round(ref(a, b), 2)
    for ddof in (0, 2):
        yield f"ddof={ddof}", lambda a, b, ddof=ddof: np.array([(a - b).mean(), (a - b).std(ddof=ddof)])
    yield "swapped outputs", lambda a, b: ref(a, b)[::-1]
    yield "variance instead of sd", lambda a, b: np.array([(a - b).mean(), (a - b).var(ddof=1)])
    yield "pooled sd of both arms", lambda a, b: np.array([(a - b).mean(), np.sqrt((a.var(ddof=1) + b.var(ddof=1)) / 2)])
    yield "sd of the reference arm", lambda a, b: np.array([(a - b).mean(), b.std(ddof=1)])
    yield "difference of the means, sd of the arm", lambda a, b: np.array([a.mean() - b.mean(), a.std(ddof=1)])
    yield "pairs shifted by one seed", lambda a, b: ref(a, np.roll(b, 1))
    yield "first seed dropped", lambda a, b: ref(a[1:], b[1:])
    yield "float32", lambda a, b: ref(a.astype(np.float32), b.astype(np.float32)).astype(np.float32)
    yield "sd with ddof=1 of the absolute differences", lambda a, b: np.array([(a - b).mean(), np.abs(a - b).std(ddof=1)])


@pytest.mark.parametrize("label,answer", list(q2_variants()), ids=[v[0] for v in q2_variants()])
def test_q2_generated_wrong_variants_are_rejected(label, answer, capsys):
    out = rejected(EX.q2, answer, capsys)
    assert "on input" in out


def test_q2_a_known_mistake_is_reported_with_its_input(capsys):
    out = rejected(EX.q2, EX.q2.wrong_answers["ddof = 0"], capsys)
    assert "differs from the expected" in out


def test_q2_a_float32_answer_is_told_it_is_float32():
    ex = exercises.load("08").q2

    def in_float32(a, b):
        d = (a - b).astype(np.float32)
        return np.array([d.mean(), d.std(ddof=1)])

    message = ex.evaluate(in_float32).message
    assert "float32" in message and "Not yet" in message




# --- q2: slips that are right on the lesson's own 5 seeds, or right numbers in the wrong place ------


@pytest.mark.parametrize(
    ("answer", "named", "step"),
    [
        (lambda a, b: np.array([(a - b).mean(), np.sqrt((((a - b) - (a - b).mean()) ** 2).sum() / 4)]),
         "dividing by 4", "`/ (d.size - 1)`"),
        (lambda a, b: np.array([(a - b).std(ddof=1), (a - b).mean()]), "[sd, mean]", "the mean first"),
        (lambda a, b: np.array([(a - b).mean(), stats.t.ppf(0.975, a.size - 1) * (a - b).std(ddof=1) / np.sqrt(a.size)]),
         "half-width", "`d.std(ddof=1)`"),
    ],
    ids=["hard-coded /4", "swapped", "t half-width"],
)
def test_q2_slips_are_named_with_a_next_step(answer, named, step, capsys):
    verdict = EX.q2.check(answer)
    assert not verdict
    assert named in rejected_text(capsys)
    assert step in verdict.next_step


def rejected_text(capsys) -> str:
    return _unwrapped(capsys.readouterr().out)


def test_q2_right_answers_pass(capsys):
    for answer in (
        lambda a, b: np.array([(a - b).mean(), (a - b).std(ddof=1)]),
        lambda a, b: (statistics.mean(a - b), statistics.stdev(a - b)),
        lambda a, b: np.array([a.mean() - b.mean(), np.sqrt(a.var(ddof=1) + b.var(ddof=1) - 2 * np.cov(a, b)[0, 1])]),
    ):
        assert EX.q2.check(answer), capsys.readouterr().out


# --- rerun 33: nan or inf is explained by this formula, which has no exp (B6) ------------------------


@pytest.mark.filterwarnings("ignore:Degrees of freedom")
def test_q2_an_infinite_sd_is_told_where_a_division_by_0_comes_from(capsys):
    def ddof_n(a, b):
        d = a - b
        return np.array([d.mean(), np.sqrt(d.var(ddof=d.size))])  # divides by n - n = 0

    verdict = EX.q2.check(ddof_n)
    out = rejected_text(capsys)
    assert not verdict and "inf" in out
    assert "overflow exp" not in out and "maximum" not in out
    assert "ddof" in out and "n - k" in out
