#!/usr/bin/env bash
# Packs what .ci/device-check.sh needs on a GPU machine into .dev/ (ignored
# by git; name it in the device tool's carry): the minervac binary and the
# test binaries of codegen/cuda and runtime/cuda, cross-built without cgo
# (there is no Go there), and a subset of ../shared — the models and golden
# cases named by the MODELS pattern (a grep -E over case names; the whole of
# ../shared does not fit the 64 MiB a call carries), with the golden indexes
# trimmed to those cases. The default carries qwen3-p-mix, which
# TestDeviceStepRows reads beside stories260K (without it that test fails on
# a missing file).
#   MODELS='stories260K|llama-2-tiny|llama-p-|gptoss-g1-mxfp4' .ci/device-pack.sh
# Variants for an A/B (device-check.sh) go in .dev/variants after packing.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=${MODELS:-'stories260K|llama-2-tiny|llama-p-|qwen3-p-mix'}
export CGO_ENABLED=0 GOOS=linux GOARCH=amd64
rm -rf .dev && mkdir -p .dev/bin
go build -ldflags='-s -w' -o .dev/bin/minervac ./cmd/minervac
go test -c -ldflags='-s -w' -o .dev/bin/rtcuda.test ./runtime/cuda
# KERNEL_TESTS=0 leaves out codegen/cuda's test binary (run device-check.sh
# with SKIP_KERNELS=1), room for variant binaries in the 64 MiB.
[ "${KERNEL_TESTS-1}" = 0 ] || go test -c -ldflags='-s -w' -o .dev/bin/cgcuda.test ./codegen/cuda
tar czf .dev/bins.tgz -C .dev/bin . && rm -rf .dev/bin
MODELS="$MODELS" python3 - <<'PY'
import json, os, re, shutil
pat = re.compile(os.environ["MODELS"])
src, dst = "../shared", ".dev/shared"
os.makedirs(dst + "/golden/e2e")
for idx in ("index.json", "index-gptoss.json", "index-archs.json"):
    d = json.load(open(f"{src}/golden/e2e/{idx}"))
    d["cases"] = [c for c in d["cases"] if pat.search(c["case"])]
    if not d["cases"]:
        continue
    json.dump(d, open(f"{dst}/golden/e2e/{idx}", "w"), indent=1)
    for c in d["cases"]:
        shutil.copytree(f"{src}/golden/e2e/{c['case']}", f"{dst}/golden/e2e/{c['case']}")
        m = f"{dst}/{c['model']}"
        if not os.path.exists(m):
            os.makedirs(os.path.dirname(m), exist_ok=True)
            shutil.copy(f"{src}/{c['model']}", m)
    print(idx, len(d["cases"]), "cases")
PY
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info && echo '/.dev/' >> .git/info/exclude; }
du -sh .dev
