"""Lesson 07's exercises: references computed independently, shown solutions that pass, and families of wrong answers rejected.

The generic guarantees (every generated variant rejected and named, the starter "not attempted",
broken functions reported) are tested for every lesson in tests/test_exercises.py.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_utils import exercises
from course_utils.tiled import tiled_attention
from rounding_bounds import attention_error
from test_exercises import _unwrapped  # the printed text, before it was wrapped

EX = exercises.load("07")


def _shown_solution(exercise, name):
    code = exercise._solution.split("```python")[1].split("```")[0]
    namespace = {"np": np}
    exec(code, namespace)  # the code the learner is shown
    return namespace[name]


# --- q1: merge two states ----------------------------------------------------------------


@pytest.mark.parametrize("case", EX.q1.cases + EX.q1.probes, ids=lambda c: c.describe())
def test_q1_reference_keeps_the_log_of_the_total_mass(case):
    m1, ell1, m2, ell2 = case.args
    m, ell = EX.q1.reference(*case.args)
    total = mpmath.mpf(ell1) * mpmath.exp(m1) + mpmath.mpf(ell2) * mpmath.exp(m2) if m > -math.inf else 0
    if total == 0:
        assert (m, ell) == (-math.inf, 0.0)
    else:
        assert m == max(m1, m2)
        # mpmath at its default 53 bits rounds the log to u; ell is within 11u (two exps of 4 ulp, three
        # roundings; the cases' m_i - m are integers), and m + log(ell) rounds once more: rel 1e-14 ≈ 90u holds.
        assert float(mpmath.log(total)) == pytest.approx(m + math.log(ell), rel=1e-14, abs=1e-14)


def test_q1_the_shown_merge_passes_and_keeps_two_empty_states_empty():
    merge = _shown_solution(EX.q1, "merge")
    assert EX.q1.evaluate(merge).passed
    assert merge(-np.inf, 0.0, -np.inf, 0.0) == (-np.inf, 0.0)


def test_q1_the_unguarded_merge_is_told_about_two_empty_states(capsys):
    assert EX.q1.check(EX.q1.variants["the right formula without a guard for two empty states"]).status == "incorrect"
    assert "(-inf, 0)" in _unwrapped(capsys.readouterr().out)


# --- q2: the tiled forward loop -----------------------------------------------------------


@pytest.mark.parametrize("case", EX.q2.cases + EX.q2.probes, ids=lambda c: c.describe())
def test_q2_reference_equals_torch_sdpa_on_every_case(case):
    q, k, v, _, _ = case.args
    expected = F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()
    # float64 rounding of two implementations (rounding_bounds.attention_error): scores near ±800 or 2000 carry
    # about 800·u or 2000·u through the exp, up to 1.5e-11 in the output, where 1e-14 recorded one CPU's last bits.
    np.testing.assert_allclose(EX.q2.reference(*case.args), expected, rtol=0, atol=2 * attention_error(q, k, v))


@pytest.mark.parametrize("case", EX.q2.cases + EX.q2.probes, ids=lambda c: c.describe())
def test_q2_checker_tolerance_covers_the_rounding_of_any_right_float64_loop(case):
    q, k, v, _, _ = case.args
    # A right loop and tiled_attention each round within attention_error: the checker must allow the sum.
    assert 2 * attention_error(q, k, v) <= EX.q2.atol


def test_q2_cases_hold_the_adversarial_inputs_the_lesson_promises():
    shapes = [(c.args[0].shape[0], c.args[1].shape[0], c.args[3], c.args[4]) for c in EX.q2.cases]
    assert any(L % bq and S % bk for L, S, bq, bk in shapes), "block sizes that divide neither length"
    scores = [c.args[0] @ c.args[1].T / math.sqrt(c.args[0].shape[1]) for c in EX.q2.cases]
    with np.errstate(invalid="ignore"):
        jumps = [s[:, c.args[4]:].max() - s[:, : c.args[4]].max() for s, c in zip(scores, EX.q2.cases) if c.args[1].shape[0] > c.args[4]]
    assert max(jumps) > 710 and min(jumps) < -710, "a later tile far above and one far below the running max"
    assert any(np.isneginf(s[:, : c.args[4]]).all() for s, c in zip(scores, EX.q2.cases)), "a fully masked first tile"


def test_q2_the_shown_loop_passes_its_checker(capsys):
    assert EX.q2.check(_shown_solution(EX.q2, "flash_forward")).passed


def _fa1_order(q, k, v, block_q, block_k):
    """A right answer in FlashAttention-1's order: keys outer, queries inner, the output kept normalized."""
    L, S = q.shape[0], k.shape[0]
    out, m, ell = np.zeros((L, v.shape[1])), np.full(L, -np.inf), np.zeros(L)
    for j0 in range(0, S, block_k):
        kj, vj = k[j0 : j0 + block_k], v[j0 : j0 + block_k]
        for i0 in range(0, L, block_q):
            rows = slice(i0, i0 + block_q)
            s = q[rows] @ kj.T / math.sqrt(q.shape[1])
            m_new = np.maximum(m[rows], s.max(axis=1))
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            p = np.exp(s - shift[:, None])
            old = ell[rows] * np.exp(m[rows] - shift)
            ell_new = old + p.sum(axis=1)
            safe = np.where(ell_new == 0, 1.0, ell_new)
            out[rows] = (old[:, None] * out[rows] + p @ vj) / safe[:, None]
            m[rows], ell[rows] = m_new, ell_new
    return out


def _lazy(q, k, v, block_q, block_k, threshold=8.0):
    """A right answer that rescales only when the maximum grows by more than `threshold`."""
    L, S = q.shape[0], k.shape[0]
    out = np.zeros((L, v.shape[1]))
    for i0 in range(0, L, block_q):
        rows = slice(i0, i0 + block_q)
        n = q[rows].shape[0]
        m, ell, acc = np.full(n, -np.inf), np.zeros(n), np.zeros((n, v.shape[1]))
        for j0 in range(0, S, block_k):
            s = q[rows] @ k[j0 : j0 + block_k].T / math.sqrt(q.shape[1])
            grow = s.max(axis=1) > m + threshold
            m_new = np.where(grow, s.max(axis=1), m)
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            alpha = np.exp(m - shift)
            p = np.exp(s - shift[:, None])
            ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + p @ v[j0 : j0 + block_k], m_new
        out[rows] = acc / ell[:, None]
    return out


@pytest.mark.parametrize("answer", [_fa1_order, _lazy], ids=["FlashAttention-1 order", "lazy rescaling"])
def test_q2_other_right_loops_are_accepted(answer):
    assert EX.q2.evaluate(answer).passed


def _whole_matrix(q, k, v, block_q, block_k):
    s = q @ k.T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True) @ v


def test_q2_forming_the_whole_score_matrix_is_rejected_by_its_memory(capsys):
    assert EX.q2.check(_whole_matrix).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "score matrix" in out and "MiB" in out and "never form" in out


def _torch_sdpa(q, k, v, block_q, block_k):
    return F.scaled_dot_product_attention(*(torch.from_numpy(a) for a in (q, k, v))).numpy()


def _torch_whole_matrix(q, k, v, block_q, block_k):  # returns a tensor
    s = torch.as_tensor(q) @ torch.as_tensor(k).T / math.sqrt(q.shape[1])
    return torch.softmax(s, dim=-1) @ torch.as_tensor(v)


def _torch_operators_only(q, k, v, block_q, block_k):  # no torch function called by name but the constructor
    s = torch.Tensor(q).double() @ torch.Tensor(k).double().T / math.sqrt(q.shape[1])
    p = (s - s.max(dim=1, keepdim=True).values).exp()
    return np.asarray(p / p.sum(dim=1, keepdim=True) @ torch.Tensor(v).double())


def _torch_tiled(q, k, v, block_q, block_k):  # even a right tiled loop: tracemalloc could not measure it
    q, k, v = (torch.from_numpy(a) for a in (q, k, v))
    out = torch.empty(q.shape[0], v.shape[1], dtype=q.dtype)
    for i0 in range(0, q.shape[0], block_q):
        qi = q[i0 : i0 + block_q]
        m = torch.full((qi.shape[0],), -math.inf, dtype=q.dtype)
        ell, acc = torch.zeros_like(m), torch.zeros(qi.shape[0], v.shape[1], dtype=q.dtype)
        for j0 in range(0, k.shape[0], block_k):
            s = qi @ k[j0 : j0 + block_k].T / math.sqrt(q.shape[1])
            m_new = torch.maximum(m, s.max(dim=1).values)
            shift = torch.where(torch.isneginf(m_new), 0.0, m_new)
            alpha, p = torch.exp(m - shift), torch.exp(s - shift[:, None])
            ell, acc, m = alpha * ell + p.sum(dim=1), alpha[:, None] * acc + p @ v[j0 : j0 + block_k], m_new
        out[i0 : i0 + block_q] = acc / ell[:, None]
    return out.numpy()


@pytest.mark.parametrize(
    "answer", [_torch_sdpa, _torch_whole_matrix, _torch_operators_only, _torch_tiled],
    ids=["F.scaled_dot_product_attention", "the whole matrix in torch", "torch tensors and operators", "a tiled loop in torch"],
)
def test_q2_an_answer_in_pytorch_is_refused_since_tracemalloc_cannot_see_its_memory(answer, capsys):
    # tracemalloc sees NumPy's allocations, never PyTorch's: without this refusal these passed as "✓ Correct".
    assert EX.q2.check(answer).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "PyTorch" in out and "tracemalloc" in out and "NumPy" in out
    assert "This is exactly what" not in out  # the output is right: no wrong formula to name


def test_q2_the_pytorch_check_does_not_refuse_numpy_answers():
    from course_utils.exercises.lesson07 import _torch_used

    q, k, v, block_q, block_k = EX.q2.cases[-1].args
    for answer in (_shown_solution(EX.q2, "flash_forward"), _fa1_order, _lazy, _whole_matrix):
        assert _torch_used(answer, (q, k, v, block_q, block_k)) is None
    assert _torch_used(_torch_sdpa, (q, k, v, block_q, block_k)) == "torch.from_numpy"


@pytest.mark.parametrize(
    "label",
    [
        "no rescaling of ell and acc when the maximum grows",
        "rescaling ell but not acc",
        "rescaling by exp(m_new - m), the wrong sign",
        "shifting each block by its own maximum only",
        "dividing acc by ell after every block",
        "tiles that end one key early (j0:j0 + block_k - 1)",
        "tiles that end one key late (j0:j0 + block_k + 1)",
        "dropping the last, partial tile of keys",
        "dropping the last, partial tile of queries",
        "shifting by m_new = -inf when nothing is allowed yet",
    ],
)
def test_q2_each_mistake_the_lesson_names_is_rejected_and_named(label, capsys):
    verdict = EX.q2.check(EX.q2.variants[label])
    assert verdict.status == "incorrect"
    assert f"This is exactly what {label} gives." in _unwrapped(capsys.readouterr().out)


def test_q2_a_nan_from_the_masked_first_tile_gets_the_guard_hint(capsys):
    EX.q2.check(EX.q2.variants["shifting by m_new = -inf when nothing is allowed yet"])
    out = _unwrapped(capsys.readouterr().out)
    assert "first tile of keys scores -inf" in out and "shift by 0" in out


@pytest.mark.parametrize("where", ["state", "inputs"])
def test_q2_a_loop_run_in_float32_is_rejected_and_told_to_use_float64(where, capsys):
    shown = _shown_solution(EX.q2, "flash_forward")

    def in_float32(q, k, v, block_q, block_k):
        if where == "inputs":  # the whole computation in float32
            return shown(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), block_q, block_k)
        out = np.zeros((q.shape[0], v.shape[1]), np.float32)  # state and output in float32, inputs float64
        for i0 in range(0, q.shape[0], block_q):
            rows = slice(i0, i0 + block_q)
            n = q[rows].shape[0]
            m, ell, acc = np.full(n, -np.inf, np.float32), np.zeros(n, np.float32), np.zeros((n, v.shape[1]), np.float32)
            for j0 in range(0, k.shape[0], block_k):
                s = (q[rows] @ k[j0 : j0 + block_k].T / math.sqrt(q.shape[1])).astype(np.float32)
                m_new = np.maximum(m, s.max(axis=1))
                shift = np.where(np.isneginf(m_new), 0.0, m_new).astype(np.float32)
                alpha, p = np.exp(m - shift), np.exp(s - shift[:, None])
                ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + (p @ v[j0 : j0 + block_k]).astype(np.float32), m_new
            out[rows] = acc / ell[:, None]
        return out

    with np.errstate(all="ignore"):
        assert EX.q2.check(in_float32).status == "incorrect"
    assert "float32" in _unwrapped(capsys.readouterr().out)


# --- q3: the bytes of K and V ------------------------------------------------------------


def test_q3_reference_equals_the_bytes_tiled_attention_counts():
    # L = S = 4096, float32, tiles of 128 x 64; d = 1 here, and the bytes of K and V grow linearly with d = 64.
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(4096, 1)).astype(np.float32) for _ in range(3))
    counts = {}
    tiled_attention(q, k, v, block_q=128, block_k=64, counts=counts)
    kv_bytes = 64 * (counts["bytes_read"]["k"] + counts["bytes_read"]["v"])
    assert EX.q3.reference == kv_bytes / 2**20 == 64


@pytest.mark.parametrize("label", list(EX.q3.wrong_answers))
def test_q3_each_near_miss_gets_its_own_explanation(label, capsys):
    assert EX.q3.check(EX.q3.wrong_answers[label]).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "max abs diff" not in out  # a sentence about the mistake, not a bare distance


def _tile_max_loop(q, k, v, block_q, block_k):
    """Right in every way but one: one running maximum for the whole tile of queries."""
    scale = 1 / math.sqrt(q.shape[1])
    out = np.empty((q.shape[0], v.shape[1]))
    with np.errstate(all="ignore"):
        for i0 in range(0, q.shape[0], block_q):
            i1 = min(i0 + block_q, q.shape[0])
            m, ell, acc = -np.inf, np.zeros(i1 - i0), np.zeros((i1 - i0, v.shape[1]))
            for j0 in range(0, k.shape[0], block_k):
                s = q[i0:i1] @ k[j0:j0 + block_k].T * scale
                m_new = max(m, s.max())
                shift = 0.0 if m_new == -np.inf else m_new
                alpha, p = np.exp(m - shift), np.exp(s - shift)
                ell, acc, m = alpha * ell + p.sum(axis=1), alpha * acc + p @ v[j0:j0 + block_k], m_new
            out[i0:i1] = acc / ell[:, None]
    return out


def test_q2_one_maximum_per_tile_instead_of_per_row_is_rejected_and_named(capsys):
    assert EX.q2.check(_tile_max_loop).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "s.max(axis=1)" in out and "-800" in out


def _queries_only(q, k, v, block_q, block_k):
    """Tiles the queries only: a full softmax over all keys per tile of queries, block_k ignored."""
    out = np.empty((q.shape[0], v.shape[1]))
    for i0 in range(0, q.shape[0], block_q):
        s = q[i0:i0 + block_q] @ k.T
        s *= 1 / math.sqrt(q.shape[1])  # in place: one (block_q, S) array alive, which passes block_q = 64
        s -= s.max(axis=1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=1, keepdims=True)
        out[i0:i0 + block_q] = s @ v
        del s  # so that two (block_q, S) arrays never live at once
    return out


def test_q2_tiling_only_the_queries_is_rejected_on_the_case_with_block_q_equal_to_L(capsys):
    assert EX.q2.check(_queries_only).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "block_q = L = 400" in out and "tiling the queries is not enough" in out


@pytest.mark.parametrize("answer", [67.1, 67, 67.11])
def test_q3_mb_rounded_to_three_digits_still_gets_the_mb_explanation(answer, capsys):
    assert EX.q3.check(answer).status == "incorrect"
    assert "MB" in _unwrapped(capsys.readouterr().out)


@pytest.mark.parametrize("answer", [64, 64.0, 64.1])
def test_q3_sixty_four_is_accepted(answer):
    assert EX.q3.check(answer).passed
