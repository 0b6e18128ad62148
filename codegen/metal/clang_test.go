package metal_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/codegen/metal"
)

// The emitted MSL cannot run here, so the tests hold it to two checks that
// need only clang (Debian's package; .ci/run installs it):
//
//   - type-check: every emitted library compiles as C++17 against
//     testdata/mslshim.h, which declares the MSL types, address spaces and
//     built-ins the kernels use;
//   - emulation: the kernels run on the CPU through the same header, one
//     std::thread per Metal thread with real barriers, launched exactly as
//     the library's schedule says, and their outputs (and KV-cache writes)
//     are compared with ir/eval on random inputs.
//
// Without clang++ both skip with a message saying so.

func clangOrSkip(t *testing.T) string {
	t.Helper()
	return gputest.ClangXX(t, "the MSL type-check and CPU emulation")
}

// clangArgs are the flags shared by the type-check and the emulation:
// unknown attributes ([[buffer(n)]] and the thread-position built-ins) are
// MSL's, so they are the one warning allowed.
func clangArgs() []string {
	inc, _ := filepath.Abs("testdata")
	return []string{"-std=c++17", "-Wall", "-Werror", "-Wno-unknown-attributes", "-I", inc, "-include", filepath.Join(inc, "mslshim.h")}
}

func typeCheck(t *testing.T, clang, path string) {
	t.Helper()
	args := append(clangArgs(), "-fsyntax-only", "-x", "c++", path)
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang++ rejects %s: %v\n%s", path, err, out)
	}
}

// TestTypeCheck compiles the golden libraries and the library of every
// emulation case (which between them use every kernel family and every
// weight dtype) as C++ against the shim.
func TestTypeCheck(t *testing.T) {
	clang := clangOrSkip(t)
	for _, fx := range gputest.Fixtures {
		t.Run(fx.Golden(".metal"), func(t *testing.T) {
			t.Parallel()
			typeCheck(t, clang, filepath.Join("testdata", fx.Golden(".metal")))
		})
	}
	for _, c := range emuCases() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			g, _, _ := c.Build(t)
			lib, err := metal.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			typeCheck(t, clang, gputest.WriteTemp(t, "lib.metal", lib.Source))
		})
	}
}
