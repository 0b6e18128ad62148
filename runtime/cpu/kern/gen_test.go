package kern

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// generatorCmd runs a kernel generator with `go run` for the host: a test
// binary cross-built for another GOARCH (run under qemu) must not pass its
// GOOS/GOARCH on, or the generator would be built for the emulated target.
func generatorCmd(gobin, pkg, dir string) *exec.Cmd {
	cmd := exec.Command(gobin, "run", pkg, "-dir", dir)
	cmd.Env = append(os.Environ(), "GOOS=", "GOARCH=", "GOARM64=", "GOAMD64=")
	return cmd
}

// generators lists every kernel generator and the files it writes here.
var generators = []struct {
	pkg   string
	files []string
}{
	{"kerndot", []string{"dot_amd64.s", "dot_amd64_stubs.go"}},
	{"kernvec", []string{"vec_amd64.s", "vec_amd64_stubs.go"}},
	{"kernattn", []string{"attn_amd64.s", "attn_amd64_stubs.go"}},
	{"kernvnni", []string{"vnni_amd64.s", "vnni_amd64_stubs.go"}},
	{"kernneon", []string{"neon_arm64.s", "neon_arm64_stubs.go"}},
}

// TestGeneratedUpToDate regenerates each generator's files into a temporary
// directory and requires them to equal the committed ones.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generators")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	for _, g := range generators {
		t.Run(g.pkg, func(t *testing.T) {
			dir := t.TempDir()
			out, err := generatorCmd(gobin, "../../../codegen/goasm/gen/"+g.pkg, dir).CombinedOutput()
			require.NoError(t, err, "%s", out)
			for _, f := range g.files {
				want, err := os.ReadFile(filepath.Join(dir, f))
				require.NoError(t, err)
				got, err := os.ReadFile(f)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want, got), "%s is stale: run go generate in runtime/cpu/kern", f)
			}
		})
	}
}
