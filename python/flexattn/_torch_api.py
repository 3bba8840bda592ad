"""flex_attention and create_block_mask on torch tensors, with torch's semantics, autograd and
torch.compile support (no graph break).

Eager: the mods are traced (cached by structure) and their current values bound. Under torch.compile the
tracing runs once per graph outside it (torch._dynamo.assume_constant_result: the plan is a constant) and
the captured values are re-read through plain attribute / item accesses (_leaf_paths), so a captured
tensor -- a learnable bias among them -- is a real graph input, and a captured 0-d tensor's value can
change without recompiling. The attention itself is the custom op flexattn::attn_fwd (_torch_ops).
"""
from __future__ import annotations

import json
import math
import os
import warnings

import torch
import torch.autograd.forward_ad as _forward_ad

from . import _dynamo_parts, _ir, _leaf_paths, _native, _torch_ops
from .attention import (AuxOutput, _check_scale, _kernel_options, _validate_block_mask, _validate_heads_and_batch,
                        _validate_shapes)
from . import block_mask as _block_mask_module
from .masks import _check_sizes, noop_mask
from ._block_layout import as_size, num_blocks, pad_columns, wrapped_lead
from ._tracer import mod_callable, trace
from ._env import env_flag

_EMPTY_BLOCK = 1 << 30
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_SMALL_INTS = (torch.int8, torch.uint8, torch.int16)


def make_spec(merged) -> str:
    """The ops' `spec` string of a _native.Merged (see _torch_ops._spec)."""
    return json.dumps({"score": merged.score, "mask": merged.mask, "scalars": [n for n, _, _ in merged.scalars],
                       "buffers": [n for n, _, _ in merged.buffers]}, separators=(",", ":"))


class Plan:
    """What a (score_mod, mask_mod) pair fixes: the spec, and where each scalar / buffer is read from
    (mod index 0 = score_mod, 1 = mask_mod; a _leaf_paths path)."""

    def __init__(self, spec, scalars, buffers, value_dependent=False, numbers=()):
        self.spec, self.scalars, self.buffers = spec, scalars, buffers
        self.value_dependent = value_dependent  # the trace specialised on captured values (guards)
        self.numbers = numbers  # (mod index, path, value): numbers of reached objects, constants of the trace


def _make_plan(score_desc, mask_desc, *args):
    """The plan of two mods described by _dynamo_parts.describe (Dynamo hands the described values over as `args`)."""
    mods = tuple(_dynamo_parts.rebuild(d, args) for d in (score_desc, mask_desc))
    score_mod, mask_mod = mods
    traced = (None if score_mod is None else trace(score_mod, "score_mod"), trace(mask_mod, "mask_mod"))
    for t in traced:
        read = sorted({n for g, _ in (t.entry.guards if t is not None else ()) for n in _ir.scalar_names(g)}
                      & set(t.tensor_scalars if t is not None else ()))
        if read:  # the graph would keep this trace when the tensor changes: Dynamo cannot guard on a tensor's value
            raise RuntimeError(
                f"flexattn: under torch.compile, {t.kind} '{t.name}' depends on the value of "
                f"{t.tensor_scalars[read[0]]} in Python (if / int() / float() / bool() of it), which the compiled graph cannot "
                "follow when the tensor changes; keep the value inside the mod's arithmetic (torch.where instead of "
                "if, no int() / float()), or capture a Python number")
    merged = _native.Merged(*traced)
    where = [None if t is None else _leaf_paths.locate(m, t) for m, t in zip(mods, traced)]

    def path(idx, name):
        p = where[idx].get(name)
        if p is None:
            raise RuntimeError(f"flexattn: under torch.compile, the value '{name}' that "
                               f"{traced[idx].kind} '{traced[idx].name}' reads ({traced[idx].sources[name]}) "
                               "must be captured directly (closure variable, global, default argument, "
                               "functools.partial argument, an item of a list / tuple / dict of those, or an "
                               "attribute of an object captured so, up to three levels deep)")
        return (idx, p)

    numbers = tuple(g for i, (m, t) in enumerate(zip(mods, traced)) if m is not None for g in _guarded_values(i, m, t))
    return Plan(make_spec(merged), tuple(path(i, n) for _, i, n in merged.scalars),
                tuple(path(i, n) for _, i, n in merged.buffers), any(t is not None and t.entry.guards for t in traced),
                numbers)


def _guarded_values(i, mod, traced):
    """(mod index, path, value) of the values the plan of `mod` took as constants, for the graph to compare (Dynamo
    then guards on each). A bound method traced with its reads recorded (_self_reads): exactly the values it read
    through `self`, so an attribute it never reads (a step counter, `training`) recompiles nothing. Otherwise every
    number / bool / str / None the objects it reaches hold (_leaf_paths.attribute_numbers)."""
    reads = getattr(traced.entry, "self_reads", None)
    if reads is None:
        return [(i, p, v) for p, v in _leaf_paths.attribute_numbers(mod)]
    out = []
    for names, kind, _ in reads:
        if kind in ("value", "enum"):
            path = (("self",),) + tuple(("attr", n) for n in names)
            value = _leaf_paths.fetch(mod, path)
            if value == value:  # (nan never equals itself: no guard could hold)
                out.append((i, path, value))
    return out


# Dynamo calls this at trace time with the real mods and bakes its result into the graph.
_plan_in_graph = torch._dynamo.assume_constant_result(_make_plan)
# Decided at import: decided inside the first compiled call, the probe's cached answer was a value Dynamo guarded on
# (None there), so every process compiled its first graph twice.
_dynamo_parts.supported()


def _scalar_tensor(values):
    if not values:
        return torch.zeros(0, dtype=torch.float64)
    return torch.stack([v.detach().to(device="cpu", dtype=torch.float64).reshape(()) if isinstance(v, torch.Tensor)
                        else torch.tensor(float(v), dtype=torch.float64) for v in values])


def _buffer_tensor(b, device):
    if not isinstance(b, torch.Tensor):
        b = torch.as_tensor(b)
    if b.dtype == torch.float64:
        b = b.float()
    elif b.dtype in _SMALL_INTS:
        b = b.int()
    return b.to(device).contiguous()


def _as_buffer(b):
    return b.reshape(1) if isinstance(b, torch.Tensor) and b.dim() == 0 else b


def _bound_values(score_mod, mask_mod, check_mask_grads=True):
    """(spec, scalar values, buffers) of the mods with their current captured values. check_mask_grads: refuse a
    mask_mod capture that requires grad (flex_attention's backward could not give it one)."""
    if torch.compiler.is_compiling():
        mods = tuple(None if m is None else mod_callable(m) for m in (score_mod, mask_mod))
        descs, args = _dynamo_parts.plan_arguments(mods)
        plan = _plan_in_graph(*descs, *args)
        if plan.value_dependent and _dynamo_parts.supported():  # the trace branched on a captured number:
            descs, args = _dynamo_parts.plan_arguments(mods, numbers=True)  # plan with the values (a guard on each)
            plan = _plan_in_graph(*descs, *args)
        for i, p, value in plan.numbers:  # Dynamo guards on each: a changed self.window recompiles (was stale)
            if _leaf_paths.fetch(mods[i], p) != value:
                raise RuntimeError(f"flexattn: internal error: {p} changed while planning")
        # A 0-d tensor in a buffer slot is a learnable scalar, traced as a 1-element buffer (_capture._learnable).
        buffers = [_as_buffer(_leaf_paths.fetch(mods[i], p)) for i, p in plan.buffers]
        if check_mask_grads:
            _check_mask_buffers([(i, "a captured tensor", b) for (i, _), b in zip(plan.buffers, buffers)])
        return plan.spec, [_leaf_paths.fetch(mods[i], p) for i, p in plan.scalars], buffers
    ts = None if score_mod is None else trace(score_mod, "score_mod")
    tm = trace(mask_mod, "mask_mod")
    merged, spec = _merged_and_spec(ts, tm)
    scalars, buffers = merged.values(ts, tm)
    buffers = [buffers[n] for n, _, _ in merged.buffers]
    if check_mask_grads:
        _check_mask_buffers([(i, (ts, tm)[i].sources[n], b) for (_, i, n), b in zip(merged.buffers, buffers)])
    return spec, [scalars[n] for n, _, _ in merged.scalars], buffers


def _check_mask_buffers(buffers):
    """[(mod index, source, tensor)]: a mask_mod's (index 1) captures get no gradient, so one that requires grad would
    fail in the backward with the variant's internal message (torch refuses it in the forward too)."""
    if not torch.is_grad_enabled():
        return
    for i, source, b in buffers:
        if i == 1 and getattr(b, "requires_grad", False):
            raise RuntimeError(f"mask_mod: {source} requires grad, but a mask_mod's captured tensors get no gradient "
                               "(the mask is a boolean of them); capture a detached copy (t = w.detach() outside "
                               "the mod), or read it in the score_mod")


_MERGED = {}  # (score entry, mask entry) -> (entries, Merged, spec)


def _merged_and_spec(ts, tm):
    """Merged and its spec for two TracedMods. Both depend only on the cached trace entries (IR, names,
    types), so a repeated call reuses them: rebuilding them cost ~60 us a call (measured)."""
    entries = (None if ts is None else ts.entry, tm.entry)
    cacheable = all(t is None or (t.cached and not t.extra) for t in (ts, tm))
    key = tuple(id(e) for e in entries)
    hit = _MERGED.get(key) if cacheable else None
    if hit is not None and all(a is b for a, b in zip(hit[0], entries)):
        return hit[1], hit[2]
    merged = _native.Merged(ts, tm)
    spec = make_spec(merged)
    if cacheable:
        if len(_MERGED) > 1024:
            _MERGED.clear()
        _MERGED[key] = (entries, merged, spec)  # holds the entries, so their ids are not reused
    return merged, spec


# ---- validation (torch's messages) ------------------------------------------------------------------
def _low_precision_kv(query, key, value):
    """A float32 query with a float16 / bfloat16 key and value (a low-precision KV cache) is accepted, as torch (>= 2.12,
    allow_lowp_kv) accepts it: the key and value are upcast (a differentiable cast, so their gradients come back in
    their own dtype) and the call runs in float32. Other mixes stay the dtype error."""
    low = (torch.float16, torch.bfloat16)
    if (isinstance(query, torch.Tensor) and isinstance(key, torch.Tensor) and isinstance(value, torch.Tensor)
            and query.dtype == torch.float32 and key.dtype in low and value.dtype in low):
        return key.to(torch.float32), value.to(torch.float32)
    return key, value


def _validate(query, key, value, enable_gqa, block_mask):
    if not all(isinstance(x, torch.Tensor) for x in (query, key, value)):
        raise TypeError("flex_attention: query, key and value must all be torch tensors or all be arrays")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"Expected query, key, and value to have the same dtype, but got query.dtype: {query.dtype}, "
                         f"key.dtype: {key.dtype}, and value.dtype: {value.dtype} instead.")
    if not (query.device == key.device == value.device):
        raise ValueError(f"Expected query, key, and value to have the same device type, but got query.device: "
                         f"{query.device}, key.device: {key.device}, and value.device: {value.device} instead.")
    if query.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"flex_attention: query, key and value must be float16, bfloat16, float32 or float64, "
                         f"got {query.dtype}")
    _validate_shapes(query, key, value)
    _validate_heads_and_batch(query, key, enable_gqa, block_mask)


def _mask_parts(block_mask, query, key):
    """(mask_mod, mask tensors, mask_meta) for the ops, the mask checked against the call's (L, S); [] / []
    for the dense (empty) mask."""
    if block_mask is not None and tuple(block_mask.BLOCK_SIZE) != (_EMPTY_BLOCK, _EMPTY_BLOCK):
        _validate_block_mask(query, key, block_mask)
    return _mask_tensors(block_mask, query.device if block_mask is not None else None, lead=query.shape[:2])


def _mask_tensors(block_mask, device, lead=None):
    """_mask_parts without the length check (paged_attention's masks cover the whole cache)."""
    if block_mask is None:
        return noop_mask, [], []
    if tuple(block_mask.BLOCK_SIZE) == (_EMPTY_BLOCK, _EMPTY_BLOCK):
        return block_mask.mask_mod, [], []
    q_len, kv_len = block_mask.seq_lengths

    def prep(x, nd):
        if (isinstance(x, torch.Tensor) and x.dtype == torch.int32 and x.dim() == nd and x.device == device
                and x.is_contiguous()):
            return x  # the common case (a BlockMask built for this device): no per-call conversion
        t = torch.as_tensor(x).to(device=device, dtype=torch.int32)
        while t.dim() < nd:
            t = t.unsqueeze(0)
        return t.contiguous()

    has_full = block_mask.full_kv_num_blocks is not None
    has_q = block_mask.q_num_blocks is not None
    nkv = num_blocks(kv_len, block_mask.BLOCK_SIZE[1])  # torch's compact lists: a column per kv block (kernels)
    mask = [prep(block_mask.kv_num_blocks, 3), pad_columns(prep(block_mask.kv_indices, 4), nkv)]
    if has_full:
        mask += [prep(block_mask.full_kv_num_blocks, 3), pad_columns(prep(block_mask.full_kv_indices, 4), nkv)]
    if has_q:
        mask += [prep(block_mask.q_num_blocks, 3), prep(block_mask.q_indices, 4)]
        if has_full:
            mask += [prep(block_mask.full_q_num_blocks, 3), prep(block_mask.full_q_indices, 4)]
    if lead is not None:
        mask = [wrapped_lead(t, lead) for t in mask]
    qb, kvb = block_mask.BLOCK_SIZE
    meta = [as_size(q_len), as_size(kv_len), int(qb), int(kvb), int(has_full), int(has_q)]
    mode = _row_order_mode_for(device, qb, q_len)
    if mode != "0":
        order, on = _row_order(block_mask, mask[0], mask[2] if has_full else None, mask[1].shape[-1])
        mask += [order, on] if mode == "auto" else [order]
        meta.append(2 if mode == "auto" else 1)
    return block_mask.mask_mod, mask, meta


def _row_order_mode_for(device, q_block, q_len):
    """The row order's mode for a call ("0": no order tensors): only where the Hopper forward can use it, on a cuda
    device, its 128-row query tiles the mask's rows, more than 64 query rows (up to 64 run on the decode family;
    a decode step's mask, sliced anew each step, would pay the argsort every step)."""
    if device is None or device.type != "cuda" or int(q_block) != 128 or _surely_at_most(q_len, 64):
        return "0"
    return _row_order_mode()


def _surely_at_most(size, bound):
    """size <= bound, where a symbolic size (torch.export) that may lie either side counts as above: a Python
    comparison would guard the export's length to one side of the bound. The order tensors of such a call are
    ignored by the decode family, so the result does not depend on the side."""
    size = as_size(size)
    if isinstance(size, torch.SymInt):
        from torch.fx.experimental.symbolic_shapes import statically_known_true
        return statically_known_true(size <= bound)
    return size <= bound


def _row_order_mode():
    """FLEXATTN_SM90_ROW_ORDER as the runtime reads it (per call): "0", "1" or "auto" (unset); anything else is
    the runtime's error, raised here first."""
    v = os.environ.get("FLEXATTN_SM90_ROW_ORDER", "").strip().lower()
    if v in ("", "auto"):
        return "auto"
    if v in ("0", "1"):
        return v
    raise ValueError(f"FLEXATTN_SM90_ROW_ORDER: expected 0, 1 or auto, got '{os.environ['FLEXATTN_SM90_ROW_ORDER']}'")


def _row_order(block_mask, num, full_num, nkv):
    """([B, H, nq] int32, [1] int32): each (b, h)'s query-block rows, most kv blocks (partial + full) first, ties
    last row first (the natural order, which causal masks and sliding windows therefore keep) --
    flexattn::block_mask_row_order, the Hopper forward's longest-first work order; and q_order_on: 1 when some
    (b, h)'s natural order (last rows first) is not longest first (a row with more blocks than the row after it),
    so the forward follows the order only where it pays for its lookup (document masks), with no device-to-host
    read. Cached on the mask object: a mask whose tensors are rewritten in place keeps a stale order, which is
    still a permutation (a slower schedule, never a wrong result)."""
    cached = getattr(block_mask, "_flexattn_q_order", None)
    if (isinstance(cached, tuple) and len(cached) == 2 and cached[0].device == num.device
            and cached[0].shape == num.shape):
        return cached
    counts = num.clamp(0, nkv)
    if full_num is not None:
        counts = counts + full_num.clamp(0, nkv)
    nq = counts.shape[-1]
    key = counts.to(torch.int64) * nq + torch.arange(nq, device=counts.device)  # distinct: ties by row, last first
    order = torch.argsort(key, dim=-1, descending=True).to(torch.int32).contiguous()
    # (a row with more blocks than the row after it <=> counts differ from their running max: counts[..., :-1] >
    # counts[..., 1:] broadcast two slices of nq - 1, which export specialised for a 2-block example (guard nq - 1 == 1))
    on = (torch.cummax(counts, dim=-1).values != counts).any().to(torch.int32).reshape(1)
    # Not cached while a CUDA graph is captured: the order's kernels only run at replay, so an eager call before the
    # first replay would read unwritten memory (and duplicate or skip rows).
    # (is_compiling first: is_current_stream_capturing returns a bool, which Dynamo cannot trace -- a graph break.)
    if not torch.compiler.is_compiling() and not (num.is_cuda and torch.cuda.is_current_stream_capturing()):
        try:
            block_mask._flexattn_q_order = (order, on)
        except AttributeError:  # a mask type without attribute slots: computed per call
            pass
    return order, on


def _follow_query_layout(out, query):
    """out (contiguous [B, H, L, Dv]) in query's dimension order, as torch's flex_attention returns it (its strides
    follow q's fill order with the last dim innermost: a query made by x.transpose(1, 2) gives an out whose
    transpose(1, 2) is contiguous, so `out.transpose(1, 2).view(B, L, H * Dv)` works). One copy, only for such
    queries; the kernels write [B, H, L, Dv]."""
    if query.dim() != 4:
        return out
    st = [query.stride(0), query.stride(1), query.stride(2)]
    if st[0] >= st[1] >= st[2]:  # [B, H, L] order already (the common case): nothing to do
        return out
    outer = [0, 1, 2]  # by stride, largest first; equal strides keep their order (an insertion sort Dynamo traces)
    for i in range(1, 3):
        j = i
        while j > 0 and st[outer[j - 1]] < st[outer[j]]:
            outer[j - 1], outer[j] = outer[j], outer[j - 1]
            j -= 1
    order = outer + [3]
    inverse = [order.index(d) for d in range(4)]
    return out.permute(order).contiguous().permute(inverse)


def _check_no_transform(query, key, value, buffers):
    """torch.func transforms and forward-mode AD need vmap / jvp rules that flexattn's kernels do not have: without
    this check a tangent was dropped without a word (forward AD) or a transform failed inside the binding."""
    if torch._C._functorch.maybe_current_level() is not None:
        raise NotImplementedError("flexattn.flex_attention does not support torch.func transforms (vmap, grad, "
                                  "jvp, jacrev, ...): call it outside the transform and use torch.autograd for "
                                  "gradients (torch's flex_attention has no such rules either)")
    if _forward_ad._current_level >= 0 and any(
            _forward_ad.unpack_dual(t).tangent is not None for t in (query, key, value, *buffers)):
        raise NotImplementedError("flexattn.flex_attention does not support forward-mode AD (dual tensors): use "
                                  "reverse mode (torch.autograd)")


# ---- the public entry points ------------------------------------------------------------------------
def flex_attention(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False, kernel_options=None, *, return_aux=None):
    """torch.nn.attention.flex_attention.flex_attention on flexattn's backends (see flexattn.flex_attention)."""
    key, value = _low_precision_kv(query, key, value)
    _validate(query, key, value, enable_gqa, block_mask)
    if return_lse and return_aux is not None:
        raise ValueError("Cannot specify both return_lse and return_aux. return_lse is deprecated, use "
                         "return_aux=AuxRequest(lse=True)")
    if kernel_options is not None:
        _kernel_options(kernel_options)  # the numpy path's checks: OUTPUT_LOGSUMEXP / OUTPUT_MAX, BACKEND
    if scale is not None and not torch.compiler.is_compiling():
        scale = _check_scale(scale)
    if return_lse and not torch.compiler.is_compiling():
        warnings.warn("return_lse is deprecated and will be removed; use return_aux=AuxRequest(lse=True)",
                      FutureWarning, stacklevel=2)
    mask_mod, mask, meta = _mask_parts(block_mask, query, key)
    if scale is None:
        scale = 1.0 / math.sqrt(query.size(-1))
    spec, scalar_values, buffer_values = _bound_values(score_mod, mask_mod)
    buffers = [_buffer_tensor(b, query.device) for b in buffer_values]
    op = _torch_ops.attn_fwd  # under torch.compile: the custom op (graph node, fake impl, autograd)
    if not torch.compiler.is_compiling():
        _check_no_transform(query, key, value, buffers)
        needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value, *buffers))
        op = _torch_ops.attn_fwd_autograd if needs_grad else _torch_ops.attn_fwd_eager
    out, lse, mx = op(query, key, value, _scalar_tensor(scalar_values), buffers, mask, spec, meta, float(scale))
    out = _follow_query_layout(out, query)
    if return_aux is not None:
        return out, AuxOutput(lse=lse if return_aux.lse else None, max_scores=mx if return_aux.max_scores else None)
    if return_lse:
        return out, lse
    return out


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None, BLOCK_SIZE=128, _compile=False,
                      separate_full_blocks=True, compute_dq_write_order=False, dq_kv_order=True):
    """torch's create_block_mask. On a CUDA device the tiles are classified on the GPU (the mask_mod
    compiled into a kernel, no dense mask); elsewhere flexattn.create_block_mask builds on the CPU.
    separate_full_blocks / compute_dq_write_order / dq_kv_order: as flexattn.create_block_mask."""
    from .block_mask import BlockMask, _block_size, _without_full_blocks, check_mask_mod
    from .block_mask import create_block_mask as create_on_cpu

    if not separate_full_blocks and not torch.compiler.is_compiling():
        return _without_full_blocks(create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device, BLOCK_SIZE, _compile))

    dev = torch.device(device) if device is not None else torch.device(
        "cuda" if torch.cuda.is_available() else "cpu")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"create_block_mask: device={device!r}, but torch finds no CUDA device (no driver or GPU)")
    if torch.compiler.is_compiling():
        return _block_mask_in_graph(mask_mod, B, H, Q_LEN, KV_LEN, dev, BLOCK_SIZE, separate_full_blocks)
    C = _native.load()
    if dev.type != "cuda" or C is None:
        return create_on_cpu(mask_mod, B, H, Q_LEN, KV_LEN, device=dev, BLOCK_SIZE=BLOCK_SIZE, _compile=_compile)
    check_mask_mod(mask_mod)
    B, H, Q_LEN, KV_LEN = _check_sizes(B=B, H=H, Q_LEN=Q_LEN, KV_LEN=KV_LEN)
    qb, kvb = _block_size(BLOCK_SIZE)
    traced = trace(mask_mod, "mask_mod")
    merged = _native.Merged(None, traced)
    scalars, buffers = merged.values(None, traced)
    mod = None if merged.mask is None else _native.parsed_mod(*merged.mask)
    arrays = _torch_ops.build_mask_on_gpu(mod, (B, H, Q_LEN, KV_LEN, qb, kvb), scalars,
                                          {n: _buffer_tensor(b, dev) for n, b in buffers.items()}, dev)
    return BlockMask((int(Q_LEN), int(KV_LEN)), *arrays, (qb, kvb), mask_mod)


def _block_mask_in_graph(mask_mod, B, H, Q_LEN, KV_LEN, dev, BLOCK_SIZE, separate_full_blocks=True):
    """create_block_mask inside torch.compile: the mask_mod planned as flex_attention plans it (_bound_values), the
    tiles classified by the op flexattn::block_mask (a graph node, so fullgraph holds and a document mask built from
    each batch's ids runs in the graph). The trace and the builder behind create_block_mask's eager path take locks
    and numpy arrays, which Dynamo cannot trace: the graph broke there, and fullgraph failed."""
    from .block_mask import _block_size

    # (no check_mask_mod here: its cache of kinds changed under Dynamo's guards; the plan's trace checks the mod)
    # Symbolic sizes (dynamic shapes) stay symbolic: int() would recompile the graph for every length.
    # (Dynamo shows a symbolic size as an int: isinstance(v, torch.SymInt) is False there; torch.export's
    # non-strict tracing runs this Python with real SymInts, which operator.index would specialise.)
    B, H, Q_LEN, KV_LEN = (v if isinstance(v, torch.SymInt) or isinstance(v, int) and not isinstance(v, bool) and v >= 1
                           else _check_sizes(**{n: v})[0]
                           for n, v in (("B", B), ("H", H), ("Q_LEN", Q_LEN), ("KV_LEN", KV_LEN)))
    qb, kvb = _block_size(BLOCK_SIZE)
    # (a block mask is a boolean of its captures: one that requires grad is fine here, as in the eager path)
    spec, scalar_values, buffer_values = _bound_values(None, mask_mod, check_mask_grads=False)
    buffers = [_buffer_tensor(b, dev) for b in buffer_values]
    arrays = _torch_ops.block_mask(_scalar_tensor(scalar_values), buffers, spec,
                                   [B, H, Q_LEN, KV_LEN, qb, kvb, int(separate_full_blocks)], dev)
    if not separate_full_blocks:  # the op merged the full tiles into the partial lists
        arrays = [arrays[0], arrays[1], None, None, arrays[4], arrays[5], None, None]
    return _GRAPH_BLOCK_MASK((Q_LEN, KV_LEN), *arrays, (qb, kvb), mask_mod)


# the class BlockMask.__new__ picks for torch tensors, resolved here: Dynamo cannot trace the lookup (an import)
_GRAPH_BLOCK_MASK = _block_mask_module._torch_compatible_class()
