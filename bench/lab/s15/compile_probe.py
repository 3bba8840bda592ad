"""Session 15: where a masked variant's cold first call spends its time on the device. Per case (D=128 and 64), each in
a fresh kernel cache: the block-mask builder's compile (create_block_mask, cold then warm), the forward compile alone
(compile_variant, what an inference call waits), and the forward with the backward compiling beside it (a training
call's first step, the bench's --compile-jobs 2). Prints one line per case; FLEXATTN_JIT_DEBUG=1 shows each NVRTC
compile. Usage: compile_probe.py CASE D MODE, one process per
measurement (fresh in-process caches), FLEXATTN_CACHE_DIR set by the caller to a new folder."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

import bench_torch as bt  # noqa: E402
from flexattn import _native, _torch_api, _torch_ops  # noqa: E402
from flexattn.masks import noop_mask  # noqa: E402

C = _native.require("compile_probe")
S, H = 8192, 16


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    r = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, r


def variant_of(case):
    score, mask = bt.make_score_mod(case, S, H), bt.make_mask_mod(case, S)
    spec = _torch_api._bound_values(score, mask or noop_mask)[0]
    return _torch_ops._decode(spec, "")[0], mask


def main():
    case, D, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]  # mode: alone (block mask, then forward) | beside | bwd
    arch = C.cuda_device_arch(0)
    # start-up outside the timings (driver, NVRTC load): one small mask, compiled into the same fresh cache
    _torch_api.create_block_mask(lambda b, h, q, kv: kv <= q + 7, 1, 1, 256, 256, device="cuda")
    variant, mask = variant_of(case)
    row = {}
    if mode == "alone":
        if mask is not None:
            row["bm_cold"], _ = timed(lambda: _torch_api.create_block_mask(mask, 1, 1, S, S, device="cuda"))
            row["bm_warm"], _ = timed(lambda: _torch_api.create_block_mask(mask, 1, 1, S, S, device="cuda"))
        row["fwd_alone"], _ = timed(lambda: C.compile_variant(variant, "bf16", D, D, arch, False))
    elif mode == "beside":
        got = {}

        def bwd():
            t0 = time.perf_counter()
            C.compile_variant(variant, "bf16", D, D, arch, True)
            got["bwd"] = time.perf_counter() - t0
        th = threading.Thread(target=bwd)
        th.start()
        row["fwd_beside_bwd"], _ = timed(lambda: C.compile_variant(variant, "bf16", D, D, arch, False))
        th.join()
        row["bwd_beside_fwd"] = got["bwd"]
    else:
        row["bwd_alone"], _ = timed(lambda: C.compile_variant(variant, "bf16", D, D, arch, True))
    print(f"{case:14s} D={D:3d} {mode:6s} " + " ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
