# What the device-round scripts share; each sources it first: . "$(dirname "$0")/lib.sh"
# On sourcing: `set -u`, the working folder is the repo root, the kernel cache is build-gpu's (build-gpu/ is
# configured and built from the same tree on the device) and the clock starts (T0).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
export FLEXATTN_CACHE_DIR=$PWD/build-gpu/kernel-cache
F=build-gpu/tools/flexattn
CHECK=build-gpu/tests/gpu/attention/gpu_attention_check
DCHECK=build-gpu/tests/gpu/decode/gpu_decode_check
T0=$(date +%s)

el() { echo $(( $(date +%s) - T0 )); }  # seconds since the start

# python_env: Python runs from here on use build-gpu's _C (build it first, BUILD_PY=ON) and see bench/'s modules.
python_env() {
  export FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python:$PWD/bench \
    PYTHONUNBUFFERED=1
}

# out_dir NAME: the script's log folder, $O = ${OUT:-/tmp}/NAME (made).
out_dir() { O=${OUT:-/tmp}/$1; mkdir -p "$O"; }

# stamp TEXT...: "[<seconds>s] TEXT" to stdout and to $L/steps.log.
stamp() { echo "[$(el)s] $*" | tee -a $L/steps.log; }

# The time budget: `deadline N` (seconds after T0); `left` = seconds before it (negative past it);
# `cap N [FLOOR]` = min(N, max(FLOOR, left)), FLOOR = 0: a step's timeout.
deadline() { DEADLINE=$1; }
left() { echo $(( DEADLINE - $(el) )); }
cap() {
  local l; l=$(left)
  [ "$l" -lt "${2:-0}" ] && l=${2:-0}
  [ "$l" -lt "$1" ] && echo "$l" || echo "$1"
}

# build_gpu LOGDIR TARGET...: configure build-gpu (tests on; the Python extension with BUILD_PY=ON) and build
# the targets, logs in LOGDIR; on a build error its first 20 error lines and exit 1; then "build <seconds> s".
build_gpu() {
  local logs=$1; shift
  cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DFLEXATTN_REQUIRE_GTEST=OFF -DFLEXATTN_BUILD_PYTHON=${BUILD_PY:-OFF} -DFLEXATTN_BUILD_TESTS=ON > $logs/configure.log 2>&1
  cmake --build build-gpu -j16 --target "$@" > $logs/build.log 2>&1 || { grep -E "error" $logs/build.log | head -20; exit 1; }
  echo "build $(el) s"
}

# short_cases CMD...: CMD once per case of `flexattn bench --suite short` (its mod flags appended), all in
# the background (prewarm: a kernel set's key does not depend on B, H or S; the document divisor 256 is
# S=2048's). The caller waits.
short_cases() {
  "$@" &
  "$@" --mask causal &
  "$@" --mask sliding_window:1023 &
  "$@" --mask-expr "q_idx // 256 == kv_idx // 256 && q_idx >= kv_idx" &
  "$@" --mask prefix_lm:512 &
  "$@" --mask causal --score alibi &
  "$@" --mask causal --score softcap:30 &
  "$@" --score relbias &
}

# decode_bench NAME MIN CAP [VAR=VALUE...] [ARG...]: `flexattn bench --suite decode --backend cuda ARG...`
# with the VARs set, under a timeout of min(CAP, left) s, into $O/bench_NAME.log, then "bench NAME rc=..";
# skipped (and said) when fewer than MIN s are left.
decode_bench() {
  local name=$1 min=$2 cap=$3 t envs=(); shift 3
  while [ $# -gt 0 ] && [[ $1 =~ ^[A-Z_][A-Z0-9_]*= ]]; do envs+=("$1"); shift; done
  t=$(left)
  if [ "$t" -lt "$min" ]; then echo "bench $name skipped (time)"; return; fi
  [ "$t" -gt "$cap" ] && t=$cap
  env ${envs[@]+"${envs[@]}"} timeout "$t" $F bench --suite decode --backend cuda "$@" > "$O/bench_$name.log" 2>&1
  echo "bench $name rc=$?"
}

# decode_ab VAR: `bench/run.py --suite decode` (flexattn and cuDNN) with VAR=1 / unset / unset / =1 (A/B/B/A: a value's
# two runs show the noise) into $O/decode_<run>_<on|off>, while 40 s are left; then each run's rows. Needs build-gpu's
# _C and python_env.
decode_ab() {
  local n=0 c
  for c in on off off on; do
    [ $(left) -gt 40 ] || break
    env $([ $c = on ] && echo $1=1) timeout $(cap 100 10) python3 bench/run.py --suite decode \
      --impls flexattn,sdpa-cudnn --out $O/decode_${n}_$c > $O/decode_${n}_$c.log 2>&1
    echo "decode $n $c rc=$? ($(el) s)"
    n=$((n + 1))
  done
  for f in $O/decode_*_*.log; do echo "== $(basename $f .log)"; grep -E "^\| (flexattn|sdpa-cudnn)" $f | head -12; done
}

# decode_run NAME CAP [VAR=V ...]: `bench/run.py --suite decode` (flexattn and cuDNN) with the settings, under a timeout
# of min(CAP, left) s, into $O/NAME (log $O/NAME.log); then its rows (impl, B, S, page, GB/s). Needs build-gpu's _C and
# python_env.
decode_run() {
  local name=$1 cap=$2; shift 2
  env "$@" timeout $(cap $cap 10) python3 bench/run.py --suite decode --impls flexattn,sdpa-cudnn --out $O/$name \
    > $O/$name.log 2>&1
  echo "decode $name rc=$? ($(el) s)"
  grep -E "^\| (flexattn|sdpa-cudnn)" $O/$name.log | awk -F'|' '{print $2,$3,$6,$8,$11}' | head -12
}

# dchecks CAP NAME:VAR=V[,VAR=V...] ...: gpu_decode_check once per NAME with its settings, all side by side (each under
# a timeout of min(CAP, left) s, into $O/dcheck_NAME.log); then per NAME its PASS / FAIL counts, first failures and
# last line.
dchecks() {
  local cap=$1 spec name; shift
  for spec in "$@"; do
    name=${spec%%:*}
    env $(echo "${spec#*:}" | tr ',' ' ') timeout $(cap $cap 10) $DCHECK > $O/dcheck_$name.log 2>&1 &
  done
  wait
  for spec in "$@"; do
    name=${spec%%:*}
    echo "dcheck $name $(pass_fail $O/dcheck_$name.log) ($(el) s)"; grep ^FAIL $O/dcheck_$name.log | head -5
    tail -1 $O/dcheck_$name.log
  done
}

# pass_fail LOG: "PASS <n> FAIL <m>", the PASS / FAIL lines of a gpu_attention_check log.
pass_fail() { echo "PASS $(grep -c '^PASS' "$1") FAIL $(grep -c '^FAIL' "$1")"; }

# ms_of LOG forward|backward: the milliseconds of `flexattn run`'s "<kind> (cuda): <ms> ms" line; empty if none.
ms_of() { awk -v k="$2" '$1 == k && $2 == "(cuda):" { ms = $3 } END { if (ms != "") print ms }' "$1" 2>/dev/null; }

# tflops FLOP MS: FLOP / MS in TFLOP/s, rounded ("%.0f"); "-" when MS is empty or not positive.
tflops() { awk -v f="$1" -v ms="$2" 'BEGIN { if (ms > 0) printf "%.0f", f / (ms * 1e9); else printf "-" }'; }

# persistent_ab: bench/run.py --suite long --backward, flexattn only, with FLEXATTN_SM90_BWD_PERSISTENT unset and
# =auto (needs build-gpu's _C), into $O/bench_default and $O/bench_auto; then per case and head dim the forward
# TFLOP/s (default) and the backward's default / auto.
persistent_ab() {
  python_env
  local c
  for c in default auto; do
    env $([ $c = auto ] && echo FLEXATTN_SM90_BWD_PERSISTENT=auto) timeout 170 python3 bench/run.py --suite long \
      --backward --impls flexattn --no-warm --reps 20 --out $O/bench_$c > $O/bench_$c.log 2>&1
    echo "bench $c rc=$? ($(el) s)"
  done
  echo "== flexattn TFLOP/s fwd default | bwd default / auto"
  python3 - "$O" <<'PY'
import json, sys
rows = {c: {(r["case"], r["D"]): r for r in json.load(open(f"{sys.argv[1]}/bench_{c}/results.json"))["rows"]} for c in ("default", "auto")}
for (case, d), r in sorted(rows["default"].items(), key=lambda kv: (kv[0][1], kv[0][0])):
    a = rows["auto"].get((case, d), {})
    print(f"{case:16s} D={d:3d} fwd {r.get('fwd_tflops') or 0:5.0f} | bwd {r.get('bwd_tflops') or 0:5.0f} / {a.get('bwd_tflops') or 0:5.0f}")
PY
}

# bwd_checks: gpu_attention_check --quick, then --quick with FLEXATTN_SM90_BWD_PERSISTENT=auto on document / relbias,
# then --quick --deterministic (logs check.log, check_auto.log, det.log in $O; timeouts capped by the deadline), each
# with its pass / fail line and first failures.
bwd_checks() {
  timeout $(cap 200) $CHECK --quick > $O/check.log 2>&1; echo "check --quick rc=$? $(pass_fail $O/check.log) ($(el) s)"
  grep ^FAIL $O/check.log | head -5
  FLEXATTN_SM90_BWD_PERSISTENT=auto timeout $(cap 90 5) $CHECK --quick --only document --only relbias > $O/check_auto.log 2>&1
  echo "check --quick persistent auto doc/relbias rc=$? $(pass_fail $O/check_auto.log) ($(el) s)"; grep ^FAIL $O/check_auto.log | head -3
  det_checks
}

# det_checks [all]: gpu_attention_check --quick --deterministic (bitwise repeats inside; log det.log), and with `all`
# the whole --deterministic set (det_all.log), each with its pass / fail line and first failures.
det_checks() {
  timeout $(cap 90 10) $CHECK --quick --deterministic > $O/det.log 2>&1
  echo "check --quick --deterministic rc=$? $(pass_fail $O/det.log) ($(el) s)"; grep ^FAIL $O/det.log | head -3
  [ "${1:-}" = all ] || return 0
  timeout $(cap 150 10) $CHECK --deterministic > $O/det_all.log 2>&1
  echo "check --deterministic rc=$? $(pass_fail $O/det_all.log) ($(el) s)"; grep ^FAIL $O/det_all.log | head -3
}

# det_timing NAME CAP [VAR=VALUE...]: bench/lab/round/det18.py on build-gpu's _C (build it first, BUILD_PY=ON) with the
# VARs set (DET8_DIMS, DET18_VAR, DET18_VALUES), under min(CAP, left) s into $O/NAME.log; then its rc, any error, and
# its rows (B=2 H=16 S=8192 bf16 backward ms, default | deterministic).
det_timing() {
  local name=$1 c=$2; shift 2
  env FLEXATTN_NATIVE_DIR=$PWD/build-gpu/bindings FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 \
    "$@" timeout $(cap $c 10) python3 bench/lab/round/det18.py > $O/$name.log 2>&1
  echo "$name rc=$? ($(el) s)"; grep -v "^row" $O/$name.log | grep -iE "error|Traceback" | head -5
  grep ^row $O/$name.log | cut -c5-
}

# quick_check CAP ARG...: gpu_attention_check --quick ARG... under min(CAP, left) s into $O/check.log, then
# "check rc=<rc> PASS <n> FAIL <m> (<seconds> s)" and the first FAIL lines.
quick_check() {
  local c=$1; shift
  timeout $(cap $c 5) $CHECK --quick "$@" > $O/check.log 2>&1
  echo "check rc=$? $(pass_fail $O/check.log) ($(el) s)"
  grep ^FAIL $O/check.log | head -3
}

# run_check ARG...: `flexattn run --backend cuda --check -B 1 -H 4 ARG...` (60 s cap, log in $O/run.log), counted in
# RUN_OK / RUN_BAD; a failure prints its arguments and the log's last lines. run_check_summary prints the counts.
RUN_OK=0; RUN_BAD=0
run_check() {
  if timeout 60 $F run --backend cuda --check -B 1 -H 4 "$@" > $O/run.log 2>&1; then RUN_OK=$((RUN_OK + 1))
  else RUN_BAD=$((RUN_BAD + 1)); echo "FAIL run $*"; tail -3 $O/run.log; fi
}
run_check_summary() { echo "run --check: $RUN_OK ok, $RUN_BAD failed ($(el) s)"; }

# record_suites: the record run's benches on build-gpu's _C (build it first, BUILD_PY=ON): bench/run.py --suite
# long --backward --deterministic (every case, all peers; flexattn's deterministic backward too), --suite decode,
# and, when 60 s are left, the cases outside the suite (softcap_approx_causal, t5_full, relbias_learnable_full; flexattn
# and torch flex; flexattn's deterministic backward too) into
# $OUT/bench/{long,decode,extra}, then their tables.
# Record them here with `python3 bench/run.py --record DIR/bench/long DIR/bench/decode [DIR/bench/extra]`.
record_suites() {
  mkdir -p $OUT/bench
  python_env
  timeout $(cap 330 30) python3 bench/run.py --suite long --backward --deterministic --no-warm --reps 20 --out $OUT/bench/long > $OUT/bench/long.log 2>&1
  echo "long rc=$? ($(el) s)"
  timeout $(cap 90 10) python3 bench/run.py --suite decode --out $OUT/bench/decode > $OUT/bench/decode.log 2>&1
  echo "decode rc=$? ($(el) s)"
  if [ "$(left)" -ge 60 ]; then
    timeout $(cap 140 10) python3 bench/run.py --suite long --impls flexattn,torch-flex \
      --cases softcap_approx_causal,t5_full,relbias_learnable_full --backward --deterministic --no-warm --reps 20 \
      --out $OUT/bench/extra > $OUT/bench/extra.log 2>&1
    echo "extra rc=$? ($(el) s)"
  fi
  grep -E "^\|" $OUT/bench/long.log | tail -18 | cut -d'|' -f2,4,6,7,8,10,11,12,14,15,16
  grep -E "^\| flexattn" $OUT/bench/decode.log | head -8
}

# fwd_sweep VAR "V1 V2 ..." [CASES]: the forward of `bench/run.py --suite long` (flexattn only; CASES, a comma list,
# default full, causal, sliding, document, prefix-LM, ALiBi, softcap) once per value of VAR, in the order given and
# then reversed (A/B/B/A for two values; the spread between a value's two runs is the noise), into
# $O/sweep_VAR/fwd_<run>_<value> (one kernel cache, so each source compiles once); then sweep_table.py's table
# (forward ms per run, and the first value's best over each value's best). Needs build-gpu's _C.
# bwd_sweep: the same with the backward timed too (`--backward`), into $O/bsweep_VAR, its table of backward ms.
sweep_runs() {
  local kind=$1 var=$2 values=($3) cases=${4:-full,causal,sliding1024,document,prefixlm,alibi_causal,softcap_causal}
  local order=() n v dir extra=() key=fwd_ms
  if [ "$kind" = bwd ]; then dir=$O/bsweep_$var; extra=(--backward); key=bwd_ms; else dir=$O/sweep_$var; fi
  extra+=(${SWEEP_EXTRA:-})  # e.g. SWEEP_EXTRA=--deterministic (then: sweep_table.py DIR VAR bwd_det_ms V...);
  # SWEEP_SUITE=long128: D=128 only
  mkdir -p $dir
  python_env
  order=("${values[@]}")
  for ((n = ${#values[@]} - 1; n >= 0; n--)); do order+=("${values[n]}"); done
  n=0
  for v in "${order[@]}"; do
    env $var=$v timeout $(cap 120 10) python3 bench/run.py --suite ${SWEEP_SUITE:-long} --impls flexattn --cases $cases "${extra[@]}" \
      --no-warm --reps 30 --cache-dir $PWD/build-gpu/bench-cache --out $dir/fwd_${n}_$v > $dir/fwd_${n}_$v.log 2>&1
    echo "$kind run $n ($var=$v) rc=$? ($(el) s)"
    n=$((n + 1))
  done
  python3 bench/lab/round/sweep_table.py "$dir" "$var" $key "${values[@]}"
}
fwd_sweep() { sweep_runs fwd "$@"; }
bwd_sweep() { sweep_runs bwd "$@"; }

# fwd_ab VAR: fwd_sweep VAR "0 1" over the default cases (a switch off, on, on, off).
fwd_ab() { fwd_sweep "$1" "0 1"; }

# ncu_full NAME KERNEL_REGEX CAP CMD...: `ncu --set full` of the first launch of KERNEL_REGEX in CMD (under min(CAP,
# left) s) into $O/ncu_NAME.*: the details page, the SASS source page (csv), the summary lines and ncu_top's 12 top stall
# lines; the report itself is deleted (too large to bring back).
ncu_full() {
  local name=$1 kernel=$2 c=$3; shift 3
  local ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
  timeout $(cap $c 10) $ncu --kernel-name regex:"$kernel" --launch-count 1 --set full --import-source yes \
    -o $O/ncu_$name -f "$@" > $O/ncu_$name.log 2>&1
  echo "ncu $name rc=$? ($(el) s)"
  $ncu --import $O/ncu_$name.ncu-rep --page details > $O/ncu_$name.details.txt 2>&1
  $ncu --import $O/ncu_$name.ncu-rep --page source --csv --print-source sass > $O/ncu_$name.sass.csv 2>&1
  grep -E "^ +Duration|Issued Ipc|No Eligible|Eligible Warps" $O/ncu_$name.details.txt | head -4
  python3 bench/lab/round/ncu_top.py $O/ncu_$name.sass.csv 12
  rm -f $O/ncu_$name.ncu-rep
}

# record_hd96: when 70 s are left, the hd96 suite's full and causal cases with the backward (all peers) into
# $OUT/bench/hd96, then its table (head dim 96: padded onto the D=128 kernels).
record_hd96() {
  [ "$(left)" -ge 70 ] || { echo "hd96 skipped (time)"; return 0; }
  mkdir -p $OUT/bench
  timeout $(cap 100 10) python3 bench/run.py --suite hd96 --cases full,causal --backward --no-warm --reps 20 \
    --out $OUT/bench/hd96 > $OUT/bench/hd96.log 2>&1
  echo "hd96 rc=$? ($(el) s)"; grep -E "^\|" $OUT/bench/hd96.log | tail -9 | cut -d'|' -f2,4,6,7,8,10,11,12
}

# base_tree PATCH: /tmp/base = this tree with PATCH (a `git diff` against the base commit, carried as an untracked file)
# applied in reverse, its build-gpu built (flexattn, _C); says so if that fails.
base_tree() {
  mkdir -p /tmp/base && tar --exclude=./build-gpu --exclude=./build -cf - . | tar -xf - -C /tmp/base
  (cd /tmp/base && patch -s -R -p1 < "$1" && BUILD_PY=ON build_gpu $O/.. flexattn _C >/dev/null) || echo "base build failed"
  echo "base built ($(el) s)"
}

# tree_ab CASES: bench/run.py --suite long --impls flexattn --cases CASES --backward --deterministic on this tree and on
# /tmp/base (base_tree), new / base / base / new, into $O/ab (each tree its own build-gpu and kernel cache); then the
# tables of backward ms and deterministic backward ms (sweep_table.py, VAR = tree).
tree_ab() {
  local dir=$O/ab n=0 tree root
  mkdir -p $dir
  for tree in new base base new; do
    root=$PWD; [ $tree = base ] && root=/tmp/base
    (cd $root && FLEXATTN_CACHE_DIR=$root/build-gpu/kernel-cache FLEXATTN_NATIVE_DIR=$root/build-gpu/bindings \
      FLEXATTN_REQUIRE_NATIVE=1 PYTHONPATH=$root/python timeout $(cap 120 10) python3 bench/run.py --suite long \
      --impls flexattn --cases "$1" --backward --deterministic --no-warm --reps 20 \
      --out $dir/fwd_${n}_$tree > $dir/fwd_${n}_$tree.log 2>&1)
    echo "run $n $tree rc=$? ($(el) s)"; n=$((n + 1))
  done
  python3 bench/lab/round/sweep_table.py $dir tree bwd_ms new base
  python3 bench/lab/round/sweep_table.py $dir tree bwd_det_ms new base
}

# learnable_checks VAR=VALUE...: gpu_attention_check --only learnable (every length, both modes) into $O/learn.log, then
# --quick --only learnable --only relbias once per VAR=VALUE into $O/learn_<VAR=VALUE>.log; a pass / fail line each.
learnable_checks() {
  local env
  timeout $(cap 150 5) $CHECK --only learnable > $O/learn.log 2>&1
  echo "--only learnable rc=$? $(pass_fail $O/learn.log) ($(el) s)"; grep -m5 "^FAIL" $O/learn.log
  for env in "$@"; do
    env $env timeout $(cap 60 5) $CHECK --quick --only learnable --only relbias > $O/learn_$env.log 2>&1
    echo "$env --quick --only learnable/relbias rc=$? $(pass_fail $O/learn_$env.log) ($(el) s)"
    grep -m3 "^FAIL" $O/learn_$env.log
  done
}
