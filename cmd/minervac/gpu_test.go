package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	goruntime "runtime"
	"testing"

	"github.com/stretchr/testify/require"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	mslgen "github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/plan"
)

// `minervac compile -target metal|cuda` writes a plan whose kernels/<target>
// section is the emitted library (source and launch schedule) of the plan's
// own graph; running it where the GPU runtime cannot load is one clear
// line.
func TestCompileTargetGPU(t *testing.T) {
	type emitted struct {
		source   string
		launches any
	}
	targets := []struct {
		name   string
		decode func(t *testing.T, b []byte) emitted
		emit   func(t *testing.T, g *ir.Graph) emitted
		cannot string // the run error where the runtime cannot load, "" where it may
	}{
		{"metal", func(t *testing.T, b []byte) emitted {
			var lib mslgen.Library
			require.NoError(t, json.Unmarshal(b, &lib))
			return emitted{lib.Source, lib.Launches}
		}, func(t *testing.T, g *ir.Graph) emitted {
			lib, err := mslgen.Emit(g)
			require.NoError(t, err)
			return emitted{lib.Source, lib.Launches}
		}, map[bool]string{true: "", false: "metal: only on darwin"}[goruntime.GOOS == "darwin"]},
		{"cuda", func(t *testing.T, b []byte) emitted {
			var lib cudagen.Library
			require.NoError(t, json.Unmarshal(b, &lib))
			return emitted{lib.Source, lib.Launches}
		}, func(t *testing.T, g *ir.Graph) emitted {
			lib, err := cudagen.Emit(g)
			require.NoError(t, err)
			return emitted{lib.Source, lib.Launches}
		}, cudaCannot()},
	}
	for _, tg := range targets {
		for _, name := range []string{"stories260K.gguf", "synthetic/llama-p-Q4_0.gguf"} {
			t.Run(tg.name+"/"+name, func(t *testing.T) {
				model := shared.Path(t, "models/gguf/"+name)
				out := filepath.Join(t.TempDir(), "m.plan")
				_, stderr, code := minervac(t, "compile", model, "-target", tg.name, "-o", out)
				require.Equal(t, 0, code, stderr)
				l, err := plan.Open(out)
				require.NoError(t, err)
				defer l.Close()
				require.Equal(t, tg.name, l.Plan.Target)
				got := tg.decode(t, l.Plan.Kernels[tg.name])
				want := tg.emit(t, l.Plan.Graph)
				require.Equal(t, want.source, got.source)
				require.Equal(t, want.launches, got.launches)
				require.NotEmpty(t, got.source)

				if tg.cannot != "" {
					_, stderr, code = minervac(t, "run", out, "--prompt", "hi", "-n", "1")
					require.Equal(t, 1, code)
					require.Contains(t, stderr, tg.cannot)
				}
			})
		}
	}
	// The library is emitted from the compiled graph: loading the model the
	// same way gives the same source as the golden file's generator.
	m, err := loadModel(shared.Path(t, "models/gguf/stories260K.gguf"), arch.Options{})
	require.NoError(t, err)
	defer m.src.Close()
	p, err := compileModel(m, "", compileOptions{Target: "metal"})
	require.NoError(t, err)
	require.Contains(t, string(p.Kernels["metal"]), "fused_matmul_norm_f32_512x64")
}

// cudaCannot is the error a cuda plan's run gives here when no driver is
// configured and libcuda.so.1 is not installed; "" when one may load.
func cudaCannot() string {
	if goruntime.GOOS != "linux" {
		return "cuda: only on linux"
	}
	if os.Getenv("MINERVA_CUDA_LIB") != "" {
		return ""
	}
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/nvidia/lib64"} {
		if _, err := os.Stat(filepath.Join(dir, "libcuda.so.1")); err == nil {
			return ""
		}
	}
	return "cannot load the CUDA driver"
}
