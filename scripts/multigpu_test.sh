#!/usr/bin/env bash
# `make multigpu-test`: the context-parallel ring (docs/cp.md §3) on N GPUs of one host. A stub for now:
# it says what the check will run and stops, because that check cannot run yet (see the last message).
set -uo pipefail
cd "$(dirname "$0")/.."

gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    visible=$(echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c . || true)
    [ "$visible" -lt "$gpus" ] && gpus=$visible
  fi
fi

cat <<'PLAN'
multigpu-test will: build gpu_cp_check; start one process per GPU (N = 2, then every visible GPU) with
NCCL_NVLS_ENABLE=0, rank 0 writing nccl_unique_id() to a file the others read; each rank runs
ring_forward / ring_backward on its zigzag and contiguous shards for causal, document and sliding-window
masks (bf16 and f16, GQA) and compares out, lse, dq, dk, dv with one-GPU cuda_forward / cuda_backward of
the whole sequence, and at small sizes with cpu_plan_forward / cpu_plan_backward; then it times N = 1..G
for the scaling table in bench/RESULTS.md.
PLAN

if [ "$gpus" -lt 2 ]; then
  echo "multigpu-test: needs at least 2 visible NVIDIA GPUs; found $gpus. NCCL refuses two ranks on one GPU," \
       "so the ring cannot be checked on a single device." >&2
  exit 1
fi
echo "multigpu-test: $gpus GPUs visible, but gpu_cp_check is not written yet: the ring's kernels need runtime" \
     "q_offset/kv_offset in ForwardArgs/BackwardArgs before masks that read positions (causal, document," \
     "sliding window) can run on it (docs/cp.md §4)." >&2
exit 2
