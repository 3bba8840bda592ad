"""What the round's Python probes (host_probe.py, decode_probe6.py) share: per-call GPU and host times."""
import time

import torch


def batch_ms(fn, n):
    """GPU time per call of n calls back to back (CUDA events around them, after one untimed call), in ms."""
    fn(); torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(n): fn()
    b.record(); torch.cuda.synchronize()
    return a.elapsed_time(b) / n


def host_us(fn, n=200):
    """Host time to issue one call (n calls without a sync in between), in microseconds."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n): fn()
    h = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return h
