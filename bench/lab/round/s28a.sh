#!/usr/bin/env bash
# Prepared in session 27 for the next device: s26b (alibi_causal's cold compile twice with the JIT's events, --reps
# fixed; its memcheck part ran clean in s27a) and then s21d (the persistent backward at D = 128 on the short walks,
# never re-measured since session 6) in one call.
d=$(dirname "$0"); t0=$(date +%s)
S26B_MEMCHECK=0 S26B_DEADLINE=150 bash $d/s26b.sh
S21D_DEADLINE=$(( 575 - ($(date +%s) - t0) )) bash $d/s21d.sh
