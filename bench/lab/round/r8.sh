#!/usr/bin/env bash
# Session 3 round 2 (reuses build-gpu when the machine stayed warm): the attention checks (sm90 forward
# default incl. position offsets, the opt-in sm90 backward, the decode hook), then the CLI benches:
# sm90 backward vs sm80 backward (short suite) and the decode suite.
. "$(dirname "$0")/lib.sh"
ONLY="${ONLY:-gpu_attention gpu_attention_sm90_bwd gpu_attention_decode}" BUDGET=${BUDGET:-330} bash bench/lab/round/r7.sh
FLEXATTN_SM90_BWD=1 timeout 90 $F bench --suite short --backend cuda > $OUT/bench_sm90bwd.log 2>&1; echo "sm90bwd rc=$?"
timeout 70 $F bench --suite short --backend cuda > $OUT/bench_sm80bwd.log 2>&1; echo "sm80bwd rc=$?"
timeout 60 $F bench --suite decode --backend cuda > $OUT/bench_decode.log 2>&1; echo "decode rc=$?"
echo "==== sm90 bwd"; grep -v "^{" $OUT/bench_sm90bwd.log | tail -12
echo "==== sm80 bwd"; grep -v "^{" $OUT/bench_sm80bwd.log | tail -12
echo "==== decode"; grep -v "^{" $OUT/bench_decode.log | tail -14
