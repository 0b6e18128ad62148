package kern

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedNEONAsmUpToDate regenerates neon_arm64.s and its stubs into a
// temporary directory and requires them to equal the committed files.
func TestGeneratedNEONAsmUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	dir := t.TempDir()
	out, err := generatorCmd(gobin, "../../../codegen/goasm/gen/kernneon", dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, f := range []string{"neon_arm64.s", "neon_arm64_stubs.go"} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err)
		got, err := os.ReadFile(f)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got), "%s is stale: run go generate in runtime/cpu/kern", f)
	}
}
