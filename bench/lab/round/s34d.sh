#!/usr/bin/env bash
# Session 34, s34c plus the v2 consumers' adds moved behind the dQ / dK GEMM issues (bg_warp_sums / bg_add), against
# HEAD (s34c.patch regenerated). It ran the steps s34e.sh runs now (the same script; the tree it measured was
# reverted after it: default D = 128 learnable 3.9 % slower, bench/RESULTS.md session 34).
exec "$(dirname "$0")/s34e.sh" "$@"
