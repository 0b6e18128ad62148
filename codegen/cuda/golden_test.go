package cuda_test

import (
	"flag"
	"regexp"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.cu from the emitter")

// golden compares the libraries of gputest.Fixtures with testdata/*.cu;
// every launch must have a whole number of warps, at most 1024 threads,
// and the library its argmax kernel.
var golden = gputest.Golden{Package: "codegen/cuda", Ext: ".cu", Emit: cuda.Emit, Check: func(t *testing.T, lib *gpu.Library) {
	for _, l := range lib.Launches {
		if l.Threads%32 != 0 || l.Threads == 0 || l.Threads > 1024 {
			t.Errorf("launch of %s has %d threads per block", l.Kernel, l.Threads)
		}
	}
	checkArgmax(t, lib)
	checkGridDepSync(t, lib.Source)
}}

// checkGridDepSync checks that every kernel's body begins with
// grid_dep_sync() — the runtime launches every kernel with programmatic
// stream serialization on sm_90, and a kernel that touched global memory
// before the wait would race with the grid before it — or reads only
// weights before it: 16-byte loads through wr (ld_nc16(wr …)) into its
// prefetch registers, no other indexing, load helper or decoder. It
// returns how many kernels wait late.
func checkGridDepSync(t *testing.T, src string) (late int) {
	t.Helper()
	kernels := cuda.KernelBodies(src)
	if len(kernels) == 0 {
		t.Fatal("no kernels in the library")
	}
	if !cuda.KernelsWait(src) {
		t.Error("KernelsWait is false")
	}
	for _, k := range kernels {
		pre, _, waits := strings.Cut(k.Body, "grid_dep_sync();")
		if !waits {
			t.Errorf("kernel %s does not call grid_dep_sync()", k.Name)
			continue
		}
		if strings.TrimSpace(pre) == "" {
			continue
		}
		late++
		rest := preWaitAllowed.ReplaceAllString(pre, "")
		if bad := preWaitForbidden.FindString(rest); bad != "" {
			t.Errorf("kernel %s reads or writes %q before grid_dep_sync()", k.Name, bad)
		}
	}
	return late
}

var (
	// preWaitAllowed are comments, the weight loads, and the prefetch
	// registers and shared stage a kernel may use before its late
	// grid_dep_sync.
	preWaitAllowed = regexp.MustCompile(`//.*|ld_nc16\(wr\b|\b(pf|stage)(\[[^\]]*\])+`)
	// preWaitForbidden is any other indexing, load helper or decoder.
	preWaitForbidden = regexp.MustCompile(`\[|\bld_\w*|\bdq\w*\(|\bh2f\(`)
)

func TestGolden(t *testing.T) { golden.Test(t, *update) }

// checkArgmax checks that a library with a logits output carries its
// argmax kernel, in the source and the kernel list but in no launch.
func checkArgmax(t *testing.T, lib *cuda.Library) {
	t.Helper()
	if lib.Argmax == nil {
		t.Fatal("no argmax kernel for the logits output")
	}
	a := lib.Argmax
	if a.Threads%32 != 0 || a.Threads == 0 || a.Threads > 1024 {
		t.Errorf("argmax has %d threads per block", a.Threads)
	}
	listed := false
	for _, k := range lib.Kernels {
		listed = listed || (k.Name == a.Kernel && k.Family == "argmax")
	}
	if !listed || !strings.Contains(lib.Source, `extern "C" __global__ void __launch_bounds__(`) ||
		!strings.Contains(lib.Source, " "+a.Kernel+"(\n    const float* __restrict__ logits,\n    int* __restrict__ out,\n    const u32 T)") {
		t.Errorf("argmax kernel %s is not in the kernel list or the source with the documented signature", a.Kernel)
	}
	for _, l := range lib.Launches {
		if l.Kernel == a.Kernel {
			t.Errorf("argmax kernel %s is launched by the step", a.Kernel)
		}
	}
}

// TestGoldenFixturesEmit emits (and, with clang, compiles to PTX) the
// library of every model any golden end-to-end case uses (../shared/golden
// /e2e's index.json and index-gptoss.json): every kernel a golden fixture
// needs exists for CUDA.
func TestGoldenFixturesEmit(t *testing.T) {
	golden.TestModels(t, func(t *testing.T, lib *gpu.Library) {
		checkArgmax(t, lib)
		checkGridDepSync(t, lib.Source)
		if clang, ok := clangPath(); ok {
			compilePTX(t, clang, gputest.WriteTemp(t, "lib.cu", lib.Source))
		}
	})
}
