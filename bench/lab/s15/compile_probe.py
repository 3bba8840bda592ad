"""Session 15: where a masked variant's cold first call spends its time on the device. One measurement per process
(fresh in-process caches; the caller sets FLEXATTN_CACHE_DIR to a new folder). Usage: compile_probe.py CASE D MODE,
MODE one of: alone (the block-mask builder's compile, create_block_mask cold then warm, then the forward compile
alone: what an inference call waits), beside (the forward compile with the backward compiling beside it: a training
call's first step, the bench's --compile-jobs 2), bwd (the backward compile alone), builder (session 16: the
builder's cold create_block_mask with only the CUDA context made before, so that the mask-independent compact
kernel compiles too, beside the classify kernel; NVRTC's first load included). Prints one line;
FLEXATTN_JIT_DEBUG=1 shows each NVRTC compile."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import bench_impls as bi  # noqa: E402
import bench_torch as bt  # noqa: E402
from flexattn import _native, _torch_api  # noqa: E402

C = _native.require("compile_probe")
S, H = 8192, 16


def variant_of(case):
    score, mask = bt.make_score_mod(case, S, H), bt.make_mask_mod(case, S)
    return bi.flexattn_variant(score, mask), mask


def main():
    case, D, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]  # mode: alone (block mask, then forward) | beside | bwd
    arch = C.cuda_device_arch(0)
    if mode == "builder":
        import torch
        torch.zeros(1, device="cuda")
        mask = bt.make_mask_mod(case, S)
        t, _ = bt.first_call(lambda: _torch_api.create_block_mask(mask, 1, 1, S, S, device="cuda"))
        print(f"{case:14s} D={D:3d} {mode:6s} bm_cold_all={t:.2f}", flush=True)
        return
    # start-up outside the timings (driver, NVRTC load): one small mask, compiled into the same fresh cache
    _torch_api.create_block_mask(lambda b, h, q, kv: kv <= q + 7, 1, 1, 256, 256, device="cuda")
    variant, mask = variant_of(case)
    row = {}
    if mode == "alone":
        if mask is not None:
            row["bm_cold"], _ = bt.first_call(lambda: _torch_api.create_block_mask(mask, 1, 1, S, S, device="cuda"))
            row["bm_warm"], _ = bt.first_call(lambda: _torch_api.create_block_mask(mask, 1, 1, S, S, device="cuda"))
        row["fwd_alone"], _ = bt.first_call(lambda: C.compile_variant(variant, "bf16", D, D, arch, False))
    elif mode == "beside":
        got = {}

        def bwd():
            t0 = time.perf_counter()
            C.compile_variant(variant, "bf16", D, D, arch, True)
            got["bwd"] = time.perf_counter() - t0
        th = threading.Thread(target=bwd)
        th.start()
        row["fwd_beside_bwd"], _ = bt.first_call(lambda: C.compile_variant(variant, "bf16", D, D, arch, False))
        th.join()
        row["bwd_beside_fwd"] = got["bwd"]
    else:
        row["bwd_alone"], _ = bt.first_call(lambda: C.compile_variant(variant, "bf16", D, D, arch, True))
    print(f"{case:14s} D={D:3d} {mode:6s} " + " ".join(f"{k}={v:.2f}" for k, v in row.items()), flush=True)


if __name__ == "__main__":
    main()
