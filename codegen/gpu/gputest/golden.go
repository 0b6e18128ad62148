package gputest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/frontend/hf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

// Shared is ../shared beside the repository (models and golden data) as a
// test of codegen/<language> sees it.
const Shared = "../../../shared"

// Fixture is a model whose emitted library is a golden file of each
// language: testdata/<Name><ext>.
type Fixture struct{ Name, Model string }

// Golden is the golden file's name with the language's extension.
func (f Fixture) Golden(ext string) string { return f.Name + ext }

// Fixtures are the golden models. Each language's compile or type-check
// test compiles their golden files too, so -update cannot bless source
// that clang rejects.
var Fixtures = []Fixture{
	{"stories260K", Shared + "/models/gguf/stories260K.gguf"},
	{"llama-p-Q4_0", Shared + "/models/gguf/synthetic/llama-p-Q4_0.gguf"},
	{"gptoss-g1-mxfp4", Shared + "/models/gguf/synthetic/gptoss-g1-mxfp4.gguf"},
}

// FusedGraph loads a model and runs the pass pipeline on it, as
// `minervac compile` does; without the file the test skips.
func FusedGraph(t testing.TB, path string) *ir.Graph {
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
	return fuse(t, m.Graph)
}

// HFModels are the quantized model directories of ../shared/golden/e2e-hf:
// MLX affine llamas (4-bit g64 with a BF16 down projection, 8-bit g32),
// the MLX qwen3 with F32 scales, and gpt-oss as openai (MXFP4 experts,
// BF16 rest) and mlx-lm (MXFP4 experts, 8-bit affine rest) store it.
var HFModels = []string{"stories260K-mlx-q4", "llama-p-mlx-q8-g32", "tiny_qwen3_sharded", "gptoss-g1-hf", "gptoss-g1-mlx"}

// HFGraph opens the model directory ../shared/models/hf/<name> and runs the
// pass pipeline on its graph; without the directory the test skips.
func HFGraph(t testing.TB, name string) *ir.Graph {
	t.Helper()
	dir := filepath.Join(Shared, "models", "hf", name)
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
	return fuse(t, m.Graph)
}

func fuse(t testing.TB, g *ir.Graph) *ir.Graph {
	t.Helper()
	list, err := passes.Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(g, list, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return g
}

// Golden is a language's golden-file test.
type Golden struct {
	Package string // the package's directory below the module ("codegen/cuda"), for the -update hint
	Ext     string // the golden files' extension (".cu")
	Emit    func(*ir.Graph) (*gpu.Library, error)
	// Check, when set, checks each fixture's library further.
	Check func(t *testing.T, lib *gpu.Library)
}

// Test emits each fixture's library and compares it with its golden file
// in testdata, first rewriting the file from the emitter when update is
// set (the package's -update flag).
func (gd Golden) Test(t *testing.T, update bool) {
	for _, fx := range Fixtures {
		t.Run(fx.Golden(gd.Ext), func(t *testing.T) {
			lib, err := gd.Emit(FusedGraph(t, fx.Model))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", fx.Golden(gd.Ext))
			if update {
				if err := os.WriteFile(path, []byte(lib.Source), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./%s -update)", err, gd.Package)
			}
			if string(want) != lib.Source {
				t.Errorf("emitted source differs from %s (review, then go test ./%s -update)", path, gd.Package)
			}
			if !strings.HasPrefix(lib.Source, "// Code generated") {
				t.Errorf("generated source does not say so on its first line")
			}
			if gd.Check != nil {
				gd.Check(t, lib)
			}
		})
	}
}

// GoldenModels lists, once each, the models any golden end-to-end case
// uses (../shared/golden/e2e's index.json and index-gptoss.json); without
// the indexes the test skips.
func GoldenModels(t *testing.T) []string {
	t.Helper()
	var models []string
	seen := map[string]bool{}
	for _, index := range []string{"index.json", "index-gptoss.json"} {
		b, err := os.ReadFile(filepath.Join(Shared, "golden", "e2e", index))
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
	return models
}

// TestModels emits the library of every GoldenModels model (a parallel
// subtest each), logs its kernel families and hands it to check (which may
// compile it): every kernel a golden fixture needs exists for the language.
func (gd Golden) TestModels(t *testing.T, check func(t *testing.T, lib *gpu.Library)) {
	for _, m := range GoldenModels(t) {
		t.Run(filepath.Base(m), func(t *testing.T) {
			t.Parallel()
			lib, err := gd.Emit(FusedGraph(t, filepath.Join(Shared, m)))
			if err != nil {
				t.Fatal(err)
			}
			families := map[string]int{}
			for _, k := range lib.Kernels {
				families[k.Family]++
			}
			t.Logf("%d kernels, %d launches per step; families %v", len(lib.Kernels), len(lib.Launches), families)
			check(t, lib)
		})
	}
}
