package cuda_test

import (
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
)

// TestHFModelsEmit emits (and, with clang, compiles to PTX) the library of
// every quantized model directory of the HF goldens (gputest.HFModels):
// their MLX affine and repacked MXFP4 weights have every kernel they need.
func TestHFModelsEmit(t *testing.T) {
	for _, name := range gputest.HFModels {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lib, err := cuda.Emit(gputest.HFGraph(t, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d kernels, %d launches per step", len(lib.Kernels), len(lib.Launches))
			if clang, ok := clangPath(); ok {
				compilePTX(t, clang, gputest.WriteTemp(t, "lib.cu", lib.Source))
			}
		})
	}
}
