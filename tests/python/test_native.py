"""The native bridge flexattn._C on numpy arrays: IR handles, the cpu backend (forward, backward), the CPU
BlockMask builder, and the error messages. Skipped when the extension is not built (CI builds it and sets
FLEXATTN_REQUIRE_NATIVE=1, so a broken build fails here instead of skipping)."""
import math

import numpy as np
import pytest

import flexattn
from flexattn import _native, _reference, ops

C = _native.load()
pytestmark = pytest.mark.skipif(C is None, reason=f"flexattn._C not built: {_native.error()}")
RNG = np.random.default_rng(1)


def rand(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def dense_oracle(q, k, v, score=None, mask=None, scale=None):
    """float64 softmax(score(q k^T * scale) | mask) v with GQA / batch broadcast, from the definition."""
    B, Hq, L, E = q.shape
    G = Hq // k.shape[1]
    k = np.broadcast_to(np.repeat(k, G, 1), (B, Hq) + k.shape[2:])
    v = np.broadcast_to(np.repeat(v, G, 1), (B, Hq) + v.shape[2:])
    s = np.einsum("bhle,bhse->bhls", q, k) * (1 / math.sqrt(E) if scale is None else scale)
    grid = np.ix_(range(B), range(Hq), range(L), range(k.shape[2]))
    with np.errstate(all="ignore"):
        if score is not None:
            s = np.broadcast_to(score(s, *grid), s.shape)
        if mask is not None:
            s = np.where(np.broadcast_to(mask(*grid), s.shape), s, -np.inf)
        m = s.max(-1)
        shift = np.where(m == -np.inf, 0, m)
        p = np.exp(s - shift[..., None])
        den = p.sum(-1)
        p = np.where(den[..., None] == 0, 0, p / np.where(den == 0, 1, den)[..., None])
    lse = np.where(den == 0, -np.inf, shift + np.log(np.where(den == 0, 1, den)))
    return p @ v, lse, m


# ---- IR handles -------------------------------------------------------------------------------------
def test_mod_parses_prints_and_describes_itself():
    m = C.Mod("score + bias{bf16}[h, q_idx - kv_idx] * alpha", "score_mod")
    assert m.text == "score + bias{bf16}[h, q_idx - kv_idx] * alpha"
    assert m.kind == "score_mod" and m.reads_score
    assert m.buffers == [("bias", "bf16", 2)] and m.scalar_names == ["alpha"]
    assert C.Mod(m.text, "score_mod") == m and hash(C.Mod(m.text, "score_mod")) == hash(m)


def test_structural_key_ignores_literal_values_but_text_keeps_them():
    a, b = C.Mod("20.0 * tanh(score / 20.0)", "score_mod"), C.Mod("30.0 * tanh(score / 30.0)", "score_mod")
    assert a.structural_key == b.structural_key and a.structural_hash == b.structural_hash
    assert a.text != b.text and a != b


def test_parse_options_give_buffer_and_scalar_types():
    m = C.Mod("doc[q_idx] == doc[kv_idx] && q_idx >= kv_idx - w", "mask_mod", {"doc": "int32"}, {"w": "i64"})
    assert m.buffers == [("doc", "i32", 1)] and m.scalar_names == ["w"]
    with pytest.raises(C.Error, match=r"buffer_dtypes\['doc'\]: unknown dtype 'int3'"):
        C.Mod("doc[q_idx] == 0", "mask_mod", {"doc": "int3"})


def test_renamed_renames_scalars_and_buffers_only():
    m = C.Mod("score * off + bb[h] + h", "score_mod").renamed({"off": "off_m", "bb": "b2", "h": "ignored"})
    assert m.text == "score * off_m + b2[h] + h"


@pytest.mark.parametrize("text,kind,message", [
    ("score +", "score_mod", "line 1, column 8: expected an expression"),
    ("q_idx >= kv_idx", "score_mask", "kind: expected 'score_mod' or 'mask_mod', got 'score_mask'"),
    ("score * 2.0", "mask_mod", "mask_mod"),
    ("q_idx - kv_idx", "mask_mod", "mask_mod"),
])
def test_mod_errors_name_the_problem(text, kind, message):
    with pytest.raises(C.Error, match=message) as e:
        C.Mod(text, kind)
    assert isinstance(e.value, ValueError)


def test_variant_checks_gradient_buffers():
    score = C.Mod("score + bias[h] + idx{i32}[q_idx]", "score_mod")
    mask = C.Mod("bias[h] > 0.0", "mask_mod")
    v = C.Variant(score, None, ["bias"])
    assert v.grad_buffers == ["bias"] and "bias" in repr(v)
    assert C.Variant(score, None).key != C.Variant(score, None, ["bias"]).key
    for grads, message in ((["idx"], "'idx' is not a floating-point buffer read by the score_mod"),
                           (["nope"], "'nope' is not a floating-point buffer read by the score_mod"),
                           (["bias", "bias"], "'bias' is listed twice")):
        with pytest.raises(C.Error, match=message):
            C.Variant(score, None, grads)
    with pytest.raises(C.Error, match="'bias' is read by the mask_mod"):
        C.Variant(score, mask, ["bias"])
    with pytest.raises(C.Error, match="score_mod: got a mask_mod"):
        C.Variant(mask, None)


# ---- cpu backend --------------------------------------------------------------------------------------
def test_forward_matches_the_definition_with_buffers_scalars_gqa_and_broadcast():
    q, k, v = rand(3, 4, 37, 16), rand(1, 2, 53, 16), rand(1, 2, 53, 8)
    bias = rand(4, 37 + 53).astype(np.float32)
    score = C.Mod("score * alpha + bias[h, q_idx - kv_idx + 52]", "score_mod")
    mask = C.Mod("q_idx + off >= kv_idx", "mask_mod", scalar_types={"off": "i32"})
    out, lse, mx = C.cpu_forward(C.Variant(score, mask), q, k, v, scalars={"alpha": 0.5, "off": 16},
                                 buffers={"bias": bias}, scale=0.3)
    ref, ref_lse, ref_max = dense_oracle(
        q, k, v, score=lambda s, b, h, i, j: s * 0.5 + bias[h, i - j + 52].astype(np.float64),
        mask=lambda b, h, i, j: i + 16 >= j, scale=0.3)
    assert out.dtype == np.float64 and out.shape == (3, 4, 37, 8) and lse.shape == (3, 4, 37)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-12)
    np.testing.assert_allclose(mx, ref_max, rtol=1e-12)


def test_fully_masked_rows_give_zero_out_and_minus_inf_lse():
    q, k, v = rand(1, 1, 9, 8), rand(1, 1, 9, 8), rand(1, 1, 9, 8)
    out, lse, mx = C.cpu_forward(C.Variant(None, C.Mod("q_idx >= 4 && kv_idx <= q_idx", "mask_mod")), q, k, v)
    assert np.all(out[0, 0, :4] == 0) and np.all(lse[0, 0, :4] == -np.inf) and np.all(mx[0, 0, :4] == -np.inf)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(lse[0, 0, 4:]))
    dq, dk, dv, _ = C.cpu_backward(C.Variant(None, C.Mod("q_idx >= 4 && kv_idx <= q_idx", "mask_mod")), q, k, v,
                                   rand(1, 1, 9, 8))
    assert np.all(np.isfinite(dq)) and np.all(dq[0, 0, :4] == 0)


def test_block_mask_tuple_applies_partial_and_full_tiles():
    L = 70
    causal = C.Mod("q_idx >= kv_idx", "mask_mod")
    arrays = C.build_block_mask(causal, 1, 1, L, L, 16, 32)
    q, k, v = rand(2, 2, L, 16), rand(2, 2, L, 16), rand(2, 2, L, 16)
    bm = (L, L, 16, 32, arrays[0], arrays[1], arrays[2], arrays[3])
    out, lse, _ = C.cpu_forward(C.Variant(None, causal), q, k, v, block_mask=bm)
    ref, ref_lse, _ = dense_oracle(q, k, v, mask=lambda b, h, i, j: i >= j)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-12)
    # Tiles not listed are skipped even where the mask_mod says True: an all-True mask_mod with the
    # causal block lists keeps exactly the causal tiles.
    out2, _, _ = C.cpu_forward(C.Variant(None, None), q, k, v, block_mask=bm)
    tiles = np.zeros((L, L), bool)
    for r in range(arrays[0].shape[2]):
        for c in list(arrays[1][0, 0, r, :arrays[0][0, 0, r]]) + list(arrays[3][0, 0, r, :arrays[2][0, 0, r]]):
            tiles[r * 16:(r + 1) * 16, c * 32:(c + 1) * 32] = True
    ref2, _, _ = dense_oracle(q, k, v, mask=lambda b, h, i, j: tiles[i, j])
    np.testing.assert_allclose(out2, ref2, rtol=0, atol=1e-12)


def numeric_grad(f, x, eps=1e-6):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + eps
        fp = f()
        x[i] = old - eps
        fm = f()
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


def test_backward_matches_finite_differences_including_buffer_and_lse_gradients():
    q, k, v = rand(1, 2, 5, 4), rand(1, 1, 6, 4), rand(1, 1, 6, 3)
    bias = rand(2, 6).astype(np.float32)
    dout, dlse = rand(1, 2, 5, 3), rand(1, 2, 5)
    score = C.Mod("score * 1.5 + bias[h, kv_idx] * score", "score_mod")
    mask = C.Mod("kv_idx <= q_idx + 1", "mask_mod")
    variant = C.Variant(score, mask, ["bias"])

    def loss():
        out, lse, _ = C.cpu_forward(variant, q, k, v, buffers={"bias": bias.astype(np.float32)})
        return float((out * dout).sum() + (lse * dlse).sum())

    dq, dk, dv, grads = C.cpu_backward(variant, q, k, v, dout, dlse, buffers={"bias": bias})
    for x, g in ((q, dq), (k, dk), (v, dv)):
        np.testing.assert_allclose(g, numeric_grad(loss, x), rtol=1e-5, atol=1e-7)
    b64 = bias.astype(np.float64)

    def loss_b():
        out, lse, _ = C.cpu_forward(variant, q, k, v, buffers={"bias": b64.astype(np.float32)})
        return float((out * dout).sum() + (lse * dlse).sum())
    # float32 buffer: the perturbation must survive the cast, so use a larger step.
    np.testing.assert_allclose(grads["bias"], numeric_grad(loss_b, b64, eps=1e-2), rtol=2e-3, atol=1e-4)
    assert set(grads) == {"bias"} and grads["bias"].shape == bias.shape


def test_inputs_of_any_float_dtype_and_layout_are_read_exactly():
    q = rand(1, 2, 8, 16)
    ref, _, _ = C.cpu_forward(C.Variant(None, None), q, q, q)
    for dt in (np.float16, np.float32):
        x = q.astype(dt)
        out, _, _ = C.cpu_forward(C.Variant(None, None), x, x, x)
        exact, _, _ = C.cpu_forward(C.Variant(None, None), *(x.astype(np.float64),) * 3)
        np.testing.assert_array_equal(out, exact)
    t = np.asfortranarray(q)  # non-contiguous: converted on the way in
    np.testing.assert_array_equal(C.cpu_forward(C.Variant(None, None), t, t, t)[0], ref)


@pytest.mark.parametrize("call,message", [
    (lambda v, q: C.cpu_forward(v, q.astype(np.int32), q, q), r"q must have a float dtype \(f16, bf16, f32, f64\); got i32"),
    (lambda v, q: C.cpu_forward(v, q.astype(np.uint8), q, q), "query: unsupported dtype uint8"),
    (lambda v, q: C.cpu_forward(v, q, q[..., :8], q), r"k head dim \(k.shape\[3\]\) must equal the q head dim D=16"),
    (lambda v, q: C.cpu_forward(v, q, q, q, threads=-1), "threads: must be >= 0"),
    (lambda v, q: C.cpu_forward(C.Variant(C.Mod("score * s", "score_mod"), None), q, q, q),
     "scalar 's' is used by the mod but no value was given"),
    (lambda v, q: C.cpu_forward(C.Variant(C.Mod("score + t[h]", "score_mod"), None), q, q, q,
                                buffers={"t": np.zeros(2)}), "buffer 't': float64 buffers are not supported"),
    (lambda v, q: C.cpu_forward(v, q, q, q, block_mask=(8, 8, 4, 4, np.zeros((1, 1, 2), np.int32),
                                                        np.zeros((1, 1, 2), np.int32), None, None)),
     "block_mask: kv_indices must be \\[B, H, nq, nkv\\]"),
    (lambda v, q: C.cpu_forward(v, q, q, q, block_mask=(8, 8, 4, 4, np.full((1, 1, 2), 3, np.int32),
                                                        np.zeros((1, 1, 2, 2), np.int32), None, None)),
     "kv_num_blocks"),
])
def test_cpu_errors_name_the_argument(call, message):
    with pytest.raises(C.Error, match=message):
        call(C.Variant(None, None), rand(1, 1, 8, 16))


# ---- the numpy path through TracedMods ----------------------------------------------------------------
def test_block_mask_builder_matches_the_python_builder():
    doc = np.repeat(np.arange(5), 23)[:100].astype(np.int32)

    def mask(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx) | (h == b)
    py = flexattn.create_block_mask(mask, 2, 3, 100, 100, device="numpy", BLOCK_SIZE=(16, 32))
    native = _native.build_block_mask_numpy(flexattn.trace(mask), 2, 3, 100, 100, 16, 32)
    fields = ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
              "full_q_num_blocks", "full_q_indices")
    for name, arr in zip(fields, native):
        assert arr.dtype == np.int32
        np.testing.assert_array_equal(arr, getattr(py, name), err_msg=name)


def test_cpu_forward_numpy_with_traced_mods_and_clashing_names():
    offset = 3
    slopes = np.linspace(0.1, 0.8, 4).astype(np.float32)

    def score(s, b, h, q_idx, kv_idx):
        return s + slopes[h] * (kv_idx - q_idx) + offset

    def make_mask(offset):  # its own 'offset', another value: renamed in the merged variant
        def mask(b, h, q_idx, kv_idx):
            return q_idx + offset >= kv_idx
        return mask
    q, k, v = rand(2, 4, 40, 16, dtype=np.float32), rand(2, 4, 40, 16, dtype=np.float32), rand(2, 4, 40, 16,
                                                                                               dtype=np.float32)
    bm = flexattn.create_block_mask(make_mask(7), 2, 1, 40, 40, device="numpy", BLOCK_SIZE=16)
    ts, tm = flexattn.trace(score), flexattn.trace(bm.mask_mod)
    out, lse, mx = _native.cpu_forward_numpy(q, k, v, ts, tm, bm, 0.25, True, False)
    ref, ref_lse, _ = _reference.forward(q, k, v, "float64", ts, tm, bm.tile_classes(), bm.BLOCK_SIZE, 0.25, 1)
    assert out.dtype == np.float32 and lse.dtype == np.float32 and mx is None
    np.testing.assert_allclose(out, ref, rtol=0, atol=2e-6)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-6)
    merged = _native.Merged(ts, tm)
    assert [n for n, _, _ in merged.scalars] == ["offset", "offset_m"]


def test_require_names_the_build_command_when_missing(monkeypatch):
    monkeypatch.setitem(_native._state, "module", None)
    monkeypatch.setitem(_native._state, "error", "no _C here")
    monkeypatch.delenv("FLEXATTN_REQUIRE_NATIVE", raising=False)
    with pytest.raises(ImportError, match=r"the cpu backend needs the compiled extension flexattn._C.*no _C here"
                                          r".*pip install \."):
        _native.require("the cpu backend")


def test_cuda_padded_head_dims_are_the_kernel_dims():
    assert C.cuda_padded_head_dims(40, 40) == (64, 64)
    assert C.cuda_padded_head_dims(64, 80) == (64, 96)
    assert C.cuda_padded_head_dims(128, 128) == (128, 128)
    with pytest.raises(Exception, match=r"head dims: expected 1..256, got D=300, Dv=64"):
        C.cuda_padded_head_dims(300, 64)


def test_cuda_backward_workspace_bytes_is_what_cuda_backward_checks():
    # cuda_backward checks its workspace before any driver call, so a machine without a GPU gets past that check
    # (and fails later, at the device) exactly when the size is right. Session 35: a size from q's shape alone was
    # too small by the Hopper backward's launch order (two ints per kv tile of each kv head), so every backward
    # from Python failed with "workspace: the backward needs ...".
    q, k = [2, 4, 256, 64], [2, 2, 1000, 64]

    def tensor(shape, ptr=0x10000):
        strides = [int(np.prod(shape[i + 1:])) for i in range(4)]
        return (ptr, "bf16", shape, strides)

    n = C.cuda_backward_workspace_bytes(q, k)
    assert n > C.cuda_backward_workspace_bytes(q, [2, 2, 128, 64])  # grows with k's kv tiles

    def run(workspace_bytes):
        C.cuda_backward(C.Variant(None, None), tensor(q), tensor(k), tensor(k), tensor(q), 0x10000, tensor(q),
                        dq=tensor(q), dk=tensor(k), dv=tensor(k), workspace=0x10000, workspace_bytes=workspace_bytes)

    with pytest.raises(Exception, match=rf"workspace: the backward needs {n} bytes"):
        run(n - 1)
    try:
        run(n)
    except Exception as e:  # no GPU here: the call fails at the device, past the workspace check
        assert "workspace" not in str(e), str(e)
    with pytest.raises(Exception, match=r"k_shape: expected \[Bkv, Hkv, S, E\]"):
        C.cuda_backward_workspace_bytes(q, [2, 1000, 64])


def test_compile_variant_prewarms_the_forward_tile_the_call_takes():
    # Compiles with NVRTC (no GPU): without a block mask a D = 64 forward takes the tall tile, with one the usual tile,
    # so the two prewarms are different kernels; the backward does not depend on it.
    full = C.Variant(C.Mod("score", "score_mod"), None)
    try:
        bare = C.compile_variant(full, "bf16", 64, 64, "sm_90a")
    except C.Error as e:
        if "nvrtc" in str(e).lower():
            pytest.skip(f"no NVRTC: {e}")
        raise
    masked = C.compile_variant(full, "bf16", 64, 64, "sm_90a", block_mask=True)
    assert bare["key"].startswith("attn_fwd_sm90a") and masked["key"].startswith("attn_fwd_sm90a")
    assert bare["key"] != masked["key"]
    assert bare["spill_bytes"] == {"flexattn_fwd": 0} and masked["spill_bytes"] == {"flexattn_fwd": 0}


def test_loading_registers_this_pythons_site_packages_for_nvrtc():
    """torch's NVRTC wheel (site-packages/nvidia/cu13/lib) was found through $VIRTUAL_ENV only: `venv/bin/python`
    without an activated venv fell back to the toolkit, absent on a machine with just the wheels."""
    import site

    C = _native.load()
    dirs = C.nvrtc_search_dirs()
    for s in site.getsitepackages():
        assert s + "/nvidia/cu13/lib" in dirs, (s, dirs[:8])


def test_python_sites_skip_entries_that_are_not_strings(monkeypatch):
    """sys.path may hold pathlib paths or bytes: the first call failed on p.endswith (AttributeError)."""
    import pathlib
    import sys

    monkeypatch.setattr(sys, "path", sys.path + [pathlib.Path("/tmp/x-packages"), b"/tmp/y-packages"])
    assert all(isinstance(p, str) for p in _native._python_sites())
