#!/usr/bin/env bash
# Session 15 round 6: the final position clamp (one unsigned min; round 4 checked the signed form) and the host's
# refusal of negative offsets: `--quick` on the position-gathering entries, `run --check` on document masks
# (forward, backward, decode path). ~3 min.
. "$(dirname "$0")/lib.sh"
out_dir s15g; L=$O
deadline 300
build_gpu $O gpu_attention_check flexattn
quick_check 150 --only document --only relbias --only t5 --only alibi --only causal
for q in 17 1000 4097; do run_check --dtype bf16 -Q $q -D 128 --mask document:3 --backward; done
run_check --dtype bf16 -Q 1 --kv 4097 -D 128 --mask document:3
run_check --dtype bf16 -Q 1000 -D 64 --mask document:5 --backward --hkv 2
run_check_summary
echo "total $(el) s"
