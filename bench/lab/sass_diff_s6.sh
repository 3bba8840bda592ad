#!/usr/bin/env bash
# SASS identity check for device-code refactors (session 6): compiles the same generated sources
# (bench/lab/sass_diff_s6/gen_sources.cc: sm90 forward / backward, sm80 backward / forward and decode of
# corpus variants, D = 64 and 128, default switches and the replaced paths) with NVRTC against kernels/
# of BASE (a git revision) and of the working tree, disassembles every kernel (cuobjdump -sass) and
# compares them. Compile only (no GPU). Prints per-kernel differences and the identical / different
# counts last; exit status 1 if any kernel differs.
# Usage: bench/lab/sass_diff_s6.sh [BASE]   from the repo root; BASE defaults to the merge-base of HEAD
#   and main. Needs build/ with the libraries (cmake --build build --target compile_sm90). JOBS=2:
#   parallel compiles; WORK=/tmp/sass_diff_s6 keeps the cubins between runs (BASE's keyed by its kernels/
#   tree and the source, the working tree's by a hash of kernels/); ONLY=<regex> restricts the sources by
#   name, e.g. ONLY=bwd90_. The JIT's own compile of a source gives the same SASS as nvrtc_cubin (checked
#   on the 64 sources the compile tier's cache shares with this set).
# cuobjdump / nvdisasm: $CUDA_HOME/bin, /usr/local/cuda/bin, /tmp/cuobj*/nvidia/cu13/bin or PATH.
set -euo pipefail
base=${1:-$(git merge-base HEAD main)}
root=$(git rev-parse --show-toplevel)
cd "$root"
work=${WORK:-/tmp/sass_diff_s6}
jobs=${JOBS:-2}
export PATH=${CUDA_HOME:-/usr/local/cuda}/bin:/usr/local/cuda/bin:/tmp/cuobj/nvidia/cu13/bin:/tmp/cuobj2/nvidia/cu13/bin:$PATH
command -v cuobjdump >/dev/null || { echo "cuobjdump not found"; exit 2; }
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
mkdir -p "$work"/{src,tools}
b=build
libs="$b/src/runtime/libflexattn_runtime.a $b/src/mods/libflexattn_mods.a $b/src/codegen/libflexattn_codegen.a
      $b/src/jit/libflexattn_jit.a $b/src/block_mask/libflexattn_block_mask.a $b/src/ir/libflexattn_ir.a
      $b/src/core/libflexattn_core.a"
c++ -O1 -std=gnu++20 -Isrc -Itests -Ikernels -Iinclude bench/lab/sass_diff_s6/gen_sources.cc $libs -ldl -lpthread \
    -o "$work/tools/gen_sources"
c++ -O1 -std=c++17 -I"$cuda/include" bench/lab/sass_diff_s6/nvrtc_cubin.cc -L"$cuda/lib64" -L"$cuda/lib" -lnvrtc \
    -Wl,-rpath,"$cuda/lib64:$cuda/lib" -o "$work/tools/nvrtc_cubin"
rm -f "$work"/src/*.cu
"$work/tools/gen_sources" "$work/src"

# BASE's kernels/ (cached by tree id) and the working tree's (copied, so later edits don't race).
tree=$(git rev-parse "$base:kernels")
before=$work/before-$tree
if [ ! -d "$before/kernels" ]; then
  mkdir -p "$before"
  git archive "$base" kernels | tar -x -C "$before"
fi
ahash=$(find kernels -type f | sort | xargs sha256sum | sha256sum | cut -c1-16)
after=$work/after-$ahash
if [ ! -d "$after/kernels" ]; then
  mkdir -p "$after" && cp -r kernels "$after/"
fi

# One compile + disassembly: $1 = source, $2 = kernels root, $3 = out prefix.
compile() {
  local src=$1 inc=$2 out=$3 arch=sm_90a
  case $(basename "$src") in bwd80_* | fwd80_*) arch=sm_80 ;; esac
  [ -s "$out.sass" ] && return 0
  "$work/tools/nvrtc_cubin" "$src" "$inc/kernels" $arch "$out.cubin" "$out.log" || { echo "COMPILE FAILED $src ($inc)"; return 1; }
  cuobjdump -sass "$out.cubin" >"$out.sass.tmp" && mv "$out.sass.tmp" "$out.sass"
}
export -f compile
export work
mkdir -p "$before/out" "$after/out"
ls "$work"/src/*.cu | grep -E "${ONLY:-.}" | while read -r s; do
  n=$(basename "$s" .cu)
  h=$(sha256sum "$s" | cut -c1-16)
  echo "$s $before $before/out/$n-$h"
  echo "$s $after $after/out/$n"
done | xargs -P "$jobs" -n 3 bash -c 'compile "$@"' _

# Per-kernel comparison: cuobjdump prints "Function : <name>" before each kernel's SASS; runs of blanks
# are collapsed (the column of the encoding comments follows the longest line of the whole cubin, so
# one kernel's change would shift the others' padding). Opcodes, operands, addresses and encodings
# must match exactly.
same=0 diff=0
report=$work/report.txt
: >"$report"
for s in $(ls "$work"/src/*.cu | grep -E "${ONLY:-.}"); do
  n=$(basename "$s" .cu)
  h=$(sha256sum "$s" | cut -c1-16)
  a=$before/out/$n-$h.sass z=$after/out/$n.sass
  for f in $(grep -oE 'Function : \S+' "$a" | awk '{print $3}'); do
    fa=$(awk -v f="$f" '/Function : /{on = ($3 == f)} on' "$a" | tr -s ' \t' ' ')
    fz=$(awk -v f="$f" '/Function : /{on = ($3 == f)} on' "$z" | tr -s ' \t' ' ')
    if [ "$fa" == "$fz" ]; then
      same=$((same + 1))
    else
      diff=$((diff + 1))
      ia=$(grep -cE '^ /\*[0-9a-f]{4,}\*/' <<<"$fa" || true)
      iz=$(grep -cE '^ /\*[0-9a-f]{4,}\*/' <<<"$fz" || true)
      echo "DIFF $n $f: instructions $ia -> $iz" | tee -a "$report"
    fi
  done
  nf_a=$(grep -c 'Function : ' "$a") nf_z=$(grep -c 'Function : ' "$z")
  [ "$nf_a" = "$nf_z" ] || { echo "DIFF $n: $nf_a kernels -> $nf_z" | tee -a "$report"; diff=$((diff + 1)); }
done
echo "sources: $(ls "$work"/src/*.cu | grep -cE "${ONLY:-.}") (BASE $base, kernels tree $tree vs working tree $(basename "$after"))"
echo "kernels: identical SASS $same, different $diff"
[ "$diff" = 0 ]
