"""Session 18: the deterministic backward against the default one, B=2 H=16 S=8192 bf16 (head dims DET8_DIMS). Per case
and head dim: backward ms (CUDA events, median of 10) with torch's deterministic algorithms off, then on once per value of
the switch DET18_VAR (DET18_VALUES; none: once as built). Each deterministic mode's dQ / dK / dV of three runs are compared
bitwise, and its grads against the default mode's (max abs diff relative to max |grad|). One line per row.
The rounds' switches were temporary (not in the tree): FLEXATTN_SM90_BWD_DQ_CHAINS (round 3: 1 2 4 copies of dq_accum)
and FLEXATTN_SM90_BWD_DQ_PROBE (round 4: parts of the dQ writer off, 0 = none; not deterministic, so "bitwise NO")."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import flexattn  # noqa: E402
import bench_torch  # noqa: E402

B, H, S = 2, 16, 8192
dev = "cuda"


def doc_mask(b, h, q, kv):
    return ((q // 1024) == (kv // 1024)) & (q >= kv)


def causal(b, h, q, kv):
    return q >= kv


CASES = {"full": None, "causal": causal, "document": doc_mask}
CASES = {k: v for k, v in CASES.items() if k in os.environ.get("DET18_CASES", " ".join(CASES)).split()}
VAR = os.environ.get("DET18_VAR", "")
VALUES = os.environ.get("DET18_VALUES", "").split() if VAR else [""]


def bwd_ms(fn, reps=20):
    # GPU time, as bench/run.py measures it (L2 flushed, the host's time covered by a GPU-side hold): session 19
    # found the plain event timing of sessions 8-18 included ~0.4 ms of host time per backward, which diluted the
    # deterministic mode's cost (causal D=128: +16 % here, +23 % in the bench).
    return bench_torch.time_ms(fn, reps, warmup=2)


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

        modes = ["default"] + [f"det{c}" for c in VALUES]
        step()  # warm: the first default timing of a case ran slow in round 3
        res, same, err = {}, {}, {}
        for mode in modes:
            if mode != "default":
                if VAR:
                    os.environ[VAR] = mode[3:]
            torch.use_deterministic_algorithms(mode != "default")
            step()
            res[mode] = bwd_ms(step)
            grads = [torch.autograd.grad(out, (q, k, v), g, retain_graph=True) for _ in range(1 if mode == "default" else 3)]
            if mode == "default":
                ref = grads[0]
                continue
            same[mode] = all(torch.equal(a, b) for x in grads[1:] for a, b in zip(grads[0], x))
            err[mode] = max(((a.float() - b.float()).abs().max() / b.float().abs().max()).item()
                            for a, b in zip(grads[0], ref))
        torch.use_deterministic_algorithms(False)
        if VAR:
            os.environ.pop(VAR, None)
        cols = " ".join(f"{VAR or 'det'} {m[3:]} {res[m]:.3f} ({100 * (res[m] / res['default'] - 1):+.1f}%, bitwise "
                        f"{'yes' if same[m] else 'NO'}, err {err[m]:.1e})" for m in modes[1:])
        print(f"row D={D} {name:9s} default {res['default']:.3f} | {cols}", flush=True)
