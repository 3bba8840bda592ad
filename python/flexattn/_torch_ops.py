"""flexattn's torch custom ops: flexattn::attn_fwd and flexattn::attn_bwd, with fake (meta) implementations
and autograd, so that flex_attention runs under torch.compile as one opaque node (no graph break).

The variant travels as `spec`, a JSON string that is a constant per mod structure; captured Python
numbers and 0-d tensors travel as the float64 tensor `scalars`, captured tensors as `buffers`, the block
mask as `mask` (kv_num_blocks, kv_indices[, full_kv_num_blocks, full_kv_indices][, q_num_blocks, q_indices
[, full_q_*]][, q_order[, q_order_on]]) with `mask_meta` = [q_len, kv_len, q_block, kv_block, has_full, has_q[, n_order]]
([] = dense).
Changing a scalar's value or a tensor's contents never changes the graph or the compiled kernel.

CUDA tensors in bf16 / f16 run the cuda backend on torch's current stream, with every output, gradient
and workspace allocated by torch; everything else (CPU tensors, CUDA f32 / f64) runs the cpu backend on
host copies (float64 math, exact). Inputs the kernels cannot read directly (non-contiguous last dim,
misaligned strides, head dims that are not multiples of 16) are copied / zero-padded first.
"""
from __future__ import annotations

import functools
import json
import threading
import warnings
from typing import List, Optional, Tuple

import torch

from . import _native
from ._arrays import to_numpy
from ._env import env_flag

_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
                torch.int64: "i64", torch.bool: "bool", torch.float64: "f64"}
stats = {"fwd": 0, "bwd": 0, "cuda": 0, "cpu": 0}
_warned = {"f32_cuda": False}


# ---- the variant of a spec --------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def _spec(spec: str):
    """(score mod key, mask mod key, scalar names, buffer names) of a spec (_torch_api.make_spec)."""
    s = json.loads(spec)
    return _tuplify(s["score"]), _tuplify(s["mask"]), tuple(s["scalars"]), tuple(s["buffers"])


def _tuplify(x):
    return tuple(_tuplify(v) for v in x) if isinstance(x, list) else x


def _decode(spec: str, grads: str):
    """(_C.Variant, scalar names, buffer names) of a spec and the comma-separated grad buffers."""
    score, mask, snames, bnames = _spec(spec)
    return _native.variant_of(score, mask, tuple(g for g in grads.split(",") if g)), snames, bnames


def _stat_dtype(q):
    return torch.float64 if q.dtype == torch.float64 else torch.float32


def _use_cuda(q):
    return q.device.type == "cuda" and q.dtype in (torch.bfloat16, torch.float16)


# ---- cpu backend (host copies) ----------------------------------------------------------------------
def _host(t):
    return t.detach().to("cpu").contiguous()


def _host_mask(q, mask, meta):
    if not meta:
        return None
    q_len, kv_len, qb, kvb, has_full = meta[:5]
    full = (_host(mask[2]), _host(mask[3])) if has_full else (None, None)
    return (q_len, kv_len, qb, kvb, _host(mask[0]), _host(mask[1]), *full)


def _cpu_fwd(variant, q, k, v, scalars, buffers, mask, meta, scale):
    C = _native.require("flex_attention on this device")
    out, lse, mx = C.cpu_forward(variant, _host(q), _host(k), _host(v), scalars=scalars,
                                 buffers={n: _host(b) for n, b in buffers.items()},
                                 block_mask=_host_mask(q, mask, meta), scale=scale)
    st = _stat_dtype(q)
    return (torch.from_numpy(out).to(device=q.device, dtype=q.dtype), torch.from_numpy(lse).to(q.device, st),
            torch.from_numpy(mx).to(q.device, st))


def _cpu_bwd(variant, q, k, v, dout, dlse, scalars, buffers, mask, meta, scale):
    C = _native.require("the flex_attention backward on this device")
    dq, dk, dv, grads = C.cpu_backward(variant, _host(q), _host(k), _host(v), _host(dout),
                                       None if dlse is None else _host(dlse), scalars=scalars,
                                       buffers={n: _host(b) for n, b in buffers.items()},
                                       block_mask=_host_mask(q, mask, meta), scale=scale)
    back = (lambda a, like: torch.from_numpy(a).to(device=like.device, dtype=like.dtype))
    return back(dq, q), back(dk, k), back(dv, v), {n: torch.from_numpy(g) for n, g in grads.items()}


# ---- cuda backend (device pointers, torch's stream and allocator) -----------------------------------
def _kernel_dims(C, D, Dv):
    """Head dims the cuda kernels take (48 -> 64, 80 -> 96, ...); zero columns leave the result unchanged."""
    if max(D, Dv) > 256:
        raise ValueError(f"flex_attention: the cuda backend takes head dims up to 256, got E={D}, Ev={Dv}")
    return C.cuda_padded_head_dims(D, Dv)


def _kernel_ready(t, width):
    """t with its last dim zero-padded to `width`, last dim contiguous, strides multiples of 8 elements
    and data 16-byte aligned (what the kernels' vector loads need); a copy only when necessary."""
    if t.shape[-1] != width:
        return torch.nn.functional.pad(t, (0, width - t.shape[-1]))
    if t.stride(-1) != 1 or any(s % 8 for s in t.stride()[:-1]) or t.data_ptr() % 16:
        return t.contiguous()
    return t


def _view(t):
    return (t.data_ptr(), _DTYPE_NAMES[t.dtype], list(t.shape), list(t.stride()))


def _device_mask(mask, meta):
    if not meta:
        return None
    q_len, kv_len, qb, kvb, has_full, has_q = meta[:6]
    it = iter(mask)
    num, idx = next(it), next(it)
    full = (next(it), next(it)) if has_full else (None, None)
    qside = (next(it), next(it)) if has_q else (None, None)
    fq = (next(it), next(it)) if has_q and has_full else (None, None)
    order = tuple(next(it) for _ in range(meta[6] if len(meta) > 6 else 0))  # q_order[, q_order_on]
    ptrs = [0 if t is None else t.data_ptr() for t in (num, idx, *full, *qside, *fq, *order)]
    B, H, nq, nkv = idx.shape
    return (q_len, kv_len, qb, kvb, ptrs, B, H, nq, nkv)


def _cuda_buffers(buffers):
    return {n: (b.data_ptr(), _DTYPE_NAMES[b.dtype], list(b.shape)) for n, b in buffers.items()}


_FILL_LOCK = threading.Lock()


def _empty(shape, dtype, device):
    """torch.empty without deterministic mode's fill (torch.use_deterministic_algorithms with
    torch.utils.deterministic.fill_uninitialized_memory, its default, writes NaN into every torch.empty): the kernels
    write every element of what is allocated here (outputs, lse, the backward's workspace; the GPU checks poison
    them), so the fill would be one memset per buffer for nothing. Session 33 (H200, B=2 H=16 S=8192 D=128): ~235 MB
    per backward; the deterministic document backward's cost over the default mode fell from +24.4 % to +5.0 %.
    The flag is process-wide: an allocation another thread makes during this call's torch.empty skips the fill too."""
    det = getattr(torch.utils, "deterministic", None)
    if det is None or not torch.are_deterministic_algorithms_enabled():
        return torch.empty(shape, dtype=dtype, device=device)
    with _FILL_LOCK:  # flexattn's own calls one at a time; the flag's value restored as found
        fill = det.fill_uninitialized_memory
        if not fill:
            return torch.empty(shape, dtype=dtype, device=device)
        det.fill_uninitialized_memory = False
        try:
            return torch.empty(shape, dtype=dtype, device=device)
        finally:
            det.fill_uninitialized_memory = fill


def _cuda_fwd(variant, q, k, v, scalars, buffers, mask, meta, scale):
    C = _native.require("flex_attention on CUDA")
    D, Dv = q.shape[-1], v.shape[-1]
    PD, PDv = _kernel_dims(C, D, Dv)
    qp, kp, vp = _kernel_ready(q, PD), _kernel_ready(k, PD), _kernel_ready(v, PDv)
    B, Hq, L = q.shape[:3]
    out = _empty((B, Hq, L, vp.shape[-1]), q.dtype, q.device)
    lse = _empty((B, Hq, L), torch.float32, q.device)
    mx = _empty((B, Hq, L), torch.float32, q.device)
    C.cuda_forward(variant, _view(qp), _view(kp), _view(vp), _view(out), lse=lse.data_ptr(), max_score=mx.data_ptr(),
                   scalars=scalars, buffers=_cuda_buffers(buffers), block_mask=_device_mask(mask, meta),
                   scale=scale, device=q.device.index or 0,
                   stream=torch.cuda.current_stream(q.device).cuda_stream)
    return (out if Dv == out.shape[-1] else out[..., :Dv].contiguous()), lse, mx


def _cuda_bwd(variant, q, k, v, out, lse, dout, dlse, scalars, buffers, grad_names, mask, meta, scale):
    C = _native.require("the flex_attention backward on CUDA")
    D, Dv = q.shape[-1], v.shape[-1]
    PD, PDv = _kernel_dims(C, D, Dv)
    qp, kp = _kernel_ready(q, PD), _kernel_ready(k, PD)
    vp, outp = _kernel_ready(v, PDv), _kernel_ready(out, PDv)
    doutp = _kernel_ready(dout.to(q.dtype), PDv)
    dq, dk, dv = (_empty(t.shape, t.dtype, t.device) for t in (qp, kp, vp))
    grads = {n: torch.zeros(buffers[n].shape, dtype=torch.float32, device=q.device) for n in grad_names}
    deterministic = torch.are_deterministic_algorithms_enabled()
    ws = _empty(C.cuda_backward_workspace_bytes(list(qp.shape), list(kp.shape), deterministic,
                                                {n: list(g.shape) for n, g in grads.items()}), torch.uint8, q.device)
    dl = None if dlse is None else dlse.to(torch.float32).contiguous()
    lse = lse.contiguous()  # kept alive in a variable: the kernels read it after this line
    C.cuda_backward(variant, _view(qp), _view(kp), _view(vp), _view(outp), lse.data_ptr(),
                    _view(doutp), grad_lse=0 if dl is None else dl.data_ptr(), dq=_view(dq), dk=_view(dk),
                    dv=_view(dv), scalars=scalars, buffers=_cuda_buffers(buffers),
                    buffer_grads={n: g.data_ptr() for n, g in grads.items()}, block_mask=_device_mask(mask, meta),
                    scale=scale, deterministic=deterministic, workspace=ws.data_ptr(), workspace_bytes=ws.numel(),
                    device=q.device.index or 0, stream=torch.cuda.current_stream(q.device).cuda_stream)
    trim = (lambda t, n: t if t.shape[-1] == n else t[..., :n].contiguous())
    return trim(dq, D), trim(dk, D), trim(dv, Dv), grads


# ---- the ops ----------------------------------------------------------------------------------------
# The ops' list arguments are Optional: AOTInductor's proxy executor hands an empty list argument of a custom op over
# as None (torch 2.15: a plain List[Tensor] then fails the op's schema check, so an exported model without captured
# tensors or without a block mask could not run); None reads as the empty list.
def _lists(*lists):
    return [[] if x is None else x for x in lists]


def _optional_tensor_lists_supported():
    """Whether this torch's custom_op takes Optional[List[Tensor]] (torch 2.15 does; 2.11's infer_schema refuses it,
    and there the ops keep List[Tensor]: everything but AOTInductor with an empty list works the same)."""
    def probe(x: Optional[List[torch.Tensor]]) -> torch.Tensor:
        raise NotImplementedError
    try:
        torch.library.infer_schema(probe, mutates_args=())
        return True
    except Exception:
        return False


OPTIONAL_TENSOR_LISTS = _optional_tensor_lists_supported()


def _custom_op(name, fn):
    if not OPTIONAL_TENSOR_LISTS:
        # (annotations are strings here: `from __future__ import annotations`)
        fn.__annotations__ = {k: ("List[torch.Tensor]" if v in ("Optional[List[torch.Tensor]]", Optional[List[torch.Tensor]])
                                  else v) for k, v in fn.__annotations__.items()}
    return torch.library.custom_op(name, mutates_args=())(fn)


def _bind(scalars, buffers, spec, grads=""):
    variant, snames, bnames = _decode(spec, grads)
    values = scalars.tolist()
    if len(values) != len(snames) or len(buffers) != len(bnames):
        raise ValueError(f"flexattn::attn: the spec names {len(snames)} scalars and {len(bnames)} buffers, got "
                         f"{len(values)} and {len(buffers)}")
    return variant, dict(zip(snames, values)), dict(zip(bnames, buffers))


def attn_fwd_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scalars: torch.Tensor,
                   buffers: Optional[List[torch.Tensor]], mask: Optional[List[torch.Tensor]], spec: str,
                   mask_meta: Optional[List[int]], scale: float) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(out [B,Hq,L,Ev], lse [B,Hq,L] natural log, max [B,Hq,L])."""
    buffers, mask, mask_meta = _lists(buffers, mask, mask_meta)
    variant, sc, bufs = _bind(scalars, buffers, spec)
    stats["fwd"] += 1
    if _use_cuda(q):
        stats["cuda"] += 1
        with torch.cuda.device(q.device):
            return _cuda_fwd(variant, q, k, v, sc, bufs, mask, mask_meta, scale)
    stats["cpu"] += 1
    if q.device.type == "cuda" and not _warned["f32_cuda"]:
        _warned["f32_cuda"] = True
        warnings.warn(f"flexattn: the cuda backend takes bfloat16 / float16; {q.dtype} CUDA tensors run on the cpu "
                      "backend (exact float64 math on host copies, slow)", stacklevel=2)
    return _cpu_fwd(variant, q, k, v, sc, bufs, mask, mask_meta, scale)


# The op for autograd and torch.compile. Eager calls that need no gradient call attn_fwd_eager directly:
# the custom-op dispatch costs ~40 us a call on the host (measured), as much as a short kernel.
attn_fwd = _custom_op("flexattn::attn_fwd", attn_fwd_eager)


@attn_fwd.register_fake
def _(q, k, v, scalars, buffers, mask, spec, mask_meta, scale):
    B, Hq, L = q.shape[:3]
    st = _stat_dtype(q)
    return (q.new_empty((B, Hq, L, v.shape[-1])), q.new_empty((B, Hq, L), dtype=st),
            q.new_empty((B, Hq, L), dtype=st))


def attn_bwd_eager(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, lse: torch.Tensor,
                   grad_out: torch.Tensor, grad_lse: Optional[torch.Tensor], scalars: torch.Tensor,
                   buffers: Optional[List[torch.Tensor]], mask: Optional[List[torch.Tensor]], spec: str, grads: str,
                   mask_meta: Optional[List[int]], scale: float
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, List[torch.Tensor]]:
    """(dq, dk, dv, [gradient of each buffer named in `grads`, in that order])."""
    buffers, mask, mask_meta = _lists(buffers, mask, mask_meta)
    variant, sc, bufs = _bind(scalars, buffers, spec, grads)
    names = [g for g in grads.split(",") if g]
    stats["bwd"] += 1
    if _use_cuda(q):
        with torch.cuda.device(q.device):
            dq, dk, dv, g = _cuda_bwd(variant, q, k, v, out, lse, grad_out, grad_lse, sc, bufs, names, mask,
                                      mask_meta, scale)
    else:
        dq, dk, dv, g = _cpu_bwd(variant, q, k, v, grad_out, grad_lse, sc, bufs, mask, mask_meta, scale)
    return dq, dk, dv, [g[n].to(device=bufs[n].device, dtype=bufs[n].dtype) for n in names]


attn_bwd = _custom_op("flexattn::attn_bwd", attn_bwd_eager)


@attn_bwd.register_fake
def _(q, k, v, out, lse, grad_out, grad_lse, scalars, buffers, mask, spec, grads, mask_meta, scale):
    buffers = buffers or []
    index = {n: i for i, n in enumerate(_spec(spec)[3])}
    names = [g for g in grads.split(",") if g]
    # contiguous, as the kernels and the CPU reference return them: empty_like kept a transposed q's strides (the
    # layout transformers makes, x.view(B, L, H, D).transpose(1, 2)), which failed the compiled backward's views
    return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
            [buffers[index[n]].new_empty(buffers[index[n]].shape) for n in names])


def _setup(ctx, inputs, output):
    q, k, v, scalars, buffers, mask, spec, mask_meta, scale = inputs
    buffers, mask, mask_meta = _lists(buffers, mask, mask_meta)
    out, lse, mx = output
    ctx.mark_non_differentiable(mx)
    bnames = _spec(spec)[3]
    ctx.grad_index = [i for i, b in enumerate(buffers) if b.requires_grad]
    ctx.grads = ",".join(bnames[i] for i in ctx.grad_index)
    ctx.n_buffers, ctx.n_mask = len(buffers), len(mask)
    ctx.spec, ctx.mask_meta, ctx.scale = spec, list(mask_meta), scale
    ctx.save_for_backward(q, k, v, out, lse, scalars, *buffers, *mask)


def _grads(ctx, grad_out, grad_lse, bwd):
    """(dq, dk, dv, [gradient or None per buffer]) from the tensors _setup saved; `bwd` is attn_bwd (the
    op, for autograd graphs torch.compile traces) or attn_bwd_eager."""
    q, k, v, out, lse, scalars, *rest = ctx.saved_tensors
    buffers, mask = rest[:ctx.n_buffers], rest[ctx.n_buffers:]
    if grad_out is None:  # only the lse was used
        grad_out = torch.zeros_like(out)
    dq, dk, dv, bgrads = bwd(q, k, v, out, lse, grad_out, grad_lse, scalars, list(buffers), list(mask), ctx.spec,
                             ctx.grads, ctx.mask_meta, ctx.scale)
    per_buffer = [None] * ctx.n_buffers
    for i, g in zip(ctx.grad_index, bgrads):
        per_buffer[i] = g
    return dq, dk, dv, per_buffer


def _backward(ctx, grad_out, grad_lse, grad_max):
    dq, dk, dv, per_buffer = _grads(ctx, grad_out, grad_lse, attn_bwd)
    # The gradient structure mirrors the inputs: a list per tensor list; an int list is one leaf, except
    # the empty one, which flattens to an empty list.
    meta_grad = None if ctx.mask_meta else []
    return dq, dk, dv, None, per_buffer, [None] * ctx.n_mask, None, meta_grad, None


attn_fwd.register_autograd(_backward, setup_context=_setup)


# ---- block masks made inside torch.compile ---------------------------------------------------------
def block_mask_eager(scalars: torch.Tensor, buffers: Optional[List[torch.Tensor]], spec: str, sizes: List[int],
                     device: torch.device) -> List[torch.Tensor]:
    """The 8 int32 tensors of torch's BlockMask layout (kv_num_blocks, kv_indices, full_kv_*, q_*, full_q_*) of the
    spec's mask_mod; sizes = [B, H, Q_LEN, KV_LEN, Q_BLOCK_SIZE, KV_BLOCK_SIZE, separate_full_blocks] (0: the full
    tiles merged into the partial lists, the full_* tensors then zeros). Built as flexattn.create_block_mask
    builds them (on the GPU for a CUDA device, natively on the CPU otherwise), from the spec rather than a trace:
    torch.compile reaches this op with the plan's spec (_torch_api.create_block_mask)."""
    _, mask, snames, bnames = _spec(spec)
    buffers = buffers or []
    values = scalars.tolist()
    if len(values) != len(snames) or len(buffers) != len(bnames):
        raise ValueError(f"flexattn::block_mask: the spec names {len(snames)} scalars and {len(bnames)} buffers, got "
                         f"{len(values)} and {len(buffers)}")
    C = _native.require("create_block_mask")
    mod = None if mask is None else _native.parsed_mod(*mask)
    B, H, q_len, kv_len, qb, kvb, separate = (int(x) for x in sizes)
    sc = {n: float(x) for n, x in zip(snames, values)}
    device = torch.device(device)
    if device.type == "cuda":
        arrays = build_mask_on_gpu(mod, (B, H, q_len, kv_len, qb, kvb), sc, dict(zip(bnames, buffers)), device)
    else:
        # (to_numpy: bf16 has no numpy dtype; the eager builder reads such a capture as float32 too)
        arrays = C.build_block_mask(mod, B, H, q_len, kv_len, qb, kvb, scalars=sc,
                                    buffers={n: _native._host_buffer(to_numpy(b)) for n, b in zip(bnames, buffers)})
        arrays = [torch.from_numpy(a).to(device) for a in arrays]
    if not separate:
        from .block_mask import BlockMask, _without_full_blocks

        merged = _without_full_blocks(BlockMask((q_len, kv_len), *arrays, (qb, kvb)))
        arrays = [merged.kv_num_blocks, merged.kv_indices, torch.zeros_like(arrays[2]), torch.zeros_like(arrays[3]),
                  merged.q_num_blocks, merged.q_indices, torch.zeros_like(arrays[6]), torch.zeros_like(arrays[7])]
    return [a.to(device=device, dtype=torch.int32).contiguous() for a in arrays]


def build_mask_on_gpu(mod, sizes, scalars, buffers, device):
    """The 8 int32 tensors of a parsed mask_mod's BlockMask, classified on the GPU (asynchronously on the current
    stream); sizes (B, H, Q_LEN, KV_LEN, Q_BLOCK_SIZE, KV_BLOCK_SIZE), buffers {name: tensor} (moved to `device`)."""
    bufs = {n: b.to(device).contiguous() for n, b in buffers.items()}
    with torch.cuda.device(device):
        return _native.require("create_block_mask").cuda_build_block_mask(
            mod, *(int(x) for x in sizes), scalars={n: float(v) for n, v in scalars.items()},
            buffers={n: (b.data_ptr(), _DTYPE_NAMES[b.dtype], list(b.shape)) for n, b in bufs.items()},
            device=device.index if device.index is not None else torch.cuda.current_device(),
            stream=torch.cuda.current_stream(device).cuda_stream)


block_mask = _custom_op("flexattn::block_mask", block_mask_eager)


@block_mask.register_fake
def _(scalars, buffers, spec, sizes, device):
    B, H, q_len, kv_len, qb, kvb, _ = sizes
    nq, nkv = -(-q_len // qb), -(-kv_len // kvb)

    def new(*shape):
        return torch.empty(shape, dtype=torch.int32, device=device)
    return [new(B, H, nq), new(B, H, nq, nkv), new(B, H, nq), new(B, H, nq, nkv),
            new(B, H, nkv), new(B, H, nkv, nq), new(B, H, nkv), new(B, H, nkv, nq)]


# ---- backward prefetch ------------------------------------------------------------------------------
_prefetched = set()


def _prefetch_enabled():
    return env_flag("FLEXATTN_PREFETCH_BACKWARD", True)


def _prefetch_backward(q, v, buffers, spec):
    """On the first call of a variant that will need gradients, starts compiling its backward kernels on a
    thread while this forward compiles its own, so that a new variant's first training step waits for the
    longer of the two compiles instead of their sum (the JIT's in-process cache makes the backward's own
    request wait for this compile instead of repeating it). Errors are left to that request to report."""
    bnames = _spec(spec)[3]
    grads = ",".join(n for n, b in zip(bnames, buffers) if b.requires_grad)
    deterministic = torch.are_deterministic_algorithms_enabled()
    key = (spec, grads, q.dtype, q.shape[-1], v.shape[-1], q.device.index, deterministic)
    if key in _prefetched:
        return
    _prefetched.add(key)
    C = _native.require("flex_attention on CUDA")
    variant = _decode(spec, grads)[0]
    PD, PDv = _kernel_dims(C, q.shape[-1], v.shape[-1])
    arch = C.cuda_device_arch(q.device.index or 0)
    dtype = _DTYPE_NAMES[q.dtype]

    def compile_backward():
        try:
            C.compile_variant(variant, dtype, PD, PDv, arch, backward=True, deterministic=deterministic)
        except Exception:  # noqa: BLE001 - the backward's own request compiles again and raises
            pass

    # Not a daemon: the interpreter waits for a compile in flight at exit instead of unloading NVRTC under it.
    threading.Thread(target=compile_backward, name="flexattn-backward-prefetch").start()


class _EagerAttn(torch.autograd.Function):
    """Eager calls that need gradients: the op's forward and backward (same _setup / _backward logic)
    without the custom-op dispatch, which costs ~40 us on the host each way (measured)."""

    @staticmethod
    def forward(ctx, q, k, v, scalars, n_buffers, spec, mask_meta, scale, *tensors):
        buffers, mask = list(tensors[:n_buffers]), list(tensors[n_buffers:])
        if _use_cuda(q) and _prefetch_enabled():
            _prefetch_backward(q, v, buffers, spec)
        output = attn_fwd_eager(q, k, v, scalars, buffers, mask, spec, mask_meta, scale)
        _setup(ctx, (q, k, v, scalars, buffers, mask, spec, mask_meta, scale), output)
        ctx.set_materialize_grads(False)
        return output

    @staticmethod
    def backward(ctx, grad_out, grad_lse, grad_max):
        with torch.no_grad():
            dq, dk, dv, per_buffer = _grads(ctx, grad_out, grad_lse, attn_bwd_eager)
        grads = (dq, dk, dv, None, None, None, None, None, *per_buffer, *([None] * ctx.n_mask))
        return _refuse_double_backward(grads) if torch.is_grad_enabled() else grads


def _refuse_double_backward(grads):
    """Under create_graph=True: gradients whose own backward raises. They were plain tensors, so a gradient penalty
    on them added nothing without a word (torch.autograd.function.once_differentiable does the same, but only when
    an incoming gradient requires grad, which a loss's never does)."""
    tensors = [g for g in grads if g is not None]
    if not tensors:
        return grads
    err = torch._C._functions.DelayedError(b"flexattn: the backward of flex_attention is not differentiable "
                                           b"(double backward / create_graph=True is not supported)", len(tensors))
    wrapped = err(*[t.detach().requires_grad_() for t in tensors])
    it = iter(wrapped if isinstance(wrapped, tuple) else (wrapped,))
    return tuple(None if g is None else next(it) for g in grads)


def attn_fwd_autograd(q, k, v, scalars, buffers, mask, spec, mask_meta, scale):
    """attn_fwd with autograd, for eager calls (outside torch.compile)."""
    return _EagerAttn.apply(q, k, v, scalars, len(buffers), spec, mask_meta, scale, *buffers, *mask)
