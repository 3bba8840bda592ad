"""paged_attention's per-token host path (session 6): binding plans (python/flexattn/_bound_plan.py) and the
per-BlockMask argument cache (paged._MaskArgs) must give exactly what the traced path gives, read at every
call. Without a GPU the CUDA path's native calls are stubbed: what is checked is what reaches them (the
scalars, the captured buffers, the block-mask pointers), against the traced path computed afresh.
"""
import contextlib
import ctypes
import functools

import numpy as np
import pytest

from flexattn import _native

torch = pytest.importorskip("torch")
if _native.load() is None:
    pytest.skip("needs the compiled extension", allow_module_level=True)

import flexattn  # noqa: E402
from flexattn import _bound_plan, _torch_api, _tracer, paged  # noqa: E402

GLOBAL_W = 4
GLOBAL_SCALE = 0.5


def i32(x):
    return torch.tensor(x, dtype=torch.int32)


def reference(score_mod, mask_mod):
    """The traced path, every time (what paged_attention bound before plans)."""
    return _bound_plan._full(score_mod, mask_mod)[0]


def bound_matches(score_mod, mask_mod):
    got = paged._bound(score_mod, mask_mod)
    want = reference(score_mod, mask_mod)
    assert got[0] is want[0], "another variant (IR / scalar types / buffers) than the traced path"
    assert tuple(got[1]) == tuple(want[1]) and tuple(got[2]) == tuple(want[2])
    assert got[3] == want[3] and all(type(a) is float for a in got[3])
    assert len(got[4]) == len(want[4]) and all(a is b for a, b in zip(got[4], want[4])), \
        "the captured objects themselves are bound (their memory is read at run time)"
    return got


@pytest.fixture
def count_traces(monkeypatch):
    """How often the tracer is asked (the plan's fast path asks it nothing)."""
    calls = [0]
    real = _tracer.trace

    def counting(fn, kind=None):
        calls[0] += 1
        return real(fn, kind)

    monkeypatch.setattr(_bound_plan._tracer, "trace", counting)
    return calls


def warm(score_mod, mask_mod, n=3):
    """Three calls: the first traces, the second builds the plan, the third uses it."""
    for _ in range(n):
        bound_matches(score_mod, mask_mod)


def test_a_captured_int_rebound_between_calls_is_read_every_call(count_traces):
    W = 8

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)

    warm(None, window)
    asked = count_traces[0]
    for W in (8, 100, 3, 2**31 - 1):  # noqa: B007 - the closure reads the rebound W
        assert bound_matches(None, window)[3] == [float(W)]
    assert count_traces[0] == asked + 4  # the references' traces only
    W = 2**40  # an i64 now: another IR (scalar type), so the plan must not hold
    got = bound_matches(None, window)
    W = 2.5  # a float: f32
    assert bound_matches(None, window)[0] is not got[0]


def test_globals_defaults_partials_and_containers_are_read_every_call(count_traces):
    global GLOBAL_W

    def mask(b, h, q_idx, kv_idx, lo=2):
        return (q_idx - kv_idx <= GLOBAL_W) & (kv_idx >= lo)

    params = [0.25, 3]
    table = {"gain": 1.5}

    def score(s, b, h, q_idx, kv_idx, bias=0.0):
        return s * params[0] * table["gain"] + bias + params[1]

    part = functools.partial(score, bias=0.125)
    warm(part, mask)
    asked = count_traces[0]
    try:
        GLOBAL_W = 11
        mask.__defaults__ = (5,)
        params[0], table["gain"] = 0.75, -2.0
        part.keywords["bias"] = 1.0
        got = bound_matches(part, mask)
        assert count_traces[0] == asked + 2  # only the reference's two traces
        assert sorted(got[3]) == sorted([11.0, 5.0, 0.75, -2.0, 1.0, 3.0])
        params.append(7)  # a longer list: another key; the plan fails, the traced path binds
        bound_matches(part, mask)
        table["other"] = 1  # a new key in a captured dict
        bound_matches(part, mask)
        mask.__defaults__ = None  # lo becomes a required parameter: a score_mod now
        with pytest.raises(TypeError):
            paged._bound(part, mask)
    finally:
        GLOBAL_W = 4


def test_captured_tensors_are_bound_as_themselves(count_traces):
    bias = torch.zeros(64)
    cap = torch.tensor(20.0)

    def score(s, b, h, q_idx, kv_idx):
        return cap * torch.tanh(s / cap) + bias[kv_idx]

    warm(score, paged._torch_mods()[0].noop_mask)
    noop = paged._torch_mods()[0].noop_mask
    asked = count_traces[0]
    bias.add_(1.0)  # in place: the same object (the kernels read its memory at run time)
    cap.fill_(30.0)  # a 0-d tensor is a scalar: its value is read every call
    got = bound_matches(score, noop)
    assert got[4][0] is bias and got[3] == [30.0]
    bias = torch.ones(64)  # another tensor, same shape: bound instead of the old one
    assert bound_matches(score, noop)[4][0] is bias
    assert count_traces[0] == asked + 4  # the references' traces only (two mods, two calls)
    bias = torch.ones(65)  # another shape: another key
    bound_matches(score, noop)
    bias = torch.ones(65, dtype=torch.float64)  # another dtype
    bound_matches(score, noop)
    bias = torch.ones(65, dtype=torch.complex64)  # unsupported: the traced path's error
    with pytest.raises(TypeError, match="complex64"):
        paged._bound(score, noop)


def test_a_0d_tensor_that_starts_requiring_grad_leaves_the_plan(count_traces):
    """A 0-d tensor that requires grad is a 1-element buffer to the walk, not a scalar: a plan built while it was a
    scalar must not hold once requires_grad is set, and none is built for the buffer form."""
    temp = torch.tensor(2.0)
    noop = paged._torch_mods()[0].noop_mask

    def score(s, b, h, q_idx, kv_idx):
        return s * temp

    warm(score, noop)
    assert bound_matches(score, noop)[3] == [2.0]
    temp.requires_grad_()
    for _ in range(3):
        got = paged._bound(score, noop)
        assert got[3] == [] and len(got[4]) == 1 and got[4][0].shape == (1,) and got[4][0]._base is temp
    temp.requires_grad_(False)
    assert bound_matches(score, noop)[3] == [2.0]


def test_aliasing_of_captured_tensors_is_checked():
    t = torch.arange(8, dtype=torch.float32)
    a, b = t, t

    def score(s, bb, h, q_idx, kv_idx):
        return s + a[kv_idx] + b[q_idx]

    noop = paged._torch_mods()[0].noop_mask
    one = bound_matches(score, noop)
    warm(score, noop)
    assert len(one[4]) == 1  # one buffer: the same tensor twice
    b = torch.arange(8, dtype=torch.float32)
    assert len(bound_matches(score, noop)[4]) == 2


def test_branches_on_scalars_pick_the_entry_the_tracer_would(count_traces):
    causal = 1

    def mask(b, h, q_idx, kv_idx):
        keep = q_idx - kv_idx < 16
        if causal > 0:
            keep = keep & (q_idx >= kv_idx)
        return keep

    warm(None, mask)
    with_causal = bound_matches(None, mask)[0]
    causal = 0
    without = bound_matches(None, mask)[0]
    assert without is not with_causal
    causal = 3
    assert bound_matches(None, mask)[0] is with_causal


def test_a_rebound_helper_and_a_new_global_are_seen(count_traces):
    ns = {}
    exec("def helper(q, kv):\n    return q >= kv\n"
         "def mask(b, h, q_idx, kv_idx):\n    return helper(q_idx, kv_idx) & (abs(q_idx - kv_idx) <= 9)\n", ns)
    mask = ns["mask"]
    warm(None, mask)
    first = bound_matches(None, mask)[0]
    exec("def helper(q, kv):\n    return q > kv\n", ns)
    second = bound_matches(None, mask)[0]
    assert second is not first
    # `abs` was the builtin; a module global of that name now shadows it: another IR
    exec("def abs(x):\n    return x\n", ns)
    assert bound_matches(None, mask)[0] is not second


def test_clear_cache_retires_plans(count_traces):
    def mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    warm(None, mask)
    asked = count_traces[0]
    paged._bound(None, mask)
    assert count_traces[0] == asked
    flexattn.clear_cache()
    paged._bound(None, mask)
    assert count_traces[0] == asked + 1 and _tracer.stats["traces"] == 1


def test_an_emptied_cell_takes_the_traced_path():
    def make():
        W = 3

        def mask(b, h, q_idx, kv_idx):
            return q_idx - kv_idx <= W

        def forget():
            nonlocal W
            del W

        return mask, forget

    mask, forget = make()
    warm(None, mask)
    forget()
    with pytest.raises(NameError):
        paged._bound(None, mask)


# ---- the block-mask arguments -----------------------------------------------------------------------------
class _Stream:
    cuda_stream = 0


@pytest.fixture
def native(monkeypatch):
    """The CUDA path on CPU bf16 tensors with the native calls recording their arguments."""
    monkeypatch.setattr(torch.cuda, "device", lambda d: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda d=None: _Stream())
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(paged, "_cuda_now", lambda torch, index: (0, 0))
    real = _native.require("test")
    calls = []

    class Native:
        def __getattr__(self, name):
            return getattr(real, name)

        def cuda_decode_workspace_bytes(self, *views, **kw):
            return 0

        def cuda_decode(self, *views, **kw):
            calls.append(kw)

    monkeypatch.setattr(paged._native, "require", lambda what="": Native())
    monkeypatch.setattr(paged, "_decode_by_gather", paged._cuda_decode)  # CPU tensors take the CUDA path
    return calls


def _ints_at(ptr, n):
    return list((ctypes.c_int32 * n).from_address(ptr))


def _decode(bm, **kw):
    q = torch.zeros(2, 4, 1, 64, dtype=torch.bfloat16)
    k = torch.zeros(2, 2, 256, 64, dtype=torch.bfloat16)
    paged.paged_attention(q, k, k, None, i32([256, 200]), q_offsets=i32([255, 199]), block_mask=bm,
                          validate=False, **kw)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def test_block_mask_arguments_follow_edits_of_the_mask(native):
    bm = flexattn.create_block_mask(causal, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    _decode(bm)
    _decode(bm)
    held = paged._MASKS[id(bm)]
    assert paged._mask_args(bm) is held  # reused while the mask is unchanged
    arg = native[-1]["block_mask"]
    assert arg[:4] == (256, 256, 64, 64) and arg[4][1] == bm.kv_indices.data_ptr() and arg[5:] == (1, 1, 4, 4)
    assert arg[4][4:] == [0, 0, 0, 0]  # the q side: never read by the decode kernels
    # an in-place edit of a mask the call uses directly: the same memory, now with the new values
    bm.kv_indices[0, 0, 3, 0] = 2
    _decode(bm)
    assert _ints_at(native[-1]["block_mask"][4][1] + 4 * 12, 4) == bm.kv_indices[0, 0, 3].tolist()
    # a new tensor in a field
    bm.kv_num_blocks = bm.kv_num_blocks.clone()
    _decode(bm)
    assert native[-1]["block_mask"][4][0] == bm.kv_num_blocks.data_ptr()
    # a metadata change in place (same pointer, new shape): derived again
    bm.kv_indices.transpose_(2, 3)
    _decode(bm)
    fresh = paged._MaskArgs(bm).device_arg(torch, torch.device("cpu"))
    assert native[-1]["block_mask"][5:] == fresh[5:] and paged._mask_args(bm) is paged._MASKS[id(bm)]
    bm.kv_indices.transpose_(2, 3)
    bm.BLOCK_SIZE = (64, 128)  # reassigned: read again
    bm.kv_indices = bm.kv_indices[..., :2].contiguous()
    bm.full_kv_indices = bm.full_kv_indices[..., :2].contiguous()
    _decode(bm)
    assert native[-1]["block_mask"][:4] == (256, 256, 64, 128) and native[-1]["block_mask"][8] == 2


def test_a_converted_mask_is_converted_again_after_an_edit(native):
    bm = flexattn.create_block_mask(causal, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    bm.kv_indices = bm.kv_indices.long()  # int64: the call passes an int32 copy
    _decode(bm)
    _decode(bm)
    first = native[-1]["block_mask"][4][1]
    assert first != bm.kv_indices.data_ptr()
    assert _ints_at(first, 16) == bm.kv_indices.flatten().tolist()
    bm.kv_indices[0, 0, 2, 1] = 3
    _decode(bm)
    assert _ints_at(native[-1]["block_mask"][4][1], 16) == bm.kv_indices.flatten().tolist()


def test_numpy_masks_are_prepared_every_call(native):
    bm = flexattn.create_block_mask(causal, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    bm.kv_indices = bm.kv_indices.numpy().copy()
    _decode(bm)
    assert id(bm) not in paged._MASKS
    bm.kv_indices[0, 0, 1, 0] = 3
    _decode(bm)
    assert _ints_at(native[-1]["block_mask"][4][1], 16) == bm.kv_indices.flatten().tolist()


def test_the_window_step_reads_its_captured_int_every_call(native):
    W = 32

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)

    bm = flexattn.create_block_mask(window, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    for W in (32, 64, 7, 200):  # noqa: B007 - read through the mask's mask_mod closure
        _decode(bm)
        assert list(native[-1]["scalars"].values()) == [float(W)]
    bm.mask_mod = causal  # the mask_mod attribute is read every call
    _decode(bm)
    assert native[-1]["scalars"] == {}


def test_block_mask_errors_are_unchanged_with_a_cached_mask(native):
    bm = flexattn.create_block_mask(causal, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    _decode(bm)
    bm.kv_num_blocks = bm.kv_num_blocks.expand(3, 1, 4)
    with pytest.raises(ValueError, match="block_mask: batch must be 1 or B=2, got 3"):
        _decode(bm)
    bm.kv_num_blocks = torch.zeros(1, 2, 4, dtype=torch.int32)
    with pytest.raises(ValueError, match="block_mask: heads must be 1 or Hq=4, got 2"):
        _decode(bm)
    bm.kv_num_blocks = torch.zeros(1, 1, 4, dtype=torch.int32, device="meta")
    with pytest.raises(ValueError, match="block_mask: expected its tensors on query's device"):
        _decode(bm)


def test_plans_do_not_keep_mods_or_masks_alive(native):
    import gc
    import weakref

    def make():
        W = 5

        def window(b, h, q_idx, kv_idx):
            return q_idx - kv_idx <= W

        return window

    mod = make()
    bm = flexattn.create_block_mask(mod, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    for _ in range(3):
        _decode(bm)
    refs = weakref.ref(mod), weakref.ref(bm), weakref.ref(bm.kv_indices)
    del mod, bm
    gc.collect()
    assert all(r() is None for r in refs)


def test_the_switch_off_traces_and_prepares_every_call(native, count_traces, monkeypatch):
    """FLEXATTN_PAGED_CACHE=0 (paged._CACHE): the pre-session-6 path, for A/B runs."""
    monkeypatch.setattr(paged, "_CACHE", False)
    W = 9

    def window(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= W

    bm = flexattn.create_block_mask(window, 1, 1, 256, 256, device="cpu", BLOCK_SIZE=64)
    before = count_traces[0]
    for _ in range(3):
        _decode(bm)
    assert count_traces[0] == before + 3 and id(bm) not in paged._MASKS
    assert list(native[-1]["scalars"].values()) == [9.0]


def test_a_pair_whose_structure_keeps_changing_stops_getting_plans(count_traces):
    """Each change of a capture's type fails the plan once; after a few failures the pair takes the traced
    path only (a plan that keeps failing would cost its checks on top of the trace)."""
    W = 1

    def mask(b, h, q_idx, kv_idx):
        return q_idx - kv_idx <= W

    for i in range(12):
        W = i if i % 2 else float(i)
        bound_matches(None, mask)
        bound_matches(None, mask)
    held = _bound_plan._PLANS[(id(None), id(mask))]
    assert type(held) is _bound_plan._Seen and held.failures >= _bound_plan._MAX_FAILURES


def test_methods_and_objects_are_keyed_by_identity():
    """Objects the walk keys by id (a bound method's self, an opaque object) are checked by identity; their
    attributes are read at trace time by the tracer, and the plan binds exactly what it binds."""
    class Alibi:
        def __init__(self, slope):
            self.slope = slope

        def score(self, s, b, h, q_idx, kv_idx):
            return s + self.slope * (kv_idx - q_idx)

    noop = paged._torch_mods()[0].noop_mask
    m = Alibi(0.5).score

    def score(s, b, h, q_idx, kv_idx):
        return m(s, b, h, q_idx, kv_idx)

    warm(score, noop)
    m.__self__.slope = 0.25
    bound_matches(score, noop)
    m = Alibi(0.75).score  # another object: another key, another IR
    bound_matches(score, noop)
