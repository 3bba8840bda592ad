"""Session 6 (py6): host time of flexattn.paged_attention's decode step on the GPU, with the per-token
caches (binding plans, block-mask arguments; paged._CACHE) on and off in the same process, and where the
remaining host time goes (each piece timed alone, no sync inside the loop). Rows:
  step <shape> cache=0|1   host us per call of the bench's decode step (bench_impls.make_decode_step)
  piece <name>             host us per call of one piece of the window step
Writes one line per row to stdout; py6.sh prints the summary table."""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import bench_cases as bc  # noqa: E402
import bench_impls as bi  # noqa: E402
from flexattn import _native, paged  # noqa: E402


def host_us(fn, n=200):  # as decode_probe6.py
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return h


def ab(step, reps=5):
    """Median host us with the caches on and off, interleaved (a warm-up call for each first)."""
    got = {True: [], False: []}
    for _ in range(reps):
        for on in (True, False):
            paged._CACHE = on
            step()
            got[on].append(host_us(step))
    paged._CACHE = True
    return statistics.median(got[True]), statistics.median(got[False])


shapes = [("B8 S8192", bc.DecodeShape(8, 32, 8, 8192, 128)),
          ("B1 S128k w4096", bc.DecodeShape(1, 32, 8, 131072, 128, None, 4096)),
          ("B8 S8192 p16", bc.DecodeShape(8, 32, 8, 8192, 128, 16))]
with torch.no_grad():
    for name, s in shapes:
        q, k, v, table = bi.decode_inputs(s)
        step = bi.make_decode_step("flexattn", s, q, k, v, table)
        on, off = ab(step)
        print(f"step {name:<16} cache=1 {on:7.1f}  cache=0 {off:7.1f}", flush=True)

    # The pieces of the window step (the bench's sliding window: a captured Python int).
    s = shapes[1][1]
    q, k, v, table = bi.decode_inputs(s)
    W = s.window

    def window(b, h, q_idx, kv_idx):
        return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)

    from flexattn import _torch_api

    bm = _torch_api.create_block_mask(window, 1, 1, s.S, s.S, device="cuda")
    lens = torch.full((s.B,), s.S, dtype=torch.int32, device="cuda")
    offs = torch.full((s.B,), s.S - 1, dtype=torch.int32, device="cuda")
    step = (lambda: paged.paged_attention(q, k, v, None, lens, q_offsets=offs, block_mask=bm, validate=False,
                                                return_lse=True))
    C = _native.require()
    seen = {}

    class Recording:
        def __getattr__(self, name):
            return getattr(C, name)

        def cuda_decode(self, *views, **kw):
            seen["views"], seen["kw"] = views, dict(kw)
            return C.cuda_decode(*views, **kw)

    for _ in range(3):
        step()
    real_require = _native.require
    _native.require = lambda what="": Recording()
    kept = step()  # its out and lse stay alive: the replayed native call writes them
    _native.require = real_require
    nbytes = seen["kw"]["workspace_bytes"]
    ws = torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
    seen["kw"]["workspace"] = ws.data_ptr() if nbytes else 0
    dev = q.device

    def one_alloc():
        buf = torch.empty(32 * 128 * 2 + 32 * 4, dtype=torch.uint8, device=dev)
        return buf[:8192].view(torch.bfloat16).view(1, 32, 1, 128), buf[8192:].view(torch.float32).view(1, 32, 1)

    pieces = [
        ("full step", step),
        ("_C.cuda_decode alone", lambda: C.cuda_decode(*seen["views"], **seen["kw"])),
        ("_Call (checks)", lambda: paged._Call(torch, q, k, v, None, lens, offs, bm, True)),
        ("_bound (plan)", lambda: paged._bound(None, window)),
        ("_mask_args (cached)", lambda: paged._mask_args(bm)),
        ("out+lse: 2 empty", lambda: (torch.empty((1, 32, 1, 128), dtype=torch.bfloat16, device=dev),
                                      torch.empty((1, 32, 1), dtype=torch.float32, device=dev))),
        ("out+lse: 1 empty+views", one_alloc),  # the alternative (not used): is one allocation cheaper?
        ("torch.empty ws", lambda: torch.empty(max(nbytes, 1), dtype=torch.uint8, device=dev)),
        ("raw stream+device", lambda: paged._cuda_now(torch, 0)),
        ("current_stream()", lambda: torch.cuda.current_stream(dev).cuda_stream),
    ]
    for name, fn in pieces:
        fn()
        print(f"piece {name:<22} {statistics.median(host_us(fn) for _ in range(3)):7.2f}", flush=True)
    print(f"workspace bytes {nbytes}", flush=True)
