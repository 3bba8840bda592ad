"""Session 17: 12 flushed 8x8k decode steps of one implementation (argv[1]), for ncu to profile one of them.
Optional argv[2], argv[3]: B and S of another shape (session 45: 1 131072)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
import bench_cases as bc, bench_torch as bt, bench_impls as bi

B, S = (int(sys.argv[2]), int(sys.argv[3])) if len(sys.argv) > 3 else (8, 8192)
s = bc.DecodeShape(B, 32, 8, S, 128)
q, k, v, table = bi.decode_inputs(s)
step = bi.make_decode_step(sys.argv[1], s, q, k, v, table)
with torch.no_grad():
    for _ in range(12):
        bt._flush_l2(); step()
    torch.cuda.synchronize()
print("done")
