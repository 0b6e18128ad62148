#!/usr/bin/env bash
# The CUDA backend's checks on a GPU machine (issue 20), from what
# .ci/device-pack.sh put in .dev/: a golden text through `run -t cuda`,
# every kernel against ir/eval on the device (codegen/cuda
# TestDeviceKernels), the program against the interpreter and every golden
# case carried (runtime/cuda TestDevice*), and `minervac bench -t cuda` on
# synthetic models made there (BENCH: presets, default tinyllama-1.1b and
# llama-7b in Q4_0 and gpt-oss-20b with MXFP4 experts). Logs go to $OUT; each step has its own time limit and a
# failed step does not stop the next. For an A/B on the same machine, put another commit's binary (built as
# device-pack.sh builds minervac) gzipped at .dev/base-minervac.gz: each model then runs it first.
set -u
OUT=${OUT:-/tmp/device-out}
mkdir -p "$OUT"
root=$PWD
S=$OUT/summary.txt
say() { echo "== $*" | tee -a "$S"; }
B=/tmp/minerva-bin && mkdir -p $B && tar xzf .dev/bins.tgz -C $B
[ -e ../shared ] || ln -s "$root/.dev/shared" ../shared
# libcuda comes with the driver; where the loader's path lacks it, name it.
if ! ldconfig -p | grep -q 'libcuda.so.1'; then
  cu=$(find /usr /lib /opt -name 'libcuda.so.1' 2>/dev/null | head -1)
  [ -n "$cu" ] && export MINERVA_CUDA_LIB=${MINERVA_CUDA_LIB:-$cu}
fi
say "cuda driver: ${MINERVA_CUDA_LIB:-libcuda.so.1 on the loader path}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv >>"$S" 2>&1
nv=$(ls /usr/local/cuda/lib64/libnvrtc.so.* 2>/dev/null | head -1)
[ -n "$nv" ] || nv=$(find /usr /opt -name 'libnvrtc.so.*' 2>/dev/null | head -1)
export MINERVA_NVRTC_LIB=${MINERVA_NVRTC_LIB:-$nv} MINERVA_CACHE_DIR=/tmp/minerva-cache
say "nvrtc: $nv"
BENCH=${BENCH-"tinyllama-1.1b llama-7b gpt-oss-20b"}
# A BENCH entry is PRESET or PRESET:QUANT (default q4_0; mxfp4 experts for gpt-oss).
synthOne() {
  local preset=${1%%:*} q=${1#*:}
  [ "$q" = "$1" ] && q=
  case $preset in
  gpt-oss-*) $B/minervac synth --arch gpt-oss --preset $preset --quant ${q:-mxfp4} -o /tmp/$1.gguf ;;
  *) $B/minervac synth --preset $preset --quant ${q:-q4_0} -o /tmp/$1.gguf ;;
  esac
}
# Each model is benchmarked as soon as its file is written (a .done marker),
# so a slow large synth does not hold back the small ones.
( for p in $BENCH; do synthOne $p || true; touch /tmp/$p.done; done ) >"$OUT/synth.log" 2>&1 &

# BENCH_ONLY=1 skips the smoke, kernel and golden steps (a rerun that only
# measures); SKIP_KERNELS=1 the kernel step alone.
if [ -z "${BENCH_ONLY-}" ]; then
say "smoke: stories260K through -t cuda against its golden text"
want=$(python3 -c 'import json; print(json.load(open("../shared/golden/e2e/stories260K__once_upon_a_time/case.json"))["gen_text"])')
got=$(timeout 60 $B/minervac run ../shared/models/gguf/stories260K.gguf -t cuda --prompt "Once upon a time" -n 64 -v 2>>"$S")
echo "rc=$? got: $got" >>"$S"
[ "$got" = "$want" ] && say "smoke: text equal" || say "smoke: text DIFFERS"

if [ -z "${SKIP_KERNELS-}" ]; then
say "kernels on the device (TestDeviceKernels)"
# KRUN narrows the kernel cases (a -test.run pattern, say
# 'TestDeviceKernels/(tiled|flash_attention)').
(cd codegen/cuda && timeout ${KTIME:-120} $B/cgcuda.test -test.run "${KRUN:-TestDeviceKernels}" -test.v -test.parallel 16) >"$OUT/kernels.log" 2>&1
echo "rc=$?" >>"$S"
grep -E '^(--- FAIL|FAIL|ok|PASS)' "$OUT/kernels.log" | head -40 >>"$S"
grep -c -- '--- PASS' "$OUT/kernels.log" >>"$S"
fi

say "program and golden cases (TestDevice*)"
(cd runtime/cuda && timeout ${GTIME:-180} $B/rtcuda.test -test.run 'TestDevice' -test.v) >"$OUT/golden.log" 2>&1
echo "rc=$?" >>"$S"
grep -E '(--- FAIL|^FAIL|^ok|^PASS|worst logits|greedy tokens equal)' "$OUT/golden.log" | head -80 >>"$S"
fi

for p in $BENCH; do
  for i in $(seq ${STIME:-300}); do [ -e /tmp/$p.done ] && break; sleep 1; done
  # With .dev/base-minervac.gz (another commit's binary), that binary's
  # run of the same file first, on the same machine, for an A/B.
  if [ -e .dev/base-minervac.gz ]; then
    [ -x $B/base-minervac ] || { gunzip -c .dev/base-minervac.gz >$B/base-minervac && chmod +x $B/base-minervac; }
    say "bench $p (base)"
    timeout ${BTIME:-90} $B/base-minervac bench /tmp/$p.gguf -t cuda --json --kernel-times -p 512 -n 128 >>"$OUT/bench-base.json" 2>>"$S"
    echo "rc=$?" >>"$S"
  fi
  say "bench $p"
  timeout ${BTIME:-90} $B/minervac bench /tmp/$p.gguf -t cuda --json --kernel-times -p 512 -n 128 -v >>"$OUT/bench.json" 2>>"$S"
  echo "rc=$?" >>"$S"
  # Variants: each .dev/variants/NAME.gz (a minervac built as device-pack.sh
  # builds it, from another commit or with a constant changed), run after
  # this binary on the same file, with NAME.env's variables when there (a
  # NAME.env beside no NAME.gz reruns this binary with them).
  for env in .dev/variants/*.env .dev/variants/*.gz; do
    [ -e "$env" ] || continue
    v=$(basename "${env%.*}")
    bin=$B/minervac
    if [ -e .dev/variants/$v.gz ]; then
      [ "${env##*.}" = env ] && continue # its .gz entry runs it
      # VARIANT_BENCH: the models binary variants run on (default BENCH).
      case " ${VARIANT_BENCH-$BENCH} " in *" $p "*) ;; *) continue ;; esac
      bin=$B/var-$v
      [ -x $bin ] || { gunzip -c .dev/variants/$v.gz >$bin && chmod +x $bin; }
    fi
    say "bench $p (variant $v)"
    ( [ -e .dev/variants/$v.env ] && set -a && . .dev/variants/$v.env
      timeout ${BTIME:-90} $bin bench /tmp/$p.gguf -t cuda --json --kernel-times -p 512 -n 128 ) >>"$OUT/bench-$v.json" 2>>"$S"
    echo "rc=$?" >>"$S"
  done
done
# Registers and spills per kernel of the first benchmark's module (ptxas on
# the cached PTX), and one profiled decode step of it (ncu), when there.
ptx=$(ls -S $MINERVA_CACHE_DIR/cuda/*.ptx 2>/dev/null | head -1)
if [ -n "$ptx" ] && command -v ptxas >/dev/null; then
  say "ptxas -v (sm_90) of $(basename $ptx)"
  timeout 30 ptxas -arch=sm_90 -v "$ptx" -o /tmp/k.cubin 2>&1 | grep -E "Compiling|registers|spill" | paste - - - | sed 's/ptxas info    ://g' >>"$S"
fi
first=$(echo $BENCH | cut -d' ' -f1)
if [ -n "$first" ] && command -v ncu >/dev/null && [ -n "${NCU-1}" ]; then
  say "ncu: one decode step of $first"
  timeout ${NTIME:-60} ncu --launch-skip ${NSKIP:-200} --launch-count ${NCOUNT:-8} --section SpeedOfLight --section Occupancy --section LaunchStats \
    $B/minervac bench /tmp/$first.gguf -t cuda -p 4 -n 4 --bw-mib 256 >"$OUT/ncu.txt" 2>&1
  echo "rc=$?" >>"$S"
  grep -E "^  [a-z_]+.*\(|Memory Throughput|DRAM Throughput|Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Limit" "$OUT/ncu.txt" | head -120 >>"$S"
fi
tail -c 3000 "$OUT/bench.json"
cat "$S"
