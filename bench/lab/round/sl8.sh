. bench/lab/round/lib.sh
out_dir sl; L=$O
build_gpu $O flexattn
for i in 1 2 3; do
timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask sliding_window:1023 > $O/sl_$i.log 2>&1; echo "sliding fwd $i: $(ms_of $O/sl_$i.log forward) ms"
done
FLEXATTN_SM90_SOFTCAP=0 timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask sliding_window:1023 > $O/sl_s0.log 2>&1; echo "sliding fwd softcap0: $(ms_of $O/sl_s0.log forward) ms"
timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask causal > $O/c.log 2>&1; echo "causal fwd: $(ms_of $O/c.log forward) ms"
FLEXATTN_JIT_DEBUG=1 timeout 60 $F run --backend cuda --dtype bf16 -B 2 -H 16 -Q 8192 -D 128 --mask sliding_window:1023 2>&1 | grep -i "declin\|sm80\|fall" | head -3
