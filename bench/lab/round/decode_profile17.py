"""Session 17: the 8x8k decode step under bench/run.py's timing (L2 flushed by a 256 MB zero_, a GPU hold, CUDA events):
per implementation the event time, then a torch.profiler trace of 10 such calls: each kernel's median duration and
the span from the call's first kernel start to its last kernel end (launch and PDL gaps included). Also a clean
flush (a 256 MB read instead of a write: no dirty lines for the call to write back) to see how much of the gap to
the event time is the flush's write-back. Argument: impls (comma list), default flexattn,sdpa-cudnn,sdpa-flash."""
import os, statistics, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
from torch.profiler import profile, ProfilerActivity
import bench_cases as bc, bench_torch as bt, bench_impls as bi

s = bc.DecodeShape(8, 32, 8, 8192, 128)
impls = (sys.argv[1] if len(sys.argv) > 1 else "flexattn,sdpa-cudnn,sdpa-flash").split(",")
q, k, v, table = bi.decode_inputs(s)
buf = torch.empty(256 << 18, dtype=torch.int32, device="cuda")


def clean_flush():
    buf.max()  # reads the 256 MB: L2 left full of clean lines


def timed(step, flush, reps=40):
    for _ in range(5): step()
    torch.cuda.synchronize()
    st = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for a, b in zip(st, en):
        flush(); torch.cuda._sleep(2_000_000); a.record(); step(); b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in zip(st, en))


for impl in impls:
    step = bi.make_decode_step(impl, s, q, k, v, table)
    with torch.no_grad():
        dirty = timed(step, bt._flush_l2)
        clean = timed(step, clean_flush)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                bt._flush_l2(); torch.cuda._sleep(2_000_000); step()
            torch.cuda.synchronize()
    gb = bc.decode_bytes(s) / 1e9
    print(f"== {impl}: event ms dirty flush {dirty:.4f} ({gb / dirty * 1e3:.0f} GB/s), clean flush {clean:.4f} "
          f"({gb / clean * 1e3:.0f} GB/s)", flush=True)
    evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                 key=lambda e: e.time_range.start)
    names = {}
    for e in evs:
        names.setdefault(e.name[:90], []).append(e.time_range.end - e.time_range.start)
    for n, d in names.items():
        print(f"   {statistics.median(d):9.1f} us  x{len(d):<3d} {n}")
    # calls: kernels other than the flush and the hold, grouped by gaps > 300 us
    skip = ("fill", "spin", "sleep", "reduce_kernel")  # the flushes (zero_, max) and the hold
    rest = [e for e in evs if not any(w in e.name.lower() for w in skip)]
    spans, cur = [], []
    for e in rest:
        if cur and e.time_range.start - cur[-1].time_range.end > 300:
            spans.append(cur[-1].time_range.end - cur[0].time_range.start); cur = []
        cur.append(e)
    if cur:
        spans.append(cur[-1].time_range.end - cur[0].time_range.start)
    if spans:
        print(f"   span of a call's kernels (first start to last end): median {statistics.median(spans):.1f} us "
              f"over {len(spans)} calls", flush=True)
