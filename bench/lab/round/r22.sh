#!/usr/bin/env bash
# Session 7, round 2: (1) FLEXATTN_SM90_POLY_EXP2=1 at D=64, every bench case, three alternating repeats (round 1: dense
# D=64 418 -> 437 with k=1, worse with k >= 2 and at D=128); plus k=1 with ILP / LAZY on dense. (2) The backward's
# kernel breakdown at S=8192 D=128 (ncu gpu__time_duration per kernel; r20's step).
. "$(dirname "$0")/lib.sh"
out_dir r22; L=$O
build_gpu $O gpu_attention_check flexattn
CASES="full causal sliding document prefixlm alibi softcap relbias"
flags() { case $1 in full) ;; causal) echo --mask causal ;; sliding) echo --mask sliding_window:1023 ;;
  document) echo --mask-expr "q_idx // 1024 == kv_idx // 1024 && q_idx >= kv_idx" ;; prefixlm) echo --mask prefix_lm:2048 ;;
  alibi) echo --mask causal --score alibi ;; softcap) echo --mask causal --score softcap:30 ;; relbias) echo --score relbias ;; esac; }
cfg() { case $1 in 0) ;; 1) echo FLEXATTN_SM90_POLY_EXP2=1 ;; 1i) echo FLEXATTN_SM90_POLY_EXP2=1 FLEXATTN_SM90_ILP=1 ;;
  1l) echo FLEXATTN_SM90_POLY_EXP2=1 FLEXATTN_SM90_LAZY=1 ;; 2) echo FLEXATTN_SM90_POLY_EXP2=2 ;; esac; }
runit() {  # cfg case B H S log
  local c=$1 m=$2; shift 2
  if [ $m = document ]; then env $(cfg $c) timeout 30 $F run -B $1 -H $2 -Q $3 -D 64 --dtype bf16 --backend cuda \
      --mask-expr "q_idx // 1024 == kv_idx // 1024 && q_idx >= kv_idx" > $4 2>&1
  else env $(cfg $c) timeout 30 $F run -B $1 -H $2 -Q $3 -D 64 --dtype bf16 --backend cuda $(flags $m) > $4 2>&1; fi
}
for m in $CASES; do for c in 0 1; do runit $c $m 1 2 1024 $O/warm_${m}_$c.log & done; done
for c in 1i 1l; do runit $c full 1 2 1024 $O/warm_full_$c.log & done
wait; echo "prewarm $(el) s"
for rep in 1 2 3; do
  for m in $CASES; do for c in 0 1; do runit $c $m 2 16 8192 $O/big_${m}_${c}_$rep.log; done; done
  for c in 1i 1l; do runit $c full 2 16 8192 $O/big_full_${c}_$rep.log; done
done
echo "runs $(el) s"
# Deterministic mode's cost (issue 6: at most 15 % slower), B=2 H=16 S=8192 D=128 backward ms.
for m in causal full; do
  mf=$([ $m = causal ] && echo "--mask causal")
  timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 $mf --backward > $O/det0_$m.log 2>&1
  timeout 90 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 $mf --backward --deterministic > $O/det1_$m.log 2>&1
  echo "deterministic $m: bwd $(ms_of $O/det0_$m.log backward) -> $(ms_of $O/det1_$m.log backward) ms ($(el) s)"
done
for m in causal full; do
  $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask $m --backward > /dev/null 2>&1
  timeout 90 ncu --metrics gpu__time_duration.sum --print-units base --csv $F run --backend cuda --dtype bf16 -B 2 -H 16 \
    -Q 8192 -D 128 --mask $m --backward > $O/ncu_bwd_$m.csv 2> $O/ncu_bwd_$m.err
  echo "ncu $m rc=$? ($(el) s)"
  python3 - $O/ncu_bwd_$m.csv <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value")
agg = collections.OrderedDict()
for r in rows[1:]:
    agg.setdefault(r[ki][:40], []).append(float(r[vi].replace(",", "")))
for k, v in agg.items(): print(f"  {k:40s} n={len(v)} us={[round(x/1000,1) for x in v][:8]}")
PY
done
# (3) The document forward (bench/run.py's mask: 8 documents of random length, causal inside; 34 % of its tiles are
# partial) against causal: ncu --set full of one forward launch each, details and SASS-level source page.
python3 -c "import numpy as np, sys; sys.path.insert(0, 'bench'); import bench_cases as bc; np.save('$O/doc.npy', np.array(bc.doc_ids(8192), dtype=np.int32))"
DOCF=(--mask-expr "doc_ids[q_idx] == doc_ids[kv_idx] && q_idx >= kv_idx" --buffer doc_ids=$O/doc.npy)
timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 "${DOCF[@]}" > $O/doc_fwd.log 2>&1; echo "doc fwd $(ms_of $O/doc_fwd.log forward) ms"
for m in document causal softcap; do
  case $m in document) A=("${DOCF[@]}") ;; causal) A=(--mask causal) ;; softcap) A=(--mask causal --score softcap:30) ;; esac
  timeout 120 ncu --set full --import-source yes -k regex:flexattn_fwd -c 1 -o $O/fwd_$m $F run --backend cuda --dtype bf16 -B 2 -H 16 \
    -Q 8192 -D 128 "${A[@]}" > $O/ncu_fwd_$m.log 2>&1; echo "ncu fwd $m rc=$? ($(el) s)"
  ncu --import $O/fwd_$m.ncu-rep --page details --csv > $O/fwd_${m}_details.csv 2>/dev/null
  ncu --import $O/fwd_$m.ncu-rep --page source --csv --print-source sass > $O/fwd_${m}_sass.csv 2>/dev/null
  grep -E '"Duration"|"Compute \(SM\) Throughput"|"Issue Slots Busy"|"No Eligible"|"Eligible Warps Per Scheduler"|"Active Warps Per Scheduler"' $O/fwd_${m}_details.csv | cut -d, -f12- | head -8
done
echo "D=64 B=2 H=16 S=8192 forward TFLOP/s, reps 1 2 3 (median)" | tee $O/table.txt
for m in $CASES full:1i full:1l; do
  case $m in *:*) c0="${m#*:}"; m=${m%%:*}; cs=$c0 ;; *) cs="0 1" ;; esac
  for c in $cs; do
    ent=$(case $m in full|relbias) echo $((8192 * 8192)) ;; *) echo $((8192 * 8193 / 2)) ;; esac)
    v=""; for rep in 1 2 3; do v="$v $(tflops $((4 * 64 * 32 * ent)) "$(ms_of $O/big_${m}_${c}_$rep.log forward)")"; done
    echo "$m poly=$c:$v" | tee -a $O/table.txt
  done
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
