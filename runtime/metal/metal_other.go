//go:build !darwin

package metal

import (
	"errors"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
)

// ErrNotDarwin is what Compile returns off Apple platforms: Metal exists
// only there. Plans for the metal target can still be compiled anywhere.
var ErrNotDarwin = errors.New("metal: only on darwin")

func compile(*ir.Graph, eval.Weights, runtime.ProgramConfig) (runtime.Program, error) {
	return nil, ErrNotDarwin
}
