package cuda_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

var update = flag.Bool("update", false, "rewrite testdata/*.cu from the emitter")

// fixtures are the models whose emitted libraries are golden files; the
// compile test compiles these files too, so -update cannot bless source
// that clang rejects.
var fixtures = []struct{ golden, model string }{
	{"stories260K.cu", "../../../shared/models/gguf/stories260K.gguf"},
	{"llama-p-Q4_0.cu", "../../../shared/models/gguf/synthetic/llama-p-Q4_0.gguf"},
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
			lib, err := cuda.Emit(fusedGraph(t, fx.model))
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
				t.Fatalf("%v (run go test ./codegen/cuda -update)", err)
			}
			if string(want) != lib.Source {
				t.Errorf("emitted source differs from %s (review, then go test ./codegen/cuda -update)", path)
			}
			if !strings.HasPrefix(lib.Source, "// Code generated") {
				t.Errorf("generated source does not say so on its first line")
			}
			for _, l := range lib.Launches {
				if l.Threads%32 != 0 || l.Threads == 0 || l.Threads > 1024 {
					t.Errorf("launch of %s has %d threads per block", l.Kernel, l.Threads)
				}
			}
		})
	}
}

// TestGoldenFixturesEmit emits (and, with clang, compiles to PTX) the
// library of every model the golden end-to-end cases of index.json use:
// every kernel a llama golden fixture needs exists for CUDA. (The gpt-oss
// cases need moe and topk_softmax, which have no CUDA kernels yet.)
func TestGoldenFixturesEmit(t *testing.T) {
	root := "../../../shared"
	b, err := os.ReadFile(filepath.Join(root, "golden", "e2e", "index.json"))
	if err != nil {
		t.Skipf("golden index not available: %v", err)
	}
	var idx struct {
		Cases []struct {
			Model string `json:"model"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	var models []string
	seen := map[string]bool{}
	for _, c := range idx.Cases {
		if !seen[c.Model] {
			seen[c.Model] = true
			models = append(models, c.Model)
		}
	}
	if len(models) == 0 {
		t.Fatal("the golden index lists no models")
	}
	for _, m := range models {
		t.Run(filepath.Base(m), func(t *testing.T) {
			t.Parallel()
			lib, err := cuda.Emit(fusedGraph(t, filepath.Join(root, m)))
			if err != nil {
				t.Fatal(err)
			}
			families := map[string]int{}
			for _, k := range lib.Kernels {
				families[k.Family]++
			}
			t.Logf("%d kernels, %d launches per step; families %v", len(lib.Kernels), len(lib.Launches), families)
			clang, ok := clangPath()
			if !ok {
				return
			}
			path := filepath.Join(t.TempDir(), "lib.cu")
			if err := os.WriteFile(path, []byte(lib.Source), 0o644); err != nil {
				t.Fatal(err)
			}
			compilePTX(t, clang, path)
		})
	}
}
