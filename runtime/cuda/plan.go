package cuda

import (
	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// library is the library a program runs: the plan's kernels section as
// stored when there is one (the plan is what runs), else emitted from g.
func library(g *ir.Graph, section []byte) (*cudagen.Library, error) {
	if section == nil {
		return cudagen.Emit(g)
	}
	var lib cudagen.Library
	if err := devplan.DecodeLibrary("cuda", section, &lib, func() string { return lib.Source }); err != nil {
		return nil, err
	}
	return &lib, nil
}

// planLayout lays out lib for steps of up to maxT tokens and slots of ctx
// rows; T is a kernel argument, not a buffer.
func planLayout(g *ir.Graph, lib *cudagen.Library, maxT, ctx, slots int) (*devplan.Layout, error) {
	return devplan.Plan(g, lib.Launches, devplan.Options{Backend: "cuda", MaxT: maxT, Context: ctx, Slots: slots})
}
