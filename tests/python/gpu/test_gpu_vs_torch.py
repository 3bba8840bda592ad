"""flexattn's cuda backend through torch (bf16 CUDA tensors) against torch.nn.attention.flex_attention:
forward (out, lse, max), backward (dq, dk, dv, learnable-bias gradients, lse gradient), GQA, K/V batch
broadcast, odd lengths, head dims that need padding, return_lse / return_aux, torch.compile (ours, and
torch's compiled flex for one case), the GPU BlockMask builder against torch's create_block_mask,
flexattn.torch.enable() on a small transformer block, and the deterministic backward (bitwise repeatable).

Errors are max |x - ref| against torch's eager flex_attention in float64; the limit is 3x the error of
torch's own eager flex_attention at the same precision (bf16) plus a small floor, so a tolerance always
means "as accurate as torch"."""
import math

import pytest

from .backend import require

torch, C = require()

import torch.nn.attention.flex_attention as tfa  # noqa: E402

import flexattn  # noqa: E402
from flexattn import AuxRequest  # noqa: E402

import flexattn.torch as fat  # noqa: E402
from flexattn import _torch_api, _torch_ops  # noqa: E402
import torch._dynamo.testing  # noqa: E402

TORCH_FLEX, TORCH_CBM = tfa.flex_attention, tfa.create_block_mask  # torch's, even while enable() is on
DEV = "cuda"
L, S = 257, 257

# ---- the mod corpus (module level: mods under torch.compile must be defined outside the graph) ---------
WINDOW = torch.tensor(64, device=DEV)
DOC = torch.repeat_interleave(torch.arange(20, device=DEV), 60)[:1024].to(torch.int32)  # ids for lengths <= 1024
PREFIX = 48
SLOPES = torch.exp2(-torch.arange(1, 9, device=DEV, dtype=torch.float32))
CAP = 20.0
REL_BIAS = torch.zeros(8, L + S, device=DEV).normal_(0, 0.5).requires_grad_()
TEMP = torch.tensor(1.25, device=DEV, requires_grad=True)  # a learnable 0-d temperature (read as a 1-element buffer)


def causal(b, h, q, kv):
    return q >= kv


def sliding(b, h, q, kv):
    return (q >= kv) & (q - kv < WINDOW)


def document(b, h, q, kv):
    return DOC[q] == DOC[kv]


def prefix_lm(b, h, q, kv):
    return (kv < PREFIX) | (q >= kv)


def alibi(score, b, h, q, kv):
    return score + SLOPES[h] * (kv - q)


def softcap(score, b, h, q, kv):
    return CAP * torch.tanh(score / CAP)


def rel_bias(score, b, h, q, kv):
    return score + REL_BIAS[h, q - kv + S]


def temperature(score, b, h, q, kv):
    return score * TEMP


def detached_bias(score, b, h, q, kv):  # the gradient stops at detach(), for the score and for the table
    return score + 0.5 * score.detach() + REL_BIAS.detach()[h, q - kv + S] + REL_BIAS[h, kv - q + S]


# Rows of captured tensors (python/flexattn/_rows.py), as attention-gym's top-k tile mask (vsa.py) and
# latent-attention rope score (latent_attention.py) use them. Tile t of the queries always keeps its own kv tile.
TOPK = torch.randint(0, 5, (2, 4, 5, 3), device=DEV)
TOPK[..., 0] = torch.arange(5, device=DEV)
ROPE_Q, ROPE_K = torch.randn(2, 4, L, 8, device=DEV) * 0.3, torch.randn(2, 1, S, 8, device=DEV) * 0.3


def top_k_tiles(b, h, q, kv):
    return (TOPK[b, h, q // 64] == (kv // 64).unsqueeze(-1)).any(dim=-1)


def rope_score(score, b, h, q, kv):
    return score + torch.dot(ROPE_Q[b, h, q], ROPE_K[b, 0, kv])


CORPUS = {  # name: (score_mod, mask_mod, learnable buffers)
    "full": (None, None, ()),
    "causal": (None, causal, ()),
    "sliding_window": (None, sliding, ()),
    "document": (None, document, ()),
    "prefix_lm": (None, prefix_lm, ()),
    "alibi+causal": (alibi, causal, ()),
    "softcap+causal": (softcap, causal, ()),
    "learnable_rel_bias": (rel_bias, None, (REL_BIAS,)),
    "learnable_0d_temperature+causal": (temperature, causal, (TEMP,)),
    "detach: score and table+causal": (detached_bias, causal, (REL_BIAS,)),
    "rows: top-k tiles + rope": (rope_score, top_k_tiles, ()),
}


def masks(mask, B, Lq=L, Skv=S, H=None):
    if mask is None:
        return None, None
    return (TORCH_CBM(mask, B, H, Lq, Skv, device=DEV),
            _torch_api.create_block_mask(mask, B, H, Lq, Skv, device=DEV))


def run(case, score, bm_pair, q, k, v, learnable, report, **kw):
    """Checks ours against torch (out, lse, grads) and returns our outputs."""
    bm_t, bm_f = bm_pair
    g = torch.randn(q.shape[:3] + (v.shape[-1],), device=DEV, dtype=torch.float64)
    gl = torch.randn(q.shape[:3], device=DEV, dtype=torch.float64)
    inputs = (q, k, v) + tuple(learnable)

    def fwd_bwd(fn, dt, bm):
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        for b in learnable:
            b.grad = None
        out, aux = fn(*xs, score_mod=score, block_mask=bm, return_aux=AuxRequest(lse=True, max_scores=True), **kw)
        lse = torch.where(aux.lse.isinf(), 0.0, aux.lse)
        ((out.double() * g).sum() + (lse.double() * gl).sum()).backward()
        grads = [x.grad.double() for x in xs] + [b.grad.double().clone() for b in learnable]
        return out.double(), aux.lse.double(), aux.max_scores.double(), grads

    try:
        ref = fwd_bwd(TORCH_FLEX, torch.float64, bm_t)
    except ValueError as e:  # torch 2.11's flex has no gradient for a 0-d capture (its vmap'd joint graph refuses it)
        if any(b.dim() == 0 for b in learnable):
            pytest.skip(f"this torch's flex_attention cannot differentiate a 0-d capture: {e}")
        raise
    base = fwd_bwd(TORCH_FLEX, q.dtype, bm_t)
    ours = fwd_bwd(_torch_api.flex_attention, q.dtype, bm_f)
    names = ["out", "lse", "max"] + ["dq", "dk", "dv"] + [f"d_buf{i}" for i in range(len(learnable))]
    ok = True
    for name, r, b, o in zip(names, ref[:3] + tuple(ref[3]), base[:3] + tuple(base[3]), ours[:3] + tuple(ours[3])):
        fin = torch.isfinite(r)
        assert torch.equal(fin, torch.isfinite(o)), f"{case} {name}: -inf / NaN pattern differs from torch"
        err = (o - r)[fin].abs().max().item() if fin.any() else 0.0
        err_b = (b - r)[fin].abs().max().item() if fin.any() else 0.0
        floor = 1e-4 * max(r[fin].abs().max().item() if fin.any() else 0.0, 1.0)
        ok &= report.row(case, name, err, err_b, 3 * err_b + floor)
    assert ok, f"{case}: flexattn is less accurate than torch at the same precision (see the summary table)"
    del inputs
    return ours


@pytest.mark.parametrize("case", list(CORPUS))
def test_corpus_forward_backward_matches_torch(case, report):
    torch.manual_seed(0)
    score, mask, learnable = CORPUS[case]
    B, H, D = 2, 4, 64
    q, k, v = (torch.randn(B, H, n, D, device=DEV, dtype=torch.bfloat16) for n in (L, S, S))
    # One block mask per head: the top-k tiles differ between heads.
    run(case, score, masks(mask, B, H=H), q, k, v, learnable, report)


def _approx_tanh_op():
    """attention-gym's approx::tanh custom op (softcap with approx=True), registered here if absent: eager torch.tanh."""
    try:
        return torch.ops.approx.tanh
    except (AttributeError, RuntimeError):
        pass

    @torch.library.custom_op("approx::tanh", mutates_args=())
    def tanh(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)

    tanh.register_fake(lambda x: torch.empty_like(x))
    return torch.ops.approx.tanh


class _TanhApproxFunction(torch.autograd.Function):
    """attention-gym's spelling: the custom op inside an autograd.Function that carries the gradient."""

    @staticmethod
    def forward(x):
        return _approx_tanh_op()(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


@pytest.mark.parametrize("spelling", ["flexattn.ops.tanh_approx", "torch.ops.approx.tanh", "autograd.Function"])
def test_softcap_with_approximate_tanh(spelling, report):
    # Every spelling traces to tanh_approx (the GPU's tanh.approx.f32: relative error ~2^-11); measured against the
    # exact softcap in float64, the error may exceed torch's bf16 one by what the approximation moves a score
    # (CAP * 2^-11), in out, lse and the gradients.
    tanh_approx = {"flexattn.ops.tanh_approx": flexattn.ops.tanh_approx, "torch.ops.approx.tanh": _approx_tanh_op(),
                   "autograd.Function": _TanhApproxFunction.apply}[spelling]

    def softcap_approx(score, b, h, q, kv):
        return CAP * tanh_approx(score / CAP)

    assert flexattn.trace(softcap_approx).text == "CAP * tanh_approx(score / CAP)"  # a captured float: a scalar
    torch.manual_seed(0)
    B, H, D = 2, 4, 128
    q, k, v = (torch.randn(B, H, n, D, device=DEV, dtype=torch.bfloat16) for n in (L, S, S))
    bm_t, bm_f = masks(causal, B)
    g = torch.randn(B, H, L, D, device=DEV, dtype=torch.float64)

    def fwd_bwd(fn, dt, score, bm):
        xs = [x.detach().to(dt).requires_grad_() for x in (q, k, v)]
        out, aux = fn(*xs, score_mod=score, block_mask=bm, return_aux=AuxRequest(lse=True))
        (out.double() * g).sum().backward()
        return [out.double(), aux.lse.double()] + [x.grad.double() for x in xs]

    ref = fwd_bwd(TORCH_FLEX, torch.float64, softcap, bm_t)
    base = fwd_bwd(TORCH_FLEX, torch.bfloat16, softcap, bm_t)
    ours = fwd_bwd(_torch_api.flex_attention, torch.bfloat16, softcap_approx, bm_f)
    score_err = CAP * 2.0 ** -11
    ok = True
    for name, r, b, o in zip(["out", "lse", "dq", "dk", "dv"], ref, base, ours):
        err, err_b = (o - r).abs().max().item(), (b - r).abs().max().item()
        scale = max(r.abs().max().item(), 1.0)
        ok &= report.row(f"softcap_approx {spelling}", name, err, err_b, 3 * err_b + (1e-4 + 4 * score_err) * scale)
    assert ok, "the approximate softcap is further from the exact one than tanh.approx's error allows"


@pytest.mark.parametrize("case", ["full", "causal", "document", "sliding_window"])
@pytest.mark.parametrize("D", [64, 128])
def test_deterministic_backward_is_bitwise_repeatable(case, D):
    """torch.use_deterministic_algorithms(True) selects the backward's deterministic mode (on Hopper the kernel's
    ordered dQ reductions): three runs give the same bits, close to the default mode's gradients. GQA, B=2, a length
    that is not a multiple of the tiles."""
    torch.manual_seed(1)
    score, mask, _ = CORPUS[case]
    B, Hq, Hkv, n = 2, 4, 2, 1000
    q = torch.randn(B, Hq, n, D, device=DEV, dtype=torch.bfloat16)
    k, v = (torch.randn(B, Hkv, n, D, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn(B, Hq, n, D, device=DEV, dtype=torch.bfloat16)
    bm = masks(mask, B, n, n)[1]

    def grads():
        xs = [x.detach().requires_grad_() for x in (q, k, v)]
        _torch_api.flex_attention(*xs, score_mod=score, block_mask=bm, enable_gqa=True).backward(g)
        return [x.grad for x in xs]

    plain = grads()
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        runs = [grads() for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    for name, *xs in zip(("dq", "dk", "dv"), *runs):
        assert all(torch.equal(xs[0], x) for x in xs[1:]), f"{case} D={D}: {name} differs between deterministic runs"
    for name, a, b in zip(("dq", "dk", "dv"), runs[0], plain):
        err = (a.float() - b.float()).abs().max().item()
        assert err <= 2e-2 * b.float().abs().max().item() + 1e-3, f"{case} D={D}: {name} off the default mode by {err}"


def test_block_masks_from_the_gpu_builder_equal_torchs():
    for name in ("causal", "sliding_window", "document", "prefix_lm"):
        _, mask, _ = CORPUS[name]
        for B, H, Lq, Skv, bs in ((2, None, L, S, 128), (1, 3, 1000, 333, (64, 32))):
            t = TORCH_CBM(mask, B, H, Lq, Skv, device=DEV, BLOCK_SIZE=bs)
            f = _torch_api.create_block_mask(mask, B, H, Lq, Skv, device=DEV, BLOCK_SIZE=bs)
            for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                          "q_indices", "full_q_num_blocks", "full_q_indices"):
                a, b = getattr(t, field), getattr(f, field)
                assert b.device.type == "cuda" and b.dtype == torch.int32
                assert torch.equal(a.to(torch.int32), b), f"{name} {field} B={B} H={H} {Lq}x{Skv} BLOCK_SIZE={bs}"


def test_block_masks_made_inside_compile_on_the_gpu_equal_torchs():
    """create_block_mask inside fullgraph compile (the op flexattn::block_mask, built on the GPU) against torch's
    create_block_mask, and the compiled attention over it against eager."""
    _, mask, _ = CORPUS["document"]
    q, k, v = (torch.randn(2, 4, 1000, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))

    def f(q, k, v):
        bm = _torch_api.create_block_mask(mask, 2, None, 1000, 1000, device=DEV, BLOCK_SIZE=(128, 64))
        return _torch_api.flex_attention(q, k, v, block_mask=bm), bm

    out, bm = torch.compile(f, backend="aot_eager", fullgraph=True)(q, k, v)
    t = TORCH_CBM(mask, 2, None, 1000, 1000, device=DEV, BLOCK_SIZE=(128, 64))
    for field in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                  "q_indices", "full_q_num_blocks", "full_q_indices"):
        got = getattr(bm, field)
        assert got.device.type == "cuda" and torch.equal(getattr(t, field).to(torch.int32), got), field
    assert torch.equal(out, f(q, k, v)[0])


# FLEXATTN_SM90_ROW_ORDER: the tile order changes no tile's arithmetic, so the forward is bitwise the same with the
# order always, never and by the flag (auto); the flag is 1 for uneven documents (longest rows mid-sequence) and
# 0 for causal (the natural order is longest first), computed on the device.
def test_row_order_keeps_the_forward_bitwise_and_flags_only_uneven_masks(monkeypatch):
    torch.manual_seed(4)
    Lq = 2048
    lengths = [300, 900, 100, 748]  # causal inside each: the longest rows sit mid-sequence
    ids = torch.repeat_interleave(torch.arange(len(lengths), device=DEV), torch.tensor(lengths, device=DEV))

    def docs(b, h, q, kv):
        return (ids[q] == ids[kv]) & (q >= kv)

    q, k, v = (torch.randn(2, 4, Lq, 128, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    for mask, want_on in ((docs, 1), (causal, 0)):
        bm = _torch_api.create_block_mask(mask, 2, None, Lq, Lq, device=DEV)
        _, on = _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, bm.kv_indices.shape[-1])
        assert on.device.type == "cuda" and on.tolist() == [want_on], mask.__name__
        outs = []
        for mode in ("0", "1", "auto"):
            monkeypatch.setenv("FLEXATTN_SM90_ROW_ORDER", mode)
            outs.append(_torch_api.flex_attention(q, k, v, block_mask=bm))
        assert all(torch.equal(outs[0], o) for o in outs[1:]), mask.__name__
        tbm = TORCH_CBM(mask, 2, None, Lq, Lq, device=DEV)
        ref = TORCH_FLEX(q.double(), k.double(), v.double(), block_mask=tbm)
        torch_err = (TORCH_FLEX(q, k, v, block_mask=tbm).double() - ref).abs().max().item()
        assert (outs[0].double() - ref).abs().max().item() <= 3 * torch_err + 1e-3, mask.__name__


def test_row_order_is_not_cached_while_a_cuda_graph_is_captured():
    # Its argsort only runs at replay: cached, an eager call before the first replay would read unwritten memory.
    bm = _torch_api.create_block_mask(causal, 1, None, 1024, 1024, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, bm.kv_indices.shape[-1])
    torch.cuda.current_stream().wait_stream(s)
    assert getattr(bm, "_flexattn_q_order", None) is None
    order, _ = _torch_api._row_order(bm, bm.kv_num_blocks, bm.full_kv_num_blocks, bm.kv_indices.shape[-1])
    assert getattr(bm, "_flexattn_q_order", None)[0] is order


@pytest.mark.parametrize("case,Hq,Hkv,Bq,Bkv,D,Dv,Lq,Skv,dtype", [
    ("gqa4_causal", 8, 2, 2, 2, 64, 64, L, S, torch.bfloat16),
    ("kv_batch_broadcast_alibi", 8, 8, 3, 1, 64, 64, L, S, torch.bfloat16),
    ("odd_lengths_E!=Ev_fp16", 4, 4, 1, 1, 128, 64, 77, 301, torch.float16),
    ("head_dim_40_padded_softcap", 2, 2, 1, 1, 40, 40, 130, 130, torch.bfloat16),
])
def test_shapes_gqa_broadcast_and_padding(case, Hq, Hkv, Bq, Bkv, D, Dv, Lq, Skv, dtype, report):
    torch.manual_seed(1)
    score = {"gqa4_causal": None, "kv_batch_broadcast_alibi": alibi, "odd_lengths_E!=Ev_fp16": None,
             "head_dim_40_padded_softcap": softcap}[case]
    mask = causal if case != "odd_lengths_E!=Ev_fp16" else None
    q = torch.randn(Bq, Hq, Lq, D, device=DEV, dtype=dtype)
    k = torch.randn(Bkv, Hkv, Skv, D, device=DEV, dtype=dtype)
    v = torch.randn(Bkv, Hkv, Skv, Dv, device=DEV, dtype=dtype)
    bm = masks(mask, Bq, Lq, Skv) if mask is not None or Bq != Bkv else (None, None)
    if Bq != Bkv and bm[0] is None:
        bm = masks(lambda b, h, qq, kv: qq >= 0, Bq, Lq, Skv)
    run(case, score, bm, q, k, v, (), report, enable_gqa=Hq != Hkv)


def test_return_lse_and_return_aux_forms():
    q = torch.randn(1, 2, 100, 64, device=DEV, dtype=torch.bfloat16)
    out = _torch_api.flex_attention(q, q, q)
    with pytest.warns(FutureWarning):
        out2, lse = _torch_api.flex_attention(q, q, q, return_lse=True)
    out3, aux = _torch_api.flex_attention(q, q, q, return_aux=AuxRequest(max_scores=True))
    assert torch.equal(out, out2) and torch.equal(out, out3) and aux.lse is None and aux.max_scores is not None
    assert lse.dtype == torch.float32 and lse.shape == (1, 2, 100)
    _, tl = TORCH_FLEX(q.double(), q.double(), q.double(), return_aux=AuxRequest(lse=True))
    assert (lse.double() - tl.lse).abs().max().item() < 2e-2  # natural log, as torch's public lse


def test_compiled_matches_eager_no_graph_break_and_no_recompile_on_new_values(report):
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 8, L, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    bm = _torch_api.create_block_mask(sliding, 2, None, L, S, device=DEV)

    def f(q, k, v, bm):
        return _torch_api.flex_attention(q, k, v, score_mod=rel_bias, block_mask=bm)

    # aot_eager: AOTAutograd with the ops' fake implementations and autograd, without Inductor's compile time
    # (test_native_torch.py covers Inductor on the CPU).
    cnt = torch._dynamo.testing.CompileCounterWithBackend("aot_eager")
    cf = torch.compile(f, backend=cnt, fullgraph=True)
    for window in (64, 17, 200):
        WINDOW.fill_(window)
        bm = _torch_api.create_block_mask(sliding, 2, None, L, S, device=DEV)
        o, e = cf(q, k, v, bm), f(q, k, v, bm)
        mine = torch.autograd.grad(o.float().sum(), (q, k, v, REL_BIAS))
        want = torch.autograd.grad(e.float().sum(), (q, k, v, REL_BIAS))
        report.row(f"compiled_vs_eager_w{window}", "out", (o - e).abs().max().item(), None, 1e-2)
        assert (o - e).abs().max().item() <= 1e-2
        for a, b in zip(mine, want):
            assert (a.float() - b.float()).abs().max().item() <= 5e-2 * max(b.float().abs().max().item(), 1.0)
    WINDOW.fill_(64)
    assert cnt.frame_count == 1


def test_torch_compiled_flex_attention_agrees(report):
    torch.manual_seed(3)
    q, k, v = (torch.randn(2, 4, L, 64, device=DEV, dtype=torch.bfloat16) for _ in range(3))
    bm_t, bm_f = masks(causal, 2)
    want = torch.compile(TORCH_FLEX)(q, k, v, score_mod=softcap, block_mask=bm_t)
    ours = torch.compile(_torch_api.flex_attention, fullgraph=True, backend="aot_eager")(q, k, v, score_mod=softcap,
                                                                                          block_mask=bm_f)
    ref = TORCH_FLEX(q.double(), k.double(), v.double(), score_mod=softcap, block_mask=bm_t)
    err, err_b = (ours.double() - ref).abs().max().item(), (want.double() - ref).abs().max().item()
    assert report.row("vs_torch_compiled_softcap", "out", err, err_b, 3 * err_b + 1e-4)


class Block(torch.nn.Module):
    """A pre-norm transformer block calling torch's API through the module attribute, as models do."""

    def __init__(self, dim=256, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x, block_mask):
        B, T, Dm = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = tfa.flex_attention(q, k, v, score_mod=softcap, block_mask=block_mask)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, Dm))
        return x + self.mlp(self.norm2(x))


def test_enable_switch_on_a_transformer_block(report):
    torch.manual_seed(4)
    block = Block().to(DEV, torch.bfloat16)
    x = torch.randn(2, L, 256, device=DEV, dtype=torch.bfloat16)

    def step(compiled):
        block.zero_grad()
        fn = torch.compile(block, fullgraph=True, backend="aot_eager") if compiled else block
        out = fn(x, tfa.create_block_mask(causal, 2, None, L, L, device=DEV))
        out.float().square().mean().backward()
        return out.float(), block.qkv.weight.grad.float().clone()

    want = step(False)
    calls = _torch_ops.stats["fwd"]
    with fat.enabled():
        assert tfa.flex_attention is _torch_api.flex_attention
        got = step(False)
        got_c = step(True)
    assert _torch_ops.stats["fwd"] > calls and tfa.flex_attention is TORCH_FLEX
    for tag, (o, gw) in (("enable_eager", got), ("enable_compiled", got_c)):
        scale_o, scale_g = want[0].abs().max().item(), want[1].abs().max().item()
        assert report.row(f"transformer_block_{tag}", "out", (o - want[0]).abs().max().item(), None, 3e-2 * scale_o)
        assert report.row(f"transformer_block_{tag}", "d_qkv_w", (gw - want[1]).abs().max().item(), None,
                          5e-2 * scale_g)


# ---- backward prefetch -------------------------------------------------------------------------------
def _unique_structure(score, b, h, q, kv):  # a structure no other test compiles (literals do not count)
    return score + (q * 3 - kv * 2) * 0.001


def test_first_training_call_compiles_its_backward_during_the_forward():
    import threading
    q, k, v = (torch.randn(1, 2, 96, 64, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    out = flexattn.flex_attention(q, k, v, score_mod=_unique_structure)
    prefetch = [t for t in threading.enumerate() if t.name == "flexattn-backward-prefetch"]
    for t in prefetch:
        t.join()
    before = C.jit_stats()
    out.float().sum().backward()
    torch.cuda.synchronize()
    after = C.jit_stats()
    assert after["compiles"] + after["disk_hits"] == before["compiles"] + before["disk_hits"], \
        "the backward compiled (or read from disk) kernels the prefetch should have made ready"
    qd, kd, vd = (x.detach().double().requires_grad_() for x in (q, k, v))
    TORCH_FLEX(qd, kd, vd, score_mod=_unique_structure).sum().backward()
    for ours, ref in ((q.grad, qd.grad), (k.grad, kd.grad), (v.grad, vd.grad)):
        assert (ours.double() - ref).abs().max().item() <= 3e-2 * ref.abs().max().item()


@pytest.mark.parametrize("D", [64, 128])
def test_deterministic_learnable_bias_gradient_is_bitwise_repeatable(D):
    """In deterministic mode the learnable buffers' gradients are exact sums rounded once (runtime/exact_grads.h):
    three runs give the same bits, within torch's own error of torch flex's gradient."""
    torch.manual_seed(2)
    B, Hq, Hkv = 2, 8, 2
    q = torch.randn(B, Hq, L, D, device=DEV, dtype=torch.bfloat16)
    k, v = (torch.randn(B, Hkv, S, D, device=DEV, dtype=torch.bfloat16) for _ in range(2))
    g = torch.randn(B, Hq, L, D, device=DEV, dtype=torch.bfloat16)

    def grads(attn, dtype=torch.bfloat16):
        REL_BIAS.grad = None
        xs = [x.detach().to(dtype).requires_grad_() for x in (q, k, v)]
        attn(*xs, score_mod=rel_bias, enable_gqa=True).backward(g.to(dtype))
        return [x.grad for x in xs] + [REL_BIAS.grad.clone()]

    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        runs = [grads(_torch_api.flex_attention) for _ in range(3)]
    finally:
        torch.use_deterministic_algorithms(before)
    for name, *xs in zip(("dq", "dk", "dv", "dbias"), *runs):
        assert all(torch.equal(xs[0], x) for x in xs[1:]), f"D={D}: {name} differs between deterministic runs"
    ref = grads(TORCH_FLEX, torch.float64)[3]
    base = grads(TORCH_FLEX)[3]
    err, err_b = (runs[0][3].double() - ref).abs().max().item(), (base.double() - ref).abs().max().item()
    assert err <= 3 * err_b + 1e-3 * ref.abs().max().item(), f"D={D}: dbias off torch's float64 by {err} (bf16 {err_b})"
