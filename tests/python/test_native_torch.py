"""The torch integration on CPU tensors: the flexattn::attn_fwd / attn_bwd custom ops, autograd (q, k, v,
learnable captured buffers, the lse), torch.compile (no graph break, no recompile when a captured 0-d
tensor changes) and the flexattn.torch switch. Compared with a dense float64 torch reference written
from the definition (torch's own flex_attention has no CPU backward). Skipped without torch or _C."""
import math

import numpy as np

import pytest

torch = pytest.importorskip("torch")

import flexattn  # noqa: E402
import flexattn.torch as fat  # noqa: E402
from flexattn import AuxRequest, _native  # noqa: E402

if _native.load() is None:
    pytest.skip(f"flexattn._C not built: {_native.error()}", allow_module_level=True)

from flexattn import _dynamo_parts, _torch_api, _torch_ops  # noqa: E402
import torch._dynamo.testing  # noqa: E402
from torch_reference import dense, flex, needs_parts, rand  # noqa: E402



def grads(out, lse, inputs, g, gl):
    return torch.autograd.grad((out * g).sum() + (torch.where(lse.isinf(), 0.0, lse) * gl).sum(), inputs)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def test_forward_and_backward_with_learnable_bias_gqa_broadcast_and_lse_gradient():
    torch.manual_seed(0)
    q, k, v = rand(3, 4, 45, 16), rand(1, 2, 45, 16), rand(1, 2, 45, 8)
    bias = rand(4, 90).float().detach().requires_grad_()
    cap = 20.0

    def score(s, b, h, q_idx, kv_idx):
        return cap * torch.tanh(s / cap) + bias[h, q_idx - kv_idx + 45]

    bm = flexattn.create_block_mask(causal, 3, 1, 45, 45, device="cpu", BLOCK_SIZE=16)
    out, aux = flex(q, k, v, score_mod=score, block_mask=bm, enable_gqa=True,
                    return_aux=AuxRequest(lse=True, max_scores=True))
    ref, ref_lse = dense(q, k, v, score, causal)
    assert out.dtype == torch.float64 and aux.lse.dtype == torch.float64 and out.shape == (3, 4, 45, 8)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)  # the bias is read as float32
    torch.testing.assert_close(aux.lse, ref_lse, rtol=1e-6, atol=1e-6)
    assert not aux.max_scores.requires_grad
    g, gl = torch.randn_like(out), torch.randn_like(ref_lse)
    mine = grads(out, aux.lse, (q, k, v, bias), g, gl)
    want = grads(ref, ref_lse, (q, k, v, bias), g, gl)
    for name, a, b in zip("qkv", mine, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
    assert mine[3].dtype == torch.float32
    torch.testing.assert_close(mine[3], want[3], rtol=1e-4, atol=1e-5)


def test_a_learnable_0d_captured_tensor_gets_its_gradient():
    """A 0-d tensor was a runtime scalar, so its gradient was dropped without a word (a learnable temperature never
    trained). One that requires grad is now read as a 1-element buffer: its gradient matches the definition's."""
    torch.manual_seed(3)
    q, k, v = rand(1, 2, 19, 8), rand(1, 2, 19, 8), rand(1, 2, 19, 8)
    temp = torch.tensor(2.0, requires_grad=True)
    shift = torch.tensor(0.25, requires_grad=True)

    def score(s, b, h, qi, kv):
        return s * temp + shift * (qi - kv) - torch.tanh(temp)  # temp read twice: one gradient, summed

    g = torch.randn(1, 2, 19, 8, dtype=torch.float64)
    out = flex(q, k, v, score_mod=score, block_mask=flexattn.create_block_mask(causal, 1, 1, 19, 19, device="cpu",
                                                                                 BLOCK_SIZE=8))
    ref, _ = dense(q, k, v, score, causal)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)  # the buffers are read as float32
    mine = torch.autograd.grad((out * g).sum(), (q, temp, shift))
    want = torch.autograd.grad((ref * g).sum(), (q, temp, shift))
    for name, a, b in zip(("q", "temp", "shift"), mine, want):
        assert a.shape == b.shape and a.dtype == b.dtype, name
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-5, atol=1e-5, msg=name)
    assert float(mine[1].abs()) > 1e-3 and temp.grad is None  # a real gradient; the user's tensor untouched
    with torch.no_grad():  # no gradient asked: the same trace still runs
        torch.testing.assert_close(flex(q, k, v, score_mod=score, block_mask=None), dense(q, k, v, score)[0],
                                   rtol=0, atol=1e-6)
    frozen = temp.detach()  # a 0-d tensor without grad stays a runtime scalar
    torch.testing.assert_close(flex(q, k, v, score_mod=lambda s, b, h, i, j: s * frozen),
                               dense(q, k, v, lambda s, b, h, i, j: s * frozen)[0], rtol=0, atol=1e-6)
    compiled = torch.compile(lambda q, k, v: flex(q, k, v, score_mod=score), backend="eager", fullgraph=True)
    out_c = compiled(q, k, v)
    grad_c = torch.autograd.grad((out_c * g).sum(), (temp, shift))
    want_c = torch.autograd.grad((dense(q, k, v, score)[0] * g).sum(), (temp, shift))
    for a, b in zip(grad_c, want_c):
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-5, atol=1e-5)


def test_0d_tensors_reached_through_attributes_are_bound_each_call_and_learn():
    """`s * self.temp` froze the parameter's first value into the trace as a literal: a later value was ignored and the
    parameter got no gradient. A 0-d tensor from outside the mod is now a 1-element buffer bound per call; one the mod
    makes itself (torch.tensor(3.0)) stays a constant."""
    torch.manual_seed(4)
    q, k, v = rand(1, 2, 16, 8), rand(1, 2, 16, 8), rand(1, 2, 16, 8)

    class Scorer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.temp = torch.nn.Parameter(torch.tensor(2.0))
            self.register_buffer("shift", torch.tensor(0.5))

        def score(self, s, b, h, qi, kv):
            return s * self.temp + self.shift * (qi - kv) * torch.tensor(3.0)

    m = Scorer()
    out = flex(q, k, v, score_mod=m.score)
    ref, _ = dense(q, k, v, m.score)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    mine, want = (torch.autograd.grad(o.sum(), (m.temp,))[0] for o in (out, ref))
    torch.testing.assert_close(mine.double(), want.double(), rtol=1e-5, atol=1e-6)
    assert "3.0" in flexattn.trace(m.score).text  # the tensor made inside the mod is a literal
    with torch.no_grad():
        m.shift.fill_(-1.5)
        m.temp.fill_(0.25)
    torch.testing.assert_close(flex(q, k, v, score_mod=m.score), dense(q, k, v, m.score)[0], rtol=0, atol=1e-6)
    # torch.compile reads them through their attribute paths (self.temp): they were refused there ("must be captured
    # directly") once they stopped being literals.
    def closure_score(s, b, h, qi, kv):  # bound methods are no mods under torch.compile (not a graph constant)
        return m.score(s, b, h, qi, kv)

    compiled = torch.compile(lambda q, k, v: flex(q, k, v, score_mod=closure_score), backend="eager", fullgraph=True)
    out_c = compiled(q, k, v)
    torch.testing.assert_close(out_c, dense(q, k, v, m.score)[0], rtol=0, atol=1e-6)
    grad_c = torch.autograd.grad(out_c.sum(), (m.temp,))[0]
    torch.testing.assert_close(grad_c.double(), torch.autograd.grad(dense(q, k, v, m.score)[0].sum(), (m.temp,))[0]
                               .double(), rtol=1e-5, atol=1e-6)
    with torch.no_grad():
        m.shift.fill_(2.0)
    torch.testing.assert_close(compiled(q, k, v), dense(q, k, v, m.score)[0], rtol=0, atol=1e-6)


def test_tensors_reached_through_module_attributes_work_under_torch_compile():
    """A bias held by an nn.Module (self.bias[h, q - kv]) was refused under torch.compile; its path is now found among
    the module's attributes, also one submodule down."""
    torch.manual_seed(5)
    q, k, v = rand(1, 2, 16, 8), rand(1, 2, 16, 8), rand(1, 2, 16, 8)

    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.randn(2, 31))

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

    m = Outer()

    def score(s, b, h, qi, kv):
        return s + m.inner.bias[h, qi - kv + 15]

    compiled = torch.compile(lambda q, k, v: flex(q, k, v, score_mod=score), backend="eager", fullgraph=True)
    out = compiled(q, k, v)
    ref, _ = dense(q, k, v, score)
    torch.testing.assert_close(out, ref.to(out.dtype), rtol=0, atol=1e-6)
    mine, want = (torch.autograd.grad(o.sum(), (m.inner.bias,))[0] for o in (out, ref))
    torch.testing.assert_close(mine.double(), want.double(), rtol=1e-5, atol=1e-6)


@needs_parts
def test_a_mod_made_inside_a_compiled_forward_over_graph_values_compiles_and_recompiles():
    """A score_mod defined in a module's forward over `self` and over a tensor computed there (`self.bias * 2`) failed
    with Dynamo's ClosureConversionError on every compile once the native module was loaded (a new sequence length,
    a reset); it is now taken apart into its code and captured values (_dynamo_parts)."""
    torch.manual_seed(6)

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = torch.nn.Parameter(torch.randn(2, 64, dtype=torch.float64))
            self.cap = 7.0

        def forward(self, q, k, v):
            doubled = self.bias * 2
            width = 3

            def near(t):
                return t * width

            def score(s, b, h, qi, kv, shift=doubled):
                return self.cap * torch.tanh(s / self.cap) + shift[h, kv] + near(self.bias[h, qi])
            return flex(q, k, v, score_mod=score)

    m = Attn()
    compiled = torch.compile(m, backend="aot_eager", fullgraph=True)
    for L in (8, 16, 24):
        q, k, v = rand(1, 2, L, 8), rand(1, 2, L, 8), rand(1, 2, L, 8)
        out = compiled(q, k, v)
        ref, _ = dense(q, k, v, lambda s, b, h, qi, kv: 7.0 * torch.tanh(s / 7.0) + 2 * m.bias[h, kv] + 3 * m.bias[h, qi])
        torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
        mine, want = (torch.autograd.grad(o.sum(), (m.bias, q)) for o in (out, ref))
        for a, b in zip(mine, want):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    torch._dynamo.reset()
    q, k, v = rand(1, 2, 8, 8), rand(1, 2, 8, 8), rand(1, 2, 8, 8)
    torch.testing.assert_close(compiled(q, k, v), m(q, k, v), rtol=0, atol=1e-9)


def test_modules_callable_objects_and_star_args_wrappers_are_mods():
    """torch calls any callable as a mod: an nn.Module (its forward, with gradients for its parameters), a callable
    object, a decorator's (*args) wrapper; the slot (score_mod / create_block_mask) says which kind it is."""
    torch.manual_seed(7)
    q, k, v = rand(1, 2, 20, 8), rand(1, 2, 20, 8), rand(1, 2, 20, 8)

    class RelBias(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(2, 39, dtype=torch.float64))

        def forward(self, s, b, h, qi, kv):
            return s + self.table[h, qi - kv + 19]

    class Half:
        def __call__(self, *a):
            return a[0] * 0.5

    def logged(fn):
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs)
        return wrapper

    rel = RelBias()
    out = flex(q, k, v, score_mod=rel)
    ref, _ = dense(q, k, v, rel.forward)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)  # the float64 table is read as float32
    mine, want = (torch.autograd.grad(o.sum(), (rel.table,))[0] for o in (out, ref))
    torch.testing.assert_close(mine, want, rtol=1e-5, atol=1e-6)
    if _dynamo_parts.supported():  # a module as the mod under compile needs the mod taken apart
        compiled = torch.compile(lambda q, k, v: flex(q, k, v, score_mod=rel), backend="eager", fullgraph=True)
        torch.testing.assert_close(compiled(q, k, v), ref, rtol=0, atol=1e-6)
    torch.testing.assert_close(flex(q, k, v, score_mod=Half()), dense(q, k, v, lambda s, *i: s * 0.5)[0],
                               rtol=0, atol=1e-9)
    mask = flexattn.create_block_mask(logged(causal), 1, 1, 20, 20, device="cpu")
    torch.testing.assert_close(flex(q, k, v, score_mod=logged(lambda s, b, h, qi, kv: s - kv), block_mask=mask),
                               dense(q, k, v, lambda s, b, h, qi, kv: s - kv, causal)[0], rtol=0, atol=1e-9)
    with pytest.raises(TypeError, match=r"cannot tell whether .*wrapper.* is a score_mod or a mask_mod .*\*args.*"
                                        r"pass kind='score_mod'"):
        flexattn.trace(logged(causal))


def test_gradients_of_rows_of_huge_negative_scores():
    """P from exp(s - lse) summed to S once |scores| ~ 1e20 (lse lost log(S)): the backward's dv was S times too
    large. Uniform scores: out is the mean of v, dv = (rows / S) per key, dq = dk = 0."""
    q, k, v = rand(1, 2, 5, 8), rand(1, 2, 6, 8), rand(1, 2, 6, 4)
    out = flex(q, k, v, score_mod=lambda s, b, h, i, j: s * 0 - 1e20)
    torch.testing.assert_close(out, v.mean(2, keepdim=True).expand_as(out), rtol=0, atol=1e-12)
    dq, dk, dv = torch.autograd.grad(out.sum(), (q, k, v))
    torch.testing.assert_close(dv, torch.full_like(dv, 5 / 6), rtol=0, atol=1e-12)
    assert dq.abs().max() == 0 and dk.abs().max() == 0


def test_transforms_forward_ad_and_double_backward_are_refused_clearly():
    """A dual tensor's tangent was dropped silently; vmap / jvp failed inside the binding; create_graph=True gave
    first gradients without a graph, so a gradient penalty added nothing."""
    import torch.autograd.forward_ad as fwAD
    q, k, v = rand(1, 1, 6, 4), rand(1, 1, 6, 4), rand(1, 1, 6, 4)
    with fwAD.dual_level(), pytest.raises(NotImplementedError, match="does not support forward-mode AD"):
        flex(fwAD.make_dual(q.detach(), torch.ones_like(q)), k, v)
    for transform in (lambda: torch.func.vmap(lambda x: flex(x, k, v))(q[None].expand(2, -1, -1, -1, -1)),
                      lambda: torch.func.grad(lambda x: flex(x, k, v).sum())(q.detach())):
        with pytest.raises(NotImplementedError, match=r"does not support torch.func transforms \(vmap, grad"):
            transform()
    out = flex(q, k, v)
    gq, = torch.autograd.grad(out.sum(), (q,), create_graph=True)
    torch.testing.assert_close(gq, torch.autograd.grad(flex(q, k, v).sum(), (q,))[0], rtol=0, atol=0)
    with pytest.raises(RuntimeError, match=r"backward of flex_attention is not differentiable \(double backward"):
        (out.sum() + gq.square().sum()).backward()


def test_detach_in_a_mod_stops_the_gradient():
    """score.detach() was the score itself in the IR, so its gradient flowed (dq off by up to 1.15 against torch);
    table.detach()[...] failed to trace. Both are the IR's detach node now: values flow, gradients stop."""
    torch.manual_seed(8)
    q, k, v = rand(1, 2, 12, 8), rand(1, 2, 12, 8), rand(1, 2, 12, 8)
    table = rand(2, 24)

    def score(s, b, h, qi, kv):
        return s + 0.5 * s.detach() + table.detach()[h, qi - kv + 12] + torch.where(qi > kv, s, s.detach())

    out = flex(q, k, v, score_mod=score)
    ref, _ = dense(q, k, v, score)  # torch's autograd of the same function is the definition
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    for mine, want in zip(*(torch.autograd.grad(o.sum(), (q, k, v)) for o in (out, ref))):
        torch.testing.assert_close(mine, want, rtol=1e-5, atol=1e-6)
    assert flexattn.trace(score).text == ("_t0 = detach(score);\nscore + 0.5 * _t0 + detach(table[h, q_idx - kv_idx + 12]) "
                                          "+ where(q_idx > kv_idx, score, _t0)")
    g, = torch.autograd.grad(flex(q, k, v, score_mod=score).sum(), (table,), allow_unused=True)
    assert g is None or g.abs().max() == 0
    mask = flexattn.create_block_mask(lambda b, h, qi, kv: table.detach()[0, kv] > 0, 1, 1, 12, 12, device="cpu",
                                      BLOCK_SIZE=4)
    want = flexattn.create_mask(lambda b, h, qi, kv: table.detach()[0, kv] > 0, 1, 1, 12, 12, device="cpu")
    assert torch.equal(want[0, 0, 0], table[0, :12] > 0)
    with torch.no_grad():  # a mask_mod capture that requires grad is refused when gradients are on (as torch)
        torch.testing.assert_close(flex(q, k, v, block_mask=mask), dense(q, k, v, mask=lambda b, h, qi, kv: table[0, kv] > 0)[0],
                                   rtol=0, atol=1e-6)


def _split_tensor_clamp_gradient():
    """torch 2.15 splits clamp's gradient at a tie with a tensor bound (as maximum does); torch 2.11 does not (found on
    the device, session 39). flexattn follows the newer rule."""
    x = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    return torch.autograd.grad(torch.clamp(x, min=torch.tensor(0.0, dtype=torch.float64)), x)[0].item() == 0.5


def _strict_clamp_gradient():
    """torch 2.15 passes no gradient at a clamp bound that is a number; older torch (2.11) passes it. flexattn follows
    the newer rule, so the tie comparisons against this torch's autograd run only where it agrees."""
    x = torch.tensor(1.0, requires_grad=True)
    return torch.autograd.grad(x.clamp(max=1.0), x)[0].item() == 0.0


@pytest.mark.parametrize("name", ["relu", "clamp", "smooth", "lerp", "nan"])
def test_activations_and_clamps_match_torch_values_and_gradients_at_ties(name):
    if name == "clamp" and not _strict_clamp_gradient():
        pytest.skip("this torch passes clamp's gradient at a number bound (torch 2.15 does not)")
    """Integer scores put values exactly on clamp bounds and relu's kink, where torch passes no gradient for a number
    bound (flexattn's max / min split it in half); relu6, hardtanh, silu, softplus, log1p, reciprocal, round, lerp,
    hypot and nan_to_num were not supported in mods."""
    import torch.nn.functional as F
    mods = {
        "relu": lambda s, b, h, q, kv: torch.relu(s * 4).round() + F.relu6(s * 3) + F.hardtanh(s) + torch.relu(s),
        "clamp": lambda s, b, h, q, kv: s.clamp(-1, 1) + torch.clamp(s, min=1.0) + s.clamp(max=0.0) + s.clamp(2, -2),
        "smooth": lambda s, b, h, q, kv: F.silu(s) + F.softplus(s * 30, beta=2) * 0.01 + torch.log1p(s.abs()),
        "lerp": lambda s, b, h, q, kv: torch.reciprocal(s.abs() + 1) + torch.lerp(s, s * 2, 0.75) + s.lerp(-s, 0.25),
        "nan": lambda s, b, h, q, kv: torch.hypot(s, s * 0.5) + torch.nan_to_num(torch.log(s)) * 0.1,
    }
    torch.manual_seed(9)
    q, k, v = (torch.randint(-1, 2, (1, 2, 9, 8)).double().requires_grad_() for _ in range(3))
    out = flex(q, k, v, score_mod=mods[name], scale=1.0)
    ref, _ = dense(q, k, v, mods[name], scale=1.0)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for mine, want in zip(*(torch.autograd.grad(o.sum(), (q, k, v)) for o in (out, ref))):
        torch.testing.assert_close(mine, want, rtol=0, atol=1e-12, equal_nan=True)


def test_round_is_half_to_even():
    x = np.array([0.49999997, 0.5, 1.5, 2.5, -0.5, -1.5, 3.7, -2.2, 2.0**24 + 2], dtype=np.float32)
    got = flexattn.trace(lambda s, b, h, q, kv: torch.round(s)).evaluate(score=x)
    np.testing.assert_array_equal(got, torch.round(torch.from_numpy(x)).numpy())


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message for a machine without a GPU")
def test_a_cuda_block_mask_without_a_gpu_says_so():
    with pytest.raises(RuntimeError, match="create_block_mask: device='cuda', but torch finds no CUDA device"):
        _torch_api.create_block_mask(causal, 1, 1, 8, 8, device="cuda")  # was "invalid argument to exchangeDevice"


@needs_parts
def test_changing_captured_numbers_under_fullgraph_compile():
    """A captured int / float that changes between calls becomes symbolic in Dynamo, which could not hand it to the plan:
    fullgraph failed (assume_constant_result argument conversion) and without it the graph broke. A mod that branches
    on a captured number is planned with the values (a recompile per int value), so its branches follow; partials work."""
    import functools

    q = rand(1, 1, 16, 8, dtype=torch.float32, grad=False)

    def make_scale(x):
        return lambda s, b, h, qi, kv: s * x

    def make_window(w):
        return lambda b, h, qi, kv: (qi >= kv) & (qi - kv < w)

    def make_repeat(n):
        def sm(s, b, h, qi, kv):
            for _ in range(n):
                s = s * 0.5
            return s
        return sm

    def shift(s, b, h, qi, kv, by):
        return s + by * kv

    frames = {}
    for name, make in (("float", lambda i: make_scale(float(i))), ("int", make_scale), ("branch", lambda i: make_repeat(i % 3)),
                       ("partial", lambda i: functools.partial(shift, by=0.1 * i))):
        torch._dynamo.reset()
        cnt = torch._dynamo.testing.CompileCounterWithBackend("eager")
        f = torch.compile(lambda q, sm, bm: flex(q, q, q, score_mod=sm, block_mask=bm), backend=cnt, fullgraph=True)
        for i in range(1, 7):
            bm = flexattn.create_block_mask(make_window(i + 2), 1, 1, 16, 16, device="cpu", BLOCK_SIZE=8)
            sm = make(i)
            torch.testing.assert_close(f(q, sm, bm), flex(q, q, q, score_mod=sm, block_mask=bm), rtol=0, atol=1e-6)
        frames[name] = cnt.frame_count
    # automatic dynamic after the first change; a trace that branches on its int recompiles on a new value
    assert frames["float"] <= 2 and frames["int"] <= 2 and frames["partial"] <= 2 and frames["branch"] <= 6, frames


def test_a_mask_mod_capture_that_requires_grad_is_refused_in_the_forward():
    """It failed only in the backward, with the variant's internal message ("grad_buffers: 'W' is not a floating-point
    buffer read by the score_mod"); torch refuses it too. Without gradients it runs."""
    q, k, v = rand(1, 2, 16, 8), rand(1, 2, 16, 8), rand(1, 2, 16, 8)
    width = torch.tensor(4.0, requires_grad=True)

    def band(b, h, qi, kv):
        return (qi - kv).abs() < width

    bm = flexattn.create_block_mask(band, 1, 1, 16, 16, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(RuntimeError, match="mask_mod: closure variable 'width' .* requires grad, but a mask_mod's"):
        flex(q, k, v, block_mask=bm)
    compiled = torch.compile(lambda q, k, v: flex(q, k, v, block_mask=bm), backend="eager", fullgraph=True)
    with pytest.raises(RuntimeError, match="a mask_mod's captured tensors get no gradient"):
        compiled(q, k, v)
    with torch.no_grad():
        torch.testing.assert_close(flex(q, k, v, block_mask=bm), dense(q, k, v, mask=band)[0], rtol=0, atol=1e-6)


@pytest.mark.parametrize("dtype,atol", [(torch.float32, 2e-6), (torch.bfloat16, 1.6e-2), (torch.float16, 2e-3)])
def test_low_precision_inputs_odd_lengths_and_non_contiguous_views(dtype, atol):
    torch.manual_seed(1)
    base = torch.randn(2, 37, 3, 24)  # [B, L, H, E] -> a transposed, non-contiguous [B, H, L, E] view
    q = base.to(dtype).transpose(1, 2).requires_grad_()
    k = torch.randn(2, 3, 29, 24, dtype=dtype, requires_grad=True)
    v = torch.randn(2, 3, 29, 24, dtype=dtype, requires_grad=True)
    assert not q.is_contiguous()
    out = flex(q, k, v, score_mod=lambda s, b, h, i, j: s - (i - j).abs() * 0.1)
    ref, _ = dense(*(x.double() for x in (q, k, v)), lambda s, b, h, i, j: s - (i - j).abs() * 0.1)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=atol)
    out.sum().backward()
    assert q.grad.dtype == dtype and q.grad.shape == q.shape and torch.isfinite(q.grad.float()).all()


def test_fully_masked_rows_are_zero_with_minus_inf_lse_and_finite_gradients():
    q, k, v = rand(1, 2, 20, 8), rand(1, 2, 20, 8), rand(1, 2, 20, 8)
    out, lse = flex(q, k, v, block_mask=flexattn.create_block_mask(lambda b, h, i, j: (i >= 5) & (j <= i), 1, 1, 20,
                                                                   20, device="cpu", BLOCK_SIZE=8), return_lse=True)
    assert (out[:, :, :5] == 0).all() and (lse[:, :, :5] == -math.inf).all()
    out.sum().backward()
    assert torch.isfinite(q.grad).all() and (q.grad[:, :, :5] == 0).all()


def test_compiled_fullgraph_matches_eager_and_never_recompiles_for_new_scalar_values():
    torch.manual_seed(2)
    q, k, v = rand(2, 2, 33, 16, dtype=torch.float32), rand(2, 2, 33, 16, dtype=torch.float32), rand(
        2, 2, 33, 16, dtype=torch.float32)
    bias = torch.randn(2, 66, requires_grad=True)
    shift = torch.tensor(0.5)
    window = torch.tensor(9)

    def score(s, b, h, q_idx, kv_idx):
        return s * shift + bias[h, q_idx - kv_idx + 33]

    def sliding(b, h, q_idx, kv_idx):
        return (q_idx >= kv_idx) & (q_idx - kv_idx < window)

    bm = flexattn.create_block_mask(sliding, 1, 1, 33, 33, device="cpu", BLOCK_SIZE=16)

    def f(q, k, v, bm):
        out, aux = flex(q, k, v, score_mod=score, block_mask=bm, return_aux=AuxRequest(lse=True))
        return out, aux.lse

    for backend in ("aot_eager", "inductor"):
        cnt = torch._dynamo.testing.CompileCounterWithBackend(backend)
        cf = torch.compile(f, backend=cnt, fullgraph=True)
        for shift_value, window_value in ((0.5, 9), (2.0, 4), (1.0, 33)):
            shift.fill_(shift_value)
            window.fill_(window_value)
            bm = flexattn.create_block_mask(sliding, 1, 1, 33, 33, device="cpu", BLOCK_SIZE=16)
            (o, l), (oe, le) = cf(q, k, v, bm), f(q, k, v, bm)
            torch.testing.assert_close(o, oe, rtol=0, atol=0)
            mine = torch.autograd.grad(o.sum() + l.sum(), (q, k, v, bias))
            want = torch.autograd.grad(oe.sum() + le.sum(), (q, k, v, bias))
            for a, b in zip(mine, want):
                torch.testing.assert_close(a, b, rtol=0, atol=0)
        assert cnt.frame_count == 1, backend


def test_a_captured_tensor_without_a_path_is_refused_under_compile_only():
    class Holder:
        pass
    h = Holder()
    h.bias = torch.randn(2, 8)

    def score(s, b, hh, q_idx, kv_idx):
        return s + h.bias[hh, kv_idx]
    q = rand(1, 2, 8, 16, dtype=torch.float32, grad=False)
    ref, _ = dense(q, q, q, lambda s, b, hh, i, j: s + h.bias[hh, j])
    torch.testing.assert_close(flex(q, q, q, score_mod=score), ref.float(), rtol=0, atol=1e-5)
    # An attribute of a captured object has a path (h.bias) since session 37.
    compiled = torch.compile(lambda q: flex(q, q, q, score_mod=score), backend="eager", fullgraph=True)
    torch.testing.assert_close(compiled(q), ref.float(), rtol=0, atol=1e-5)
    store = {("bias", 0): h.bias}  # a dict with non-string keys: the walk does not look into it

    def hidden(s, b, hh, q_idx, kv_idx):
        return s + store[("bias", 0)][hh, kv_idx]
    torch.testing.assert_close(flex(q, q, q, score_mod=hidden), ref.float(), rtol=0, atol=1e-5)
    with pytest.raises(Exception, match="must be captured directly"):
        torch.compile(lambda q: flex(q, q, q, score_mod=hidden), backend="eager", fullgraph=True)(q)


def test_errors_follow_torch():
    q = rand(1, 2, 8, 16, grad=False)
    with pytest.raises(ValueError, match="Expected query, key, and value to have the same dtype"):
        flex(q, q.float(), q)
    with pytest.raises(ValueError, match="Try setting enable_gqa=True"):
        flex(q, q[:, :1], q[:, :1])
    with pytest.raises(ValueError, match="Cannot specify both return_lse and return_aux"):
        flex(q, q, q, return_lse=True, return_aux=AuxRequest(lse=True))
    with pytest.raises(NotImplementedError, match="NYI: query, key, and value must be 4D tensors"):
        flex(q[0], q[0], q[0])
    bm = flexattn.create_block_mask(causal, 1, 1, 16, 16, device="cpu", BLOCK_SIZE=8)
    with pytest.raises(ValueError, match=r"_adjust\(q_len, kv_len\)"):
        flex(q, q, q, block_mask=bm)
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        flex(q, q, q, return_lse=True)


def test_enable_routes_torch_api_including_names_bound_by_import():
    import torch.nn.attention.flex_attention as tfa
    from torch.nn.attention.flex_attention import flex_attention as bound_by_name
    torch_fa, torch_cbm = tfa.flex_attention, tfa.create_block_mask
    assert not fat.is_enabled()
    q = rand(1, 2, 16, 16, dtype=torch.float32, grad=False)
    with fat.enabled():
        assert tfa.flex_attention is _torch_api.flex_attention and tfa.create_block_mask is _torch_api.create_block_mask
        before = _torch_ops.stats["fwd"]
        bm = tfa.create_block_mask(causal, 1, 1, 16, 16, device="cpu", BLOCK_SIZE=8)
        out = tfa.flex_attention(q, q, q, block_mask=bm)
        assert _torch_ops.stats["fwd"] == before + 1 and isinstance(bm, flexattn.BlockMask)
        torch.testing.assert_close(out, dense(q, q, q, mask=causal)[0], rtol=0, atol=1e-5)
        # transformers dispatches on isinstance(mask, torch's BlockMask): flexattn's masks of torch tensors are both
        for m in (bm, bm[0], bm.to("cpu"), bm._adjust(8, 8), flexattn.create_block_mask(causal, 1, 1, 16, 16, "cpu")):
            assert isinstance(m, tfa.BlockMask) and isinstance(m, flexattn.BlockMask), type(m).__mro__
    assert not isinstance(flexattn.create_block_mask(causal, 1, 1, 16, 16, device="numpy"), tfa.BlockMask)
    assert tfa.flex_attention is torch_fa and tfa.create_block_mask is torch_cbm and bound_by_name is torch_fa
    fat.enable()
    fat.enable()  # idempotent
    assert fat.is_enabled()
    fat.disable()
    assert tfa.flex_attention is torch_fa and not fat.is_enabled()


def test_enable_patches_modules_that_imported_the_function_by_name():
    import types
    import sys
    import torch.nn.attention.flex_attention as tfa
    user = types.ModuleType("flexattn_test_user_module")
    user.fa = tfa.flex_attention
    sys.modules[user.__name__] = user
    try:
        with fat.enabled():
            assert user.fa is _torch_api.flex_attention
        assert user.fa is tfa.flex_attention
    finally:
        del sys.modules[user.__name__]


def test_eager_fast_path_matches_the_op_and_follows_changed_captures():
    """No-grad eager calls skip the custom op and reuse cached traces; results must not depend on that."""
    torch.manual_seed(1)
    q, k, v = (rand(1, 2, 33, 16, grad=False) for _ in range(3))

    def make(offset):
        def score(s, b, h, q_idx, kv_idx):
            return s + offset
        return score

    calls = _torch_ops.stats["fwd"]
    with torch.no_grad():
        out_fast = flex(q, k, v, score_mod=make(0.5), block_mask=None)
    qg = q.clone().requires_grad_()
    out_op = flex(qg, k, v, score_mod=make(0.5), block_mask=None)
    assert torch.equal(out_fast, out_op.detach())
    assert _torch_ops.stats["fwd"] == calls + 2
    # Same code, a captured tensor instead of a float: a different structure, never the cached one.
    bias = torch.linspace(-2, 2, 33, dtype=torch.float64)

    def make_tensor(t):
        def score(s, b, h, q_idx, kv_idx):
            return s + t[kv_idx]
        return score

    for _ in range(2):
        out_t = flex(q, k, v, score_mod=make_tensor(bias))
        ref_t, _ = dense(q, k, v, score=lambda s, b, h, qi, ki: s + bias[ki])
        assert torch.allclose(out_t, ref_t, atol=1e-10)
        out_f = flex(q, k, v, score_mod=make(-1.0))
        ref_f, _ = dense(q, k, v, score=lambda s, b, h, qi, ki: s - 1.0)
        assert torch.allclose(out_f, ref_f, atol=1e-10)


def test_mod_kind_follows_wrapped_signatures_and_defaults():
    import functools
    from flexattn._tracer import mod_kind

    def mask(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    @functools.wraps(mask)
    def wrapper(*args):
        return mask(*args)

    assert mod_kind(mask) == "mask_mod"
    assert mod_kind(wrapper) == "mask_mod"  # inspect follows __wrapped__; the code-keyed cache must not

    def five(s, b, h, q_idx, kv_idx):
        return s

    assert mod_kind(five) == "score_mod"
    five.__defaults__ = (0,)  # now 4 parameters without defaults
    assert mod_kind(five) == "mask_mod"


def test_eager_autograd_path_matches_the_custom_op_gradients():
    """Eager calls with gradients use _EagerAttn instead of the op's registered autograd: same numbers,
    including a learnable buffer and an lse gradient."""
    torch.manual_seed(2)
    q, k, v = rand(2, 4, 21, 8), rand(2, 2, 21, 8), rand(2, 2, 21, 8)
    bias = rand(21).detach().requires_grad_()

    def score(s, b, h, q_idx, kv_idx):
        return s + bias[kv_idx]

    spec, scalars, buffers = _torch_api._bound_values(score, causal)
    mask_mod, mask, meta = _torch_api._mask_parts(None, q, k)
    args = (_torch_api._scalar_tensor(scalars), [_torch_api._buffer_tensor(b, q.device) for b in buffers], mask,
            spec, meta, 0.5)
    g, gl = rand(2, 4, 21, 8, grad=False), rand(2, 4, 21, grad=False)
    results = []
    for fn in (_torch_ops.attn_fwd, _torch_ops.attn_fwd_autograd):
        out, lse, _ = fn(q, k, v, *args)
        results.append((out.detach(), grads(out, lse, (q, k, v, bias), g, gl)))
    (o1, g1), (o2, g2) = results
    assert torch.equal(o1, o2)
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)


def test_row_order_is_most_kv_blocks_first_cached_and_only_for_cuda(monkeypatch):
    # Two documents of 384 and 128 rows, causal inside (block 128): rows hold 1, 2, 3 and 1 kv blocks.
    doc = torch.tensor([0] * 384 + [1] * 128)
    bm = _torch_api.create_block_mask(lambda b, h, q, kv: (doc[q] == doc[kv]) & (q >= kv), 1, 1, 512, 512,
                                      device="cpu")
    order, on = _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, bm.kv_indices.shape[-1])
    assert order.dtype == torch.int32 and order.tolist() == [[[2, 1, 3, 0]]]  # ties: last row first
    assert on.dtype == torch.int32 and on.tolist() == [1]  # row 2 (3 blocks) before row 3 (1): worth the order
    assert _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, 4)[0] is order  # cached on the mask
    # Causal: the natural order (last rows first) is longest first already, so the forward keeps it.
    causal = _torch_api.create_block_mask(lambda b, h, q, kv: q >= kv, 1, 1, 512, 512, device="cpu")
    c_order, c_on = _torch_api._row_order(causal, causal.kv_num_blocks, causal.full_kv_num_blocks, 4)
    assert c_order.tolist() == [[[3, 2, 1, 0]]] and c_on.tolist() == [0]
    monkeypatch.setenv("FLEXATTN_SM90_ROW_ORDER", "1")
    _, mask, meta = _torch_api._mask_tensors(bm, torch.device("cpu"))
    assert len(meta) == 6 and all(t is not order for t in mask)  # the cpu backend has no use for it
    # Only for the Hopper forward's calls: cuda, 128-row mask rows, more than 64 query rows (not the decode family).
    cuda = torch.device("cuda")
    assert _torch_api._row_order_mode_for(cuda, 128, 512) == "1"
    assert _torch_api._row_order_mode_for(cuda, 128, 64) == "0"
    assert _torch_api._row_order_mode_for(cuda, 64, 512) == "0"
    assert _torch_api._row_order_mode_for(torch.device("cpu"), 128, 512) == "0"
    assert _torch_api._row_order_mode() == "1"
    monkeypatch.setenv("FLEXATTN_SM90_ROW_ORDER", "0")
    assert _torch_api._row_order_mode() == "0"
    monkeypatch.delenv("FLEXATTN_SM90_ROW_ORDER")
    assert _torch_api._row_order_mode() == "auto"
    monkeypatch.setenv("FLEXATTN_SM90_ROW_ORDER", "sorted")
    with pytest.raises(ValueError, match="FLEXATTN_SM90_ROW_ORDER: expected 0, 1 or auto, got 'sorted'"):
        _torch_api._row_order_mode()


def test_device_mask_takes_the_order_and_its_flag():
    num, idx = torch.zeros(1, 1, 2, dtype=torch.int32), torch.zeros(1, 1, 2, 2, dtype=torch.int32)
    order, on = torch.tensor([[[1, 0]]], dtype=torch.int32), torch.ones(1, dtype=torch.int32)
    meta = [256, 256, 128, 128, 0, 0]
    assert len(_torch_ops._device_mask([num, idx], meta)[4]) == 8
    ptrs = _torch_ops._device_mask([num, idx, order], meta + [1])[4]
    assert len(ptrs) == 9 and ptrs[8] == order.data_ptr()
    ptrs = _torch_ops._device_mask([num, idx, order, on], meta + [2])[4]
    assert len(ptrs) == 10 and ptrs[8:] == [order.data_ptr(), on.data_ptr()]


def test_block_masks_of_torch_tensors_pickle_and_copy():
    import copy
    import io
    import pickle

    bm = flexattn.create_block_mask(causal, 1, 1, 64, 64, device="cpu", BLOCK_SIZE=16)
    for clone in (copy.copy(bm), copy.deepcopy(bm), pickle.loads(pickle.dumps(bm))):
        assert type(clone) is type(bm) and clone.mask_mod is causal and torch.equal(clone.kv_indices, bm.kv_indices)
    buf = io.BytesIO()
    torch.save(bm, buf)
    buf.seek(0)
    assert torch.equal(torch.load(buf, weights_only=False).full_kv_num_blocks, bm.full_kv_num_blocks)


def test_tensor_and_number_operands_follow_their_own_torch_rules():
    """A 0-d tensor is no Python number to torch: clamp by a tensor bound splits the gradient at a tie (by a number it
    passes none), and an integer to a tensor's negative power stays an integer power (torch refuses a number's only
    for a tensor base, and Python gives a float for two numbers)."""
    w = torch.tensor([0.0, 1.0, -1.0, 0.0], dtype=torch.float64, requires_grad=True)
    lo, e, n = torch.tensor(0.0, dtype=torch.float64), torch.tensor(-1), 4
    q, k, v = rand(1, 1, 3, 4), rand(1, 1, 4, 4), rand(1, 1, 4, 4)
    mods = []
    if _split_tensor_clamp_gradient():
        mods.append(lambda s, b, h, qi, kv: s + torch.clamp(w[kv], min=lo))
    if _strict_clamp_gradient():
        mods.append(lambda s, b, h, qi, kv: s + torch.clamp(w[kv], min=0.0))
    for mod in mods:
        out, ref = flex(q, k, v, score_mod=mod), dense(q, k, v, mod)[0]
        torch.testing.assert_close(torch.autograd.grad(out.sum(), w)[0], torch.autograd.grad(ref.sum(), w)[0],
                                   rtol=1e-6, atol=1e-9)
    mask = flexattn.create_mask(lambda b, h, qi, kv: (kv + 1) ** e == 0, 1, 1, 1, 4, device="cpu")
    assert mask[0, 0, 0].tolist() == [False, True, True, True]
    assert flexattn.create_mask(lambda b, h, qi, kv: n ** e + kv * 0 == 0, 1, 1, 1, 2, device="cpu").all()
    assert not flexattn.create_mask(lambda b, h, qi, kv: n ** -1 + kv * 0 == 0, 1, 1, 1, 2, device="cpu").any()


def test_compiled_backward_with_transformers_head_layout():
    """q / k / v as x.view(B, L, H, D).transpose(1, 2) inside the compiled function: the backward op's fake outputs kept
    q's strides while the kernels return contiguous gradients, so the compiled backward's views failed."""
    B, L, H, D = 2, 24, 4, 8

    def f(x):
        q = x.view(B, L, H, D).transpose(1, 2)
        return flex(q, q * 0.5, q * 2.0).transpose(1, 2).reshape(B, L, H * D)

    x = torch.randn(B, L, H * D, dtype=torch.float64, requires_grad=True)
    y = torch.compile(f, backend="aot_eager", fullgraph=True)(x)
    q = x.view(B, L, H, D).transpose(1, 2)
    ref = dense(q, q * 0.5, q * 2.0)[0].transpose(1, 2).reshape(B, L, H * D)
    torch.testing.assert_close(y, ref, rtol=0, atol=1e-9)
    mine, want = (torch.autograd.grad(o.square().sum(), x)[0] for o in (y, ref))
    torch.testing.assert_close(mine, want, rtol=1e-7, atol=1e-9)


def test_the_first_call_may_be_inside_fullgraph_compile():
    """The extension loaded on the first call, whose file checks Dynamo cannot trace: a first call inside
    torch.compile(fullgraph=True) failed, and every later one too. With torch imported first it loads with the package."""
    import os
    import subprocess
    import sys

    code = ("import torch, flexattn\n"
            "q = torch.randn(1, 1, 8, 8)\n"
            "f = torch.compile(lambda q: flexattn.flex_attention(q, q, q), backend='eager', fullgraph=True)\n"
            "torch.testing.assert_close(f(q), torch.softmax(q @ q.mT / 8 ** 0.5, -1) @ q)\n")
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(flexattn.__file__))
    env["PYTHONPATH"] = os.pathsep.join([package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]


@needs_parts
def test_numbers_read_through_self_follow_their_changes_under_compile():
    """self.softcap / self.shift / self.cfg["slope"] read by a mod were constants of the compiled graph's plan, so a
    changed value ran stale without a word; the graph now compares each with its planned value (Dynamo guards on
    it), so a change recompiles."""
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.softcap, self.shift, self.cfg = 20.0, 3, {"slope": 0.05}

        def score(self, s, b, h, qi, kv):
            return self.softcap * torch.tanh(s / self.softcap) + (qi - kv) * self.cfg["slope"] + self.shift

        def forward(self, q):
            return flex(q, q, q, score_mod=self.score)

    m = Layer()
    compiled = torch.compile(m, backend="eager", fullgraph=True)
    q = rand(1, 2, 16, 8, grad=False)
    for cap, shift, slope in [(20.0, 3, 0.05), (0.5, 3, 0.05), (0.5, 7, 0.05), (0.5, 7, -0.2)]:
        m.softcap, m.shift, m.cfg["slope"] = cap, shift, slope
        ref = dense(q, q, q, lambda s, b, h, qi, kv: cap * torch.tanh(s / cap) + (qi - kv) * slope + shift)[0]
        torch.testing.assert_close(compiled(q), ref, rtol=0, atol=1e-6)
