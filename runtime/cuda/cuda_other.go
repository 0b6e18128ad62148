//go:build !linux

package cuda

import (
	"errors"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// ErrNotLinux is what Compile returns off linux, the only platform the
// loader supports.
var ErrNotLinux = errors.New("cuda: only on linux")

func compile(*ir.Graph, eval.Weights, runtime.ProgramConfig) (runtime.Program, error) {
	return nil, ErrNotLinux
}
