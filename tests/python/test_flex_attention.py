"""flex_attention on numpy arrays against the naive formula softmax(score_mod(q k^T * scale) | mask) v."""
import math
import warnings

import numpy as np
import pytest

import flexattn
from flexattn import AuxRequest, BlockMask, flex_attention, ops

RNG = np.random.default_rng(0)


def create_block_mask(*args, **kwargs):
    """numpy arrays even when another test module imported torch (device=None would then mean torch)."""
    return flexattn.create_block_mask(*args, device="numpy", **kwargs)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def naive(q, k, v, score=None, mask=None, scale=None, p_dtype=None):
    """float64 reference; score(s, b, h, i, j) and mask [B, H, L, S] (bool) are dense numpy."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, Hq, L, E = q.shape
    G = Hq // k.shape[1]
    k, v = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    k, v = np.broadcast_to(k, (B,) + k.shape[1:]), np.broadcast_to(v, (B,) + v.shape[1:])
    s = np.einsum("bhle,bhse->bhls", q, k) * (1 / math.sqrt(E) if scale is None else scale)
    b, h, i, j = (np.arange(B)[:, None, None, None], np.arange(Hq)[None, :, None, None],
                  np.arange(L)[None, None, :, None], np.arange(s.shape[-1])[None, None, None, :])
    with np.errstate(all="ignore"):
        if score is not None:
            s = np.broadcast_to(score(s, b, h, i, j), s.shape)
        if mask is not None:
            s = np.where(mask, s, -np.inf)
        m = s.max(-1, keepdims=True)
        shift = np.where(m == -np.inf, 0, m)
        p = np.exp(s - shift)
        l = p.sum(-1, keepdims=True)
        p = np.where(l == 0, 0, p / l)
    if p_dtype is not None:
        p = p.astype(p_dtype).astype(np.float64)
    lse = np.where(l[..., 0] == 0, -np.inf, shift[..., 0] + np.log(np.where(l[..., 0] == 0, 1, l[..., 0])))
    return p @ v, lse, m[..., 0]


def dense_mask(mod, B, H, L, S):
    return flexattn.create_mask(mod, B, H, L, S, device="numpy")


def test_plain_attention_float64_is_exact():
    q, k, v = rand(2, 3, 37, 16, dtype=np.float64), rand(2, 3, 53, 16, dtype=np.float64), rand(2, 3, 53, 8,
                                                                                            dtype=np.float64)
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest(lse=True, max_scores=True))
    ref, lse, mx = naive(q, k, v)
    assert out.dtype == np.float64 and out.shape == (2, 3, 37, 8)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-13)
    np.testing.assert_allclose(aux.lse, lse, rtol=1e-13)
    np.testing.assert_allclose(aux.max_scores, mx, rtol=1e-13)


def test_rows_of_huge_negative_scores_are_still_a_softmax():
    """Scores near finfo.min (an additive padding mask) made lse = max + log(sum) drop log(sum): P = exp(s - lse)
    summed to S, so the output was the sum of V instead of its mean (torch: the mean)."""
    q, k, v = rand(1, 2, 5, 16, dtype=np.float64), rand(1, 2, 7, 16, dtype=np.float64), rand(1, 2, 7, 4,
                                                                                            dtype=np.float64)
    for shift in (-1e15, -1e20, -3.0e38):
        out = flex_attention(q, k, v, score_mod=lambda s, b, h, i, j: s * 1e-30 + shift)
        np.testing.assert_allclose(out, np.broadcast_to(v.mean(2, keepdims=True), out.shape), rtol=0, atol=1e-12)


def test_softcap_with_causal_block_mask_non_multiple_lengths():
    cap = 5.0

    def softcap(score, b, h, q_idx, kv_idx):
        return cap * ops.tanh(score / cap)

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx
    q, k, v = rand(1, 2, 100, 32), rand(1, 2, 100, 32), rand(1, 2, 100, 32)
    bm = create_block_mask(causal, 1, 1, 100, 100, BLOCK_SIZE=32)
    out, lse = flex_attention(q, k, v, score_mod=softcap, block_mask=bm, return_aux=AuxRequest(lse=True))
    ref, ref_lse, _ = naive(q, k, v, score=lambda s, *_: cap * np.tanh(s / cap), mask=dense_mask(causal, 1, 1, 100, 100),
                            p_dtype=np.float32)
    assert out.dtype == np.float32 and lse.lse.dtype == np.float32
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)
    np.testing.assert_allclose(lse.lse, ref_lse, rtol=1e-6)


def test_captured_bias_buffer_document_and_sliding_window():
    L = 90
    doc = np.repeat(np.arange(3), [20, 50, 20]).astype(np.int64)
    bias = rand(4, 2 * L)

    def rel_bias(score, b, h, q_idx, kv_idx):
        return score + bias[h, q_idx - kv_idx + L]

    mask = flexattn.and_masks(lambda b, h, q, kv: doc[q] == doc[kv], lambda b, h, q, kv: (q - kv < 16) & (kv - q < 16))
    q, k, v = rand(2, 4, L, 16), rand(2, 4, L, 16), rand(2, 4, L, 16)
    bm = create_block_mask(mask, None, None, L, L, BLOCK_SIZE=16)
    out = flex_attention(q, k, v, score_mod=rel_bias, block_mask=bm)
    ref, _, _ = naive(q, k, v, score=lambda s, b, h, i, j: s + bias[h, i - j + L], mask=dense_mask(mask, 1, 1, L, L),
                      p_dtype=np.float32)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)


def test_gqa_kv_batch_broadcast_and_query_head_index():
    def per_head(score, b, h, q_idx, kv_idx):
        return score * (h + 1) + b

    q, k, v = rand(3, 4, 20, 8), rand(1, 2, 24, 8), rand(1, 2, 24, 12)
    bm = create_block_mask(lambda b, h, q, kv: kv <= q + b, 3, 1, 20, 24, BLOCK_SIZE=8)
    out = flex_attention(q, k, v, score_mod=per_head, block_mask=bm, enable_gqa=True, scale=0.3)
    ref, _, _ = naive(q, k, v, score=lambda s, b, h, i, j: s * (h + 1) + b,
                      mask=dense_mask(lambda b, h, q, kv: kv <= q + b, 3, 1, 20, 24), scale=0.3, p_dtype=np.float32)
    assert out.shape == (3, 4, 20, 12)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)


def test_fully_masked_rows_give_zero_output_and_minus_inf_stats():
    mask = lambda b, h, q, kv: q >= 40  # noqa: E731
    q, k, v = rand(1, 1, 64, 8), rand(1, 1, 64, 8), rand(1, 1, 64, 8)
    bm = create_block_mask(mask, 1, 1, 64, 64, BLOCK_SIZE=16)
    out, aux = flex_attention(q, k, v, block_mask=bm, return_aux=AuxRequest(lse=True, max_scores=True))
    assert not np.isnan(out).any()
    np.testing.assert_array_equal(out[0, 0, :40], 0)
    assert np.all(aux.lse[0, 0, :40] == -np.inf) and np.all(aux.max_scores[0, 0, :40] == -np.inf)
    assert np.all(np.isfinite(aux.lse[0, 0, 40:]))


def test_score_mod_garbage_at_masked_positions_does_not_leak():
    def log_dist(score, b, h, q_idx, kv_idx):
        return score + ops.log(ops.cast(q_idx - kv_idx, "float32"))  # NaN where kv > q

    causal = lambda b, h, q, kv: q > kv  # noqa: E731
    q, k, v = rand(1, 1, 33, 8), rand(1, 1, 33, 8), rand(1, 1, 33, 8)
    out = flex_attention(q, k, v, score_mod=log_dist, block_mask=create_block_mask(causal, 1, 1, 33, 33, BLOCK_SIZE=8))
    assert not np.isnan(out).any()


def test_float16_rounds_p_before_pv_like_torch():
    q, k, v = rand(1, 2, 40, 16, dtype=np.float16), rand(1, 2, 40, 16, dtype=np.float16), rand(1, 2, 40, 16,
                                                                                            dtype=np.float16)
    out, lse = flex_attention(q, k, v, return_aux=AuxRequest(lse=True))
    ref, ref_lse, _ = naive(q, k, v, p_dtype=np.float16)
    assert out.dtype == np.float16 and lse.lse.dtype == np.float32
    np.testing.assert_array_equal(out, ref.astype(np.float16))
    np.testing.assert_allclose(lse.lse, ref_lse, rtol=1e-6)


def test_skipped_tiles_are_masked_and_full_tiles_skip_the_mask_mod():
    # 2x2 tiles of 16: tile (0,0) full, (1,1) partial, (1,0) and (0,1) skipped; the mask_mod says False on
    # the full tile's diagonal but full tiles never evaluate it (kernel semantics).
    never_diag = lambda b, h, q, kv: q != kv  # noqa: E731
    bm = BlockMask.from_kv_blocks(np.array([[[0, 1]]], np.int32), np.array([[[[0, 1], [1, 0]]]], np.int32),
                                  np.array([[[1, 0]]], np.int32), np.array([[[[0, 1], [0, 1]]]], np.int32),
                                  BLOCK_SIZE=16, mask_mod=never_diag)
    q, k, v = rand(1, 1, 32, 8), rand(1, 1, 32, 8), rand(1, 1, 32, 8)
    out = flex_attention(q, k, v, block_mask=bm)
    i, j = np.arange(32)[:, None], np.arange(32)[None, :]
    keep = ((i < 16) & (j < 16)) | ((i >= 16) & (j >= 16) & (i != j))
    ref, _, _ = naive(q, k, v, mask=keep[None, None], p_dtype=np.float32)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)


def test_dlpack_producer_inputs():
    class Wrapped:
        def __init__(self, a):
            self.a, self.shape, self.dtype = a, a.shape, a.dtype

        def __dlpack__(self, **kwargs):
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    q, k, v = rand(1, 1, 8, 4), rand(1, 1, 8, 4), rand(1, 1, 8, 4)
    out = flex_attention(Wrapped(q), Wrapped(k), Wrapped(v))
    np.testing.assert_allclose(out, flex_attention(q, k, v), rtol=0, atol=0)


def test_return_variants():
    q, k, v = rand(1, 1, 8, 4), rand(1, 1, 8, 4), rand(1, 1, 8, 4)
    out, aux = flex_attention(q, k, v, return_aux=AuxRequest())
    assert aux.lse is None and aux.max_scores is None
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        out2, lse = flex_attention(q, k, v, return_lse=True)
    np.testing.assert_array_equal(out, out2)
    assert lse.shape == (1, 1, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flex_attention(q, k, v, kernel_options={"BACKEND": "AUTO", "BLOCK_M": 64})


@pytest.mark.parametrize("args,kwargs,exc,pattern", [
    ((rand(1, 1, 8, 4), rand(1, 1, 8, 4, dtype=np.float64), rand(1, 1, 8, 4)), {}, ValueError,
     "Expected query, key, and value to have the same dtype, but got query.dtype: float32, key.dtype: float64"),
    ((rand(1, 8, 4), rand(1, 8, 4), rand(1, 8, 4)), {}, NotImplementedError, "NYI: query, key, and value must be 4D"),
    ((rand(1, 1, 8, 4), rand(1, 1, 8, 5), rand(1, 1, 8, 4)), {}, ValueError,
     "Expect query and key/value to have the same embedding dimension but got E=4 and E=5"),
    ((rand(1, 4, 8, 4), rand(1, 2, 8, 4), rand(1, 2, 8, 4)), {}, ValueError,
     "same number of heads but got Hq=4 and Hkv=2. Try setting enable_gqa=True"),
    ((rand(1, 3, 8, 4), rand(1, 2, 8, 4), rand(1, 2, 8, 4)), {"enable_gqa": True}, ValueError,
     "multiple of kv heads for GQA but got Hq=3 and Hkv=2"),
    ((rand(2, 1, 8, 4), rand(1, 1, 8, 4), rand(1, 1, 8, 4)), {}, ValueError,
     "same batch size, or non-none block_mask, but got block_mask=None, Bq=2, and Bkv=1"),
    ((rand(1, 1, 8, 4).astype(np.int32),) * 3, {}, ValueError, "must be float16, bfloat16, float32 or float64, got int32"),
    ((rand(1, 1, 8, 4),) * 3, {"return_lse": True, "return_aux": AuxRequest(lse=True)}, ValueError,
     "Cannot specify both return_lse and return_aux"),
    ((rand(1, 1, 8, 4),) * 3, {"kernel_options": {"OUTPUT_LOGSUMEXP": True}}, ValueError,
     "OUTPUT_LOGSUMEXP is decided by flex_attention"),
    ((rand(1, 1, 8, 4),) * 3, {"kernel_options": {"BACKEND": "CUDNN"}}, ValueError, "BACKEND must be one of AUTO"),
    ((rand(1, 1, 8, 4),) * 3, {"kernel_options": {"OUTPUT_MAX": True}}, ValueError,
     "OUTPUT_MAX is decided by flex_attention (return_aux)"),
    ((rand(1, 1, 8, 4),) * 3, {"kernel_options": {"BACKEND": "AUTO", "FORCE_USE_FLEX_ATTENTION": True}}, RuntimeError,
     "BACKEND cannot be combined with legacy FORCE_USE_FLEX_ATTENTION"),
    ((rand(1, 1, 8, 4),) * 3, {"scale": float("nan")}, ValueError, "scale: expected a finite number or None, got nan"),
    ((rand(1, 1, 8, 4),) * 3, {"scale": float("-inf")}, ValueError, "scale: expected a finite number or None, got -inf"),
    (([1.0], rand(1, 1, 8, 4), rand(1, 1, 8, 4)), {}, TypeError, "query must be a numpy array, a torch tensor or a DLPack"),
    ((rand(1, 1, 8, 4),) * 3, {"score_mod": lambda b, h, q, kv: q >= kv}, TypeError,
     "expected a score_mod, got mask_mod"),
])
def test_argument_errors(args, kwargs, exc, pattern):
    with pytest.raises(exc, match=pattern.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        flex_attention(*args, **kwargs)


def test_block_mask_length_mismatch_messages():
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 64, 64, BLOCK_SIZE=16)
    q = rand(1, 1, 80, 8)
    with pytest.raises(ValueError, match="created for a smaller length than you're using it for"):
        flex_attention(q, q, q, block_mask=bm)
    q = rand(1, 1, 48, 8)
    with pytest.raises(ValueError, match=r"block_mask._adjust\(q_len, kv_len\)"):
        flex_attention(q, q, q, block_mask=bm)
    out = flex_attention(q, q, q, block_mask=bm._adjust(48, 48))
    assert out.shape == (1, 1, 48, 8)


def test_sliced_block_mask_needs_a_new_mask_mod():
    bm = create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 64, 64, BLOCK_SIZE=16)
    row = bm[:, :, 2]
    row.seq_lengths = (1, 64)
    q, kv = rand(1, 1, 1, 8), rand(1, 1, 64, 8)
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        flex_attention(q, kv, kv, block_mask=row)
    pos = 40
    row.mask_mod = lambda b, h, q_idx, kv_idx: q_idx + pos >= kv_idx
    out = flex_attention(q, kv, kv, block_mask=row)
    ref, _, _ = naive(q, kv, kv, mask=(np.arange(64) <= pos)[None, None, None, :], p_dtype=np.float32)
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)


def test_a_mask_with_other_batch_or_heads_wraps_on_numpy_arrays_too():
    """Row (b % B_mask, h % H_mask), as torch's kernels and flexattn's torch path read it (it was refused here)."""
    def per_bh(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & ((q_idx - kv_idx) < 20 * ((b % 2) + 1) + 7 * (h % 3))

    rng = np.random.default_rng(5)
    q = rng.standard_normal((3, 6, 100, 8))
    wrapped = flexattn.create_block_mask(per_bh, 2, 3, 100, 100, BLOCK_SIZE=16)
    full = flexattn.create_block_mask(per_bh, 3, 6, 100, 100, BLOCK_SIZE=16)
    np.testing.assert_array_equal(flexattn.flex_attention(q, q, q, block_mask=wrapped),
                                  flexattn.flex_attention(q, q, q, block_mask=full))
