//go:build darwin

package metal

import (
	"errors"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// ErrNotImplemented is what Compile returns on darwin until the purego/objc
// device runtime exists (see the package comment).
var ErrNotImplemented = errors.New("metal: the GPU runtime is not implemented yet (kernels are emitted, type-checked and CPU-emulated only; run with -target goasm)")

func compile(*ir.Graph, eval.Weights, runtime.ProgramConfig) (runtime.Program, error) {
	return nil, ErrNotImplemented
}
