"""Session 33: what torch's deterministic NaN fill (torch.utils.deterministic.fill_uninitialized_memory, on by default
with torch.use_deterministic_algorithms) costs flexattn's deterministic backward, B=2 H=16 S=8192 bf16: GPU time
(bench_torch.time_ms) with the kernels' buffers allocated by _torch_ops._empty (no fill) and by torch.empty (filled),
A/B/B/A; then the default mode. One line per case and head dim."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "../.."))
import torch  # noqa: E402

import flexattn  # noqa: E402
from flexattn import _torch_ops  # noqa: E402
import bench_torch  # noqa: E402

B, H, S = 2, 16, 8192
skip = _torch_ops._empty


def filled(shape, dtype, device):
    return torch.empty(shape, dtype=dtype, device=device)


def causal(b, h, q, kv):
    return q >= kv


def doc(b, h, q, kv):
    return ((q // 1024) == (kv // 1024)) & (q >= kv)


torch.manual_seed(0)
for D in (128, 64):
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16)
    for name, m in (("causal", causal), ("document", doc)):
        bm = flexattn.create_block_mask(m, B, 1, S, S, device="cuda")
        out = flexattn.flex_attention(q, k, v, block_mask=bm)

        def step():
            torch.autograd.grad(out, (q, k, v), g, retain_graph=True)

        res = {}
        torch.use_deterministic_algorithms(True)
        for label, fn in (("skip", skip), ("fill", filled), ("fill2", filled), ("skip2", skip)):
            _torch_ops._empty = fn
            res[label] = bench_torch.time_ms(step, 20, warmup=2)
        _torch_ops._empty = skip
        torch.use_deterministic_algorithms(False)
        d = bench_torch.time_ms(step, 20, warmup=2)
        s_, f_ = min(res["skip"], res["skip2"]), min(res["fill"], res["fill2"])
        print(f"row D={D} {name:9s} default {d:.3f} | det no fill {res['skip']:.3f} {res['skip2']:.3f} "
              f"({100 * (s_ / d - 1):+.1f}%) | det filled {res['fill']:.3f} {res['fill2']:.3f} ({100 * (f_ / d - 1):+.1f}%)",
              flush=True)
