package metal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/passes"
)

// TestHFModelsTypeCheck emits the library of every quantized model
// directory of the HF goldens (MLX affine llamas and qwen3, gpt-oss as
// openai and mlx-lm store it) and type-checks it against the shim.
func TestHFModelsTypeCheck(t *testing.T) {
	clang := clangOrSkip(t)
	for _, name := range []string{"stories260K-mlx-q4", "llama-p-mlx-q8-g32", "tiny_qwen3_sharded", "gptoss-g1-hf", "gptoss-g1-mlx"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
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
			lib, err := metal.Emit(m.Graph)
			if err != nil {
				t.Fatal(err)
			}
			typeCheck(t, clang, gputest.WriteTemp(t, "lib.metal", lib.Source))
		})
	}
}
