"""The GPU side of the benchmark, part 1: the cases' mods as torch functions, inputs, exact densities
counted on the GPU, a float32 dense reference, and CUDA-event timing. Needs torch and a CUDA device."""
from __future__ import annotations

import math
import statistics
import time

import torch

import bench_cases as bc

DEV = "cuda"
DTYPE = torch.bfloat16
_FLUSH_BYTES = 256 << 20  # larger than the H200's 60 MB L2, as triton.testing.do_bench flushes


# ---- mods (plain torch ops: torch's flex, flexattn's tracer and the dense reference all call them) ----
def make_mask_mod(case: str, S: int):
    kind = bc.CASE_TABLE[case].mask
    if kind == "none":
        return None
    if kind == "causal":
        def causal(b, h, q, kv):
            return q >= kv
        return causal
    if kind == "sliding":
        window = bc.WINDOW

        def sliding1024(b, h, q, kv):
            return (q >= kv) & (q - kv < window)
        return sliding1024
    if kind == "prefixlm":
        prefix = S // bc.PREFIX_DIVISOR

        def prefix_lm(b, h, q, kv):
            return (kv < prefix) | (q >= kv)
        return prefix_lm
    if kind == "document":
        docs = torch.tensor(bc.doc_ids(S), dtype=torch.int32, device=DEV)

        def document(b, h, q, kv):
            return (docs[q] == docs[kv]) & (q >= kv)
        return document
    raise AssertionError(kind)


def make_score_mod(case: str, S: int, H: int, seed: int = 0):
    kind = bc.CASE_TABLE[case].score
    if kind == "none":
        return None
    if kind == "alibi":
        slopes = torch.exp2(-8.0 * torch.arange(1, H + 1, device=DEV, dtype=torch.float32) / H)

        def alibi(score, b, h, q, kv):
            return score + slopes[h] * (kv - q)
        return alibi
    if kind == "softcap":
        cap = bc.SOFTCAP

        def softcap(score, b, h, q, kv):
            return cap * torch.tanh(score / cap)
        return softcap
    if kind == "softcap_approx":
        cap, tanh_approx = bc.SOFTCAP, approx_tanh()

        def softcap_approx(score, b, h, q, kv):
            return cap * tanh_approx(score / cap)
        return softcap_approx
    if kind in ("relbias", "relbias_learnable"):
        g = torch.Generator(device=DEV).manual_seed(seed + 17)
        bias = torch.randn(H, 2 * S, device=DEV, dtype=torch.float32, generator=g) * 0.5
        # Learnable: every backward also computes the bias's gradient (accumulated into bias.grad, never read).
        bias.requires_grad_(kind == "relbias_learnable")

        def rel_bias(score, b, h, q, kv):
            return score + bias[h, q - kv + S]
        return rel_bias
    if kind == "t5":
        # T5's bidirectional buckets (attention-gym's t5 example): half the buckets per direction, exact distances
        # below max_exact, log-spaced ones up to max_distance; the log's argument kept >= 1 (the where picks the
        # exact bucket there) so that no -inf reaches the integer cast.
        g = torch.Generator(device=DEV).manual_seed(seed + 23)
        table = torch.randn(H, bc.T5_BUCKETS, device=DEV, dtype=torch.float32, generator=g) * 0.5
        half = bc.T5_BUCKETS // 2
        max_exact = half // 2
        log_span = math.log(bc.T5_MAX_DISTANCE / max_exact)

        def t5(score, b, h, q, kv):
            rel = kv - q
            n = torch.abs(rel)
            big = max_exact + (torch.log(torch.clamp(n, min=max_exact).float() / max_exact)
                               / log_span * (half - max_exact)).to(torch.int32)
            big = torch.clamp(big, max=half - 1)
            bucket = (rel > 0).to(torch.int32) * half + torch.where(n < max_exact, n, big)
            return score + table[h, bucket]
        return t5
    raise AssertionError(kind)


_APPROX_TANH = []


def approx_tanh():
    """torch.ops.approx.tanh, registered here under the name attention-gym's softcap(approx=True) uses: torch.tanh when
    called eagerly (the reference), tanh.approx.f32 in torch.compile's Triton code (torch flex) through an inline-asm
    lowering, gradient grad * (1 - y^2); flexattn's tracer reads the name as tanh_approx. An approx::tanh registered
    by someone else in this process (attention-gym's has its gradient on an autograd.Function, not on the op) is an
    error rather than a silent op without a gradient or a lowering."""
    if _APPROX_TANH:
        return _APPROX_TANH[0]
    try:
        torch.ops.approx.tanh
    except (AttributeError, RuntimeError):
        pass
    else:
        raise RuntimeError("approx::tanh is already registered in this process (attention-gym?): the bench's "
                           "softcap_approx case registers its own, with a gradient and a tanh.approx.f32 lowering")
    from functools import partial

    from torch._inductor.lowering import make_pointwise, register_lowering
    from torch._inductor.virtualized import ops as inductor_ops

    @torch.library.custom_op("approx::tanh", mutates_args=())
    def tanh(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)

    @tanh.register_fake
    def _(x):
        return torch.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)

    tanh.register_autograd(backward, setup_context=setup_context)
    asm = partial(inductor_ops.inline_asm_elementwise, asm="tanh.approx.f32 $0, $1;")
    register_lowering(torch.ops.approx.tanh)(lambda x: make_pointwise(asm)(x))
    op = torch.ops.approx.tanh
    _APPROX_TANH.append(op)
    return op


# ---- inputs -------------------------------------------------------------------------------------------
def make_inputs(shape: bc.Shape, seed: int):
    """q, k, v, dout: fresh N(0, 1) bf16 (never zeros: they hide unwritten outputs and time faster)."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    return tuple(torch.randn(shape.B, shape.H, shape.S, shape.D, device=DEV, dtype=torch.float32, generator=g)
                 .to(DTYPE) for _ in range(4))


# ---- exact density and the reference ------------------------------------------------------------------
def count_attended(mask_mod, S: int, chunk: int = 1024) -> int:
    """Attended entries of one (b, h), evaluating the mask_mod itself on the dense grid in row chunks."""
    if mask_mod is None:
        return S * S
    zero = torch.zeros((), dtype=torch.int64, device=DEV)
    kv = torch.arange(S, device=DEV)[None, :]
    total = 0
    for q0 in range(0, S, chunk):
        q = torch.arange(q0, min(q0 + chunk, S), device=DEV)[:, None]
        total += int(mask_mod(zero, zero, q, kv).sum())
    return total


def reference(q, k, v, score_mod, mask_mod):
    """softmax(mask(score_mod(q kᵀ / sqrt(D)))) v in float32 (no TF32), one (b, h) at a time."""
    B, H, S, D = q.shape
    out = torch.empty(q.shape, dtype=torch.float32, device=DEV)
    idx = torch.arange(S, device=DEV)
    qi, ki = idx[:, None], idx[None, :]
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for b in range(B):
            bt = torch.tensor(b, device=DEV)
            for h in range(H):
                ht = torch.tensor(h, device=DEV)
                s = (q[b, h].float() @ k[b, h].float().T) / math.sqrt(D)
                if score_mod is not None:
                    s = score_mod(s, bt, ht, qi, ki)
                if mask_mod is not None:
                    s = s.masked_fill(~mask_mod(bt, ht, qi, ki), -math.inf)
                out[b, h] = torch.softmax(s, dim=-1) @ v[b, h].float()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return out


def rel_err(out, ref) -> float:
    """‖out − ref‖ / ‖ref‖ (inf when out has NaN or inf)."""
    o = out.float()
    if not torch.isfinite(o).all():
        return math.inf
    return float(torch.linalg.vector_norm(o - ref) / torch.linalg.vector_norm(ref))


# ---- timing -------------------------------------------------------------------------------------------
_flush_buf = []


def _flush_l2():
    if not _flush_buf:
        _flush_buf.append(torch.empty(_FLUSH_BYTES // 4, dtype=torch.int32, device=DEV))
    _flush_buf[0].zero_()


# GPU cycles of torch.cuda._sleep queued after each flush (~1 ms at the H200's 1.98 GHz): the host path of
# the timed call (Python, argument checks, the launch itself: 50-130 µs for flexattn's masked calls, similar
# for torch's) then finishes while the GPU still sleeps, so the start event does not fire on an idle GPU
# that waits for the launch. Without it a call whose host path outlasted the ~70 µs flush was timed as
# kernel + host gap: the sliding1024 forward row came out 18-20 % low in 5 of 8 record runs (sessions
# 12-13) while the CLI and a back-to-back probe measured the kernel at the high value.
_HOLD_CYCLES = 2_000_000


def time_ms(fn, reps: int, warmup: int = 5) -> float:
    """Median of `reps` CUDA-event timings of fn(), each after an L2 flush and a GPU-side hold that
    covers the call's host time, after `warmup` calls: the GPU time of the call."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        _flush_l2()
        torch.cuda._sleep(_HOLD_CYCLES)
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def first_call(fn):
    """(seconds, result) of one synchronized call: with empty caches, mostly compile time."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, r
