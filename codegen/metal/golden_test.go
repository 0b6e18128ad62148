package metal_test

import (
	"flag"
	"os/exec"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/codegen/metal"
)

var update = flag.Bool("update", false, "rewrite testdata/*.metal from the emitter")

// golden compares the libraries of gputest.Fixtures with testdata/*.metal.
var golden = gputest.Golden{Package: "codegen/metal", Ext: ".metal", Emit: metal.Emit}

func TestGolden(t *testing.T) { golden.Test(t, *update) }

// TestGoldenFixturesEmit emits (and, with clang, type-checks) the library
// of every model any golden end-to-end case uses (../shared/golden/e2e's
// index.json and index-gptoss.json): the acceptance that every kernel a
// golden fixture needs exists for Metal.
func TestGoldenFixturesEmit(t *testing.T) {
	golden.TestModels(t, func(t *testing.T, lib *gpu.Library) {
		if _, err := exec.LookPath("clang++"); err == nil {
			typeCheck(t, clangOrSkip(t), gputest.WriteTemp(t, "lib.metal", lib.Source))
		}
	})
}
