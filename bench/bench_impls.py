"""The GPU side of the benchmark, part 2: each implementation as a callable on the same inputs, one
measurement (compile, forward, backward, accuracy), flexattn's parallel cold compile, and the decode
hook. Needs torch, CUDA, and for flexattn the compiled extension (python/flexattn/_native.py)."""
from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn.functional as F

import bench_cases as bc
import bench_torch as bt

DEV = bt.DEV


def _sdpa_backend(impl):
    from torch.nn.attention import SDPBackend
    return {"sdpa-cudnn": SDPBackend.CUDNN_ATTENTION, "sdpa-flash": SDPBackend.FLASH_ATTENTION}[impl]


def make_block_mask(impl, mask_mod, S):
    """A BlockMask of B=1, H=1, 128×128 blocks (as the anchors), by the impl's own builder."""
    if mask_mod is None:
        return None
    if impl == "flexattn":
        from flexattn import _torch_api
        return _torch_api.create_block_mask(mask_mod, 1, 1, S, S, device=DEV)
    from torch.nn.attention.flex_attention import create_block_mask
    return create_block_mask(mask_mod, 1, 1, S, S, device=DEV)


def make_forward(impl, case, score_mod, block_mask, enable_gqa=False):
    """fn(q, k, v) -> out for one variant. torch-flex gets a fresh torch.compile per variant."""
    if impl == "flexattn":
        from flexattn import _torch_api
        return lambda q, k, v: _torch_api.flex_attention(q, k, v, score_mod=score_mod, block_mask=block_mask,
                                                         enable_gqa=enable_gqa)
    if impl == "torch-flex":
        from torch.nn.attention.flex_attention import flex_attention
        compiled = torch.compile(flex_attention)
        return lambda q, k, v: compiled(q, k, v, score_mod=score_mod, block_mask=block_mask, enable_gqa=enable_gqa)
    from torch.nn.attention import sdpa_kernel
    backend = _sdpa_backend(impl)
    causal = bool(bc.CASE_TABLE[case].sdpa_causal) if case in bc.CASE_TABLE else False

    def sdpa(q, k, v):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=enable_gqa)
    return sdpa


class CaseContext:
    """What every impl of one (shape, case) shares: the mods, the inputs, the density, the reference."""

    def __init__(self, shape, case, seed, with_reference=True):
        self.shape, self.case = shape, case
        self.mask_mod = bt.make_mask_mod(case, shape.S)
        self.score_mod = bt.make_score_mod(case, shape.S, shape.H, seed)
        self.q, self.k, self.v, self.dout = bt.make_inputs(shape, seed)
        self.entries = bt.count_attended(self.mask_mod, shape.S)
        self.density = self.entries / (shape.S * shape.S)
        expected = bc.attended_entries(case, shape.S)
        self.density_note = None if expected == self.entries else (
            f"density: the mask_mod attends {self.entries} entries, the closed form says {expected}")
        self.ref = bt.reference(self.q, self.k, self.v, self.score_mod, self.mask_mod) if with_reference else None


def measure(impl, ctx, reps, warmup, backward, say=lambda stage: None, deterministic=False):
    """{fwd_ms, bwd_ms, bwd_det_ms, compile_s, compile_fwd_s, rel_err} of one impl on ctx. compile_s is the first
    calls' time over the steady time (block-mask build, forward, and backward when measured), compile_fwd_s its
    block-mask and forward part; both None for SDPA. bwd_det_ms (flexattn, with backward and deterministic): the
    same backward under torch.use_deterministic_algorithms, after the default one (not part of compile_s).
    `say` reports the stage (for the progress line)."""
    compiling = impl in bc.FLEX_IMPLS
    if impl == "torch-flex":
        torch._dynamo.reset()  # each variant compiles on its own; no guard chain grows across variants
        # Donated buffers forbid the repeated backward (retain_graph) that the timing loop runs; they only
        # let the compiled backward reuse saved activations' memory.
        import torch._functorch.config as functorch_config
        functorch_config.donated_buffer = False
    overhead = 0.0
    t_first, bm = bt.first_call(lambda: make_block_mask(impl, ctx.mask_mod, ctx.shape.S))
    if bm is not None:
        t_second, bm = bt.first_call(lambda: make_block_mask(impl, ctx.mask_mod, ctx.shape.S))
        overhead += max(0.0, t_first - t_second)
    fwd = make_forward(impl, ctx.case, ctx.score_mod, bm)
    q, k, v = ctx.q, ctx.k, ctx.v
    with torch.no_grad():
        say("compiling forward" if compiling else "first forward")
        t_first, out = bt.first_call(lambda: fwd(q, k, v))
        err = None if ctx.ref is None else bt.rel_err(out, ctx.ref)
        del out
        say(f"timing forward ({reps} reps)")
        fwd_ms = bt.time_ms(lambda: fwd(q, k, v), reps, warmup)
    overhead += max(0.0, t_first - fwd_ms / 1e3)
    fwd_overhead = overhead
    bwd_ms = bwd_det_ms = None
    if backward:
        say("compiling backward" if compiling else "first backward")
        qg, kg, vg = (x.detach().requires_grad_() for x in (q, k, v))
        t_a, out = bt.first_call(lambda: fwd(qg, kg, vg))

        def grad():
            return torch.autograd.grad(out, (qg, kg, vg), ctx.dout, retain_graph=True)
        t_b, _ = bt.first_call(grad)
        say(f"timing backward ({reps} reps)")
        bwd_ms = bt.time_ms(grad, reps, warmup)
        overhead += max(0.0, t_a - fwd_ms / 1e3) + max(0.0, t_b - bwd_ms / 1e3)
        if deterministic and impl == "flexattn":
            say(f"timing deterministic backward ({reps} reps)")
            before = torch.are_deterministic_algorithms_enabled()
            torch.use_deterministic_algorithms(True)
            try:
                grad()
                bwd_det_ms = bt.time_ms(grad, reps, warmup)
            except Exception as e:  # noqa: BLE001 - the row keeps its default-mode numbers
                print(f"[bench] {impl} {ctx.case}: deterministic backward failed: {e}", file=sys.stderr, flush=True)
            finally:
                torch.use_deterministic_algorithms(before)
        del out
    return {"fwd_ms": fwd_ms, "bwd_ms": bwd_ms, "bwd_det_ms": bwd_det_ms, "compile_s": overhead if compiling else None,
            "compile_fwd_s": fwd_overhead if compiling else None, "rel_err": err}


def _arch():
    major, minor = torch.cuda.get_device_capability()
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")  # as src/jit/device.cc names it


def flexattn_variant(score_mod, mask_mod, backward=False):
    """flexattn's compiled variant (_C.Variant) of a (score_mod, mask_mod) pair: the forward's, with no buffer
    gradients; the backward's, with the gradients of the captured tensors that require grad (as attn_bwd asks)."""
    from flexattn import _torch_api, _torch_ops
    from flexattn.masks import noop_mask

    spec, _, buffers = _torch_api._bound_values(score_mod, mask_mod or noop_mask)
    grads = ""
    if backward:
        names = _torch_ops._spec(spec)[3]
        grads = ",".join(n for n, t in zip(names, buffers) if getattr(t, "requires_grad", False))
    return _torch_ops._decode(spec, grads)[0]


def prewarm_flexattn(variants, jobs, backward):
    """Compiles flexattn's kernels of every (case, D) in `variants` ({(case, D): (score_mod, mask_mod)})
    on `jobs` threads (NVRTC runs outside the GIL, one compile per thread). Returns ({(case, D): (seconds,
    forward seconds)}, [failures]): seconds is the wall time of that variant's own compiles: its forward and
    backward compile side by side (adjacent tasks of the pool), as in an eager training call's first step,
    whose forward starts the backward's compile on a thread (FLEXATTN_PREFETCH_BACKWARD), so the longer of the
    two; forward seconds the forward's compile alone (what an inference call waits; None if it failed)."""
    from flexattn import _native

    C = _native.require("the benchmark")
    arch = _arch()
    tasks = []
    for (case, D), (score_mod, mask_mod) in variants.items():
        # The row's call has a block mask exactly when the case has a mask_mod (make_block_mask); the forward's tile
        # can depend on that, and a prewarmed set of another tile would be compiled again by the call.
        tasks += [((case, D), flexattn_variant(score_mod, mask_mod, bw), D, bw, mask_mod is not None)
                  for bw in ((False, True) if backward else (False,))]

    def compile_one(task):
        key, variant, D, bw, block_mask = task
        t0 = time.perf_counter()
        try:
            C.compile_variant(variant, "bf16", D, D, arch, bw, block_mask=block_mask)
        except Exception as e:  # noqa: BLE001 - the first call compiles it again, and its row says why
            return key, None, f"{key[0]} D={D}{' backward' if bw else ''}: {e}"
        return key, time.perf_counter() - t0, None

    seconds, failures = {}, []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for (key, s, why), (_, _, _, bw, _) in zip(pool.map(compile_one, tasks), tasks):
            if why:
                failures.append(why)
                continue
            total, fwd = seconds.get(key, (0.0, None))
            # One job runs them one after the other: then the sum is what a variant waited.
            seconds[key] = (max(total, s) if jobs > 1 else total + s, fwd if bw else s)
    return seconds, failures


def prime(impl, backward):
    """Start-up work of a compiling impl, on a mod no case uses, so that it stays out of the first
    measured compile: torch-flex compiles one small call (imports, inductor's worker pool); flexattn
    builds one block mask (imports, the CUDA driver, NVRTC's first load; its builder kernel is small, so
    no attention kernel compile is spent on priming)."""
    if impl not in bc.FLEX_IMPLS:
        return
    shape = bc.Shape(1, 2, 256, 64)

    def near(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + 7

    bm = make_block_mask(impl, near, shape.S)
    if impl == "flexattn":
        torch.cuda.synchronize()
        return
    q, k, v, dout = bt.make_inputs(shape, 12345)

    def half(score, b, h, q_idx, kv_idx):
        return score * 0.5

    fwd = make_forward(impl, "full", half, bm)
    with torch.no_grad():
        fwd(q, k, v)
    if backward:
        qg = q.detach().requires_grad_()
        torch.autograd.grad(fwd(qg, k, v), (qg,), dout)
    torch.cuda.synchronize()
    torch._dynamo.reset()


def native_status():
    """None when flexattn's cuda backend can run here, else why not."""
    try:
        from flexattn import _native
        C = _native.load()
        if C is None:
            return f"flexattn._C not loaded: {_native.error()}"
        ok, why = C.cuda_available()
        return None if ok else f"flexattn cuda backend unavailable: {why}"
    except Exception as e:  # noqa: BLE001 - any failure means "cannot benchmark flexattn"
        return f"flexattn import failed: {type(e).__name__}: {e}"


# ---- decode -------------------------------------------------------------------------------------------
def decode_inputs(s, seed=0):
    """q [B, Hq, 1, D], contiguous K/V [B, Hkv, S, D] (random, never zeros), and for paged shapes the
    same K/V scattered over a pool [B*S/page, Hkv, page, D] by a random page table [B, S/page]."""
    g = torch.Generator(device=DEV).manual_seed(seed)
    q = torch.randn(s.B, s.Hq, 1, s.D, device=DEV, generator=g).to(bt.DTYPE)
    k, v = (torch.randn(s.B, s.Hkv, s.S, s.D, device=DEV, generator=g).to(bt.DTYPE) for _ in range(2))
    if s.page is None:
        return q, k, v, None
    n = s.S // s.page
    table = torch.randperm(s.B * n, device=DEV, generator=g).to(torch.int32).view(s.B, n)

    def pool(x):
        pages = x.view(s.B, s.Hkv, n, s.page, s.D).permute(0, 2, 1, 3, 4).reshape(s.B * n, s.Hkv, s.page, s.D)
        out = torch.empty_like(pages)
        out[table.view(-1).long()] = pages
        return out
    return q, pool(k), pool(v), table


def make_decode_step(impl, s, q, k, v, table):
    """fn() -> out of one decode step. The query sits at logical position S - 1. Peers have no paged
    KV cache here (NotImplementedError: the row records why)."""
    last = s.S - 1
    if impl == "flexattn":
        import flexattn
        from flexattn import _torch_api
        B = s.B
        lens = torch.full((B,), s.S, dtype=torch.int32, device=DEV)
        offs = torch.full((B,), last, dtype=torch.int32, device=DEV)
        bm = None
        if s.window:
            W = s.window

            def window(b, h, q_idx, kv_idx):
                return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)
            bm = _torch_api.create_block_mask(window, 1, 1, s.S, s.S, device=DEV)
        return lambda: flexattn.paged_attention(q, k, v, table, lens, q_offsets=offs, block_mask=bm,
                                                validate=False)
    if s.page is not None:
        raise NotImplementedError(f"{impl}: no paged KV cache to compare against")
    if impl == "torch-flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        torch._dynamo.reset()
        bm = None
        if s.window:
            lo = last - s.window

            def window(b, h, q_idx, kv_idx):  # the one query row is at position S - 1
                return kv_idx >= lo
            bm = create_block_mask(window, 1, 1, 1, s.S, device=DEV)
        compiled = torch.compile(flex_attention)
        return lambda: compiled(q, k, v, block_mask=bm, enable_gqa=True)
    if s.window:
        lo = last - s.window
        k, v = k[:, :, lo:].contiguous(), v[:, :, lo:].contiguous()  # SDPA has no window: give it the window
    fwd = make_forward(impl, "decode", None, None, enable_gqa=True)
    return lambda: fwd(q, k, v)


def measure_decode(impl, s, reps, warmup, seed=0):
    """ms of one decode step (median of CUDA-event timings), after checking the output is finite."""
    q, k, v, table = decode_inputs(s, seed)
    step = make_decode_step(impl, s, q, k, v, table)
    with torch.no_grad():
        out = step()
        if not torch.isfinite(out.float()).all():
            raise RuntimeError("decode output has NaN or inf")
        return bt.time_ms(step, reps, warmup)
