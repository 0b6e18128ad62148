package metal_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

var update = flag.Bool("update", false, "rewrite testdata/*.metal from the emitter")

// fixtures are the models whose emitted libraries are golden files; the
// type-check test compiles these files too, so -update cannot bless source
// that clang rejects.
var fixtures = []struct{ golden, model string }{
	{"stories260K.metal", "../../../shared/models/gguf/stories260K.gguf"},
	{"llama-p-Q4_0.metal", "../../../shared/models/gguf/synthetic/llama-p-Q4_0.gguf"},
}

// fusedGraph loads a model and runs the pass pipeline on it, as
// `minervac compile` does.
func fusedGraph(t *testing.T, path string) *ir.Graph {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model %s not available: %v", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
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

func TestGolden(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.golden, func(t *testing.T) {
			lib, err := metal.Emit(fusedGraph(t, fx.model))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", fx.golden)
			if *update {
				if err := os.WriteFile(path, []byte(lib.Source), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./codegen/metal -update)", err)
			}
			if string(want) != lib.Source {
				t.Errorf("emitted source differs from %s (review, then go test ./codegen/metal -update)", path)
			}
			if !strings.HasPrefix(lib.Source, "// Code generated") {
				t.Errorf("generated source does not say so on its first line")
			}
		})
	}
}
