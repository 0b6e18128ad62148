//go:build linux

package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
)

// The tests below run the CUDA program on a real GPU: the same checks as
// the emulated driver's (program_emu_test.go, golden_emu_test.go), with
// the driver and NVRTC the system has. Without a loadable driver and a
// device they skip, as they do in CI.

// realDevice skips unless libcuda and NVRTC load (from the system, not
// the emulated driver) and device 0 can run the kernels.
func realDevice(t *testing.T) {
	t.Helper()
	if strings.Contains(os.Getenv("MINERVA_CUDA_LIB"), "emucuda") {
		t.Skip("MINERVA_CUDA_LIB names the emulated driver")
	}
	name, err := DeviceName()
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	if strings.Contains(name, "emulator") {
		t.Skipf("device %s is the emulated driver", name)
	}
	t.Logf("device: %s", name)
}

func TestDeviceProgramMatchesReference(t *testing.T) {
	realDevice(t)
	t.Setenv("MINERVA_CACHE_DIR", t.TempDir())
	programMatchesReference(t, "")
}

// TestDeviceGoldenE2E runs every golden case whose index and model file are
// present (a GPU machine may be handed a subset of ../shared, with indexes
// trimmed to the cases it carries).
func TestDeviceGoldenE2E(t *testing.T) {
	realDevice(t)
	var indexes []string
	for _, index := range []string{"index.json", "index-gptoss.json"} {
		if _, err := os.Stat(filepath.Join(shared.Path(t, "golden/e2e"), index)); err == nil {
			indexes = append(indexes, index)
		} else {
			t.Logf("golden/e2e/%s not here, not run", index)
		}
	}
	goldenE2E(t, indexes, func(c *golden.Case) bool {
		if _, err := os.Stat(c.ModelPath); err != nil {
			t.Logf("%s: model not here, not run", c.Name)
			return false
		}
		return true
	})
}
