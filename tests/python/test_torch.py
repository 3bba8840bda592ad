"""torch mods, torch tensors and agreement with torch's own flex_attention (skipped without torch)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
tfa = pytest.importorskip("torch.nn.attention.flex_attention")

import flexattn  # noqa: E402
from flexattn import TraceError  # noqa: E402

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def text(fn):
    return flexattn.trace(fn).text


@pytest.mark.parametrize("mod,expected", [
    (lambda s, b, h, q, kv: torch.where(q >= kv, s, -float("inf")), "where(q_idx >= kv_idx, score, -inf)"),
    (lambda s, b, h, q, kv: 30.0 * torch.tanh(s / 30.0), "30.0 * tanh(score / 30.0)"),
    (lambda s, b, h, q, kv: torch.exp2(s) + torch.exp(s) + torch.log(s) + torch.log2(s),
     "exp2(score) + exp(score) + log(score) + log2(score)"),
    (lambda s, b, h, q, kv: torch.sigmoid(s) * torch.sqrt(s) * torch.rsqrt(s), "sigmoid(score) * sqrt(score) * rsqrt(score)"),
    (lambda s, b, h, q, kv: torch.sin(s) + torch.cos(s) + torch.floor(s) + torch.ceil(s) + torch.abs(s),
     "sin(score) + cos(score) + floor(score) + ceil(score) + abs(score)"),
    (lambda s, b, h, q, kv: torch.clamp(s, min=-1.0, max=1.0),
     "_t0 = where(score <= -1.0, -1.0, score);\nwhere(_t0 >= 1.0, 1.0, _t0)"),
    (lambda s, b, h, q, kv: torch.minimum(s, torch.maximum(s, q)), "min(score, max(score, q_idx))"),
    (lambda s, b, h, q, kv: s + (q - kv).float() * 0.5, "score + f32(q_idx - kv_idx) * 0.5"),
    (lambda s, b, h, q, kv: s + (q - kv).to(torch.int64), "score + i64(q_idx - kv_idx)"),
    (lambda s, b, h, q, kv: s.to(torch.float32) + torch.tensor(2.0), "score + 2.0{f32}"),
    (lambda s, b, h, q, kv: torch.where(q > kv, 1.0, 0.0) * s, "f32(where(q_idx > kv_idx, 1.0, 0.0)) * score"),
    (lambda s, b, h, q, kv: torch.div(q, 2, rounding_mode="floor") * s, "q_idx // 2 * score"),
    (lambda s, b, h, q, kv: torch.special.expit(s), "sigmoid(score)"),
    (lambda s, b, h, q, kv: torch.nn.functional.relu(s), "where(score <= 0, 0, score)"),
])
def test_torch_functions_are_traced(mod, expected):
    assert text(mod) == expected


def test_torch_mask_ops_and_combinators():
    assert text(lambda b, h, q, kv: torch.logical_and(q >= kv, kv > 0)) == "q_idx >= kv_idx && kv_idx > 0"
    assert text(lambda b, h, q, kv: (q >= kv) & ~(kv == 3)) == "q_idx >= kv_idx && !(kv_idx == 3)"
    causal = lambda b, h, q, kv: q >= kv  # noqa: E731
    window = lambda b, h, q, kv: q - kv < 8  # noqa: E731
    assert text(tfa.and_masks(causal, window)) == "q_idx >= kv_idx && q_idx - kv_idx < 8"
    assert text(tfa.or_masks(causal, window)) == "q_idx >= kv_idx || q_idx - kv_idx < 8"
    assert text(tfa.noop_mask) == "true{bool}"


def test_captured_tensors_and_zero_dim_scalars():
    bias = torch.randn(4, 64, dtype=torch.bfloat16)
    offset = torch.tensor(3)
    scale = torch.tensor(0.5)

    def mod(score, b, h, q_idx, kv_idx):
        return score * scale + bias[h, q_idx - kv_idx + offset]
    t = flexattn.trace(mod)
    assert t.text == "score * scale + bias{bf16}[h, q_idx - kv_idx + offset{i64}]"
    assert t.buffers["bias"] is bias and t.scalars == {"scale": 0.5, "offset": 3}
    assert t.scalar_types == {"scale": "f32", "offset": "i64"}
    bias2 = torch.randn(4, 64, dtype=torch.bfloat16)

    def mod2(score, b, h, q_idx, kv_idx):
        return score * scale + bias2[h, q_idx - kv_idx + offset]
    assert flexattn.trace(mod2).text == "score * scale + bias2{bf16}[h, q_idx - kv_idx + offset{i64}]"


def test_tensor_reached_through_an_attribute_is_bound_each_call():
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rel = torch.nn.Parameter(torch.randn(2, 16), requires_grad=False)

        def score_mod(self, score, b, h, q_idx, kv_idx):
            return score + self.rel[h, kv_idx]

    layer = Layer()
    t = flexattn.trace(layer.score_mod)
    assert t.text == "score + tensor[h, kv_idx]" and t.buffers["tensor"] is layer.rel
    assert not flexattn.trace(layer.score_mod).cached  # bound by identity: retraced every call
    layer.rel = torch.nn.Parameter(torch.randn(2, 16), requires_grad=False)  # replaced: the new one is bound
    assert flexattn.trace(layer.score_mod).buffers["tensor"] is layer.rel


def test_tensor_reached_through_two_attributes_is_not_cached():
    """With self.a and self.b the same tensor, the trace cannot tell which one the mod read, so a cached trace might
    re-read the wrong one after either is replaced: such traces are not cached."""
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = self.b = torch.randn(2, 16)

        def score_mod(self, score, b, h, q_idx, kv_idx):
            return score + self.b[h, kv_idx]

    layer = Layer()
    flexattn.trace(layer.score_mod)
    assert not flexattn.trace(layer.score_mod).cached
    layer.b = torch.randn(2, 16)
    t = flexattn.trace(layer.score_mod)
    assert t.buffers["tensor"] is layer.b


def test_control_flow_error_in_a_torch_mod():
    def torch_mod(score, b, h, q_idx, kv_idx):
        if torch.any(q_idx > kv_idx):  # MARK
            return score
        return score

    with pytest.raises(TraceError, match="in score_mod 'test_control_flow_error_in_a_torch_mod.<locals>.torch_mod' at "
                                         "test_torch.py:"):
        flexattn.trace(torch_mod)


def doc_mask_factory(device):
    doc = torch.repeat_interleave(torch.arange(4), torch.tensor([50, 60, 3, 87])).to(device)

    def doc_causal(b, h, q_idx, kv_idx):
        return (doc[q_idx] == doc[kv_idx]) & (q_idx >= kv_idx)
    return doc_causal


@pytest.mark.parametrize("device", DEVICES)
def test_create_block_mask_matches_torch(device):
    mod = doc_mask_factory(device)
    ours = flexattn.create_block_mask(mod, 2, 1, 200, 200, device=device, BLOCK_SIZE=32)
    theirs = tfa.create_block_mask(mod, 2, 1, 200, 200, device=device, BLOCK_SIZE=32)
    assert isinstance(ours.kv_indices, torch.Tensor) and ours.kv_indices.device.type == device
    assert ours.kv_indices.dtype == torch.int32
    for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
              "full_q_num_blocks"):
        torch.testing.assert_close(getattr(ours, f), getattr(theirs, f), msg=f)
    assert ours.sparsity() == pytest.approx(theirs.sparsity())
    assert ours.to_string() == theirs.to_string()
    torch.testing.assert_close(flexattn.create_mask(mod, 1, 1, 200, 200, device=device),
                               tfa.create_mask(mod, 1, 1, 200, 200, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_flex_attention_matches_torch(device, dtype):
    torch.manual_seed(0)
    cap = 20.0
    bias = torch.randn(4, 400, device=device)

    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap) + bias[h, q_idx - kv_idx + 199]

    mask = doc_mask_factory(device)
    L = 200
    q = torch.randn(2, 4, L, 64, device=device, dtype=dtype)
    k = torch.randn(2, 2, L, 64, device=device, dtype=dtype)
    v = torch.randn(2, 2, L, 32, device=device, dtype=dtype)
    bm_ours = flexattn.create_block_mask(mask, 2, 1, L, L, device=device, BLOCK_SIZE=64)
    bm_torch = tfa.create_block_mask(mask, 2, 1, L, L, device=device, BLOCK_SIZE=64)
    with torch.no_grad():
        out, aux = flexattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm_ours, enable_gqa=True,
                                           return_aux=flexattn.AuxRequest(lse=True))
        ref, ref_lse = tfa.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm_torch, enable_gqa=True,
                                          return_lse=True)
        ref64 = tfa.flex_attention(q.double(), k.double(), v.double(), score_mod=score_mod, block_mask=bm_torch,
                                   enable_gqa=True)
    assert out.dtype == dtype and out.device == q.device and out.shape == ref.shape
    err_ours = (out.double() - ref64).abs().max().item()
    err_torch = (ref.double() - ref64).abs().max().item()
    assert err_ours <= 2 * err_torch + 1e-6, (err_ours, err_torch)
    torch.testing.assert_close(aux.lse, ref_lse.float(), rtol=1e-4, atol=1e-4)
    # torch's own BlockMask is accepted too
    with torch.no_grad():
        out2 = flexattn.flex_attention(q, k, v, score_mod=score_mod, block_mask=bm_torch, enable_gqa=True)
    torch.testing.assert_close(out2, out)


@pytest.mark.skipif(flexattn._native.load() is not None, reason="the native extension provides the backward "
                    "(tests/python/test_native_torch.py)")
def test_requires_grad_is_refused_until_backward_exists():
    q = torch.randn(1, 1, 8, 4, requires_grad=True)
    with pytest.raises(NotImplementedError, match="backward pass is not available from Python yet"):
        flexattn.flex_attention(q, q, q)
    with torch.no_grad():
        assert flexattn.flex_attention(q, q, q).shape == (1, 1, 8, 4)


def test_block_mask_devices():
    bm = flexattn.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 64, 64, device="cpu", BLOCK_SIZE=16)
    assert isinstance(bm.kv_indices, torch.Tensor) and bm.device == "cpu"
    assert isinstance(bm.to("numpy").kv_indices, np.ndarray)
    sliced = bm[0, 0, 1]
    assert isinstance(sliced.kv_indices, torch.Tensor) and sliced.kv_num_blocks.shape == (1, 1, 1)
    torch.testing.assert_close(bm._adjust(32, 32).kv_num_blocks, torch.tensor([[[1, 1]]], dtype=torch.int32))


def test_ops_call_torch_on_tensors():
    x = torch.tensor([-1.5, 0.5])
    torch.testing.assert_close(flexattn.ops.tanh(x), torch.tanh(x))
    torch.testing.assert_close(flexattn.ops.where(x > 0, x, 0.0), torch.tensor([0.0, 0.5]))
    assert flexattn.ops.cast(x, "int32").dtype == torch.int32


def test_kernel_buffers_skip_the_deterministic_fill_and_restore_it():
    """torch.use_deterministic_algorithms fills every torch.empty with NaN (fill_uninitialized_memory); the buffers the
    CUDA kernels write whole are allocated without it (_torch_ops._empty), and the flag is back on afterwards."""
    from flexattn import _torch_ops
    det = torch.utils.deterministic
    was, fill = torch.are_deterministic_algorithms_enabled(), det.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    det.fill_uninitialized_memory = True
    try:
        assert torch.isnan(torch.empty(64, dtype=torch.float32)).all()  # torch's fill, which _empty skips
        t = _torch_ops._empty((4, 16), torch.bfloat16, "cpu")
        assert t.shape == (4, 16) and t.dtype == torch.bfloat16
        assert det.fill_uninitialized_memory is True
        assert torch.isnan(torch.empty(64, dtype=torch.float32)).all()
    finally:
        torch.use_deterministic_algorithms(was)
        det.fill_uninitialized_memory = fill


# ---- divergences from torch found in session 36 (CPU comparison with torch 2.15) ---------------------------
def test_torch_path_checks_kernel_options_and_scale_like_the_numpy_path():
    """torch tensors skipped the kernel_options checks (a bogus BACKEND ran), and scale=nan silently became
    1/sqrt(E) (the native calls read NaN as the default)."""
    q = torch.randn(1, 1, 8, 4)
    with pytest.raises(ValueError, match="BACKEND must be one of AUTO"):
        flexattn.flex_attention(q, q, q, kernel_options={"BACKEND": "bogus"})
    with pytest.raises(ValueError, match="OUTPUT_MAX is decided by flex_attention"):
        flexattn.flex_attention(q, q, q, kernel_options={"OUTPUT_MAX": True})
    with pytest.raises(RuntimeError, match="cannot be combined with legacy FORCE_USE_FLEX_ATTENTION"):
        flexattn.flex_attention(q, q, q, kernel_options={"BACKEND": "AUTO", "FORCE_USE_FLEX_ATTENTION": True})
    with pytest.raises(ValueError, match="scale: expected a finite number or None, got nan"):
        flexattn.flex_attention(q, q, q, scale=float("nan"))
    torch.testing.assert_close(flexattn.flex_attention(q, q, q, scale=0.5, kernel_options={"BACKEND": "AUTO"}),
                               tfa.flex_attention(q, q, q, scale=0.5))


def test_flexattn_torch_is_reachable_as_an_attribute():
    import importlib
    import subprocess
    import sys

    code = "import flexattn; flexattn.torch.enable(); flexattn.torch.disable(); print('ok')"
    env = dict(__import__("os").environ)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert importlib.import_module("flexattn").torch is importlib.import_module("flexattn.torch")


@pytest.mark.parametrize("make", [
    lambda B, H, L, D: torch.randn(B, L, H, D).transpose(1, 2),      # the usual [B, L, H, D] projection, transposed
    lambda B, H, L, D: torch.randn(B, H, L, D),
    lambda B, H, L, D: torch.randn(L, B, H, D).permute(1, 2, 0, 3),
    lambda B, H, L, D: torch.randn(H, B, L, D).transpose(0, 1),
])
def test_output_strides_follow_the_query_as_torch(make):
    """flexattn returned a contiguous out for every query, so `out.transpose(1, 2).view(B, L, H * D)` (fine on
    torch's out for a transposed query) raised."""
    B, H, L, D = 2, 4, 16, 8
    q, k, v = make(B, H, L, D), torch.randn(B, H, L, D), torch.randn(B, H, L, D)
    ours, theirs = flexattn.flex_attention(q, k, v), tfa.flex_attention(q, k, v)
    assert ours.stride() == theirs.stride()
    torch.testing.assert_close(ours, theirs)
    q.requires_grad_()
    out = flexattn.flex_attention(q, k, v)
    if out.transpose(1, 2).is_contiguous():
        out.transpose(1, 2).view(B, L, H * D).sum().backward()
        assert q.grad is not None and q.grad.shape == q.shape


def test_captured_tensor_metadata_in_mods():
    """torch mods may branch on a captured tensor's dtype or device (is_floating_point, .device)."""
    w, i = torch.arange(16.0), torch.arange(16)

    def mod(s, b, h, q, kv):
        bias = w[q] if w.is_floating_point() and w.device.type == "cpu" else 0
        return s + bias + (1 if i.is_floating_point() else 2) + (3 if i.float().is_floating_point() else 0)
    assert text(mod) == "score + w[q_idx] + 2 + 3"


def test_elementwise_operations_on_whole_captured_tensors_are_applied_per_load():
    """(slopes * 2)[h], torch.exp(bias)[h, q, kv], (ids == 1)[kv], bias.float().clamp(-1, 1)[...] failed ('applied to a
    whole captured tensor'); torch evaluates them eagerly, flexattn applies them to each element it loads."""
    torch.manual_seed(3)
    slopes, bias = torch.tensor([0.5, 0.25]), torch.randn(2, 8, 8)
    ids, topk = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]), torch.randint(0, 4, (2, 3))
    mods = [
        lambda s, b, h, q, kv: s + (slopes * 2)[h] * (kv - q) + (1 - slopes)[h],
        lambda s, b, h, q, kv: s + slopes.exp()[h] + torch.exp(bias)[h, q, kv] + (-bias)[h][q, kv] + bias.abs()[h, q, kv],
        lambda s, b, h, q, kv: s + bias.float().clamp(-1, 1)[h, q, kv] + (2 * bias + s)[h, q, kv],
        lambda s, b, h, q, kv: s + ((ids + 1) * 10)[q].float() + (ids == 1)[kv].float() + ids.float().sqrt()[q],
        lambda s, b, h, q, kv: s + (topk[h] == kv // 4).any(dim=-1).float() + (topk[h] * 2).sum().float(),
    ]
    q, k, v = (torch.randn(1, 2, 8, 16) for _ in range(3))
    for mod in mods:
        torch.testing.assert_close(flexattn.flex_attention(q, k, v, score_mod=mod), tfa.flex_attention(q, k, v, score_mod=mod),
                                   rtol=0, atol=2e-6)
    assert text(mods[0]) == "_t0 = slopes[h];\nscore + _t0 * 2 * (kv_idx - q_idx) + (1 - _t0)"
    assert text(lambda s, b, h, q, kv: s + np.abs(bias)[h, q, kv]) == "score + abs(bias[h, q_idx, kv_idx])"
    assert flexattn.trace(lambda s, b, h, q, kv: s + (0 if (ids * 0.5).dtype == torch.float32 else 1)).text == "score + 0"
    with pytest.raises(TraceError, match="captured tensor 'bias' used without indexing"):
        flexattn.trace(lambda s, b, h, q, kv: (bias + bias)[h, q, kv] + s)  # two tensors: not elementwise per load


@pytest.mark.parametrize("index", [1, -1, (0, 2, 3), (0, 1, -1), True, (slice(None), slice(1, 3), [0, 2]),
                                   (slice(None), slice(None), [2, 0]), (slice(None), 0, slice(None, None, 2)),
                                   (slice(None), slice(None), slice(1, None)), (0, 0, [3, 4]), (0, 0, 4),
                                   (slice(None), slice(None), slice(None, None, -1)), (slice(None, None, -2),),
                                   (slice(None), slice(None), slice(4, 0, -3))],
                         ids=str)
@pytest.mark.parametrize("form", ["python", "array", "tensor"])
def test_a_torch_mask_slices_as_the_numpy_one(index, form):
    """Slices of torch masks run on torch ops (no host copy; torch.compile traces them): the same lists, lengths and
    transposed q side as the numpy path, for every index form. A 0-d array or tensor keeps its dimension, as an int
    (numpy's indexing dropped it: a mask of fewer dims)."""
    mod = lambda b, h, q, kv: ((q >= kv) & (kv >= q - 100 * (h + 1))) | (b == 1)  # noqa: E731
    t = flexattn.create_block_mask(mod, 2, 3, 300, 300, device="cpu", BLOCK_SIZE=64)  # 5 rows, the last of 44
    n = t.to("numpy")
    index = index if isinstance(index, tuple) else (index,)
    last = index[-1]
    if form != "python" and not isinstance(last, (slice, bool)):
        last = np.array(last) if form == "array" else torch.tensor(last)
    got, want = t[index[:-1] + (last,)], n[index[:-1] + (last.numpy() if isinstance(last, torch.Tensor) else last,)]
    assert isinstance(got.kv_indices, torch.Tensor) and got.seq_lengths == want.seq_lengths
    assert got.kv_num_blocks.dim() == 3
    for f in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks", "q_indices",
              "full_q_num_blocks", "full_q_indices"):
        np.testing.assert_array_equal(getattr(got, f).numpy(), getattr(want, f), err_msg=f)
        assert getattr(got, f).is_contiguous() and getattr(got, f).dtype == torch.int32, f
    with pytest.raises(RuntimeError, match="Cannot use mask_mod from a sliced BlockMask"):
        flexattn.trace(got.mask_mod)


# ---- parity with torch 2.15's FlexAttention (session 41 review) ----------------------------------------------------
@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "uint16", "int32", "uint64"])
def test_integer_index_arrays_of_any_width_index_torch_masks(dtype):
    """torch reads a uint8 index as a bool mask and refuses int8 / int16 / uint*: the torch path's slices (numpy
    before) returned other rows for uint8 and raised for the rest."""
    bm = flexattn.create_block_mask(lambda b, h, q, kv: (q >= kv) | (b == 1), 3, 1, 200, 200, device="cpu")
    for index in (np.array([1, 0, 1], dtype=dtype), torch.from_numpy(np.array([1, 0, 1], dtype=dtype))
                  if dtype in ("uint8", "int8", "int16", "int32") else None):
        if index is None:
            continue
        got = bm[index]
        assert got.kv_num_blocks.shape == (3, 1, 2)
        assert torch.equal(got.kv_indices, bm.kv_indices[[1, 0, 1]])


def test_a_flexattn_mask_runs_in_torchs_compiled_flex_attention():
    """torch (>= 2.12) unpacks 17 fields from as_tuple (the dq_* metadata of its deterministic backward): a flexattn
    mask gave 13 ('not enough values to unpack'), so a torch.compile(flex_attention) made before flexattn.torch.enable()
    (torchtune's compile_friendly_flex_attention) failed on flexattn's masks."""
    if "dq_write_order" not in tfa.BlockMask.__init__.__code__.co_varnames:
        pytest.skip("this torch's BlockMask has no dq_* fields")
    bm = flexattn.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 256, 256, device="cpu")
    assert len(bm.as_tuple()) == len(tfa.BlockMask.from_kv_blocks(bm.kv_num_blocks, bm.kv_indices).as_tuple())
    assert bm.dq_write_order is None and bm.dq_kv_order_spt is None
    q = torch.randn(1, 2, 256, 32)
    want = tfa.flex_attention(q, q, q, block_mask=tfa.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 256, 256,
                                                                         device="cpu"))
    got = torch.compile(tfa.flex_attention)(q, q, q, block_mask=bm)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_dq_metadata_is_kept_through_from_kv_blocks_and_pickle():
    import pickle

    num, idx = torch.ones(1, 1, 2, dtype=torch.int32), torch.tensor([[[[0, 1], [1, 0]]]], dtype=torch.int32)
    order = torch.arange(4, dtype=torch.int32)
    bm = flexattn.BlockMask.from_kv_blocks(num, idx, dq_write_order=order, dq_kv_order=True)
    assert bm.dq_write_order is order and bm.dq_kv_order is None and bm.dq_kv_order_spt is True
    back = pickle.loads(pickle.dumps(bm))
    assert torch.equal(back.dq_write_order, order) and back.dq_kv_order_spt is True
    assert bm.to("cpu").dq_write_order is not None and bm.to("cpu").dq_kv_order_spt is True
    # without them the pickle names the class alone: it loads in flexattn releases before the fields existed
    plain = flexattn.BlockMask.from_kv_blocks(num, idx)
    assert plain.__reduce__()[0] is flexattn.BlockMask
    with pytest.raises(ValueError, match="dq_kv_order must be a bool, Tensor, or None"):
        flexattn.BlockMask.from_kv_blocks(num, idx, dq_kv_order=1)
    with pytest.raises(ValueError, match="dq_write_order_full requires dq_write_order"):
        flexattn.BlockMask.from_kv_blocks(num, idx, dq_write_order_full=order)


def test_noop_and_empty_combinators_return_tensors_for_torch():
    """torch vmaps mask_mods and refuses a Python bool: torch's create_mask / create_block_mask failed on flexattn's
    noop_mask, and_masks(), or_masks() (and on masks whose default mask_mod is noop_mask)."""
    assert tfa.create_mask(flexattn.noop_mask, 1, 1, 4, 4, device="cpu").all()
    assert tfa.create_mask(flexattn.and_masks(), 1, 1, 4, 4, device="cpu").all()
    assert not tfa.create_mask(flexattn.or_masks(), 1, 1, 4, 4, device="cpu").any()
    b = torch.tensor(0)
    assert flexattn.noop_mask(b, b, b, b).dtype == torch.bool and flexattn.noop_mask(0, 0, 0, 0) is True
    assert text(flexattn.noop_mask) == "true"


def test_torch_runtime_errors_are_caught_as_either_type():
    """torch raises RuntimeError for a block mask of another length and for key / value of other shapes; flexattn
    raised ValueError. Its ShapeError is both."""
    q = torch.randn(1, 1, 256, 16)
    bm = flexattn.create_block_mask(lambda b, h, qi, kv: qi >= kv, 1, 1, 128, 128, device="cpu")
    for exc in (RuntimeError, ValueError):
        with pytest.raises(exc, match="block_mask was created for"):
            flexattn.flex_attention(q, q, q, block_mask=bm)
        with pytest.raises(exc, match="Expect key and value to have the same batch size"):
            flexattn.flex_attention(q, q, q[:, :, :255])
    with pytest.raises(ValueError, match="to all be  at least 2 dimensional, but got query.dim: 1"):
        flexattn.flex_attention(q[0, 0, 0], q[0, 0, 0], q[0, 0, 0])


def test_flex_kernel_options_and_a_low_precision_kv_cache():
    from flexattn import FlexKernelOptions

    assert FlexKernelOptions is getattr(tfa, "FlexKernelOptions", dict)
    q = torch.randn(1, 2, 64, 16, requires_grad=True)
    k, v = (torch.randn(1, 2, 64, 16).bfloat16().requires_grad_() for _ in range(2))
    out = flexattn.flex_attention(q, k, v)  # torch accepts it (allow_lowp_kv): k / v upcast, f32 out
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, flexattn.flex_attention(q, k.float(), v.float()))
    out.sum().backward()
    assert k.grad.dtype == torch.bfloat16 and v.grad.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="to have the same dtype"):
        flexattn.flex_attention(q.bfloat16(), k.float(), v.float())


def test_a_mask_with_other_batch_or_heads_wraps_as_in_torch():
    """torch's kernels read mask row (b % B_mask, h % H_mask) (a mask built with the kv heads under GQA): flexattn
    refused a mask whose batch or heads were neither 1 nor the query's."""
    torch.manual_seed(0)

    def per_head(b, h, qi, kv):
        return (qi >= kv) & ((qi - kv) < 64 * (h + 1))

    q, k = torch.randn(1, 4, 256, 32), torch.randn(1, 2, 256, 32)
    got = flexattn.flex_attention(q, k, k, block_mask=flexattn.create_block_mask(per_head, 1, 2, 256, 256, device="cpu"),
                                  enable_gqa=True)
    want = torch.compile(tfa.flex_attention)(q, k, k, enable_gqa=True,
                                             block_mask=tfa.create_block_mask(per_head, 1, 2, 256, 256, device="cpu"))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)

    def per_batch(b, h, qi, kv):  # batch 2 of 3 reads mask row 0 of 2: the same as this mod's row for b = 2
        return (qi >= kv) & ((qi - kv) < 50 * ((b % 2) + 1) + 10 * h)

    q3 = torch.randn(3, 3, 256, 32)
    wrapped = flexattn.create_block_mask(per_batch, 2, 3, 256, 256, device="cpu")
    full = flexattn.create_block_mask(per_batch, 3, 3, 256, 256, device="cpu")
    torch.testing.assert_close(flexattn.flex_attention(q3, q3, q3, block_mask=wrapped),
                               flexattn.flex_attention(q3, q3, q3, block_mask=full), rtol=0, atol=0)
