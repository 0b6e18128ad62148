package metal_test

import (
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/codegen/metal"
)

// TestHFModelsTypeCheck emits the library of every quantized model
// directory of the HF goldens (gputest.HFModels) and type-checks it
// against the shim.
func TestHFModelsTypeCheck(t *testing.T) {
	clang := clangOrSkip(t)
	for _, name := range gputest.HFModels {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			lib, err := metal.Emit(gputest.HFGraph(t, name))
			if err != nil {
				t.Fatal(err)
			}
			typeCheck(t, clang, gputest.WriteTemp(t, "lib.metal", lib.Source))
		})
	}
}
