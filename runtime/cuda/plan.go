package cuda

import (
	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// planLayout lays out lib for steps of up to maxT tokens and slots of ctx
// rows; T is a kernel argument, not a buffer.
func planLayout(g *ir.Graph, lib *cudagen.Library, maxT, ctx, slots int) (*devplan.Layout, error) {
	return devplan.Plan(g, lib.Launches, devplan.Options{Backend: "cuda", MaxT: maxT, Context: ctx, Slots: slots})
}
