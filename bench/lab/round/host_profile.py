"""Where does flexattn's ~200 us of host time per forward call go (session 10: 186-252 us per call against
torch-flex's 114-203 us, host_probe.py)? For a few cases at a small shape (the kernel shorter than the host
time, so the queue never blocks): host us per call, the native cuda_forward's own share (timed around it),
and a cProfile of 300 calls, top entries by own time."""
import cProfile, io, os, pstats, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch
import bench_cases as bc, bench_impls as bi
from flexattn import _native, _torch_ops
from probe_timing import host_us

shape = bc.Shape(1, 4, 1024, 128)
C = _native.load()
native = {"n": 0, "s": 0.0}
real_forward = C.cuda_forward


class Timed:  # the native module's attributes are read-only: wrap the module instead
    def __getattr__(self, name):
        return getattr(C, name)

    def cuda_forward(self, *a, **k):
        t = time.perf_counter()
        r = real_forward(*a, **k)
        native["s"] += time.perf_counter() - t
        native["n"] += 1
        return r


for case in sys.argv[1:] or ["document", "causal", "alibi_causal"]:
    ctx = bi.CaseContext(shape, case, 0, with_reference=False)
    bm = bi.make_block_mask("flexattn", ctx.mask_mod, shape.S)
    fwd = bi.make_forward("flexattn", case, ctx.score_mod, bm)
    q, k, v = ctx.q, ctx.k, ctx.v
    with torch.no_grad():
        f = lambda: fwd(q, k, v)
        f(); torch.cuda.synchronize()
        h = host_us(f, 300)
        _native.require = lambda *_a: Timed()
        native.update(n=0, s=0.0)
        h2 = host_us(f, 300)
        nat = native["s"] / max(native["n"], 1) * 1e6
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(300): f()
        pr.disable()
        torch.cuda.synchronize()
        _native.require = lambda *_a: C
    print(f"== {case}: host {h:.1f} us per call; with the timer {h2:.1f}, of which cuda_forward {nat:.1f} us")
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(22)
    print("\n".join(l for l in s.getvalue().splitlines() if l.strip())[:6000])
