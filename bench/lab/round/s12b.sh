#!/usr/bin/env bash
# Session 12 (issue 6): the sm90 backward's wide kernel (D = Dv = 256; kernels/sm90/bwd_consumer_wide_sm90.cuh),
# first GPU run. (1) gpu_attention_check --quick (now with D=256 for every corpus mod, deterministic and offset
# cases); (2) flexattn run --check --backward at D=256, odd lengths, causal / document / ALiBi / softcap, GQA;
# (3) compute-sanitizer memcheck + synccheck on a small wide backward; (4) the hd256 suite, flexattn only,
# backward: the wide kernel vs the sm80 family (FLEXATTN_SM90_BWD=0). ~8 min.
. "$(dirname "$0")/lib.sh"
out_dir s12b; L=$O
deadline 570
BUILD_PY=ON build_gpu $O gpu_attention_check flexattn _C
timeout $(cap 220) $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"
grep ^FAIL $O/check.log | head -5; grep "cases," $O/check.log
python3 -c "import numpy as np; np.save('$O/doc.npy', (np.arange(4097) * 7 // 4097).astype(np.int32))"
run_check() {  # NAME ARGS...
  local n=$1; shift
  local dt=(--dtype bf16); [[ " $* " == *" --dtype "* ]] && dt=()
  timeout $(cap 60 5) $F run --backend cuda --check --backward "${dt[@]}" -D 256 "$@" > $O/run_$n.log 2>&1
  echo "run --check $n rc=$? $(grep -E '^check: ' $O/run_$n.log | tail -1) $(grep -E '^  d[qkv] ' $O/run_$n.log | awk '{print $1, $5}' | tr '\n' ' ')"
}
for Lq in 1 17 127 129 1000 4097; do run_check causal_$Lq -B 1 -H 4 --hkv 2 -Q $Lq --mask causal; done
for Lq in 129 1000; do
  run_check doc_$Lq -B 2 -H 4 -Q $Lq --mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy
  run_check alibi_$Lq -B 2 -H 4 -Q $Lq --mask causal --score alibi
  run_check softcap_$Lq -B 2 -H 4 -Q $Lq --mask causal --score softcap:30
  run_check relbias_$Lq -B 1 -H 4 -Q $Lq --score relbias
done
run_check unequal -B 1 -H 4 -Q 300 --kv 700 --mask causal
run_check f16 --dtype f16 -B 1 -H 2 -Q 1000
run_check det -B 1 -H 4 -Q 1000 --mask causal --deterministic
echo "checks ($(el) s)"
for tool in memcheck synccheck; do
  timeout $(cap 90 5) compute-sanitizer --tool $tool $F run --backend cuda --backward --dtype bf16 -D 256 -B 1 -H 2 -Q 300 --mask causal > $O/san_$tool.log 2>&1
  echo "sanitizer $tool rc=$? $(grep -E 'ERROR SUMMARY' $O/san_$tool.log | tail -1) ($(el) s)"
done
export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python
timeout $(cap 150 5) python3 bench/run.py --suite hd256 --backward --impls flexattn --no-warm --out $O/bench_wide > $O/bench_wide.log 2>&1
echo "bench wide rc=$? ($(el) s)"
FLEXATTN_SM90_BWD=0 timeout $(cap 150 5) python3 bench/run.py --suite hd256 --backward --impls flexattn --cases full,causal,document --no-warm --out $O/bench_sm80 > $O/bench_sm80.log 2>&1
echo "bench sm80 rc=$? ($(el) s)"
for d in bench_wide bench_sm80; do echo "== $d"; tail -14 $O/$d.log; done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
