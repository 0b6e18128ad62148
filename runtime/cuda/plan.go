package cuda

import (
	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// launches converts the library's schedule to devplan's form.
func launches(lib *cudagen.Library) []devplan.Launch {
	out := make([]devplan.Launch, len(lib.Launches))
	for i, l := range lib.Launches {
		d := devplan.Launch{Kernel: l.Kernel, Threads: l.Threads, MinT: l.MinT, MaxT: l.MaxT}
		for j, g := range l.Grid {
			d.Grid[j] = devplan.Dim{N: g.N, PerToken: g.PerToken, Tile: g.Tile}
		}
		for _, a := range l.Args {
			d.Args = append(d.Args, devplan.Arg{Value: a.Value, ScratchPerToken: a.ScratchPerToken})
		}
		out[i] = d
	}
	return out
}

// planLayout lays out lib for steps of up to maxT tokens and slots of ctx
// rows; T is a kernel argument, not a buffer.
func planLayout(g *ir.Graph, lib *cudagen.Library, maxT, ctx, slots int) (*devplan.Layout, error) {
	return devplan.Plan(g, launches(lib), devplan.Options{Backend: "cuda", MaxT: maxT, Context: ctx, Slots: slots})
}
