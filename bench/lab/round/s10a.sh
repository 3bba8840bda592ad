#!/usr/bin/env bash
# For session 10's first device call (issue 5 / 6, session 9's schedule-model changes, none run on a GPU yet):
# (1) correctness: gpu_attention_check --quick with the defaults (small head group first), with
#     FLEXATTN_SM90_ROW_ORDER=1 and with FLEXATTN_SM90_BWD_HEAD_GROUPS=1 (10 deterministic cases each);
# (2) B=2 H=16 S=8192 D=128 forward ms: small group first (default) vs last (FLEXATTN_SM90_SMALL_GROUP_FIRST=0)
#     vs first + row order, on document (bench/run.py's mask), causal, sliding, full;
# (3) backward ms, S=8192 and S=4096, causal / document / full, HEAD_GROUPS 0 vs 1, default and --deterministic;
# (4) bench/run.py on the short forwards and the host issue time per call.
# Too much for one 10-minute call: PART=1 (1, 2; ~5 min), PART=2 (3; ~4 min), PART=3 (4; ~5 min).
. "$(dirname "$0")/lib.sh"
out_dir s10a; L=$O
build_gpu $O gpu_attention_check flexattn
PART=${PART:-1}
if [ $PART = 1 ]; then
for c in "" "FLEXATTN_SM90_ROW_ORDER=1" "FLEXATTN_SM90_BWD_HEAD_GROUPS=1"; do
  n=${c:-default}; n=${n%%=*}
  env $c timeout 150 $CHECK --quick > $O/check_$n.log 2>&1; echo "check --quick $n rc=$? $(pass_fail $O/check_$n.log) ($(el) s)"
  grep ^FAIL $O/check_$n.log | head -3
done
fi
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32)); np.save('$O/doc4.npy', np.array(bc.doc_ids(4096), dtype=np.int32))"
cfg() { case $1 in first) ;; last) echo FLEXATTN_SM90_SMALL_GROUP_FIRST=0 ;; rows) echo FLEXATTN_SM90_ROW_ORDER=1 ;;
  g0) ;; g1) echo FLEXATTN_SM90_BWD_HEAD_GROUPS=1 ;; esac; }
one() {  # cfg case S extra-args... -> $O/<cfg>_<case>_<S><tag>.log
  local c=$1 m=$2 S=$3 tag=$4; shift 4
  local a=(); case $m in causal) a=(--mask causal) ;; sliding) a=(--mask sliding_window:1023) ;; full) ;;
    document) a=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/$([ $S = 8192 ] && echo doc || echo doc4).npy) ;; esac
  env $(cfg $c) timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q $S -D 128 "${a[@]}" "$@" > $O/${c}_${m}_${S}${tag}.log 2>&1
}
if [ $PART = 1 ]; then
for c in first last rows; do for m in document causal sliding full; do one $c $m 1024 w & done; done; wait
for rep in 1 2; do for m in document causal sliding full; do for c in first last rows; do one $c $m 8192 _$rep; done; done; done
echo "forward runs $(el) s"
echo "== B=2 H=16 S=8192 D=128 forward ms: small group first (default) / last / first + row order (reps 1, 2)"
for m in document causal sliding full; do
  line="$m:"; for c in first last rows; do line="$line  $c"; for rep in 1 2; do line="$line $(ms_of $O/${c}_${m}_8192_$rep.log forward)"; done; done; echo "$line"
done
fi
if [ $PART = 2 ]; then
for S in 8192 4096; do for m in causal document full; do for c in g0 g1; do
  one $c $m $S _b --backward; one $c $m $S _d --backward --deterministic
done; done; done
echo "== B=2 H=16 D=128 backward ms: HEAD_GROUPS 0 / 1, default and deterministic"
for S in 8192 4096; do for m in causal document full; do
  echo "S=$S $m: default $(ms_of $O/g0_${m}_${S}_b.log backward) -> $(ms_of $O/g1_${m}_${S}_b.log backward)  det $(ms_of $O/g0_${m}_${S}_d.log backward) -> $(ms_of $O/g1_${m}_${S}_d.log backward)"
done; done
fi
# (4) bench/run.py's own timing of the two short forwards (session 8: sliding 386 TFLOP/s there, 442-457 in the CLI),
# flexattn only, small group first vs last.
if [ $PART = 3 ]; then
  cmake -S . -B build-gpu -DFLEXATTN_BUILD_PYTHON=ON > $O/configure_py.log 2>&1
  cmake --build build-gpu -j16 --target _C > $O/build_py.log 2>&1 || { grep error $O/build_py.log | head; }
  export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
  for c in first last; do
    env $(cfg $c) timeout 150 python3 bench/run.py --suite long --cases sliding1024,document,causal --impls flexattn --no-warm \
      --reps 30 --out $O/bench_$c > $O/bench_$c.log 2>&1; echo "bench.py $c rc=$? ($(el) s)"; tail -12 $O/bench_$c.log | grep -E "^\|" | head -8
  done
  # bench/run.py times one call after a 256 MB L2 flush (~70 us on the GPU): host time per call beyond that
  # shows up as GPU idle inside the timed region. Flushed single call vs back-to-back vs host issue time.
  (cd bench/lab/round && PROBE_S=8192 timeout 120 python3 host_probe.py sliding1024 document causal) > $O/host_probe.log 2>&1
  echo "host_probe rc=$?"; cat $O/host_probe.log | tail -8
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
