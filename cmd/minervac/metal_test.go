package main

import (
	"encoding/json"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	mslgen "github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime/plan"
)

// `minervac compile -target metal` writes a plan whose kernels/metal
// section is the emitted library (source and launch schedule) of the plan's
// own graph; running it off darwin is one clear line.
func TestCompileTargetMetal(t *testing.T) {
	for _, name := range []string{"stories260K.gguf", "synthetic/llama-p-Q4_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			model := shared.Path(t, "models/gguf/"+name)
			out := filepath.Join(t.TempDir(), "m.plan")
			_, stderr, code := minervac(t, "compile", model, "-target", "metal", "-o", out)
			require.Equal(t, 0, code, stderr)
			l, err := plan.Open(out)
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, "metal", l.Plan.Target)
			var lib mslgen.Library
			require.NoError(t, json.Unmarshal(l.Plan.Kernels["metal"], &lib))
			want, err := mslgen.Emit(l.Plan.Graph)
			require.NoError(t, err)
			require.Equal(t, want.Source, lib.Source)
			require.Equal(t, want.Launches, lib.Launches)
			require.NotEmpty(t, lib.Launches)

			if goruntime.GOOS != "darwin" {
				_, stderr, code = minervac(t, "run", out, "--prompt", "hi", "-n", "1")
				require.Equal(t, 1, code)
				require.Contains(t, stderr, "metal: only on darwin")
			}
		})
	}
	// The library is emitted from the compiled graph: loading the model the
	// same way gives the same source as the golden file's generator.
	m, err := loadModel(shared.Path(t, "models/gguf/stories260K.gguf"), arch.Options{})
	require.NoError(t, err)
	defer m.file.Close()
	p, err := compileModel(m, "", compileOptions{Target: "metal"})
	require.NoError(t, err)
	require.Contains(t, string(p.Kernels["metal"]), "fused_matmul_norm_f32_512x64")
}
