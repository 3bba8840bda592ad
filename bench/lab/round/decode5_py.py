"""decode5 Python probe (issue 7): where the time of flexattn.paged_attention goes on the 8x8k decode shape
(Hq=32 Hkv=8 D=128 bf16, one query row at position S-1), before (main's paged.py, verbatim in
decode5_main_paged.py) and after (this tree's: memoised workspace size / noop-mask binding / head dims, no
device switch when the device is current, fewer torch attribute reads). Per case and path: host us per call (200 calls, no sync), the bench's flushed per-call
ms (bench_torch.time_ms, what bench/run.py --suite decode reports) and GB/s, the back-to-back GPU ms. Paged
cases with a random page table (bench/run.py's) and with one in allocation order (TLB / locality check)."""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import bench_cases as bc  # noqa: E402
import bench_impls as bi  # noqa: E402  (decode_inputs: bench/run.py's inputs)
import bench_torch as bt  # noqa: E402
import flexattn  # noqa: E402


def _load_main_paged():
    """main's paged.py (bench/lab/round/decode5_main_paged.py) as flexattn._paged_main."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "decode5_main_paged.py")
    spec = importlib.util.spec_from_file_location("flexattn._paged_main", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


MAIN = _load_main_paged()


def steps(s, q, k, v, table):
    """(before, after): one decode step through main's and this tree's paged_attention, the arguments of
    bench_impls.make_decode_step (lengths S, query at S - 1, the window's block mask)."""
    from flexattn import _torch_api

    lens = torch.full((s.B,), s.S, dtype=torch.int32, device=q.device)
    offs = torch.full((s.B,), s.S - 1, dtype=torch.int32, device=q.device)
    bm = None
    if s.window:
        W = s.window

        def window(b, h, q_idx, kv_idx):
            return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)
        bm = _torch_api.create_block_mask(window, 1, 1, s.S, s.S, device=q.device)
    kw = dict(q_offsets=offs, block_mask=bm, validate=False)
    return (lambda: MAIN.paged_attention(q, k, v, table, lens, **kw),
            lambda: flexattn.paged_attention(q, k, v, table, lens, **kw))




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
        nbytes = bc.decode_bytes(s)
        outs = {}
        for path, step in zip(("before", "after"), steps(s, q, k, v, table)):
            outs[path] = step().float()
            h = host_us(step)
            ms = bt.time_ms(step, 20, 5)
            b = b2b_ms(step)
            print(f"{name:<16} {path:<6} {h:8.1f} {ms:10.4f} {nbytes / ms / 1e6:6.0f} {b:8.4f} {nbytes / b / 1e6:8.0f}",
                  flush=True)
        same = torch.equal(outs["before"], outs["after"])
        print(f"{name:<16} before/after outputs identical: {same}", flush=True)
        del q, k, v, table
        torch.cuda.empty_cache()
