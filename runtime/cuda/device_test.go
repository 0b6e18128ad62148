//go:build linux

package cuda

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/internal/golden"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/runtime"
)

// The tests below run the CUDA program on a real GPU: the same checks as
// the emulated driver's (program_emu_test.go, golden_emu_test.go), with
// the driver and NVRTC the system has. Without a loadable driver and a
// device they skip, as they do in CI.

// realDevice skips unless libcuda and NVRTC load (the system's, or the
// files $MINERVA_CUDA_LIB and $MINERVA_NVRTC_LIB name, as minervac's flags
// would read them) and device 0 can run the kernels; it returns the
// Options of a program there.
func realDevice(t *testing.T) runtime.Options {
	t.Helper()
	opts := runtime.Options{CUDALib: os.Getenv("MINERVA_CUDA_LIB"), NVRTCLib: os.Getenv("MINERVA_NVRTC_LIB"), CacheDir: t.TempDir()}
	if strings.Contains(opts.CUDALib, "emucuda") {
		t.Skip("MINERVA_CUDA_LIB names the emulated driver")
	}
	name, err := DeviceName(opts)
	if err != nil {
		t.Skipf("no GPU: %v", err)
	}
	if strings.Contains(name, "emulator") {
		t.Skipf("device %s is the emulated driver", name)
	}
	t.Logf("device: %s", name)
	return opts
}

func TestDeviceProgramMatchesReference(t *testing.T) {
	programMatchesReference(t, realDevice(t), "")
}

func TestDeviceStepRows(t *testing.T) {
	stepRowsMatchesSlotSteps(t, realDevice(t))
}

// TestDeviceGoldenE2E runs every golden case whose index and model file are
// present (a GPU machine may be handed a subset of ../shared, with indexes
// trimmed to the cases it carries).
func TestDeviceGoldenE2E(t *testing.T) {
	opts := realDevice(t)
	var indexes []string
	for _, index := range goldenIndexes {
		if _, err := os.Stat(filepath.Join(shared.Path(t, "golden/e2e"), index)); err == nil {
			indexes = append(indexes, index)
		} else {
			t.Logf("golden/e2e/%s not here, not run", index)
		}
	}
	goldenE2E(t, opts, indexes, func(c *golden.Case) bool {
		if _, err := os.Stat(c.ModelPath); err != nil {
			t.Logf("%s: model not here, not run", c.Name)
			return false
		}
		return true
	})
}
