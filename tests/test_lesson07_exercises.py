"""Lesson 07's exercises: references computed independently, shown solutions that pass, and families of wrong answers rejected.

The generic guarantees (every generated variant rejected and named, the starter "not attempted",
broken functions reported) are tested for every lesson in tests/test_exercises.py.
"""

from __future__ import annotations

import math
from fractions import Fraction

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


def _exact_in_any_loop(q, k) -> bool:
    """Whether every score is exact in any order of summation and each row's other scores are >= 746 below its
    maximum: each query has one nonzero coordinate whose products with the keys are exact, E = 4 (a scale of
    exactly 1/2), and e^-746 underflows to 0, so every right loop's weights are exactly 1 and 0."""
    nonzero = q != 0
    if q.shape[1] != 4 or not (nonzero.sum(axis=1) == 1).all():
        return False
    products = q[nonzero][:, None] * k[:, nonzero.argmax(axis=1)].T
    exact = all(Fraction(float(x)) == Fraction(float(a)) * Fraction(float(b))
                for x, a, b in zip(products.ravel(), np.repeat(q[nonzero], k.shape[0]), k[:, nonzero.argmax(axis=1)].T.ravel()))
    s = np.sort(products / 2, axis=1)
    return exact and bool((s[:, -1] - s[:, -2] >= 746).all())


@pytest.mark.parametrize("case", EX.q2.cases + EX.q2.probes, ids=lambda c: c.describe())
def test_q2_checker_tolerance_covers_the_rounding_of_any_right_float64_loop(case):
    q, k, v, _, _ = case.args
    if _exact_in_any_loop(q, k):  # the case near -2e10: scores of that size would round by 4e-6, but these do not
        expected = v[np.argmax(q @ k.T, axis=1)]
        assert np.array_equal(EX.q2.reference(*case.args), expected)
        assert np.array_equal(_fa1_order(*case.args), expected) and np.array_equal(_lazy(*case.args), expected)
        return
    # A right loop and tiled_attention each round within attention_error: the checker must allow the sum.
    assert 2 * attention_error(q, k, v) <= EX.q2.atol


def test_q2_has_a_case_exact_in_any_loop_far_below_any_finite_floor():
    far = [c for c in EX.q2.cases if _exact_in_any_loop(c.args[0], c.args[1])]
    assert far and (far[0].args[0] @ far[0].args[1].T / 2).max() < -1e10


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


def _tiles_into_the_whole_matrix(q, k, v, block_q, block_k):
    """Reads k and v one tile at a time, but writes every tile's scores into one (L, S) matrix."""
    L, S = q.shape[0], k.shape[0]
    s = np.empty((L, S))
    for j0 in range(0, S, block_k):
        s[:, j0:j0 + block_k] = q @ k[j0:j0 + block_k].T / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    out = np.zeros((L, v.shape[1]))
    for j0 in range(0, S, block_k):
        out += p[:, j0:j0 + block_k] @ v[j0:j0 + block_k]
    return out


def _query_tile_scores_joined(q, k, v, block_q, block_k):
    """Reads k and v in tiles, but keeps each tile of queries' scores against all keys in one array."""
    out, scale = np.empty((q.shape[0], v.shape[1])), 1 / math.sqrt(q.shape[1])
    for i0 in range(0, q.shape[0], block_q):
        qi = q[i0:i0 + block_q]
        s = np.empty((len(qi), k.shape[0]))
        for j0 in range(0, k.shape[0], block_k):
            s[:, j0:j0 + block_k] = qi @ k[j0:j0 + block_k].T
        s *= scale  # in place, so that one (block_q, S) array is alive at a time
        s -= s.max(axis=1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=1, keepdims=True)
        out[i0:i0 + block_q] = sum(s[:, j0:j0 + block_k] @ v[j0:j0 + block_k] for j0 in range(0, k.shape[0], block_k))
        del s
    return out


def _memory_said(answer, L):
    """What the memory check says of `answer` on the large case of L queries (the read check comes first in check)."""
    from course_utils.exercises import lesson07
    from course_utils.exercises.core import Run

    case = next(c for c in EX.q2.cases if c.args[0].shape[0] == L)
    expected = EX.q2.reference(*case.args)
    return lesson07._never_holds_the_score_matrix(Run(answer, case, expected, expected, "float64", EX.q2.reference))


def test_q2_keeping_the_scores_of_a_tile_of_queries_against_all_keys_is_rejected_where_block_q_is_L(capsys):
    assert EX.q2.check(_query_tile_scores_joined).status == "incorrect"  # first by its reads: all keys before v
    out = _memory_said(_query_tile_scores_joined, 400)
    assert "block_q = L = 400" in out and "tiling the queries is not enough" in out


def test_q2_reading_in_tiles_but_keeping_the_whole_score_matrix_is_rejected_by_its_memory(capsys):
    assert EX.q2.check(_tiles_into_the_whole_matrix).status == "incorrect"
    out = _unwrapped(capsys.readouterr().out)
    assert "does not walk the keys in tiles" not in out  # it does read them in tiles
    out = _memory_said(_tiles_into_the_whole_matrix, 320)
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


@pytest.mark.parametrize("answer", [67.1, 67, 67.11])
def test_q3_mb_rounded_to_three_digits_still_gets_the_mb_explanation(answer, capsys):
    assert EX.q3.check(answer).status == "incorrect"
    assert "MB" in _unwrapped(capsys.readouterr().out)


@pytest.mark.parametrize("answer", [64, 64.0, 64.1])
def test_q3_sixty_four_is_accepted(answer):
    assert EX.q3.check(answer).passed


# --- q2: the checker follows which keys each operation reads ---------------------------------------
#
# A softmax over all keys at once gives the same numbers as the tiled loop, and one row of S scores takes no more
# memory than a copy of k: so on one case (L = 8, S = 1024, tiles of 4 x 64) the checker hands the answer k and v
# as arrays that report how many keys each operation reads. Right loops of every form pass; answers that read
# all keys at once are rejected, and told which line did it.

READS = next(case for case in EX.q2.cases if getattr(case, "follow_reads", False))


def test_q2_one_case_follows_the_reads_with_many_tiles_of_keys_and_of_queries():
    q, k, v, block_q, block_k = READS.args
    assert k.shape[0] >= 16 * block_k and q.shape[0] >= 2 * block_q > block_q > 1
    assert block_k == 64  # a loop with its own fixed 64 x 64 tiles reads no more than block_k keys at once


def _two_pass(q, k, v, block_q, block_k):
    """Wrong: a first pass over the tiles of keys finds each row's maximum, a second sums; no online rescaling."""
    out, scale = np.zeros((q.shape[0], v.shape[1])), 1 / math.sqrt(q.shape[1])
    for i0 in range(0, q.shape[0], block_q):
        qi = q[i0:i0 + block_q]
        m = np.full(len(qi), -np.inf)
        for j0 in range(0, k.shape[0], block_k):
            m = np.maximum(m, (qi @ k[j0:j0 + block_k].T * scale).max(axis=1))
        shift = np.where(np.isneginf(m), 0.0, m)
        ell, acc = np.zeros(len(qi)), np.zeros((len(qi), v.shape[1]))
        for j0 in range(0, k.shape[0], block_k):
            p = np.exp(qi @ k[j0:j0 + block_k].T * scale - shift[:, None])
            ell += p.sum(axis=1)
            acc += p @ v[j0:j0 + block_k]
        out[i0:i0 + block_q] = acc / ell[:, None]
    return out


def _fixed_64(q, k, v, block_q, block_k):
    """Right, with its own 64 x 64 tiles whatever the block sizes given (the review accepts it)."""
    return _shown_solution(EX.q2, "flash_forward")(q, k, v, 64, 64)


def _nan_to_num_guard(q, k, v, block_q, block_k):
    """Right: np.nan_to_num in place of the shift guard, the tiles cut by np.array_split, np.einsum and .dot."""
    L, S = q.shape[0], k.shape[0]
    k = np.asarray(k, dtype=np.float64) / np.sqrt(q.shape[1])  # keys scaled once: a copy, not a read of scores
    kT = k.T.copy()
    out = np.zeros((L, v.shape[1]))
    for i0 in range(0, L, block_q):
        qi = q[i0:i0 + block_q]
        m, ell, acc = np.full(len(qi), -np.inf), np.zeros(len(qi)), np.zeros((len(qi), v.shape[1]))
        cuts = range(block_k, S, block_k)
        for kj, vj in zip(np.array_split(kT, cuts, axis=1), np.array_split(v, cuts)):
            s = np.einsum("id,dj->ij", qi, kj)
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.nan_to_num(m_new, neginf=0.0)
            alpha, p = np.exp(m - shift), np.exp(s - shift[:, None])
            ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + p.dot(vj), m_new
        out[i0:i0 + block_q] = acc / ell[:, None]
    return out


def _one_query_online(q, k, v, block_q, block_k):
    """Right: one query at a time (block_q ignored), but the keys in tiles with the running m, ell and acc."""
    out, scale = np.zeros((q.shape[0], v.shape[1])), 1 / math.sqrt(q.shape[1])
    for i in range(q.shape[0]):
        m, ell, acc = -np.inf, 0.0, np.zeros(v.shape[1])
        for j0 in range(0, k.shape[0], block_k):
            s = q[i].dot(k[j0:j0 + block_k].T) * scale  # .dot of a plain array: the checker still sees the tile
            m_new = max(m, s.max())
            shift = 0.0 if m_new == -np.inf else m_new
            alpha, p = np.exp(m - shift), np.exp(s - shift)
            ell, acc, m = alpha * ell + p.sum(), alpha * acc + p @ v[j0:j0 + block_k], m_new
        out[i] = acc / ell
    return out


def _padded_tiles(q, k, v, block_q, block_k):
    """Right: k and v padded to whole tiles with np.pad, the padding masked with -inf."""
    S, pad = k.shape[0], -k.shape[0] % block_k
    kp, vp = np.pad(k, ((0, pad), (0, 0))), np.pad(v, ((0, pad), (0, 0)))
    real = np.arange(S + pad) < S
    out, scale = np.zeros((q.shape[0], v.shape[1])), 1 / math.sqrt(q.shape[1])
    for i0 in range(0, q.shape[0], block_q):
        qi = q[i0:i0 + block_q]
        m, ell, acc = np.full(len(qi), -np.inf), np.zeros(len(qi)), np.zeros((len(qi), v.shape[1]))
        for j0 in range(0, S + pad, block_k):
            s = np.where(real[j0:j0 + block_k], qi @ kp[j0:j0 + block_k].T * scale, -np.inf)
            m_new = np.maximum(m, s.max(axis=1))
            shift = np.where(np.isneginf(m_new), 0.0, m_new)
            alpha, p = np.exp(m - shift), np.exp(s - shift[:, None])
            ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + p @ vp[j0:j0 + block_k], m_new
        out[i0:i0 + block_q] = acc / ell[:, None]
    return out


RIGHT_LOOPS = {
    "the shown solution": _shown_solution(EX.q2, "flash_forward"),
    "FlashAttention-1 order": _fa1_order,
    "lazy rescaling (tau = 8)": _lazy,
    "fixed 64 x 64 tiles": _fixed_64,
    "nan_to_num guard, scaled keys, array_split, einsum, .dot": _nan_to_num_guard,
    "one query at a time, keys in tiles": _one_query_online,
    "k and v padded to whole tiles": _padded_tiles,
}


@pytest.mark.parametrize("answer", RIGHT_LOOPS.values(), ids=RIGHT_LOOPS.keys())
def test_q2_every_right_tiled_loop_passes_while_the_checker_follows_its_reads(answer, capsys):
    verdict = EX.q2.check(answer)
    assert verdict.passed, capsys.readouterr().out


def test_q2_the_checkers_reference_passes():
    assert EX.q2.evaluate(EX.q2.reference).passed


def _row_at_a_time(q, k, v, block_q, block_k):
    """One query row at a time with an ordinary softmax over all keys: no tiles of keys, no online softmax."""
    out = np.empty((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = q[i] @ k.T / math.sqrt(q.shape[1])
        p = np.exp(s - s.max())
        out[i] = p @ v / p.sum()
    return out


def _row_at_a_time_with_dot(q, k, v, block_q, block_k):
    out = np.empty((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = q[i].dot(k.T) / math.sqrt(q.shape[1])
        p = np.exp(s - s.max())
        out[i] = p.dot(v) / p.sum()
    return out


def _row_at_a_time_after_asarray(q, k, v, block_q, block_k):
    k, v = np.asarray(k), np.array(v, dtype=np.float64)  # a plain copy would hide the reads from the checker
    return _row_at_a_time(q, k, v, block_q, block_k)


def _row_at_a_time_by_broadcasting(q, k, v, block_q, block_k):
    out = np.empty((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = (k * q[i]).sum(axis=1) / math.sqrt(q.shape[1])
        p = np.exp(s - s.max())
        out[i] = (p[:, None] * v).sum(axis=0) / p.sum()
    return out


def _query_tiles(q, k, v, block_q, block_k):
    """Tiles of queries, each against all keys at once; block_k ignored."""
    out = np.empty((q.shape[0], v.shape[1]))
    for i0 in range(0, q.shape[0], block_q):
        s = q[i0:i0 + block_q] @ k.T / math.sqrt(q.shape[1])
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[i0:i0 + block_q] = p / p.sum(axis=1, keepdims=True) @ v
    return out


def _whole_matrix_einsum(q, k, v, block_q, block_k):
    s = np.einsum("id,jd->ij", q, k) / math.sqrt(q.shape[1])
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return np.einsum("ij,jd->id", p / p.sum(axis=1, keepdims=True), v)


def _scores_in_tiles_values_at_once(q, k, v, block_q, block_k):
    """Reads k in tiles, but joins the row of scores and multiplies it by all of v at once."""
    out = np.empty((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        s = np.concatenate([q[i] @ k[j0:j0 + block_k].T for j0 in range(0, k.shape[0], block_k)])
        p = np.exp(s / math.sqrt(q.shape[1]) - s.max() / math.sqrt(q.shape[1]))
        out[i] = p @ v / p.sum()
    return out


def _tiles_of_keys_joined_again(q, k, v, block_q, block_k):
    k = np.concatenate([k[j0:j0 + block_k] for j0 in range(0, k.shape[0], block_k)])
    return _whole_matrix(q, k, v, block_q, block_k)


WIDE_READS = {  # answer: (what the message must say it did, the line it must quote)
    "one row at a time, all keys (@)": (
        _row_at_a_time, "multiplies one query by all 1024 keys of k at once", "s = q[i] @ k.T / math.sqrt(q.shape[1])"),
    "one row at a time, all keys (.dot)": (
        _row_at_a_time_with_dot, "reads all 1024 keys of k at once", "s = q[i].dot(k.T) / math.sqrt(q.shape[1])"),
    "one row at a time after np.asarray(k)": (
        _row_at_a_time_after_asarray, "multiplies one query by all 1024 keys of k at once", "s = q[i] @ k.T"),
    "one row at a time, by broadcasting": (
        _row_at_a_time_by_broadcasting, "reads all 1024 keys of k at once", "s = (k * q[i]).sum(axis=1)"),
    "tiles of queries against all keys": (
        _query_tiles, "multiplies a tile of 4 queries by all 1024 keys of k at once",
        "s = q[i0:i0 + block_q] @ k.T"),
    "the whole matrix (@)": (
        _whole_matrix, "multiplies all 8 queries by all 1024 keys of k at once: the whole (8, 1024) score matrix",
        "s = q @ k.T / math.sqrt(q.shape[1])"),
    "the whole matrix (np.einsum)": (
        _whole_matrix_einsum, "reads all 1024 keys of k at once", 's = np.einsum("id,jd->ij", q, k)'),
    "scores in tiles, values at once": (
        _scores_in_tiles_values_at_once, "multiplies the weights of one query by all 1024 rows of v at once",
        "out[i] = p @ v / p.sum()"),
    "tiles of keys joined again": (
        _tiles_of_keys_joined_again, "multiplies all 8 queries by all 1024 keys of k at once", "s = q @ k.T"),
}


@pytest.mark.parametrize("label", WIDE_READS)
def test_q2_an_answer_that_reads_all_keys_at_once_is_rejected_and_told_which_line(label, capsys):
    answer, did, line = WIDE_READS[label]
    verdict = EX.q2.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert verdict.status == "incorrect"
    assert "the checker follows which keys" in out  # the case that follows the reads, not a memory case
    assert "it does not walk the keys in tiles" in out and did in out and f"`{line}" in out
    assert "`k[j0:j0 + block_k]`" in out
    assert "This is exactly what" not in out  # the output is right: no wrong formula to name


def test_q2_after_a_wide_read_the_next_step_gives_the_online_update_in_code(capsys):
    ex = exercises.load("07").q2
    ex.check(_row_at_a_time)
    feedback = _unwrapped(capsys.readouterr().out)
    ex.hint()
    step = _unwrapped(capsys.readouterr().out)
    assert step.startswith("Next step for this mistake: Put the work on keys inside `for j0 in range(0, S, block_k):`")
    assert "`alpha = np.exp(m - m_new)`" in step and "`acc = alpha[:, None] * acc + p @ vj`" in step
    assert step.split(": ", 1)[1] not in feedback  # one step beyond the feedback


def test_q2_following_the_reads_leaves_the_answers_arrays_usable_as_arrays():
    from course_utils.exercises.lesson07 import _Reads, _Rows

    reads = _Reads(block_k=2)
    k = _Rows.of(np.arange(12.0).reshape(6, 2), "k", reads)
    tile = k[2:4].T
    assert isinstance(tile, _Rows) and tile.keys() == 2 and tile.shape == (2, 2)
    assert isinstance(k * 0.5, _Rows) and (k * 0.5).keys() == 6  # scaled, not read
    assert np.ones(2) @ tile @ np.ones(2) == 4 + 5 + 6 + 7  # rows 2 and 3: two keys, allowed
    assert reads.wide is None
    assert float(k[5, 1]) == 11.0 and len(k) == 6 and k.max() == 11.0  # scalars and reductions read nothing
    np.ones(2) @ k.T
    assert reads.wide is not None and reads.wide.keys == 6 and reads.wide.how == "`@`" and reads.wide.queries == 1


def _row_buffer_then_softmax(q, k, v, block_q, block_k):
    """Reads k and v in tiles, but keeps every key's score of a row in one buffer: no online softmax."""
    S, E = k.shape
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        row = np.empty(S)
        for j0 in range(0, S, block_k):
            row[j0:j0 + block_k] = q[i] @ k[j0:j0 + block_k].T / np.sqrt(E)
        w = np.exp(row - row.max())
        w /= w.sum()
        for j0 in range(0, S, block_k):
            out[i] += w[j0:j0 + block_k] @ v[j0:j0 + block_k]
    return out


def test_q2_a_row_of_scores_filled_tile_by_tile_then_a_plain_softmax_is_rejected_by_name(capsys):
    verdict = EX.q2.check(_row_buffer_then_softmax)
    out = _unwrapped(capsys.readouterr().out)
    assert not verdict.passed
    assert "makes an array of shape (1024,) with `np.empty`" in out and "online softmax" in out, out
    assert "`row = np.empty(S)`" in out


def _scores_in_a_column(q, k, v, bq, bk):
    S, E = k.shape; out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        row = np.zeros((S, 1))
        for j in range(0, S, bk): row[j:j+bk, 0] = q[i] @ k[j:j+bk].T / np.sqrt(E)
        w = np.exp(row[:, 0] - row.max()); w /= w.sum()
        for j in range(0, S, bk): out[i] += w[j:j+bk] @ v[j:j+bk]
    return out
def _scores_by_np_append(q, k, v, bq, bk):
    S, E = k.shape; out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        row = np.array([])
        for j in range(0, S, bk): row = np.append(row, q[i] @ k[j:j+bk].T / np.sqrt(E))
        w = np.exp(row - row.max()); w /= w.sum()
        for j in range(0, S, bk): out[i] += w[j:j+bk] @ v[j:j+bk]
    return out
def _scores_in_a_list_of_tiles(q, k, v, bq, bk):
    S, E = k.shape; out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        tiles = [q[i] @ k[j:j+bk].T / np.sqrt(E) for j in range(0, S, bk)]
        row = np.array(tiles).ravel() if len({t.size for t in tiles}) == 1 else np.concatenate(tiles)
        w = np.exp(row - row.max()); w /= w.sum()
        for n, j in enumerate(range(0, S, bk)): out[i] += w[j:j+bk] @ v[j:j+bk]
    return out


# --- review 33, W1-W8: every key's score kept in a container the constructor watch does not see, or two passes ----


def _scores_as_python_floats(q, k, v, bq, bk):
    S, E = k.shape; out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        row = []
        for j in range(0, S, bk): row.extend((q[i] @ k[j:j+bk].T / np.sqrt(E)).tolist())
        w = np.exp(np.subtract(row, max(row))); w /= w.sum()
        for j in range(0, S, bk): out[i] += w[j:j+bk] @ v[j:j+bk]
    return out


def _scores_in_a_dict_of_tiles(q, k, v, bq, bk):
    S, E = k.shape; out = np.zeros((q.shape[0], v.shape[1]))
    for i0 in range(0, q.shape[0], bq):
        tiles = {j: q[i0:i0+bq] @ k[j:j+bk].T / np.sqrt(E) for j in range(0, S, bk)}
        m = np.max([t.max(axis=1) for t in tiles.values()], axis=0)
        ell = sum(np.exp(t - m[:, None]).sum(axis=1) for t in tiles.values())
        acc = sum(np.exp(t - m[:, None]) @ v[j:j+bk] for j, t in tiles.items())
        out[i0:i0+bq] = acc / ell[:, None]
    return out


ROOM = "room for a score for every one of the 1024 keys"
NO_V_BETWEEN = "read 1024 keys of k (more than two tiles of block_k = 64) with no read of v between them"
NOT_ONLINE = {
    "an (S, 1) column": (_scores_in_a_column, ROOM),
    "np.append": (_scores_by_np_append, ROOM),
    "a list of tiles joined": (_scores_in_a_list_of_tiles, ROOM),
    "two passes": (_two_pass, NO_V_BETWEEN),
    "Python floats": (_scores_as_python_floats, NO_V_BETWEEN),
    "a dict of tiles": (_scores_in_a_dict_of_tiles, NO_V_BETWEEN),
}


@pytest.mark.parametrize("label", NOT_ONLINE)
def test_q2_every_keys_score_gathered_in_any_layout_or_two_passes_is_rejected_as_no_online_softmax(label, capsys):
    answer, said = NOT_ONLINE[label]
    verdict = EX.q2.check(answer)
    out = _unwrapped(capsys.readouterr().out)
    assert verdict.status == "incorrect" and said in out, out


# --- review 33 (rerun c): a read of v early on, entries copied one by one, and a loop that reads the next tile early


def _dummy_v_then_two_passes(q, k, v, bq, bk):
    L,E=q.shape; S=k.shape[0]; out=np.empty((L,v.shape[1])); sc=1/np.sqrt(E)
    _ = np.zeros_like(q[:, :1] @ v[:1].T[:1])
    for i0 in range(0,L,bq):
        qi=q[i0:i0+bq]; m=np.full(len(qi),-np.inf)
        for j0 in range(0,S,bk): m=np.maximum(m,(qi@k[j0:j0+bk].T*sc).max(1))
        ell=np.zeros(len(qi)); acc=np.zeros((len(qi),v.shape[1]))
        for j0 in range(0,S,bk):
            p=np.exp(qi@k[j0:j0+bk].T*sc-m[:,None]); ell+=p.sum(1); acc+=p@v[j0:j0+bk]
        out[i0:i0+bq]=acc/ell[:,None]
    return out
def _entries_copied_one_by_one(q,k,v,bq,bk):
    S,E=k.shape; kk=np.empty((S,E)); vv=np.empty(v.shape)
    for j in range(S):
        for e in range(E): kk[j,e]=k[j,e]
    for j in range(S):
        for e in range(v.shape[1]): vv[j,e]=v[j,e]
    s=q@kk.T/np.sqrt(E); p=np.exp(s-s.max(1,keepdims=True)); return p/p.sum(1,keepdims=True)@vv
def _next_tile_scored_early(q,k,v,bq,bk):
    L,E=q.shape; S=k.shape[0]; out=np.empty((L,v.shape[1])); sc=1/np.sqrt(E)
    for i0 in range(0,L,bq):
        qi=q[i0:i0+bq]; m=np.full(len(qi),-np.inf); ell=np.zeros(len(qi)); acc=np.zeros((len(qi),v.shape[1]))
        s_next=qi@k[0:bk].T*sc
        for j0 in range(0,S,bk):
            s=s_next
            if j0+bk<S: s_next=qi@k[j0+bk:j0+2*bk].T*sc
            mn=np.maximum(m,s.max(1)); sh=np.where(mn==-np.inf,0,mn); a=np.exp(m-sh); p=np.exp(s-sh[:,None])
            ell=a*ell+p.sum(1); acc=a[:,None]*acc+p@v[j0:j0+bk]; m=mn
        out[i0:i0+bq]=acc/ell[:,None]
    return out


@pytest.mark.parametrize("answer", [_dummy_v_then_two_passes, _entries_copied_one_by_one])
def test_q2_many_tiles_of_keys_with_no_value_read_between_them_are_rejected(answer, capsys):
    assert EX.q2.check(answer).status == "incorrect"
    assert "with no read of v between them" in _unwrapped(capsys.readouterr().out)


def test_q2_a_loop_that_scores_the_next_tile_early_passes():
    assert EX.q2.evaluate(_next_tile_scored_early).passed


# --- review 33 ---------------------------------------------------------------------------------------


def _all_queries_per_key_tile(q, k, v, block_q, block_k):
    """Right, and tiled over the keys, but every query at once: block_q is ignored."""
    m, ell, acc = np.full(q.shape[0], -np.inf), np.zeros(q.shape[0]), np.zeros((q.shape[0], v.shape[1]))
    for j0 in range(0, k.shape[0], block_k):
        s = q @ k[j0:j0 + block_k].T / math.sqrt(q.shape[1])
        m_new = np.maximum(m, s.max(axis=1))
        shift = np.where(np.isneginf(m_new), 0.0, m_new)
        p, alpha = np.exp(s - shift[:, None]), np.exp(m - shift)
        ell, acc, m = alpha * ell + p.sum(axis=1), alpha[:, None] * acc + p @ v[j0:j0 + block_k], m_new
    return acc / ell[:, None]


def test_q2_a_loop_that_ignores_block_q_is_told_so_not_that_it_formed_the_matrix():
    """N4: it holds (L, block_k) scores, not the (L, S) matrix nor an array of S columns."""
    out = _memory_said(_all_queries_per_key_tile, 320)
    assert "whatever block_q is" in out and "never form" not in out
    from course_utils.exercises.lesson07 import _never_holds_the_score_matrix

    assert "for i0 in range(0, L, block_q)" in _never_holds_the_score_matrix.next_step
    assert "np.empty((L, S))" not in _never_holds_the_score_matrix.next_step


def test_q3_128_mib_is_told_both_readings_that_give_it():
    """N5: 128 is 64 passes of 4 bytes, or the right 32 passes of 8 bytes."""
    verdict = EX.q3.evaluate(128)
    assert "8 bytes per number" in verdict.message and "L / block_k = 64" in verdict.message


def test_q2_a_loop_with_block_q_and_block_k_swapped_is_rejected():
    """Fourth rerun: tiles of block_k queries by block_q keys read more than block_k keys at once (block_q > block_k)."""
    right = _shown_solution(EX.q2, "flash_forward")
    assert EX.q2.evaluate(right).status == "correct"
    assert EX.q2.evaluate(lambda q, k, v, block_q, block_k: right(q, k, v, block_k, block_q)).status == "incorrect"
