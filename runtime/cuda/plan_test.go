package cuda

import (
	"os"
	"slices"
	"strings"
	"testing"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

// fusedGraph loads a model and runs the pass pipeline on it.
func fusedGraph(t *testing.T, path string) *ir.Graph { return fusedModel(t, path).Graph }

// fusedModel is fusedGraph with the weights.
func fusedModel(t *testing.T, path string) *arch.Model {
	t.Helper()
	return fusedModelOpts(t, path, arch.Options{})
}

// fusedModelOpts is fusedModel with the frontend's options (the cache type).
func fusedModelOpts(t *testing.T, path string, o arch.Options) *arch.Model {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model %s not available: %v", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, o)
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
	return m
}

// TestLayoutBindsInBounds: for golden fixtures, at several step sizes, the
// dispatches of a step are the schedule's launches for that T
// with every value bound inside its buffer (devplan.Layout.Check), and T
// is not a buffer (the CUDA kernels take it as an argument).
func TestLayoutBindsInBounds(t *testing.T) {
	for _, model := range []string{"stories260K.gguf", "synthetic/llama-p-Q4_0.gguf"} {
		t.Run(model, func(t *testing.T) {
			g := fusedGraph(t, "../../../shared/models/gguf/"+model)
			lib, err := cudagen.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			const maxT, ctx, slots = 16, 64, 3
			l, err := planLayout(g, lib, maxT, ctx, slots)
			if err != nil {
				t.Fatal(err)
			}
			if l.TBufI != -1 {
				t.Fatal("T is bound as a buffer")
			}
			for _, T := range []int{1, 2, 7, maxT} {
				ds, err := l.Dispatches(T)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) != len(lib.Step(T)) {
					t.Fatalf("T=%d: %d dispatches for %d launches", T, len(ds), len(lib.Step(T)))
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
			// A library whose kernels take no cache bases (emitted before
			// batched steps) is refused, not run on caches bound whole.
			old := *lib
			old.Launches = nil
			for _, ln := range lib.Launches {
				ln.Args = slices.DeleteFunc(slices.Clone(ln.Args), func(a sched.Arg) bool { return a.Value == sched.KVBase })
				old.Launches = append(old.Launches, ln)
			}
			if _, err := planLayout(g, &old, maxT, ctx, slots); err == nil || !strings.Contains(err.Error(), "compile the plan again") {
				t.Errorf("a library without cache bases: %v", err)
			}
		})
	}
}
