package metal

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

// The pure-Go logic of the runtime, tested where Metal does not exist.

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

// TestLayoutBindsInBounds: for the golden llama and gpt-oss fixtures, at
// several step sizes, every dispatch binds every value inside its
// buffer (offset + the bytes the value takes at T ≤ the buffer's size), the
// last binding is T, states are bound whole (every slot's rows), and the grids
// are the schedule's.
func TestLayoutBindsInBounds(t *testing.T) {
	for _, model := range []string{"stories260K.gguf", "synthetic/gptoss-g1-mxfp4.gguf"} {
		t.Run(model, func(t *testing.T) {
			g := fusedGraph(t, "../../../shared/models/gguf/"+model)
			lib, err := metal.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			const maxT, ctx, slots = 16, 64, 3
			l, err := planLayout(g, lib, maxT, ctx, slots)
			if err != nil {
				t.Fatal(err)
			}
			for _, T := range []int{1, 7, maxT} {
				ds, err := l.Dispatches(T)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != len(lib.Step(T)) {
					t.Fatalf("%d dispatches for %d launches", len(ds), len(lib.Step(T)))
				}
				if err := l.Check(ds, T); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := l.Dispatches(maxT + 1); err == nil {
				t.Error("a step larger than maxT was accepted")
			}
			if l.KVBaseI < 0 || l.Bufs[l.KVBaseI].Bytes != 4*maxT {
				t.Errorf("cache bases buffer %d", l.KVBaseI)
			}
			if n := l.MaxBindings(); n < 4 || n > 31 {
				t.Errorf("maxBindings %d: Metal allows 31 buffer arguments", n)
			}
		})
	}
}

func TestPipelineKey(t *testing.T) {
	a, b := pipelineKey("kernel void f() {}", false), pipelineKey("kernel void f() {} ", false)
	if a == b || len(a) != 64 {
		t.Errorf("keys %q %q", a, b)
	}
	if a != pipelineKey("kernel void f() {}", false) {
		t.Error("key is not deterministic")
	}
	if pipelineKey("x", true) == pipelineKey("x", false) {
		t.Error("ICB and plain pipelines share a key")
	}
}

// library runs a plan's kernels section as stored and emits from the graph
// only without one; a section that does not decode strictly is an error.
func TestLibraryFromPlan(t *testing.T) {
	g := fusedGraph(t, "../../../shared/models/gguf/stories260K.gguf")
	emitted, err := library(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	stored := *emitted
	stored.Source += "\n// stored in the plan\n"
	section, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	got, err := library(g, section)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != stored.Source || len(got.Launches) != len(emitted.Launches) {
		t.Fatalf("library from the plan: %d launches, source %d bytes; want the stored one", len(got.Launches), len(got.Source))
	}
	for _, bad := range []string{`{"source": ""}`, `{"source": "x", "bogus": 1}`, string(section) + "{}", "[]"} {
		if _, err := library(g, []byte(bad)); err == nil || !strings.Contains(err.Error(), "metal: the plan's kernels section") {
			t.Errorf("section %.40q: error %v", bad, err)
		}
	}
}
