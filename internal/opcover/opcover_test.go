package opcover

import (
	"fmt"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime/cpu"
)

// backends are the columns: each answers from the table it dispatches on.
var backends = []struct {
	name     string
	supports func(ir.Op) bool
}{
	{"interpreter", eval.Supports},
	{"cpu", cpu.Supports},
	{"cuda", cuda.Supports},
	{"metal", metal.Supports},
}

// absent lists the cells that are empty on purpose, with the reason. A
// listed cell that the backend does support fails too: the list must not
// go stale.
var absent = map[string]string{
	"cuda/concat":  "concat joins weight-only values, folded at load (runtime/internal/devplan)",
	"metal/concat": "concat joins weight-only values, folded at load (runtime/internal/devplan)",
}

func TestOpBackendCoverage(t *testing.T) {
	var table strings.Builder
	fmt.Fprintf(&table, "%-16s", "op")
	for _, b := range backends {
		fmt.Fprintf(&table, " %-12s", b.name)
	}
	table.WriteString("\n")
	for _, op := range ir.Ops() {
		fmt.Fprintf(&table, "%-16s", op)
		for _, b := range backends {
			cell := b.name + "/" + string(op)
			why, deliberate := absent[cell]
			has := b.supports(op)
			switch {
			case has && deliberate:
				t.Errorf("%s: listed as absent (%s) but the backend supports it: drop it from the list", cell, why)
			case !has && !deliberate:
				t.Errorf("%s: not supported, and not listed as deliberately absent", cell)
			}
			mark := "yes"
			if !has {
				mark = "absent"
			}
			fmt.Fprintf(&table, " %-12s", mark)
		}
		table.WriteString("\n")
	}
	for cell := range absent {
		b, op, _ := strings.Cut(cell, "/")
		known := false
		for _, o := range ir.Ops() {
			known = known || string(o) == op
		}
		if !known {
			t.Errorf("absent cell %s (%s) names an op the table does not have", cell, b)
		}
	}
	t.Log("\n" + table.String())
}
