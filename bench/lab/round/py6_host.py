"""Session 6: host (Python) time of one flexattn.paged_attention decode step, measured on CPU tensors with
the native decode calls stubbed out (no GPU needed): the call is routed through _cuda_decode exactly as a
CUDA bf16 call is, so what is timed is the Python work in front of the kernels (argument checks, mod
binding, block-mask arguments, allocations, views). Works on the tree before and after session 6's
host-path changes (it only uses paged_attention, paged._Call and paged._cuda_decode).

  PYTHONPATH=python:/tmp/torchsite FLEXATTN_NATIVE_DIR=build-python/bindings python3 bench/lab/round/py6_host.py
"""
import contextlib
import cProfile
import os
import pstats
import sys
import time
import timeit

import torch

import flexattn
from flexattn import _native, _torch_api, paged

N = int(os.environ.get("PY6_N", "2000"))


class _Stream:
    cuda_stream = 0


# No GPU: the stream / device queries answer as for device 0, and the native calls return at once.
torch.cuda.current_stream = lambda d=None: _Stream()
torch.cuda.current_device = lambda: 0
torch.cuda.device = lambda d: contextlib.nullcontext()
torch.cuda.is_current_stream_capturing = lambda: False
if hasattr(paged, "_cuda_now"):  # session 6: one hook answers (current device, raw stream)
    paged._cuda_now = lambda torch, index: (index if index is not None else 0, 0)
real = _native.require("py6_host")


class _Native:
    def __getattr__(self, name):
        return getattr(real, name)

    def cuda_decode_workspace_bytes(self, *views, **kw):
        return 4096

    def cuda_decode(self, *views, **kw):
        return None


_native.require = lambda what="": _Native()
paged._decode_by_gather = lambda torch, c, score_mod, bm, scale: paged._cuda_decode(torch, c, score_mod, bm, scale)

B, HQ, HKV, S, D, PAGE, W = 8, 32, 8, 4096, 128, 16, 1024
q = torch.randn(B, HQ, 1, D).to(torch.bfloat16)
k = torch.zeros(B, HKV, S, D, dtype=torch.bfloat16)
v = torch.zeros(B, HKV, S, D, dtype=torch.bfloat16)
pool = torch.zeros(B * S // PAGE, HKV, PAGE, D, dtype=torch.bfloat16)
table = torch.randperm(B * S // PAGE).to(torch.int32).view(B, S // PAGE)
lens = torch.full((B,), S, dtype=torch.int32)
offs = torch.full((B,), S - 1, dtype=torch.int32)
CAP = 20.0


def window(b, h, q_idx, kv_idx):  # the bench's sliding window: a captured Python int (W)
    return (q_idx - kv_idx <= W) & (kv_idx <= q_idx)


def softcap(score, b, h, q_idx, kv_idx):  # a global float (CAP) and torch.tanh
    return CAP * torch.tanh(score / CAP)


bm = _torch_api.create_block_mask(window, 1, 1, S, S, device="cpu")
steps = {
    "contig no mask": lambda: flexattn.paged_attention(q, k, v, None, lens, q_offsets=offs, validate=False),
    "paged no mask": lambda: flexattn.paged_attention(q, pool, pool, table, lens, q_offsets=offs, validate=False),
    "paged window": lambda: flexattn.paged_attention(q, pool, pool, table, lens, q_offsets=offs, block_mask=bm,
                                                     validate=False),
    "paged window+softcap": lambda: flexattn.paged_attention(q, pool, pool, table, lens, q_offsets=offs,
                                                             block_mask=bm, score_mod=softcap, validate=False),
    "_Call paged": lambda: paged._Call(torch, q, pool, pool, table, lens, offs, bm, True),
}
rows = []
with torch.no_grad():
    for name, fn in steps.items():
        fn()
        # CPU time of this process (the helpers' machine is shared: wall time counts other processes)
        best = min(timeit.repeat(fn, number=N, repeat=7, timer=time.process_time)) / N * 1e6
        rows.append((name, best))
        print(f"{name:<24} {best:8.1f} us/call", flush=True)
    if os.environ.get("PY6_PROFILE"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(N):
            steps["paged window"]()
        pr.disable()
        pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(20)
