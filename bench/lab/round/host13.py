"""Session 13: is bench/run.py's sliding1024 forward row (D=128) host-bound in some runs (374-386 TFLOP/s in
three of seven record runs, 452-465 in the others and in the CLI)? Per case at B=2 H=16 S=8192 D=128,
flexattn forward: the bench's flushed per-call median (bench_torch.time_ms), the GPU time per call back to
back (batch_ms) and the host time to issue one call (host_us). Host-bound when host_us exceeds the
flushed time's GPU share."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
import bench_cases as bc, bench_impls as bi, bench_torch as bt
from probe_timing import batch_ms, host_us

shape = bc.Shape(2, 16, 8192, 128)
print("| case | flushed ms | batch ms | host us per call |")
print("|---|---|---|---|")
for case in sys.argv[1:] or ["sliding1024", "document", "causal"]:
    ctx = bi.CaseContext(shape, case, 0, with_reference=False)
    bm = bi.make_block_mask("flexattn", ctx.mask_mod, shape.S)
    fwd = bi.make_forward("flexattn", case, ctx.score_mod, bm)
    with torch.no_grad():
        f = lambda: fwd(ctx.q, ctx.k, ctx.v)
        f(); torch.cuda.synchronize()
        fl = [bt.time_ms(f, 20) for _ in range(3)]
        ba = batch_ms(f, 50)
        hs = [host_us(f, 50) for _ in range(3)]
    print(f"| {case} | {' / '.join(f'{x:.3f}' for x in fl)} | {ba:.3f} | {' / '.join(f'{x:.0f}' for x in hs)} |", flush=True)
