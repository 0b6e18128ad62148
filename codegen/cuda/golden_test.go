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
	{"gptoss-g1-mxfp4.cu", "../../../shared/models/gguf/synthetic/gptoss-g1-mxfp4.gguf"},
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
			checkArgmax(t, lib)
		})
	}
}

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
	root := "../../../shared"
	var models []string
	seen := map[string]bool{}
	for _, index := range []string{"index.json", "index-gptoss.json"} {
		b, err := os.ReadFile(filepath.Join(root, "golden", "e2e", index))
		if err != nil {
			t.Skipf("golden index not available: %v", err)
		}
		var idx struct {
			Cases []struct {
				Model string `json:"model"`
			} `json:"cases"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatalf("%s: %v", index, err)
		}
		for _, c := range idx.Cases {
			if !seen[c.Model] {
				seen[c.Model] = true
				models = append(models, c.Model)
			}
		}
	}
	if len(models) == 0 {
		t.Fatal("the golden indexes list no models")
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
			checkArgmax(t, lib)
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
