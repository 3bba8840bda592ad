#!/usr/bin/env bash
# `make gpu-test`: on a machine with an NVIDIA GPU, builds flexattn and runs every GPU check in one go,
# printing a short pass/fail table last. Logs go to $OUT (the device tool's output folder) or build-gpu/.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG=${OUT:-build-gpu/logs}
mkdir -p "$LOG"
JOBS=$(nproc)
export FLEXATTN_CACHE_DIR=${FLEXATTN_CACHE_DIR:-$PWD/build-gpu/kernel-cache}
status=0
PYOPT=-DFLEXATTN_BUILD_PYTHON=OFF
# GPU_TEST_PYTHON=0 skips the Python extension and the torch comparisons (saves device time).
[ "${GPU_TEST_PYTHON:-1}" = 1 ] && python3 -c "import nanobind" 2>/dev/null && PYOPT=-DFLEXATTN_BUILD_PYTHON=ON
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF $PYOPT >"$LOG/configure.log" 2>&1 \
  || { tail -30 "$LOG/configure.log"; exit 1; }
TARGETS="gpu_attention_check gpu_block_mask_check gpu_decode_check gpu_cp_check flexattn"
[ "$PYOPT" = -DFLEXATTN_BUILD_PYTHON=ON ] && TARGETS="$TARGETS _C"
cmake --build build-gpu -j"$JOBS" --target $TARGETS >"$LOG/build.log" 2>&1 \
  || { grep -E "error" "$LOG/build.log" | head -30; exit 1; }
# GPU_TEST_ONLY="python_gpu gpu_decode ...": run only the named steps (the names of the summary table), so
# the whole set can be split over device calls of at most 10 minutes each.
# GPU_TEST_PARALLEL=N runs up to N steps at once (default 1). The steps are correctness checks, not timings, and most
# of their time is NVRTC compiles on the host's cores; the kernel cache's entries are written by rename, so
# concurrent steps share it safely.
PARALLEL=${GPU_TEST_PARALLEL:-1}
[[ "$PARALLEL" =~ ^[1-9][0-9]*$ ]] || { echo "GPU_TEST_PARALLEL: expected a positive integer, got '$PARALLEL'"; exit 2; }
rm -f "$LOG"/*.result
step() {  # name, command...: runs one step, its "rc=N Ms" in $LOG/name.result
  local name=$1; shift
  local t0=$(date +%s)
  "$@" >"$LOG/$name.log" 2>&1
  echo "rc=$? $(( $(date +%s) - t0 ))s" >"$LOG/$name.result"
}
run() {  # name, command...
  local name=$1
  if [ -n "${GPU_TEST_ONLY:-}" ] && [[ " $GPU_TEST_ONLY " != *" $name "* ]]; then return 0; fi
  if [ "$PARALLEL" = 1 ]; then step "$@"; return 0; fi
  while [ "$(jobs -rp | wc -l)" -ge "$PARALLEL" ]; do wait -n; done
  step "$@" &
}
CHECK=build-gpu/tests/gpu/attention/gpu_attention_check
HOPPER=0
build-gpu/tools/flexattn info 2>/dev/null | grep -q "sm_90" && HOPPER=1
run gpu_attention $CHECK ${GPU_TEST_ARGS:-}
# The longest steps next, so that with GPU_TEST_PARALLEL the short ones fill in beside them: the Python suite
# against torch flex, and compute-sanitizer memcheck on the quick subset (every kernel, odd lengths, both dtypes: any
# invalid access fails the step; skipped where the tool is absent or GPU_TEST_MEMCHECK=0).
# With GPU_TEST_PARALLEL=N the Python suite (alone 340 s on the H100, most of it NVRTC compiles) is dealt to N steps
# python_gpu_<i>, its test ids round-robin (a collection error is the step python_gpu_collect); GPU_TEST_ONLY names it
# python_gpu either way.
python_gpu() {
  [ -n "${GPU_TEST_ONLY:-}" ] && [[ " $GPU_TEST_ONLY " != *" python_gpu "* ]] && return 0
  local files="tests/python/gpu tests/python/test_native_torch.py tests/python/test_native_torch_compile.py tests/python/test_export.py"
  local py="env FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONUNBUFFERED=1 python3 -m pytest -q -p no:cacheprovider"
  if [ "$PARALLEL" = 1 ]; then GPU_TEST_ONLY="" run python_gpu $py $files ${PYTEST_ARGS:-}; return 0; fi
  $py --co $files ${PYTEST_ARGS:-} >"$LOG/python_gpu_collect.log" 2>&1 \
    || { echo "rc=$? 0s" >"$LOG/python_gpu_collect.result"; return 0; }
  grep "::" "$LOG/python_gpu_collect.log" >"$LOG/python_gpu.ids"
  local i
  for ((i = 0; i < PARALLEL; i++)); do
    awk -v n="$PARALLEL" -v i=$i 'NR % n == i' "$LOG/python_gpu.ids" >"$LOG/python_gpu_$i.ids"
    # (one id per line, read with mapfile: parametrized ids may hold spaces)
    [ -s "$LOG/python_gpu_$i.ids" ] && GPU_TEST_ONLY="" run python_gpu_$i \
      bash -c 'mapfile -t ids < "$1"; shift; exec "$@" "${ids[@]}"' - "$LOG/python_gpu_$i.ids" $py ${PYTEST_ARGS:-}
  done
}
if python3 -c "import torch" 2>/dev/null && ls build-gpu/bindings/_C*.so >/dev/null 2>&1; then
  python_gpu
fi
if [ "${GPU_TEST_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  run memcheck compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick
  [ $HOPPER = 1 ] && FLEXATTN_SM90=0 FLEXATTN_SM90_BWD=0 FLEXATTN_DECODE=0 run memcheck_sm80 compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick
fi
# On Hopper the forward defaults to the sm90 family; the portable sm80 family is checked as well.
# The default run above takes the Hopper families and the decode hook for L <= 64; the families they
# replace are checked too (--quick: their full runs passed on the H200 on 2026-12-02; this keeps the whole
# script under 10 min): the portable sm80 family end to end, the sm90 forward on short queries (which the
# decode hook takes by default), and (below) the paths later defaults replaced.
[ $HOPPER = 1 ] && FLEXATTN_SM90=0 FLEXATTN_SM90_BWD=0 FLEXATTN_DECODE=0 run gpu_attention_sm80 $CHECK --quick
[ $HOPPER = 1 ] && FLEXATTN_DECODE=0 run gpu_attention_no_decode $CHECK --quick
# The paths the defaults replaced in session 4: one CTA per tile (not persistent), the first sm90 backward.
[ $HOPPER = 1 ] && FLEXATTN_SM90_PERSISTENT=0 FLEXATTN_SM90_BWD_V2=0 run gpu_attention_per_tile $CHECK --quick
# The paths session 5's defaults replaced, in one run: the v2 backward with per-row bulk dQ (v3's TMA
# reductions off) and per-entry buffer-gradient atomics, the forward without the affine ALiBi bias, uniform descriptors, ILP softmax and lazy
# rescale, and the narrow kv tile for buffer-reading mods; and session 7's general softcap path (FLEXATTN_SM90_SOFTCAP=0).
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_V3=0 FLEXATTN_SM90_BWD_BG_REDUCE=0 FLEXATTN_SM90_AFFINE=0 FLEXATTN_SM90_UDESC=0 FLEXATTN_SM90_ILP=0 \
  FLEXATTN_SM90_LAZY=0 FLEXATTN_SM90_NARROW=1 FLEXATTN_SM90_SOFTCAP=0 run gpu_attention_s4 $CHECK --quick
# The sm90 backward's per-element dQ path (the default is the bulk dQ path).
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_BULK=0 run gpu_attention_bwd_red $CHECK --quick
# Deterministic mode's other path: the sm80 dQ pass (FLEXATTN_SM90_BWD_ORDERED_DQ=0), on the deterministic cases only.
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_ORDERED_DQ=0 run gpu_attention_det_pass $CHECK --deterministic --quick
# The sm90 backward without its deferred launch order (FLEXATTN_SM90_BWD_CTA_ORDER, default on since session 35).
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_CTA_ORDER=0 run gpu_attention_no_cta_order $CHECK --quick
# The sm90 forward's work tiles in block-mask row order on every mask (FLEXATTN_SM90_ROW_ORDER=1; the default,
# auto, takes it where the natural order is not longest first): every tile once.
[ $HOPPER = 1 ] && FLEXATTN_SM90_ROW_ORDER=1 run gpu_attention_row_order $CHECK --quick
# Kv-range masks (FLEXATTN_SM90_KV_RANGE=1, opt-in): partial tiles tested against each row's kv bounds (causal,
# sliding window, prefix-LM, softcap / ALiBi with causal, the text mask; session 17: 127/127 in the full --quick run).
[ $HOPPER = 1 ] && FLEXATTN_SM90_KV_RANGE=1 run gpu_attention_kv_range $CHECK --quick --only causal --only sliding \
  --only prefix --only text
# The backward's grouped launch order forced on for every variant and call (FLEXATTN_SM90_BWD_HEAD_GROUPS=1; the default
# `auto` uses it only for variants with a mask_mod, with a block mask or deterministic), default and deterministic cases.
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_HEAD_GROUPS=1 run gpu_attention_bwd_groups $CHECK --quick
# Session 21's switches (bench/RESULTS.md, sessions 21-22): the tall forward tile (default on since session 22) turned
# off on the D = 64 calls without a block mask (the identity and score-only mods, every length of the full run), the
# softcap path's reciprocal on the FMA pipe for every entry, and the decode family's last-CTA merge (below, with the
# decode checks).
[ $HOPPER = 1 ] && FLEXATTN_SM90_FWD_TALL=0 run gpu_attention_no_tall $CHECK --only full --only relbias --only t5
[ $HOPPER = 1 ] && FLEXATTN_SM90_SOFTCAP_RCP=8 run gpu_attention_softcap_rcp $CHECK --only softcap
# ... and the MUFU reciprocal that the D = 64 default (8) replaced in session 27.
[ $HOPPER = 1 ] && FLEXATTN_SM90_SOFTCAP_RCP=0 run gpu_attention_softcap_mufu $CHECK --only softcap
# Session 28's padded head dims (FLEXATTN_SM90_PAD_HEAD_DIM, default on since session 29) turned off: the quick run's
# D 80 / 96 / 160 cases on the sm80 family (every other case takes the same kernels as with it).
[ $HOPPER = 1 ] && FLEXATTN_SM90_PAD_HEAD_DIM=0 run gpu_attention_no_pad_head_dim $CHECK --quick
# Session 29's defaults turned off: the rel-gather forward's row loads after the wait for S (the relative-bias entries
# of the full run), and the v3 dQ buffers' stores in step order (every backward form of the quick run).
[ $HOPPER = 1 ] && FLEXATTN_SM90_GATHER_PREFETCH=0 run gpu_attention_no_gather_prefetch $CHECK --only relbias
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_SWAP=0 run gpu_attention_no_bwd_dq_swap $CHECK --quick
# Session 31's first-store dQ tiles (FLEXATTN_SM90_BWD_DQ_CLAIM; default on, off in deterministic mode since session
# 32): off, every query tile cleared by the preprocess and added into (every backward form of the quick run); forced
# on in deterministic mode.
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_CLAIM=0 run gpu_attention_no_dq_claim $CHECK --quick
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_CLAIM=1 run gpu_attention_dq_claim_det $CHECK --quick --deterministic
# ... and with a limit of 256 kv rows, so the quick run's masked lengths have both open tiles and tiles the preprocess
# cleared and marked stored (at the default 2048 every quick case's tiles are open).
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV=256 run gpu_attention_dq_claim_mixed $CHECK --quick
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_DQ_CLAIM=1 FLEXATTN_SM90_BWD_DQ_CLAIM_MAX_KV=256 \
  run gpu_attention_dq_claim_mixed_det $CHECK --quick --deterministic
# Session 33's rank warp (FLEXATTN_SM90_BWD_RANK_WARP, default on) compiled out: the ordered writers compute the ranks.
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_RANK_WARP=0 run gpu_attention_no_rank_warp $CHECK --quick --deterministic
# Session 31's padded backward (FLEXATTN_SM90_BWD_PAD_HEAD_DIM, default on since session 32) turned off: the quick
# run's D 96 / 192 / Dv 96 backward cases on the sm80 family.
[ $HOPPER = 1 ] && FLEXATTN_SM90_BWD_PAD_HEAD_DIM=0 run gpu_attention_no_bwd_pad_head_dim $CHECK --quick
# Session 24's early claim of the persistent forward's next tile (FLEXATTN_SM90_EARLY_CLAIM=2, opt-in): every tile
# still runs exactly once (the quick run's masks and lengths).
[ $HOPPER = 1 ] && FLEXATTN_SM90_EARLY_CLAIM=2 run gpu_attention_early_claim $CHECK --quick
# Session 24's distance-only bias tables (FLEXATTN_SM90_REL_DIAG; default on since session 29 but for the gather shape):
# forced on, the T5 and relative-bias entries of the full run, and under memcheck (the tables' shared-memory indices);
# off, T5's per-entry path.
[ $HOPPER = 1 ] && FLEXATTN_SM90_REL_DIAG=1 run gpu_attention_rel_diag $CHECK --only t5 --only relbias
[ $HOPPER = 1 ] && FLEXATTN_SM90_REL_DIAG=0 run gpu_attention_no_rel_diag $CHECK --quick --only t5
[ $HOPPER = 1 ] && command -v compute-sanitizer >/dev/null && FLEXATTN_SM90_REL_DIAG=1 run memcheck_rel_diag \
  compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick --only t5 --only relbias
[ -x build-gpu/tests/gpu/block_mask_gpu/gpu_block_mask_check ] && run gpu_block_mask build-gpu/tests/gpu/block_mask_gpu/gpu_block_mask_check
[ -x build-gpu/tests/gpu/decode/gpu_decode_check ] && run gpu_decode build-gpu/tests/gpu/decode/gpu_decode_check ${GPU_TEST_ARGS:-}
# The cp.async decode ring (the default on sm_90a is the bulk ring with a PDL combine).
[ $HOPPER = 1 ] && [ -x build-gpu/tests/gpu/decode/gpu_decode_check ] && FLEXATTN_DECODE_BULK=0 FLEXATTN_DECODE_PDL=0 run gpu_decode_cp_async build-gpu/tests/gpu/decode/gpu_decode_check --quick
[ -x build-gpu/tests/gpu/decode/gpu_decode_check ] && FLEXATTN_DECODE_MERGE=0 run gpu_decode_no_merge build-gpu/tests/gpu/decode/gpu_decode_check --quick
[ -x build-gpu/tests/gpu/cp/gpu_cp_check ] && run gpu_cp build-gpu/tests/gpu/cp/gpu_cp_check
# Every library mod through the CLI: `flexattn run --check --backward` against the CPU reference.
run gpu_library_mods scripts/gpu_library_check.sh "$LOG"
wait
summary=""
for f in "$LOG"/*.result; do
  [ -f "$f" ] || continue
  r=$(cat "$f"); summary+=$(printf '%-16s %s' "$(basename "$f" .result)" "$r")$'\n'
  [[ "$r" == rc=0\ * ]] || status=1
done
echo "---- failures (if any) ----"
grep -h "^FAIL" "$LOG"/gpu_*.log 2>/dev/null | head -40
echo "---- summary ----"
[ -f "$LOG/gpu_attention.log" ] && tail -3 "$LOG/gpu_attention.log"
printf '%s' "$summary"
exit $status
