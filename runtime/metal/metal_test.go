package metal_test

import (
	"runtime"
	"strings"
	"testing"

	mr "github.com/minerva-llm/minerva/runtime"
	_ "github.com/minerva-llm/minerva/runtime/metal"

	"github.com/minerva-llm/minerva/ir"
)

// The backend registers under "metal"; off darwin it refuses to compile
// with one line naming why. (On darwin the empty graph is refused for
// having no logits, before any device is touched.)
func TestCompileRefusesWithOneLine(t *testing.T) {
	b, ok := mr.LookupBackend("metal")
	if !ok {
		t.Fatal("metal backend not registered")
	}
	_, err := b.Compile(&ir.Graph{Name: "empty"}, nil, mr.ProgramConfig{Context: 8})
	if err == nil {
		t.Fatal("Compile succeeded without a Metal runtime")
	}
	want := "metal: only on darwin"
	if runtime.GOOS == "darwin" {
		want = "metal: "
	}
	if !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %q, want one line starting %q", err, want)
	}
}
