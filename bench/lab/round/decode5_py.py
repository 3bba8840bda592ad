"""decode5 Python probe (issue 7): where the time of flexattn.paged_attention goes on the 8x8k decode shape
(Hq=32 Hkv=8 D=128 bf16, one query row at position S-1), before (main's _cuda_decode, kept verbatim below)
and after (this tree's: memoised workspace size / noop-mask binding / head dims, no device switch when the
device is current). Per case and path: host us per call (200 calls, no sync), the bench's flushed per-call
ms (bench_torch.time_ms, what bench/run.py --suite decode reports) and GB/s, the back-to-back GPU ms. Paged
cases with a random page table (bench/run.py's) and with one in allocation order (TLB / locality check)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import bench_cases as bc  # noqa: E402
import bench_impls as bi  # noqa: E402
import bench_torch as bt  # noqa: E402
import flexattn  # noqa: E402
from flexattn import _native, paged  # noqa: E402


def main_cuda_decode(torch, c, score_mod, block_mask, scale):  # main a1ec7b7, verbatim
    from flexattn import _torch_api, _torch_ops

    C = _native.require("paged_attention on CUDA")
    q = c.query
    mask_mod, mask, meta = _torch_api._mask_tensors(block_mask, q.device)
    spec, scalar_values, buffer_values = _torch_api._bound_values(score_mod, mask_mod)
    buffers = [_torch_api._buffer_tensor(b, q.device) for b in buffer_values]
    variant, scalars, bufs = _torch_ops._bind(_torch_api._scalar_tensor(scalar_values), buffers, spec)
    PD, PDv = _torch_ops._kernel_dims(C, c.D, c.Dv)
    qp, kp, vp = _torch_ops._kernel_ready(q, PD), _torch_ops._kernel_ready(c.key, PD), \
        _torch_ops._kernel_ready(c.value, PDv)
    out = torch.empty((c.B, c.Hq, c.L, PDv), dtype=q.dtype, device=q.device)
    lse = torch.empty((c.B, c.Hq, c.L), dtype=torch.float32, device=q.device)
    ptr = (lambda t: 0 if t is None else t.data_ptr())
    dev_index = q.device.index if q.device.index is not None else torch.cuda.current_device()
    with torch.cuda.device(q.device):
        args = dict(lse=lse.data_ptr(), scalars=scalars, buffers=_torch_ops._cuda_buffers(bufs),
                    block_mask=_torch_ops._device_mask(mask, meta), page_table=ptr(c.page_table),
                    max_pages=c.max_pages, kv_lens=ptr(c.kv_lens), q_offsets=ptr(c.q_offsets), scale=scale,
                    device=dev_index, stream=torch.cuda.current_stream(q.device).cuda_stream)
        views = (variant, _torch_ops._view(qp), _torch_ops._view(kp), _torch_ops._view(vp), _torch_ops._view(out))
        nbytes = C.cuda_decode_workspace_bytes(*views, **args)
        ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=q.device)
        C.cuda_decode(*views, workspace=ws.data_ptr() if nbytes else 0, workspace_bytes=nbytes, **args)
    return (out if PDv == c.Dv else out[..., :c.Dv].contiguous()), lse


NEW = paged._cuda_decode


def host_us(fn, n=200):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return h


def b2b_ms(fn, n=30):
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


cases = [("8x8k", bc.DecodeShape(8, 32, 8, 8192, 128), False),
         ("8x8k p16 rand", bc.DecodeShape(8, 32, 8, 8192, 128, 16), False),
         ("8x8k p16 seq", bc.DecodeShape(8, 32, 8, 8192, 128, 16), True),
         ("8x8k p128 rand", bc.DecodeShape(8, 32, 8, 8192, 128, 128), False),
         ("1x128k win4096", bc.DecodeShape(1, 32, 8, 131072, 128, None, 4096), False)]
only = sys.argv[1:]
print(f"{'case':<16} {'path':<6} {'host us':>8} {'flushed ms':>10} {'GB/s':>6} {'b2b ms':>8} {'b2b GB/s':>8}", flush=True)
with torch.no_grad():
    for name, s, seq in cases:
        if only and name not in only:
            continue
        q, k, v, table = bi.decode_inputs(s)
        if seq and table is not None:  # the same pages, in allocation order (sequence-major)
            n = s.S // s.page
            ids = table.view(-1).long()  # pool[ids[i]] holds logical page i (b * n + j)
            k, v = k[ids], v[ids]  # pool row i = logical page i
            table = torch.arange(s.B * n, device=q.device, dtype=torch.int32).view(s.B, n)
        step = bi.make_decode_step("flexattn", s, q, k, v, table)
        nbytes = bc.decode_bytes(s)
        outs = {}
        for path, fn in (("before", main_cuda_decode), ("after", NEW)):
            paged._cuda_decode = fn
            outs[path] = step().float()
            h = host_us(step)
            ms = bt.time_ms(step, 20, 5)
            b = b2b_ms(step)
            print(f"{name:<16} {path:<6} {h:8.1f} {ms:10.4f} {nbytes / ms / 1e6:6.0f} {b:8.4f} {nbytes / b / 1e6:8.0f}",
                  flush=True)
        paged._cuda_decode = NEW
        same = torch.equal(outs["before"], outs["after"])
        print(f"{name:<16} before/after outputs identical: {same}", flush=True)
        del q, k, v, table
        torch.cuda.empty_cache()
