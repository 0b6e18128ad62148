package cuda_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

// hfModels are the quantized model directories of ../shared/golden/e2e-hf:
// MLX affine llamas (4-bit g64 with a BF16 down projection, 8-bit g32),
// the MLX qwen3 with F32 scales, and gpt-oss as openai (MXFP4 experts,
// BF16 rest) and mlx-lm (MXFP4 experts, 8-bit affine rest) store it.
var hfModels = []string{"stories260K-mlx-q4", "llama-p-mlx-q8-g32", "tiny_qwen3_sharded", "gptoss-g1-hf", "gptoss-g1-mlx"}

// hfGraph opens a model directory and runs the pass pipeline on its graph;
// without the directory the test skips.
func hfGraph(t *testing.T, name string) *ir.Graph {
	t.Helper()
	dir := filepath.Join(gputest.Shared, "models", "hf", name)
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("model directory %s not available: %v", dir, err)
	}
	d, err := hf.Open(dir, os.Open)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	m, err := arch.LoadFile(d, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := passes.Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(m.Graph, list, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return m.Graph
}

// TestHFModelsEmit emits (and, with clang, compiles to PTX) the library of
// every quantized model directory of the HF goldens: their MLX affine and
// repacked MXFP4 weights have every kernel they need.
func TestHFModelsEmit(t *testing.T) {
	for _, name := range hfModels {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lib, err := cuda.Emit(hfGraph(t, name))
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
