#!/usr/bin/env bash
# Next session, round 1 (~8 min): what landed in session 3 without a GPU run.
#  1. the full attention check with the defaults (mod_ops: branch-free // and %, fixed i64 path);
#  2. the opt-in bulk dQ backward (FLEXATTN_SM90_BWD_DQ_BULK=1): quick check, then memcheck;
#  3. CLI A/B: backward default vs bulk dQ (--suite short), plus the decode suite.
# The pending patches (bench/lab/pending) are for round 2: apply, rebuild, gpu_decode_check / softcap A/B.
. "$(dirname "$0")/lib.sh"
ONLY="gpu_attention" BUDGET=${BUDGET:-240} bash bench/lab/round/r7.sh
FLEXATTN_SM90_BWD_DQ_BULK=1 timeout 120 $CHECK --quick > $OUT/bulk_check.log 2>&1; echo "bulk check rc=$?"
grep -c "^PASS" $OUT/bulk_check.log; grep "^FAIL" $OUT/bulk_check.log | head -5; tail -1 $OUT/bulk_check.log
FLEXATTN_SM90_BWD_DQ_BULK=1 timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $CHECK --quick > $OUT/bulk_memcheck.log 2>&1
echo "bulk memcheck rc=$?"; grep "ERROR SUMMARY" $OUT/bulk_memcheck.log
timeout 60 $F bench --suite short --backend cuda > $OUT/bench_default.log 2>&1; echo "default rc=$?"
FLEXATTN_SM90_BWD_DQ_BULK=1 timeout 60 $F bench --suite short --backend cuda > $OUT/bench_bulk.log 2>&1; echo "bulk rc=$?"
echo "==== default"; grep -v "^{" $OUT/bench_default.log | tail -9
echo "==== bulk dQ"; grep -v "^{" $OUT/bench_bulk.log | tail -9
# 4. where the sm90 backward spends its time (issue 6): one dense and one softcap backward kernel, S=2048.
ARGS="-B 4 -H 16 -Q 2048 -D 128 --dtype bf16 --backend cuda --backward"
$F run $ARGS > /dev/null 2>&1
timeout 75 ncu -k regex:'^flexattn_bwd$' -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SourceCounters $F run $ARGS > $OUT/ncu_bwd_dense.log 2>&1
echo "ncu rc=$?"; grep -E "Duration|Throughput|Stall|Issued|Eligible|Executed Ipc|Pipe|Bank|Registers" $OUT/ncu_bwd_dense.log | head -40
