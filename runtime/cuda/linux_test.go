//go:build linux

package cuda

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/runtime"
)

func TestArgBlock(t *testing.T) {
	b, err := newArgBlock(launchArgSizes(2))
	if err != nil {
		t.Fatal(err)
	}
	defer b.free()
	b.setPtr(0, 0x7f00_0000_1000)
	b.setPtr(1, 0xdead_beef_0000)
	b.setU32(2, 17)
	base := b.params()
	if base%uintptr(4096) != 0 {
		t.Fatalf("block at %#x is not page-aligned (not from mmap?)", base)
	}
	// kernelParams[i] points at argument i's value, inside the block.
	ptrs := unsafe.Slice((*uintptr)(unsafe.Pointer(&b.mem[0])), 3)
	for i, off := range b.l.off {
		if want := uintptr(unsafe.Pointer(&b.mem[off])); ptrs[i] != want {
			t.Fatalf("kernelParams[%d] = %#x, want %#x (offset %d)", i, ptrs[i], want, off)
		}
	}
	if v := *(*uint64)(unsafe.Pointer(&b.mem[b.l.off[0]])); v != 0x7f00_0000_1000 {
		t.Fatalf("argument 0 = %#x", v)
	}
	if v := *(*uint64)(unsafe.Pointer(&b.mem[b.l.off[1]])); v != 0xdead_beef_0000 {
		t.Fatalf("argument 1 = %#x", v)
	}
	if v := *(*uint32)(unsafe.Pointer(&b.mem[b.l.off[2]])); v != 17 {
		t.Fatalf("argument 2 = %d", v)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("setU32 on a pointer argument did not panic")
			}
		}()
		b.setU32(0, 1)
	}()
	if err := b.free(); err != nil || b.free() != nil {
		t.Fatalf("free: %v", err)
	}
}

func TestOpenLibError(t *testing.T) {
	fail := func(name string) (uintptr, error) {
		if name == "libnvrtc.so.12" {
			return 0, errors.New("libnvrtc.so.12: wrong ELF class:\nELFCLASS32")
		}
		return 0, errors.New(name + ": cannot open shared object file: No such file or directory")
	}
	_, err := openLib(nvrtcLib, "", fail)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Fatalf("error is not one line: %q", msg)
	}
	for _, n := range append(nvrtcLib.names, "MINERVA_NVRTC_LIB", "wrong ELF class: ELFCLASS32") {
		if !strings.Contains(msg, n) {
			t.Errorf("error %q does not name %q", msg, n)
		}
	}
	if strings.Contains(msg, "No such file") {
		t.Errorf("error %q repeats the not-found reasons", msg)
	}

	// A path names the one file tried.
	var tried []string
	_, err = openLib(nvrtcLib, "/opt/x/libnvrtc.so.12.4", func(n string) (uintptr, error) { tried = append(tried, n); return 0, errors.New("No such file") })
	if len(tried) != 1 || tried[0] != "/opt/x/libnvrtc.so.12.4" || !strings.Contains(err.Error(), "/opt/x/libnvrtc.so.12.4") {
		t.Fatalf("tried %v: %v", tried, err)
	}
	h, err := openLib(nvrtcLib, "", func(string) (uintptr, error) { return 42, nil })
	if h != 42 || err != nil {
		t.Fatalf("openLib = %d, %v", h, err)
	}
}

// On a machine without the NVIDIA driver, Compile fails with the loader's
// one-line error naming libcuda.so.1.
func TestCompileWithoutDriver(t *testing.T) {
	if _, err := load(runtime.Options{}); err == nil {
		t.Skip("libcuda and NVRTC load here")
	} else if strings.Contains(err.Error(), "NVRTC") {
		t.Skipf("libcuda loads here: %v", err)
	}
	_, err := backend{}.Compile(&ir.Graph{}, nil, runtime.ProgramConfig{Context: 8})
	if err == nil {
		t.Fatal("Compile succeeded without a driver")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "libcuda.so.1") || !strings.Contains(msg, "MINERVA_CUDA_LIB") {
		t.Fatalf("error %q: want one line naming libcuda.so.1 and MINERVA_CUDA_LIB", msg)
	}
	t.Log(msg)
}

// Programmatic dependent launch needs sm_90, a driver that can capture it
// (CUDA 12.3) and cuLaunchKernelEx, and MINERVA_CUDA_PDL=0 turns it off
// (the library condition: TestProgramLaunchesWithPDLOnSM90).
func TestPDLSupported(t *testing.T) {
	with := &api{cuLaunchKernelEx: 1}
	waits := "extern \"C\" __global__ void k(\n    const u32 T) {\n    grid_dep_sync();\n}\n"
	for _, c := range []struct {
		a             *api
		major, driver int
		env           string
		want          bool
	}{
		{with, 9, 12030, "", true},
		{with, 10, 13000, "1", true},
		{with, 9, 12020, "", false},
		{with, 8, 13000, "", false},
		{&api{}, 9, 13000, "", false},
		{with, 9, 13000, "0", false},
	} {
		t.Setenv("MINERVA_CUDA_PDL", c.env)
		if got := c.a.pdlSupported(c.major, c.driver, waits); got != c.want {
			t.Errorf("sm %d, driver %d, symbol %v, MINERVA_CUDA_PDL=%q: %v, want %v", c.major, c.driver, c.a.cuLaunchKernelEx != 0, c.env, got, c.want)
		}
	}
}
