//go:build linux

package cuda

import (
	"errors"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// ErrNotImplemented is what Compile returns when the CUDA libraries load:
// device execution is not written yet (see the package comment).
var ErrNotImplemented = errors.New("cuda: device execution is not implemented yet")

func compile(*ir.Graph, eval.Weights, runtime.ProgramConfig) (runtime.Program, error) {
	if _, err := load(); err != nil {
		return nil, err
	}
	return nil, ErrNotImplemented
}
