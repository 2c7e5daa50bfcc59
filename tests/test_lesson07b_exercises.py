"""Lesson 07b's exercises: references checked independently against torch, and families of wrong answers rejected."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils import exercises
from course_utils.tiled import tiled_attention
from rounding_bounds import attention_error, exponent_error, score_gradient_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("07b")


def rejected(ex, answer, capsys) -> str:
    assert not ex.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert out.startswith("✗ Not yet")
    return out


def _masked_scores(rng, L=5, S=11):
    scores = rng.normal(scale=3.0, size=(L, S))
    mask = rng.random((L, S)) > 0.4
    mask[1] = False  # fully masked
    mask[3, :4] = False  # nothing allowed in the first tile
    mask[3, 6] = True
    return np.where(mask, scores, -np.inf)


# --- q1: tile weights -------------------------------------------------------------------


def test_q1_reference_tiles_reassemble_torch_softmax_with_zeros_for_fully_masked_rows():
    scores = _masked_scores(np.random.default_rng(0))
    t = torch.from_numpy(scores)
    lse = torch.logsumexp(t, dim=-1).numpy()  # -inf for the fully masked row
    expected = torch.nan_to_num(torch.softmax(t, dim=-1), nan=0.0).numpy()  # torch.softmax gives nan there
    tiles = [EX.q1.reference(scores[:, a:b], lse) for a, b in ((0, 4), (4, 8), (8, 11))]
    # float64 rounding, relative to each weight: torch's lse is within exponent_error, our exp(s - lse) adds as
    # much again, and torch.softmax is within it too: 3 exponent_errors (atol 1e-300 for weights that underflow).
    np.testing.assert_allclose(np.concatenate(tiles, axis=-1), expected, rtol=3 * exponent_error(scores), atol=1e-300)


def test_q1_cases_hold_a_fully_masked_row_a_tile_masked_row_large_scores_and_a_square_tile():
    cases = EX.q1.cases
    lses = [np.asarray(c.args[1]) for c in cases]
    assert any(np.isneginf(lse).any() for lse in lses)
    assert any((np.isneginf(c.args[0]).all(-1) & np.isfinite(c.args[1])).any() for c in cases)
    assert any(np.max(c.args[0]) > 710 for c in cases)  # exp overflows in float64
    assert any(c.args[0].shape[-1] == c.args[0].shape[-2] for c in cases)


def q1_variants():
    ref = EX.q1.reference

    def masked_plus(lse):
        return np.where(np.isneginf(lse), np.inf, lse)

    for shift in (-1.0, -0.5, 0.5, math.log(2)):
        yield f"lse shifted by {shift:.3g}", lambda s, lse, c=shift: ref(s, lse + c)
    for factor in (0.5, 2.0, math.log2(math.e), 1 / math.log2(math.e)):
        yield f"scores and lse scaled by {factor:.3g}", lambda s, lse, f=factor: np.exp(f * (s - masked_plus(lse)[..., None]))
    for base in (2.0, 10.0):
        yield f"base {base:g}", lambda s, lse, b=base: b ** (s - masked_plus(lse)[..., None])
    yield "rounded to 3 decimals", lambda s, lse: np.round(ref(s, lse), 3)
    yield "float32", lambda s, lse: ref(s.astype(np.float32), lse.astype(np.float32))
    yield "renormalized over the tile", lambda s, lse: np.nan_to_num(ref(s, lse) / ref(s, lse).sum(-1, keepdims=True))
    yield "the row's nan replaced by 1", lambda s, lse: np.nan_to_num(np.exp(s - lse[..., None]), nan=1.0)
    yield "last column dropped to 0", lambda s, lse: np.concatenate([ref(s, lse)[..., :-1], 0 * ref(s, lse)[..., -1:]], -1)
    yield "-inf scores replaced by -10", lambda s, lse: ref(np.where(np.isneginf(s), -10.0, s), lse)
    yield "fully masked rows given weight 1 on the first key", lambda s, lse: np.where(
        np.isneginf(lse)[..., None] & (np.arange(s.shape[-1]) == 0), 1.0, ref(s, lse))


@pytest.mark.parametrize("label,answer", list(q1_variants()), ids=[v[0] for v in q1_variants()])
def test_q1_generated_wrong_variants_are_rejected(label, answer, capsys):
    assert "on input" in rejected(EX.q1, answer, capsys)


def test_q1_a_case_holds_weights_far_below_e_minus_12_yet_above_the_tolerance():
    weights = [EX.q1.reference(*c.args) for c in EX.q1.cases]
    tiny = [w[(w > 0) & (w < np.exp(-25.0))] for w in weights]
    assert any((t > 2 * EX.q1.atol).any() for t in tiny), "a weight below e^-25 that the tolerance still sees"


def test_q1_flooring_the_exponents_at_minus_12_is_rejected_and_named(capsys):
    def floored(scores, lse):  # the answer that used to pass: small weights cut off at e^-12
        x = scores - np.where(np.isneginf(lse), np.inf, lse)[..., None]
        return np.where(x < -12, 0.0, np.exp(x))

    out = rejected(EX.q1, floored, capsys)
    assert "flushing to 0 every weight whose exponent s - lse is below -12" in out and "not 0" in out


@pytest.mark.parametrize("floor", [-11.0, -12.0, -14.0, -18.0, -21.0, -24.0, -25.5])  # e^-25.5 is 8e-12: 8 atols
@pytest.mark.parametrize("how", ["flushed", "floored"])
def test_q1_small_weights_cut_off_at_any_floor_down_to_the_tolerance_are_rejected(floor, how, capsys):
    def cut(scores, lse):
        x = scores - np.where(np.isneginf(lse), np.inf, lse)[..., None]
        if how == "flushed":
            return np.where(x < floor, 0.0, np.exp(x))
        return np.where(np.isneginf(x), 0.0, np.exp(np.maximum(x, floor)))

    rejected(EX.q1, cut, capsys)


def test_q1_fa3s_finite_replacement_is_accepted_too(capsys):
    # FlashAttention-3 keeps -inf and replaces it by 0 before recomputing: exp(-inf - 0) = 0.
    assert EX.q1.check(lambda s, lse: np.exp(s - np.where(np.isneginf(lse), 0.0, lse)[..., None]))


def test_q1_the_plain_formula_is_told_about_minus_inf_minus_minus_inf(capsys):
    out = rejected(EX.q1, EX.q1.variants["exp(scores - lse) with lse = -inf left in place"], capsys)
    assert "exp(-inf - (-inf))" in out and "+inf" in out


def test_q1_the_quotient_is_told_about_overflow_not_masking(capsys):
    out = rejected(EX.q1, EX.q1.variants["exp(scores) / exp(lse)"], capsys)
    assert "overflow" in out and "no allowed key" not in out


# --- q2: the gradient of a tile of scores ---------------------------------------------------


def test_q2_reference_tiles_reassemble_torch_autograd_of_the_scores():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(6, 4)), rng.normal(size=(9, 4)), rng.normal(size=(9, 3))
    d_out = rng.normal(size=(6, 3))
    s = (torch.from_numpy(q) @ torch.from_numpy(k).T * 0.5).requires_grad_()
    (torch.softmax(s, dim=-1) @ torch.from_numpy(v) * torch.from_numpy(d_out)).sum().backward()
    out, lse = tiled_attention(q, k, v, scale=0.5)
    grid = np.zeros((6, 9))
    for i0, i1 in ((0, 4), (4, 6)):
        for j0, j1 in ((0, 2), (2, 7), (7, 9)):
            p = np.exp(q[i0:i1] @ k[j0:j1].T * 0.5 - lse[i0:i1, None])
            grid[i0:i1, j0:j1] = EX.q2.reference(p, d_out[i0:i1] @ v[j0:j1].T, out[i0:i1], d_out[i0:i1])
    # float64 rounding of two computations of dS = P ∘ (dP - D), each within score_gradient_error.
    np.testing.assert_allclose(grid, s.grad.numpy(), rtol=0, atol=2 * score_gradient_error(q, k, v, d_out, scale=0.5))


def test_q2_every_case_is_a_strict_part_of_its_rows_so_a_tile_local_d_is_wrong():
    for case in EX.q2.cases:
        p = case.args[0]
        assert (p.sum(-1) < 1 - 1e-3).all()  # the tile holds only part of each row's softmax mass


def q2_variants():
    ref = EX.q2.reference
    for factor in (0.5, 0.9, 1.1, 2.0, -1.0):
        yield f"D times {factor}", lambda p, dp, o, do, f=factor: p * (dp - f * (do * o).sum(-1, keepdims=True))
    yield "D from the tile, then the mass of the tile", lambda p, dp, o, do: p * (dp - (p * dp).sum(-1, keepdims=True) / p.sum(-1, keepdims=True))
    yield "D = rowsum(O * O)", lambda p, dp, o, do: p * (dp - (o * o).sum(-1, keepdims=True))
    yield "D = rowsum(dO * dO)", lambda p, dp, o, do: p * (dp - (do * do).sum(-1, keepdims=True))
    yield "P squared", lambda p, dp, o, do: p * ref(p, dp, o, do)
    yield "dP transposed where square", lambda p, dp, o, do: ref(p, dp[..., ::-1], o, do)
    yield "rounded to 3 decimals", lambda p, dp, o, do: np.round(ref(p, dp, o, do), 3)
    yield "float32", lambda p, dp, o, do: ref(*(a.astype(np.float32) for a in (p, dp, o, do)))
    yield "D of the previous row", lambda p, dp, o, do: p * (dp - np.roll((do * o).sum(-1), 1)[:, None])
    yield "the jacobian's diagonal only", lambda p, dp, o, do: p * dp - p * p * dp


@pytest.mark.parametrize("label,answer", list(q2_variants()), ids=[v[0] for v in q2_variants()])
def test_q2_generated_wrong_variants_are_rejected(label, answer, capsys):
    assert "on input" in rejected(EX.q2, answer, capsys)


def test_q2_a_tile_local_d_is_named_with_the_output_identity(capsys):
    out = rejected(EX.q2, EX.q2.variants["D summed over this tile's keys only"], capsys)
    assert "rowsum(dO * O)" in out


# --- q3: the split-KV merge ---------------------------------------------------------------------


def test_q3_reference_merges_chunks_into_torch_sdpa_over_all_keys():
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(4, 5)), rng.normal(size=(13, 5)), rng.normal(size=(13, 2))
    mask = rng.random((4, 13)) > 0.3
    mask[:, 5:9] = False  # an empty chunk
    mask[2] = False  # an empty row
    parts = [tiled_attention(q, k[a:b], v[a:b], mask[:, a:b]) for a, b in ((0, 5), (5, 9), (9, 13))]
    merged = EX.q3.reference(np.stack([o for o, _ in parts]), np.stack([lse for _, lse in parts]))
    expected = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v)), attn_mask=torch.from_numpy(mask))
    # float64 rounding of two implementations, each within attention_error (whose exponent bound covers the
    # rescaling of merged parts by exp(lse_c - lse)).
    np.testing.assert_allclose(merged, expected.numpy(), rtol=0, atol=2 * attention_error(q, k, v, mask=mask))


def test_q3_cases_hold_an_empty_chunk_an_empty_row_and_lses_that_overflow_exp():
    lses = [np.asarray(c.args[1]) for c in EX.q3.cases]
    assert any(np.isneginf(lse).all(axis=-1).any() for lse in lses)  # a chunk empty for every query
    assert any(np.isneginf(lse).all(axis=0).any() for lse in lses)  # a query empty in every chunk
    assert any(np.nanmax(np.where(np.isfinite(lse), lse, np.nan)) > 710 for lse in lses)


def q3_variants():
    ref = EX.q3.reference
    for power in (0.5, 2.0):
        def powered(outs, lses, c=power):
            top = lses.max(0)
            shift = np.where(np.isneginf(top), 0.0, top)
            w = np.exp(c * (lses - shift))
            total = w.sum(0)
            return np.where(total[..., None] > 0, (w[..., None] * outs).sum(0) / np.where(total > 0, total, 1)[..., None], 0.0)
        yield f"weights to the power {power}", powered
    yield "exp2 weights", lambda outs, lses: ref(outs, lses / math.log(2))
    yield "first chunk dropped", lambda outs, lses: ref(outs[1:], lses[1:]) if len(outs) > 1 else ref(outs, lses) + 1
    yield "chunks' outputs swapped", lambda outs, lses: ref(outs[::-1], lses)
    yield "rounded to 3 decimals", lambda outs, lses: np.round(ref(outs, lses), 3)
    yield "float32", lambda outs, lses: ref(outs.astype(np.float32), lses.astype(np.float32))
    yield "an empty row given the mean of the outputs", lambda outs, lses: np.where(
        np.isneginf(lses).all(0)[..., None], outs.mean(0) + 1.0, ref(outs, lses))
    yield "lses weighted by the chunk's position", lambda outs, lses: ref(outs, lses + np.arange(len(lses))[:, None] * 0.1)


@pytest.mark.parametrize("label,answer", list(q3_variants()), ids=[v[0] for v in q3_variants()])
def test_q3_generated_wrong_variants_are_rejected(label, answer, capsys):
    assert "on input" in rejected(EX.q3, answer, capsys)


def test_q3_an_empty_row_that_goes_nan_is_told_to_shift_by_zero(capsys):
    out = rejected(EX.q3, EX.q3.variants["no care for a row empty in every chunk"], capsys)
    assert "shift" in out.lower() and "-inf - (-inf)" in out


def test_q3_the_recomputing_convention_for_an_empty_chunk_is_rejected_and_named(capsys):
    def plus_inf(outs, lses):  # +inf for an empty chunk, the convention of lesson 07b's section 1
        lses = np.where(np.isneginf(lses), np.inf, lses)
        top = lses.max(0)
        w = np.exp(lses - top)
        return (w[..., None] * outs).sum(0) / w.sum(0)[..., None]

    out = rejected(EX.q3, plus_inf, capsys)
    assert "nan" in out and "+inf is the convention for recomputing" in out


def test_q3_the_course_function_itself_is_refused_as_the_function_to_write():
    from course_utils import merge_attention_parts  # review 33: the exercise asks the learner to write it

    verdict = EX.q3.evaluate(lambda outs, lses: merge_attention_parts(outs, lses)[0])
    assert not verdict and "calls `course_utils.merge_attention_parts`" in verdict.message


@pytest.mark.parametrize("named,answer", [
    ("a flush of small weights to 0",
     lambda s, lse: np.where(s - np.where(np.isneginf(lse), np.inf, lse)[..., None] < -30, 0.0,
                             np.exp(s - np.where(np.isneginf(lse), np.inf, lse)[..., None]))),
    ("e^-700: you floored or clipped the exponent",
     lambda s, lse: np.exp(np.clip(s - np.where(np.isneginf(lse), np.inf, lse)[..., None], -700, 0))),
    ("you added 1e-13 to every weight", lambda s, lse: EX.q1.reference(s, lse) + 1e-13),
])
def test_q1_weights_that_are_not_exactly_0_where_and_only_where_the_reference_is_0_are_rejected(named, answer, capsys):
    assert EX.q1.check(answer).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "where the exact weight is" in out and named in out


@pytest.mark.parametrize("exercise", ["q1", "q2", "q3"])
def test_each_float32_answer_is_named(exercise, capsys):
    ex = getattr(EX, exercise)

    def in_float32(*args):
        return ex.reference(*(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args)).astype(np.float64)

    assert ex.check(in_float32).status == "incorrect"
    assert "float32" in _unwrapped(capsys.readouterr().out)


@pytest.mark.parametrize("shift", [lambda z: z.max(), lambda z: z.mean(axis=-1, keepdims=True)], ids=["global max", "row mean"])
def test_q3_one_maximum_over_all_rows_or_a_mean_shift_is_rejected_and_named(shift, capsys):
    def merge(outputs, lses):
        with np.errstate(all="ignore"):
            z = np.moveaxis(lses, 0, -1)
            c = np.asarray(shift(z))
            w = np.exp(z - np.where(np.isfinite(c), c, 0.0))
            total = w.sum(axis=-1, keepdims=True)
            share = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)
            return (np.moveaxis(share, -1, 0)[..., None] * outputs).sum(axis=0)

    assert EX.q3.check(merge).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "instead of each row's own maximum" in out and "(chunks, queries)" in out


# --- review 33 ---------------------------------------------------------------------------------------


def test_q1_an_exponent_clipped_near_float64s_underflow_is_rejected():
    """A2: exp(-800) is exactly 0 in float64; an exponent clipped at -700 leaves 1e-304 there."""
    def clipped(s, lse):
        lse = np.where(np.isneginf(lse), np.inf, lse)
        return np.where(np.isneginf(s), 0.0, np.exp(np.clip(s - lse[..., None], -700, 0)))

    verdict = EX.q1.evaluate(clipped)
    message = _unwrapped(verdict.message)
    assert not verdict and "underflows to 0" in message and "floored or clipped" in message


def _any_instead_of_all(scores, lse):
    w = np.exp(scores - np.where(np.isneginf(lse), np.inf, lse)[..., None])
    return np.where(np.isneginf(scores).any(axis=-1, keepdims=True), 0.0, w)


def _quotient_with_nan_to_num(scores, lse):
    return np.nan_to_num(np.exp(scores) / np.exp(np.where(np.isneginf(lse), np.inf, lse))[..., None])


def _uniform_rows(scores, lse):
    with np.errstate(invalid="ignore"):
        w = np.exp(scores - lse[..., None])
    return np.where(np.isneginf(lse)[..., None], 1 / scores.shape[-1], w)


@pytest.mark.parametrize("answer,not_said", [
    (_any_instead_of_all, "flushed"),  # N6: a lost weight of 0.185 is no flush of small weights
    (_quotient_with_nan_to_num, "flushed"),  # N6: nor an overflow turned into 0
    (_uniform_rows, "floored"),  # N7: a stray 1/3 is no floor of the exponent
], ids=["any instead of all", "overflow hidden by nan_to_num", "uniform weights"])
def test_q1_a_weight_that_is_not_small_is_not_blamed_on_a_flush_or_a_floor(answer, not_said):
    verdict = EX.q1.evaluate(answer)
    assert not verdict and not_said not in verdict.message


def test_q1_inputs_rounded_to_7_decimals_are_named_a_rounding_not_float32():
    """Known item: round(x, 7) matches float32's rounding on these inputs; its result is no float32 number."""
    def rounded(s, lse):
        s, lse = np.round(s, 7), np.round(lse, 7)
        return np.exp(s - np.where(np.isneginf(lse), np.inf, lse)[..., None])

    verdict = EX.q1.evaluate(rounded)
    assert verdict.mistake == "rounding the inputs to 7 decimals" and "float32" not in verdict.message
