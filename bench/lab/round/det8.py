"""Session 8: the deterministic backward with ordered dQ reductions (FLEXATTN_SM90_BWD_ORDERED_DQ), B=2 H=16 S=8192 bf16.
Per case and head dim: backward ms (CUDA events, median of 10) with torch's deterministic algorithms off / on / on with the
pipelined dQ hand-off, dQ / dK / dV of three deterministic runs compared bitwise (and the pipelined ones with the plain
deterministic ones), and the deterministic grads against the default mode's (max abs diff relative to max |grad|). One line per row; det8.sh prints the table.
Session 18 removed the pipelined hand-off (FLEXATTN_SM90_BWD_DQ_PIPELINE): its "det_pipe" column now repeats "det"."""
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

        # Modes: default, deterministic, deterministic with the pipelined dQ hand-off (FLEXATTN_SM90_BWD_DQ_PIPELINE,
        # read at every backward, so os.environ switches it in-process). Both deterministic modes must give the same
        # bits: the order of the additions is the same.
        res, same, err = {}, {}, {}
        for mode in ("default", "det", "det_pipe"):
            os.environ["FLEXATTN_SM90_BWD_DQ_PIPELINE"] = "1" if mode == "det_pipe" else "0"
            torch.use_deterministic_algorithms(mode != "default")
            step()
            res[mode] = bwd_ms(step)
            grads = [torch.autograd.grad(out, (q, k, v), g, retain_graph=True) for _ in range(1 if mode == "default" else 3)]
            if mode == "default":
                ref = grads[0]
                continue
            if mode == "det":
                det_bits = grads[0]
            same[mode] = all(torch.equal(a, b) for x in grads[1:] + [det_bits] for a, b in zip(grads[0], x))
            err[mode] = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                            for a, b in zip(grads[0], ref))
        torch.use_deterministic_algorithms(False)
        os.environ.pop("FLEXATTN_SM90_BWD_DQ_PIPELINE", None)
        print(f"row D={D} {name:9s} bwd_ms default {res['default']:.3f} det {res['det']:.3f} "
              f"({100 * (res['det'] / res['default'] - 1):+.1f}%) pipelined {res['det_pipe']:.3f} "
              f"({100 * (res['det_pipe'] / res['default'] - 1):+.1f}%) bitwise {'yes' if same['det'] else 'NO'}/"
              f"{'yes' if same['det_pipe'] else 'NO'} err_vs_default {err['det']:.2e}", flush=True)
