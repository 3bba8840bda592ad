#!/usr/bin/env bash
# Session 7, round 3: FLEXATTN_SM90_SOFTCAP=1 (the folded softcap path of fwd_softmax_sm90.cuh). Correctness:
# gpu_attention_check --quick with it on, `run --check` over caps / signs / masks / dtypes / odd lengths. Speed: B=2 H=16
# S=8192 forward, softcap + causal D=128 and 64, softcap alone D=128, off / on alternating, three repeats.
. "$(dirname "$0")/lib.sh"
out_dir r23; L=$O
build_gpu $O gpu_attention_check flexattn
on() { FLEXATTN_SM90_SOFTCAP=1 "$@"; }
off() { "$@"; }
CFGS="128:--mask causal --score softcap:30|64:--mask causal --score softcap:30|128:--score softcap:30"
IFS='|' read -ra CASES <<< "$CFGS"
for c in "${CASES[@]}"; do d=${c%%:*}; f=${c#*:}
  for how in on off; do $how timeout 60 $F run -B 1 -H 2 -Q 256 -D $d --dtype bf16 --backend cuda $f > /dev/null 2>&1 & done
done
wait; echo "prewarm $(el) s"
on timeout 120 $CHECK --quick > $O/check_on.log 2>&1; echo "check --quick softcap-on rc=$? $(pass_fail $O/check_on.log) ($(el) s)"
grep ^FAIL $O/check_on.log | head -3
n=0
while read -r d dt q args; do
  n=$((n + 1))
  on timeout 40 $F run -B 2 -H 3 -Q $q -D $d --dtype $dt --backend cuda $args --check > $O/chk_$n.log 2>&1
  echo "check D=$d $dt Q=$q $args: rc=$? $(grep -o 'check: .*' $O/chk_$n.log | head -1)"
done <<'LIST'
128 bf16 1000 --score softcap:30
64 bf16 1000 --mask causal --score softcap:30
128 f16 129 --mask causal --score softcap:50
64 bf16 17 --mask sliding_window:5 --score softcap:20
128 bf16 4097 --mask causal --score softcap:30
128 bf16 777 --mask document:3 --score-expr -25.0*tanh(score/25.0)
64 bf16 300 --mask causal --score-expr tanh(score*0.2)*3.0
128 bf16 1 --score softcap:30
LIST
echo "checks $(el) s"
for rep in 1 2 3; do for c in "${CASES[@]}"; do d=${c%%:*}; f=${c#*:}; tag=$(echo "$d$f" | tr -cd 'a-z0-9')
  for how in off on; do $how timeout 30 $F run -B 2 -H 16 -Q 8192 -D $d --dtype bf16 --backend cuda $f > $O/big_${tag}_${how}_$rep.log 2>&1; done
done; done
echo "runs $(el) s"
echo "B=2 H=16 S=8192 forward TFLOP/s off -> on (three repeats)" | tee $O/table.txt
for c in "${CASES[@]}"; do d=${c%%:*}; f=${c#*:}; tag=$(echo "$d$f" | tr -cd 'a-z0-9')
  ent=$(case "$f" in *causal*) echo $((8192 * 8193 / 2)) ;; *) echo $((8192 * 8192)) ;; esac)
  row="D=$d $f:"
  for how in off on; do for rep in 1 2 3; do row="$row $(tflops $((4 * d * 32 * ent)) "$(ms_of $O/big_${tag}_${how}_$rep.log forward)")"; done; row="$row |"; done
  echo "$row" | tee -a $O/table.txt
done
(cd $OUT && tar czf all.tgz --exclude=all.tgz . 2>/dev/null); true
