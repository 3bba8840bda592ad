#!/usr/bin/env bash
# Session 9, round 2: (1) the persistent producer claims its next work tile 2 kv tiles early and prefetches the
# list rows (FLEXATTN_SM90_CLAIM_LEAD, default 2; 0 = sessions 4-8): --quick correctness, then B=2 H=16 S=8192
# forward ms for leads 0 / 2 / 3 alternating, 2 repeats, on document (bench/run.py's mask), sliding, causal, full
# (D=128) and document D=64. (2) det8.py: default / deterministic / deterministic + pipelined dQ hand-off.
. "$(dirname "$0")/lib.sh"
out_dir s9b; L=$O
build_gpu $O gpu_attention_check flexattn
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
args() { case $1 in sliding) echo --mask sliding_window:1023 ;; causal) echo --mask causal ;; full) ;; esac; }
one() {  # lead case rep
  local d=128; [ $2 = document64 ] && d=64
  if [ ${2:0:8} = document ]; then
    FLEXATTN_SM90_CLAIM_LEAD=$1 timeout 40 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D $d \
      --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy > $O/f_$1_$2_$3.log 2>&1
  else
    FLEXATTN_SM90_CLAIM_LEAD=$1 timeout 40 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D $d $(args $2) > $O/f_$1_$2_$3.log 2>&1
  fi
}
CASES="${CASES:-document sliding causal}"
for l in ${LEADS:-0 2}; do for m in $CASES; do one $l $m 0 & done; done; wait; echo "prewarm $(el) s"
for rep in 1 2; do for m in $CASES; do for l in ${LEADS:-0 2}; do one $l $m $rep; done; done; done
echo "forward runs $(el) s"
echo "== B=2 H=16 S=8192 bf16 forward ms, claim lead 0 / 2 / 3 (reps 1, 2)"
for m in $CASES; do
  line="$m:"; for l in ${LEADS:-0 2}; do line="$line  L$l"; for rep in 1 2; do line="$line $(ms_of $O/f_${l}_${m}_$rep.log forward)"; done; done
  echo "$line"
done
timeout 120 $CHECK --quick > $O/check_quick.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check_quick.log) ($(el) s)"
grep ^FAIL $O/check_quick.log | head -5
cmake -S . -B build-gpu -DFLEXATTN_BUILD_PYTHON=ON > $O/configure_py.log 2>&1
cmake --build build-gpu -j16 --target _C > $O/build_py.log 2>&1 || { grep error $O/build_py.log | head; }
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout ${PY_BUDGET:-150} python3 bench/lab/round/det8.py > $O/det8.log 2>&1; echo "det8.py rc=$? ($(el) s)"
echo "== B=2 H=16 S=8192 bf16 backward, default vs deterministic (det8.py)"
grep ^row $O/det8.log | cut -c5-
# Where the document forward's consumers wait now (session 7: 7.1 % of samples on the next tile's Q).
if [ "${NCU:-0}" = 1 ]; then
  timeout 120 ncu --set full --import-source yes -k regex:flexattn_fwd -c 1 -o $O/fwd_doc $F run --backend cuda --dtype bf16 -B 2 -H 16 \
    -Q 8192 -D 128 --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy > $O/ncu_doc.log 2>&1
  echo "ncu doc rc=$? ($(el) s)"
  ncu --import $O/fwd_doc.ncu-rep --page source --csv --print-source sass > $O/fwd_doc_sass.csv 2>/dev/null
  rm -f $O/fwd_doc.ncu-rep
fi
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
