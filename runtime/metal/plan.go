package metal

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// The pure-Go half of the runtime is runtime/internal/devplan (shared with
// the CUDA backend): the buffer layout, the bindings of every dispatch of a
// step, the weight regions, load-time folding and chunking. Metal binds T
// as a 4-byte buffer after the others.

type (
	dispatch = devplan.Dispatch
	layout   = devplan.Layout
)

// library is the library a program runs: the plan's kernels section as
// stored when there is one (the plan is what runs), else emitted from g.
func library(g *ir.Graph, section []byte) (*metal.Library, error) {
	if section == nil {
		return metal.Emit(g)
	}
	var lib metal.Library
	if err := devplan.DecodeLibrary("metal", section, &lib, func() string { return lib.Source }); err != nil {
		return nil, err
	}
	return &lib, nil
}

// planLayout lays out lib (emitted from g) for steps of up to maxT tokens
// and slots of ctx rows.
func planLayout(g *ir.Graph, lib *metal.Library, maxT, ctx, slots int) (*layout, error) {
	return devplan.Plan(g, lib.Launches, devplan.Options{Backend: "metal", MaxT: maxT, Context: ctx, Slots: slots, TBuffer: true})
}

// pipelineKey names a compiled library in the process-wide cache: the
// SHA-256 of its source, and whether its pipelines support indirect
// command buffers (a pipeline property fixed at creation).
func pipelineKey(source string, icb bool) string {
	h := sha256.Sum256([]byte(source))
	k := hex.EncodeToString(h[:])
	if icb {
		k += "+icb"
	}
	return k
}
