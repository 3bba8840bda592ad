"""Rows of captured tensors inside mods (python/flexattn/_rows.py): a captured tensor indexed in all but its last
dimension, combined elementwise and reduced, as attention-gym's top-k (VSA) mask and latent-attention rope score
do. Traced text, values against numpy on the whole grid, and the errors."""
import numpy as np
import pytest

import flexattn
from flexattn import _native

RNG = np.random.default_rng(5)
TOPK = RNG.integers(0, 8, size=(2, 3, 4, 5)).astype(np.int64)  # [B, H, query tiles, k]
RQ = RNG.standard_normal((2, 3, 64, 8)).astype(np.float32)     # [B, H, Q, rope dim]
RK = RNG.standard_normal((2, 1, 128, 8)).astype(np.float32)    # [B, Hkv, KV, rope dim]


def grid():
    return (np.arange(2)[:, None, None, None], np.arange(3)[None, :, None, None], np.arange(64)[None, None, :, None],
            np.arange(128)[None, None, None, :])


def vsa(b, h, q, kv):  # attention-gym masks/vsa.py: is kv's tile among q's tile's top-k tiles
    return (TOPK[b, h, q // 16] == (kv // 16).unsqueeze(-1)).any(dim=-1)


def test_top_k_tile_mask_is_an_or_over_the_row():
    t = flexattn.trace(vsa)
    assert t.text == ("_t0 = q_idx // 16;\n_t1 = kv_idx // 16;\n"
                      "TOPK{i64}[b, h, _t0, 0] == _t1 || TOPK{i64}[b, h, _t0, 1] == _t1 || "
                      "(TOPK{i64}[b, h, _t0, 2] == _t1 || TOPK{i64}[b, h, _t0, 3] == _t1) || TOPK{i64}[b, h, _t0, 4] == _t1")
    b, h, q, kv = grid()
    rows = TOPK[:, :, np.arange(64) // 16][:, :, :, None, :]  # [B, H, Q, 1, k]
    want = (rows == (np.arange(128) // 16)[:, None]).any(-1)   # [B, H, Q, KV]
    assert np.array_equal(np.broadcast_to(t.evaluate(b=b, h=h, q_idx=q, kv_idx=kv), want.shape), want)


@pytest.mark.parametrize("name,mod,reference", [
    ("dot", lambda s, b, h, q, kv: s + np.dot(RQ[b, h, q], RK[b, 0, kv]),
     lambda s, Q, K: s + (Q * K).sum(-1)),
    ("product sum", lambda s, b, h, q, kv: s + (RQ[b, h, q] * RK[b, 0, kv]).sum(-1) * 0.5,
     lambda s, Q, K: s + (Q * K).sum(-1) * 0.5),
    ("amax amin mean abs neg", lambda s, b, h, q, kv: s + RQ[b, h, q].amax() - RK[b, 0, kv].amin(-1)
     - abs(-RK[b, 0, kv]).mean(),
     lambda s, Q, K: s + Q.max(-1) - K.min(-1) - np.abs(K).mean(-1)),
    ("any all of numbers", lambda s, b, h, q, kv: s + (RQ[b, h, q] > 1.5).any() * 1.0 + (RK[b, 0, kv] > -2.0).all() * 2.0,
     lambda s, Q, K: s + (Q > 1.5).any(-1) * 1.0 + (K > -2.0).all(-1) * 2.0),
    ("row with a row and a value", lambda s, b, h, q, kv: (s - RQ[b, h, q] * RK[b, 0, kv] * s).max(),
     lambda s, Q, K: (s[..., None] - Q * K * s[..., None]).max(-1)),
])
def test_row_arithmetic_and_reductions_match_numpy(name, mod, reference):
    b, h, q, kv = grid()
    s = RNG.standard_normal((2, 3, 64, 128))
    got = flexattn.trace(mod).evaluate(score=s, b=b, h=h, q_idx=q, kv_idx=kv)
    Q = RQ.astype(np.float64)[:, :, :, None, :]
    K = np.broadcast_to(RK.astype(np.float64)[:, :, None, :, :], (2, 3, 64, 128, 8))
    np.testing.assert_allclose(np.broadcast_to(got, s.shape), reference(s, Q, K), rtol=1e-12, atol=1e-12)


def test_traced_rows_read_back_in_the_native_ir():
    C = _native.load()
    if C is None:
        pytest.skip(f"flexattn._C not built: {_native.error()}")
    text = flexattn.trace(vsa).text
    assert C.Mod(text, "mask_mod") == C.Mod(C.Mod(text, "mask_mod").text, "mask_mod")


LONG = np.zeros((2, 300), dtype=np.float32)
BOOLS = np.array([[True, True, False], [False, False, True]])
EMPTY = np.zeros((2, 0), dtype=np.float32)


def too_long(s, b, h, q, kv):
    return s + LONG[b].sum()


def different_lengths(s, b, h, q, kv):
    return s + np.dot(RQ[b, h, q], TOPK[b, h, 0])


def max_with_dim(s, b, h, q, kv):
    return s + RQ[b, h, q].max(dim=-1)


def sum_over_dim_1(s, b, h, q, kv):
    return s + RQ[b, h, q].sum(dim=1)


def unsqueezed_row(s, b, h, q, kv):
    return s + RQ[b, h, q].unsqueeze(-1).sum()


def row_as_bool(s, b, h, q, kv):
    return s if RQ[b, h, q] > 0 else -s


def whole_tensor(s, b, h, q, kv):
    return s + RQ[b].sum()


def unsqueeze_dim_2(s, b, h, q, kv):
    return s + (q + 1).unsqueeze(2)


def mean_of_ints(s, b, h, q, kv):
    return s + TOPK[b, h, 0].mean()


def keepdim(s, b, h, q, kv):
    return s + RQ[b, h, q].sum(-1, keepdim=True)


def forgot_an_index(s, b, h, q, kv):
    return s + RQ[b, h, q]


# The patterns sit on other lines than the mods: the messages quote the mod's source line.
@pytest.mark.parametrize("mod,message", [
    (too_long, r"a row of 300 elements of captured tensor 'LONG' \(indexed in all but its last dimension\) .* "
               r"index it fully, e\.g\. LONG\[h, q_idx\]; rows that a mod combines or reduces are unrolled"),
    (different_lengths, r"rows of 8 and 5 elements combined elementwise"),
    (max_with_dim, r"\.max\(dim=-1\) of a row of captured tensor 'RQ' .* use \.amax\(dim\) for the values"),
    (sum_over_dim_1, r"reduction over dim=1 of a row .* a row has one dimension"),
    (unsqueezed_row, r"\.unsqueeze on a row of captured tensor 'RQ' .* rows stay one-dimensional"),
    (row_as_bool, r"a row of captured tensor 'RQ' used as a Python bool .* reduce it first"),
    (whole_tensor, r"unsupported operation '\.sum' on captured tensor 'RQ' .* index it with traced indices first"),
    (unsqueeze_dim_2, r"unsqueeze\(dim=2\) of a mod value .* a mod value is 0-d"),
    (mean_of_ints, r"mean of a row of captured tensor 'TOPK' \(i64\) .* torch refuses mean on integers"),
    (keepdim, r"keepdim=True in a reduction of a row .* leave keepdim off"),
    (forgot_an_index, r"score_mod 'forgot_an_index' returned a row of 8 values of captured tensor 'RQ' \(indexed in all "
                      r"but its last dimension\): index it fully"),
])
def test_row_errors_say_what_to_do(mod, message):
    with pytest.raises(flexattn.TraceError, match=message):
        flexattn.trace(mod)


def test_reductions_take_torchs_result_types():
    # torch: sum of bools or integers is int64 (a count, not an or); any / all / sum of an empty row are False /
    # True / 0; torch.max(row, other) is elementwise.
    t = flexattn.trace(lambda b, h, q, kv: BOOLS[b].sum() >= 2)
    assert t.text == "i64(BOOLS{bool}[b, 0]) + i64(BOOLS{bool}[b, 1]) + i64(BOOLS{bool}[b, 2]) >= 2"
    assert list(t.evaluate(b=np.arange(2), h=0, q_idx=0, kv_idx=0)) == [True, False]
    assert flexattn.trace(lambda s, b, h, q, kv: s + TOPK[b, h, 0].sum(dtype=np.int32)).text.count("i32(") == 5
    assert flexattn.trace(lambda s, b, h, q, kv: s + EMPTY[b].sum()).text == "score + 0.0"
    assert flexattn.trace(lambda b, h, q, kv: EMPTY[b].any() | (q >= kv)).text == "q_idx >= kv_idx"
    elementwise = flexattn.trace(lambda s, b, h, q, kv: s + RQ[b, h, q].max(RK[b, 0, kv]).sum())
    assert elementwise.text.count("max(RQ[b, h, q_idx, ") == 8
    assert flexattn.trace(lambda s, b, h, q, kv: s + RQ[b, h, q][3]).text == "score + RQ[b, h, q_idx, 3]"
    via_ops = flexattn.trace(lambda s, b, h, q, kv: s + flexattn.ops.exp(RQ[b, h, q]).sum())
    assert via_ops.text.count("exp(RQ[b, h, q_idx, ") == 8
    assert flexattn.trace(lambda s, b, h, q, kv: s + np.exp(RQ[b, h, q]).sum()).text == via_ops.text


def test_tensor_methods_and_matmul_on_rows():
    """row.abs(), row.exp(), row.clamp(min=0) and row @ row raised raw AttributeError / TypeError (no mod, no line)."""
    b, h, q, kv = 1, 2, 5, 7

    def both(expr):
        return flexattn.trace(lambda s, b, h, q, kv: s + expr(b, h, q, kv)).evaluate(0.0, b, h, q, kv).item()

    rq, rk = RQ[b, h, q].astype(np.float64), RK[b, 0, kv].astype(np.float64)
    assert both(lambda b, h, q, kv: (RQ[b, h, q] - RK[b, 0, kv]).abs().amax()) == pytest.approx(np.abs(rq - rk).max())
    assert both(lambda b, h, q, kv: (RQ[b, h, q] * RK[b, 0, kv]).exp().sum()) == pytest.approx(np.exp(rq * rk).sum(),
                                                                                               rel=1e-6)
    assert both(lambda b, h, q, kv: RQ[b, h, q].abs().sum()) == pytest.approx(np.abs(rq).sum(), rel=1e-6)
    assert both(lambda b, h, q, kv: RQ[b, h, q] @ RK[b, 0, kv]) == pytest.approx(rq @ rk, rel=1e-6)
    assert both(lambda b, h, q, kv: (RQ[b, h, q] * 2) @ RK[b, 0, kv]) == pytest.approx(2 * rq @ rk, rel=1e-6)
    with pytest.raises(AttributeError, match="a row of captured tensor 'RQ' has no method 'frobnicate'"):
        flexattn.trace(lambda s, b, h, q, kv: s + RQ[b, h, q].frobnicate())
