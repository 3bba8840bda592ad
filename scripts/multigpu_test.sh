#!/usr/bin/env bash
# `make multigpu-test`: the context-parallel NCCL ring (docs/cp.md §3) on the GPUs of one host. Builds
# multigpu_cp_check and runs it as one process per GPU: N = 1 (no peer; also fills the kernel cache so the
# multi-rank runs do not all compile at once), N = 2, N = every GPU; then the --time runs for the scaling
# table. Logs (one per rank and run) go to $OUT or build-gpu/logs; a summary table is printed last.
#   MULTIGPU_TIMEOUT=300    seconds per run (each rank exits 124 itself shortly before)
#   MULTIGPU_ONLY="n2 time" only the named steps (n1 n2 nall time), to split the work over device calls
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
if [ "$gpus" -lt 2 ]; then
  echo "multigpu-test: needs at least 2 visible NVIDIA GPUs; found $gpus. NCCL refuses two ranks on one GPU," \
       "so the ring cannot be checked on a single device." >&2
  exit 1
fi

# Ranks run with CUDA_VISIBLE_DEVICES unset (NCCL then sees every GPU and can use P2P between them) and
# pick their device by index, so a restricted CUDA_VISIBLE_DEVICES is translated to device indices here.
devices=()
if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
  IFS=, read -ra devices <<<"$CUDA_VISIBLE_DEVICES"
  for d in "${devices[@]}"; do
    [[ "$d" =~ ^[0-9]+$ ]] || { echo "multigpu-test: CUDA_VISIBLE_DEVICES entry '$d' is not an index;" \
                                     "unset it or list indices" >&2; exit 1; }
  done
else
  for ((i = 0; i < gpus; i++)); do devices+=("$i"); done
fi

LOG=${OUT:-build-gpu/logs}
mkdir -p "$LOG"
export FLEXATTN_CACHE_DIR=${FLEXATTN_CACHE_DIR:-$PWD/build-gpu/kernel-cache}
# NVLink multicast (NVLS) must stay off on the lent machines; the ring's point-to-point sends do not use it.
export NCCL_NVLS_ENABLE=0
T=${MULTIGPU_TIMEOUT:-300}
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=OFF \
  >"$LOG/configure.log" 2>&1 || { tail -30 "$LOG/configure.log"; exit 1; }
cmake --build build-gpu -j"$(nproc)" --target multigpu_cp_check >"$LOG/build.log" 2>&1 \
  || { grep -E "error" "$LOG/build.log" | head -30; exit 1; }
BIN=build-gpu/tests/gpu/cp/multigpu_cp_check

status=0
summary=()
# launch NAME WORLD [ARGS...]: WORLD ranks in the background, each with its own log; waits for all.
launch() {
  local name=$1 world=$2; shift 2
  if [ -n "${MULTIGPU_ONLY:-}" ] && [[ " $MULTIGPU_ONLY " != *" ${name%%_*} "* ]]; then return 0; fi
  local id="$LOG/$name.ncclid" t0=$SECONDS pids=() rcs="" r
  rm -f "$id" "$id".tmp.*  # a stale id would send the ranks to a communicator that no longer exists
  for ((r = 0; r < world; r++)); do
    env -u CUDA_VISIBLE_DEVICES timeout "$T" "$BIN" --rank "$r" --world "$world" --device "${devices[$r]}" \
      --id-file "$id" --timeout $((T > 20 ? T - 10 : T)) "$@" >"$LOG/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < world; r++)); do
    wait "${pids[$r]}"
    local rc=$?
    rcs="$rcs $rc"
    [ $rc -eq 0 ] || status=1
  done
  local last
  last=$(grep -h "cases, " "$LOG/$name.rank0.log" 2>/dev/null | tail -1)
  summary+=("$(printf '%-10s N=%-2s %4ss  rc:%-16s %s' "$name" "$world" $((SECONDS - t0)) "$rcs" "${last:-}")")
}

launch n1 1
launch n2 2
[ "$gpus" -gt 2 ] && launch nall "$gpus"
launch time_n1 1 --time
launch time_n2 2 --time
[ "$gpus" -gt 2 ] && launch time_nall "$gpus" --time

echo "---- failures (if any) ----"
grep -hE "^(FAIL|SKIP)" "$LOG"/n*.rank*.log "$LOG"/time_*.rank*.log 2>/dev/null | head -40
if ls "$LOG"/time_*.rank0.log >/dev/null 2>&1; then
  echo "---- ring forward + backward, median of 10 (rank 0; bf16, B1 H16 D128) ----"
  grep -h "^mask" "$LOG"/time_*.rank0.log | head -1
  grep -h "^TIME" "$LOG"/time_*.rank0.log | sed 's/^TIME //' | sort -k1,1 -k3,3n -k4,4n
fi
echo "---- summary ($gpus GPUs; logs in $LOG) ----"
for s in "${summary[@]}"; do echo "$s"; done
exit $status
