"""Session 32: the deterministic backward with a learnable relative bias (exact buffer-gradient sums,
runtime/exact_grads.h) against the default mode, forward + backward through flexattn's torch API, B=2 H=16 D=128 bf16.
Prints ms per step (median of CUDA-event timings) for default / deterministic and torch flex (Triton) default, and
whether the deterministic bias gradient repeats bitwise."""
import os
import statistics
import sys

import torch
import torch.nn.attention.flex_attention as tfa

from flexattn import _torch_api

DEV = "cuda"


def main():
    B, H, D = 2, 16, 128
    for S in (int(a) for a in (sys.argv[1:] or ["4096", "8192"])):
        const = os.environ.get("BIAS_CONST") == "1"  # a frozen bias: the deterministic mode without buffer gradients
        bias = torch.zeros(H, 2 * S, device=DEV).normal_(0, 0.5).requires_grad_(not const)

        def rel(score, b, h, q, kv):
            return score + bias[h, q - kv + S]

        q, k, v = (torch.randn(B, H, S, D, device=DEV, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        g = torch.randn(B, H, S, D, device=DEV, dtype=torch.bfloat16)
        tflex = torch.compile(tfa.flex_attention)

        def step(attn):
            for x in (q, k, v, bias):
                x.grad = None
            attn(q, k, v, score_mod=rel).backward(g)

        def timed(attn, reps=10):
            step(attn)
            torch.cuda.synchronize()
            ts = []
            for _ in range(reps):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                step(attn)
                b.record()
                torch.cuda.synchronize()
                ts.append(a.elapsed_time(b))
            return statistics.median(ts)

        plain = timed(_torch_api.flex_attention)
        torch.use_deterministic_algorithms(True)
        try:
            det = timed(_torch_api.flex_attention)
            grads = []
            for _ in range(2):
                step(_torch_api.flex_attention)
                grads.append(q.grad.clone() if const else bias.grad.clone())
        finally:
            torch.use_deterministic_algorithms(False)
        same = torch.equal(grads[0], grads[1])
        print(f"S={S} {'frozen' if const else 'learnable'} relbias fwd+bwd ms: flexattn {plain:.3f}, deterministic {det:.3f} "
              f"({100 * (det / plain - 1):+.1f} %); det dbias bitwise repeat: {same}", flush=True)
        if const:
            continue
        try:
            print(f"S={S} torch flex (compiled) fwd+bwd ms: {timed(tflex):.3f}", flush=True)
        except Exception as e:  # torch 2.11's compiled backward with a learnable bias can exceed shared memory
            print(f"S={S} torch flex (compiled): failed: {str(e).splitlines()[-1][:160]}", flush=True)


if __name__ == "__main__":
    main()
