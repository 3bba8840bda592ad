"""Session 6: where does a decode step's time go? Per shape: bench/run.py's flushed per-call timing, back-to-back
GPU time (batch), host issue time per call (no sync), and a cProfile of the host path of flexattn's calls."""
import cProfile, io, os, pstats, statistics, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
import bench_cases as bc, bench_torch as bt, bench_impls as bi
from probe_timing import batch_ms, host_us


shapes = [bc.DecodeShape(8, 32, 8, 8192, 128), bc.DecodeShape(1, 32, 8, 131072, 128),
          bc.DecodeShape(1, 32, 8, 131072, 128, None, 4096), bc.DecodeShape(8, 32, 8, 8192, 128, 16)]
print(f"{'shape':<22} {'impl':<11} {'flushed ms':>10} {'batch ms':>9} {'host us':>8} {'GB/s flushed':>12}")
prof_rows = []
for s in shapes:
    q, k, v, table = bi.decode_inputs(s)
    for impl in ("flexattn", "sdpa-flash"):
        try:
            step = bi.make_decode_step(impl, s, q, k, v, table)
        except NotImplementedError:
            continue
        with torch.no_grad():
            step()
            f = bt.time_ms(step, 50, 5)
            b = batch_ms(step, 50)
            h = host_us(step)
            name = f"B{s.B} S{s.S} p{s.page or 0} w{s.window}"
            print(f"{name:<22} {impl:<11} {f:>10.4f} {b:>9.4f} {h:>8.1f} {bc.gbps(bc.decode_bytes(s), f):>12.0f}", flush=True)
            if impl == "flexattn":
                pr = cProfile.Profile(); pr.enable()
                for _ in range(200): step()
                pr.disable(); torch.cuda.synchronize()
                out = io.StringIO(); pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(14)
                prof_rows.append((name, out.getvalue()))
with open(os.path.join(os.environ.get("OUT", "/tmp"), "s6a", "decode_cprofile.txt"), "w") as fh:
    for name, txt in prof_rows:
        fh.write(f"==== {name}\n{txt}\n")
