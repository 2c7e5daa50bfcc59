"""Split-KV attention and the lse merge: equal to torch SDPA for any split, with empty chunks, masks and causal."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention.bias import causal_lower_right

from course_utils import causal_mask, scaled_dot_product_attention
from course_utils.decoding import merge_attention_parts, split_kv_attention
from course_utils.tiled import tiled_attention
from rounding_bounds import attention_error, exponent_error, score_error, unit_roundoff


def _torch_sdpa(q, k, v, mask=None, is_causal=False):
    t = [torch.from_numpy(np.ascontiguousarray(a)) for a in (q, k, v)]
    attn_mask = None if mask is None else torch.from_numpy(np.ascontiguousarray(mask))
    return F.scaled_dot_product_attention(*t, attn_mask=attn_mask, is_causal=is_causal).numpy()


def _scores(q, k, mask=None, is_causal=False):
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if is_causal:
        mask = np.tri(q.shape[-2], k.shape[-2], dtype=bool)
    if mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    return s


@settings(max_examples=80, deadline=None)
@given(
    L=st.integers(1, 9),
    S=st.integers(1, 30),
    E=st.integers(1, 6),
    Ev=st.integers(1, 4),
    batch=st.sampled_from([(), (3,), (2, 2)]),
    split=st.one_of(st.builds(lambda n: {"n_splits": n}, st.integers(1, 12)), st.builds(lambda c: {"chunk": c}, st.integers(1, 12))),
    kind=st.sampled_from(["none", "bool", "float", "causal", "lower-right"]),
    dtype=st.sampled_from([np.float64, np.float32]),
    blocks=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    seed=st.integers(0, 2**16),
)
def test_equals_torch_sdpa_for_any_split_mask_and_dtype(L, S, E, Ev, batch, split, kind, dtype, blocks, seed):
    rng = np.random.default_rng(seed)
    q = rng.normal(size=(*batch, L, E)).astype(dtype)
    k = rng.normal(scale=2.0, size=(*batch, S, E)).astype(dtype)
    v = rng.normal(size=(*batch, S, Ev)).astype(dtype)
    mask, is_causal = None, False
    if kind == "bool":
        mask = rng.random((L, S)) > 0.5
        mask[0] = False  # one query with nothing to attend to
        mask[-1, : S // 2] = False  # the last query sees only the second half: some chunks empty for it
    elif kind == "float":
        mask = rng.normal(size=(L, S)).astype(dtype)
        mask[-1, : (S + 1) // 2] = -np.inf  # -inf in a float mask: the first chunks empty for the last query, or all
    elif kind == "causal":
        is_causal = True
    elif kind == "lower-right":
        mask = causal_mask(L, S, align="lower-right")
    out, lse = split_kv_attention(q, k, v, mask, is_causal=is_causal, block_q=blocks[0], block_k=blocks[1], **split)
    ref = _torch_sdpa(q, k, v, mask, is_causal)
    assert out.dtype == lse.dtype == dtype and out.shape == ref.shape and lse.shape == (*batch, L)
    # Rounding of two implementations in this dtype (scores, softmax, weighted sum; rounding_bounds): up to
    # about 1e-13 in float64 and 1e-4 in float32 here, far below what a wrong merge or a lost chunk moves.
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, mask=mask, is_causal=is_causal))
    if dtype == np.float64:
        scores = _scores(q, k, mask, is_causal)
        expected = torch.logsumexp(torch.from_numpy(scores), dim=-1).numpy()
        # float64 rounding: our scores carry score_error, and each side's logsumexp exponent_error and a last
        # rounding of u·|lse|: at most about 1e-13 here, so 1e-12 holds with a margin.
        bound = 2 * exponent_error(scores, input_error=score_error(q, k, mask=mask)) + 2 * unit_roundoff(lse) * np.abs(expected[np.isfinite(expected)]).max(initial=0)
        assert bound < 1e-12
        np.testing.assert_allclose(lse, expected, rtol=1e-12, atol=1e-12)  # -inf where a row has no allowed key


def test_more_splits_than_keys_leaves_empty_chunks_that_change_nothing():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    for n in (5, 6, 9, 20):  # ceil(5 / 6) = 1 key a chunk: chunks 5 and up are empty
        out, lse = split_kv_attention(q, k, v, n_splits=n)
        np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v)[0], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(lse, np.log(np.exp(_scores(q, k)).sum(-1)), rtol=1e-12)


def test_decoding_one_query_with_lower_right_alignment_matches_torch_causal_lower_right():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(1, 2, 1, 16)), rng.normal(size=(1, 2, 300, 16)), rng.normal(size=(1, 2, 300, 8))
    out, _ = split_kv_attention(q, k, v, causal_mask(1, 300, align="lower-right"), n_splits=7)
    t = [torch.from_numpy(a) for a in (q, k, v)]
    ref = F.scaled_dot_product_attention(*t, attn_mask=causal_lower_right(1, 300)).numpy()
    # float64 rounding of two implementations over 300 keys: (300 + 3) exps of 4 ulp and a sum of 300 terms
    # in each weight, about 2e-12 at most in the output, beyond the 1e-12 this test used to allow.
    np.testing.assert_allclose(out, ref, rtol=0, atol=2 * attention_error(q, k, v, mask=causal_mask(1, 300, align="lower-right")))


def test_upper_left_causal_for_one_query_against_a_cache_sees_only_the_first_key():
    """The bug lower-right alignment avoids: torch's is_causal=True is upper-left."""
    rng = np.random.default_rng(2)
    q, k, v = rng.normal(size=(1, 8)), rng.normal(size=(50, 8)), rng.normal(size=(50, 3))
    out, _ = split_kv_attention(q, k, v, is_causal=True, n_splits=4)
    # Exact on both sides: one allowed key gets weight exp(0) / 1 = 1 exactly, and 1 · v is v.
    np.testing.assert_allclose(out, v[:1], rtol=1e-15)
    np.testing.assert_allclose(_torch_sdpa(q, k, v, is_causal=True), v[:1], rtol=1e-15)


def _parts(rng, bounds, L=4, Ev=3, mask=None):
    q, k, v = rng.normal(size=(L, 5)), rng.normal(size=(bounds[-1], 5)), rng.normal(size=(bounds[-1], Ev))
    parts = [
        tiled_attention(q, k[a:b], v[a:b], None if mask is None else mask[:, a:b]) for a, b in zip(bounds, bounds[1:])
    ]
    full = scaled_dot_product_attention(q, k, v, mask)[0]
    return [o for o, _ in parts], [lse for _, lse in parts], full


def test_merging_parts_in_any_order_gives_the_full_output():
    outs, lses, full = _parts(np.random.default_rng(3), [0, 3, 4, 9, 12])
    for order in itertools.permutations(range(4)):
        out, _ = merge_attention_parts([outs[i] for i in order], [lses[i] for i in order])
        np.testing.assert_allclose(out, full, rtol=1e-12, atol=1e-15)


def test_merging_is_associative():
    outs, lses, full = _parts(np.random.default_rng(4), [0, 2, 7, 10])
    first = merge_attention_parts(outs[:2], lses[:2])
    out, lse = merge_attention_parts([first[0], outs[2]], [first[1], lses[2]])
    direct = merge_attention_parts(outs, lses)
    np.testing.assert_allclose(out, direct[0], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(lse, direct[1], rtol=1e-12)


def test_an_empty_chunk_has_lse_minus_inf_and_changes_nothing():
    rng = np.random.default_rng(5)
    mask = np.ones((4, 9), bool)
    mask[:, 3:6] = False  # the middle chunk is masked for every query
    outs, lses, full = _parts(rng, [0, 3, 6, 9], mask=mask)
    assert np.isneginf(lses[1]).all() and (outs[1] == 0).all()
    np.testing.assert_allclose(merge_attention_parts(outs, lses)[0], full, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("masked_lse, expected", [("-inf", -np.inf), ("+inf", np.inf)])
def test_a_row_empty_in_every_chunk_gives_zeros_and_the_chosen_lse(masked_lse, expected):
    outs = np.zeros((3, 2, 4))
    lses = np.full((3, 2), -np.inf)
    outs[0, 1], lses[0, 1] = 1.0, 0.5  # row 1 has one non-empty chunk
    out, lse = merge_attention_parts(outs, lses, masked_lse=masked_lse)
    assert (out[0] == 0).all() and lse[0] == expected
    np.testing.assert_allclose(out[1], 1.0)
    assert lse[1] == 0.5


def test_an_empty_chunk_with_garbage_output_still_contributes_nothing():
    out, _ = merge_attention_parts([[[2.0]], [[np.nan]]], [[0.3], [-np.inf]])
    assert out.tolist() == [[2.0]]


def test_lses_far_apart_do_not_overflow():
    outs = np.array([[[1.0, 0.0]], [[0.0, 1.0]]])
    out, lse = merge_attention_parts(outs, np.array([[1000.0], [1000.0 + math.log(3)]]))
    np.testing.assert_allclose(out, [[0.25, 0.75]], rtol=1e-12)
    np.testing.assert_allclose(lse, [1000.0 + math.log(4)], rtol=1e-15)
    out, _ = merge_attention_parts(outs, np.array([[-800.0], [800.0]]))
    np.testing.assert_allclose(out, [[0.0, 1.0]], atol=1e-300)


def test_the_merged_lse_is_the_logsumexp_of_the_parts():
    outs, lses, _ = _parts(np.random.default_rng(6), [0, 4, 11])
    _, lse = merge_attention_parts(outs, lses)
    np.testing.assert_allclose(lse, np.logaddexp(lses[0], lses[1]), rtol=1e-14)


def test_lses_broadcast_over_extra_batch_dimensions_of_the_outputs():
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(8, 4)), rng.normal(size=(2, 8, 5))  # v has 2 heads
    out, lse = split_kv_attention(q, k, v, chunk=3)
    assert out.shape == (2, 3, 5) and lse.shape == (3,)
    np.testing.assert_allclose(out, scaled_dot_product_attention(q, k, v)[0], rtol=1e-12, atol=1e-15)


def test_the_inputs_are_not_mutated():
    outs, lses, _ = _parts(np.random.default_rng(8), [0, 3, 7])
    outs, lses = np.stack(outs), np.stack(lses)
    before = outs.copy(), lses.copy()
    merge_attention_parts(outs, lses)
    np.testing.assert_array_equal(outs, before[0])
    np.testing.assert_array_equal(lses, before[1])


def test_an_lse_of_plus_inf_is_rejected_because_it_cannot_be_merged():
    with pytest.raises(ValueError, match="lses holds \\+inf"):
        merge_attention_parts(np.zeros((2, 3, 1)), np.array([[0.0, 1.0, np.inf], [0.0, 0.0, 0.0]]))


@pytest.mark.parametrize(
    "outputs, lses, error, match",
    [
        (np.zeros((2, 3, 4)), np.zeros((3, 3)), ValueError, "lses must have shape"),
        (np.zeros((2, 3, 4)), np.zeros((2, 3, 1)), ValueError, "lses must have shape"),
        (np.zeros((2, 3, 4)), np.zeros((2, 5)), ValueError, "do not broadcast"),
        (np.zeros((0, 3, 4)), np.zeros((0, 3)), ValueError, "outputs must have shape"),
        (np.zeros(3), np.zeros(3), ValueError, "outputs must have shape"),
        (np.array([["a"]]), np.zeros(1), TypeError, "outputs"),
        (np.zeros((2, 3, 4)), np.zeros((2, 3), complex), TypeError, "lses"),
    ],
)
def test_bad_merge_arguments_are_rejected_by_name(outputs, lses, error, match):
    with pytest.raises(error, match=match):
        merge_attention_parts(outputs, lses)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({}, ValueError, "exactly one of n_splits and chunk"),
        ({"n_splits": 2, "chunk": 3}, ValueError, "exactly one of n_splits and chunk"),
        ({"n_splits": 0}, ValueError, "n_splits"),
        ({"chunk": 1.5}, TypeError, "chunk"),
        ({"n_splits": 2, "masked_lse": "inf"}, ValueError, "masked_lse"),
        ({"n_splits": 2, "is_causal": True, "mask": np.ones((3, 5), bool)}, ValueError, "mask or is_causal"),
        ({"n_splits": 2, "block_k": 0}, ValueError, "block_k"),
    ],
)
def test_bad_split_arguments_are_rejected_by_name(kwargs, error, match):
    rng = np.random.default_rng(9)
    with pytest.raises(error, match=match):
        split_kv_attention(rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2)), **kwargs)


@pytest.mark.parametrize("split", [{"n_splits": 3}, {"chunk": 2}])
def test_no_keys_at_all_gives_zeros_and_minus_inf_and_no_queries_an_empty_result(split):
    q, k, v = np.ones((2, 3)), np.ones((0, 3)), np.ones((0, 4))
    out, lse = split_kv_attention(q, k, v, **split)
    assert (out == 0).all() and out.shape == (2, 4) and np.isneginf(lse).all()
    out, lse = split_kv_attention(np.ones((0, 3)), np.ones((5, 3)), np.ones((5, 2)), **split)
    assert out.shape == (0, 2) and lse.shape == (0,)
