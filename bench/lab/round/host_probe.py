"""Where does per-call time go? For a few cases: the bench's flushed single-call timing, back-to-back
throughput (kernel time), and host issue time per call (no sync), flexattn vs torch-flex."""
import sys, time, statistics, os
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
import bench_cases as bc, bench_torch as bt, bench_impls as bi
from probe_timing import batch_ms, host_us

_S = int(os.environ.get("PROBE_S", "2048"))  # 8192: the issues' B=2 H=16 S=8192 shape
shape = bc.Shape(4 if _S == 2048 else 2, 16, _S, 128) if hasattr(bc, "Shape") else None
print(f"{'case':<14} {'impl':<11} {'flushed ms':>10} {'batch ms':>9} {'host us':>8}")
for case in sys.argv[1:] or ["full", "causal", "document", "softcap_causal"]:
    ctx = bi.CaseContext(shape, case, 0, with_reference=False)
    for impl in ("flexattn", "torch-flex"):
        if impl == "torch-flex": torch._dynamo.reset()
        bm = bi.make_block_mask(impl, ctx.mask_mod, shape.S)
        fwd = bi.make_forward(impl, case, ctx.score_mod, bm)
        q, k, v = ctx.q, ctx.k, ctx.v
        with torch.no_grad():
            f = lambda: fwd(q, k, v)
            f(); torch.cuda.synchronize()
            print(f"{case:<14} {impl:<11} {bt.time_ms(f, 20, 3):10.3f} {batch_ms(f, 30):9.3f} {host_us(f):8.1f}", flush=True)
