#!/usr/bin/env bash
# Session 27 round 1: s26b (alibi_causal's cold compile twice with the JIT's events; memcheck on the rotated loop),
# then s24a (early claim, row order under it, the softcap reciprocal) in what is left of one 590 s call.
d=$(dirname "$0"); t0=$(date +%s)
bash $d/s26b.sh
S24A_DEADLINE=$(( 575 - ($(date +%s) - t0) )) bash $d/s24a.sh
