"""Session 8: the deterministic backward with ordered dQ reductions (FLEXATTN_SM90_BWD_ORDERED_DQ), B=2 H=16 S=8192 bf16.
Per case and head dim: backward ms (CUDA events, median of 10) with torch's deterministic algorithms off / on, dQ of three
deterministic runs compared bitwise, and the deterministic dQ / dK / dV against the default mode's (max abs diff relative
to max |grad|). One line per row; det8.sh prints the table."""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import flexattn  # noqa: E402

B, H, S = 2, 16, 8192
dev = "cuda"


def doc_mask(b, h, q, kv):
    return ((q // 1024) == (kv // 1024)) & (q >= kv)


def causal(b, h, q, kv):
    return q >= kv


CASES = {"full": None, "causal": causal, "document": doc_mask}


def bwd_ms(fn, reps=10):
    times = []
    for _ in range(reps + 2):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times[2:])


torch.manual_seed(0)
for D in (int(x) for x in os.environ.get("DET8_DIMS", "128 64").split()):
    q = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(B, H, S, D, device=dev, dtype=torch.bfloat16)
    for name, m in CASES.items():
        bm = flexattn.create_block_mask(m, B, 1, S, S, device=dev) if m is not None else None
        out = flexattn.flex_attention(q, k, v, block_mask=bm)

        def step():
            q.grad = k.grad = v.grad = None
            torch.autograd.grad(out, (q, k, v), g, retain_graph=True)

        res = {}
        for det in (False, True):
            torch.use_deterministic_algorithms(det)
            step()
            res[det] = bwd_ms(step)
            grads = [torch.autograd.grad(out, (q, k, v), g, retain_graph=True) for _ in range(3 if det else 1)]
            if det:
                same = all(torch.equal(grads[0][0], x[0]) and torch.equal(grads[0][1], x[1]) and torch.equal(grads[0][2], x[2])
                           for x in grads[1:])
                err = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                          for a, b in zip(grads[0], ref))
            else:
                ref = grads[0]
        torch.use_deterministic_algorithms(False)
        print(f"row D={D} {name:9s} bwd_ms default {res[False]:.3f} det {res[True]:.3f} "
              f"cost {100 * (res[True] / res[False] - 1):+.1f}% bitwise {'yes' if same else 'NO'} "
              f"err_vs_default {err:.2e}", flush=True)
