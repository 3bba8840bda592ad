"""Session 16: the cold first training step of a learnable relative bias with a mask (the variants whose sm90 backward
spills with its first source at D = 128 and takes its second or third: get_kernel_set now compiles the next two beside
the first). One process per measurement; the caller sets FLEXATTN_CACHE_DIR to a new folder and FLEXATTN_JIT_DEBUG=1
(each compile's own milliseconds, to set against the step's wall time). Usage: learnable_cold.py causal|document|sliding"""
import sys
import time

import torch

from flexattn import _torch_api

S, H, D = 2048, 4, 128


def main():
    case = sys.argv[1]
    dev = "cuda"
    torch.zeros(1, device=dev)
    bias = (torch.randn(H, 2 * S, device=dev) * 0.5).requires_grad_()
    doc = torch.repeat_interleave(torch.arange(4, device=dev, dtype=torch.int32), S // 4)

    def score(s, b, h, q, kv):
        return s + bias[h, q - kv + S]
    masks = {"causal": lambda b, h, q, kv: q >= kv,
             "document": lambda b, h, q, kv: (doc[q] == doc[kv]) & (q >= kv),
             "sliding": lambda b, h, q, kv: (q >= kv) & (q - kv <= 512)}
    bm = _torch_api.create_block_mask(masks[case], 1, 1, S, S, device=dev)
    q, k, v = (torch.randn(1, H, S, D, device=dev, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = _torch_api.flex_attention(q, k, v, score_mod=score, block_mask=bm)
        out.float().sum().backward()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    print(f"learnable relbias + {case:8s} D={D} first step {times[0]:.2f} s, second {times[1] * 1e3:.1f} ms, "
          f"bias grad finite {bool(torch.isfinite(bias.grad).all())}", flush=True)


if __name__ == "__main__":
    main()
