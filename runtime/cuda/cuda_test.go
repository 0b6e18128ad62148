package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/runtime"
)

func TestRegistered(t *testing.T) {
	b, ok := runtime.LookupBackend(Name)
	if !ok || b.Name() != "cuda" {
		t.Fatalf("backend %q not registered", Name)
	}
}

func TestCacheKey(t *testing.T) {
	k := cacheKey("src", 9, 0, 12040)
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not a hex SHA-256", k)
	}
	if cacheKey("src", 9, 0, 12040) != k {
		t.Fatal("key is not deterministic")
	}
	for name, other := range map[string]string{
		"source":   cacheKey("src ", 9, 0, 12040),
		"major":    cacheKey("src", 8, 0, 12040),
		"minor":    cacheKey("src", 9, 1, 12040),
		"driver":   cacheKey("src", 9, 0, 12050),
		"boundary": cacheKey("src9", 0, 0, 12040),
	} {
		if other == k {
			t.Errorf("changing the %s does not change the key", name)
		}
	}
	// Both digits of the capability count: 1.11 is not 11.1.
	if cacheKey("a", 1, 11, 1) == cacheKey("a", 11, 1, 1) {
		t.Error("compute capabilities 1.11 and 11.1 give the same key")
	}
}

func TestModuleCache(t *testing.T) {
	c := moduleCache{Dir: filepath.Join(t.TempDir(), "cuda")}
	key := cacheKey("src", 9, 0, 12040)
	if _, ok, err := c.load(key); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	ptx := []byte(".version 8.0\n.target sm_90\n\x00")
	if err := c.store(key, ptx); err != nil {
		t.Fatal(err)
	}
	got, ok, err := c.load(key)
	if !ok || err != nil || !bytes.Equal(got, ptx) {
		t.Fatalf("load after store: %q ok=%v err=%v", got, ok, err)
	}
	ents, _ := os.ReadDir(c.Dir)
	if len(ents) != 1 || ents[0].Name() != key+".ptx" {
		t.Fatalf("cache holds %v, want only %s.ptx", ents, key)
	}
	if err := (moduleCache{}).store(key, ptx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := (moduleCache{}).load(key); ok {
		t.Fatal("a disabled cache returned a module")
	}
	if d := defaultModuleCache("/x").Dir; d != filepath.Join("/x", "cuda") {
		t.Fatalf("default cache dir %q", d)
	}
}

func TestResultMessages(t *testing.T) {
	for _, tc := range []struct {
		r          Result
		name, text string
	}{
		{Success, "CUDA_SUCCESS", "no error"},
		{ErrorOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of device memory"},
		{ErrorNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device"},
		{ErrorStubLibrary, "CUDA_ERROR_STUB_LIBRARY", "stub"},
		{ErrorIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "illegal memory address"},
		{ErrorLaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", "launch failure"},
		{ErrorNoBinaryForGPU, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image"},
		{Result(12345), "CUresult(12345)", "unrecognized"},
	} {
		if tc.r.Name() != tc.name || !strings.Contains(tc.r.Message(), tc.text) {
			t.Errorf("%d: %s %q, want %s containing %q", tc.r, tc.r.Name(), tc.r.Message(), tc.name, tc.text)
		}
	}
	if check("cuInit", Success) != nil {
		t.Fatal("success is an error")
	}
	err := check("cuMemAlloc_v2", ErrorOutOfMemory)
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != ErrorOutOfMemory {
		t.Fatalf("%v is not an *Error", err)
	}
	if want := "cuda: cuMemAlloc_v2: out of device memory (CUDA_ERROR_OUT_OF_MEMORY)"; err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
	// Every named code has a distinct name.
	seen := map[string]Result{}
	for r := range resultText {
		if o, dup := seen[r.Name()]; dup {
			t.Errorf("%d and %d are both %s", r, o, r.Name())
		}
		seen[r.Name()] = r
	}
}

func TestNVRTCErrors(t *testing.T) {
	if NVRTCResult(6).Name() != "NVRTC_ERROR_COMPILATION" || NVRTCResult(99).Name() != "nvrtcResult(99)" {
		t.Fatal("nvrtcResult names")
	}
	if checkNVRTC("x", 0) != nil {
		t.Fatal("success is an error")
	}
	e := &NVRTCError{Call: "nvrtcCompileProgram", Code: 6, Log: "\n  kernel.cu(3): error: expected a \";\"\n1 error detected\n\x00"}
	want := `cuda: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION: kernel.cu(3): error: expected a ";"`
	if e.Error() != want {
		t.Fatalf("got %q, want %q", e.Error(), want)
	}
}

func TestArgLayout(t *testing.T) {
	l, err := planArgs(launchArgSizes(3))
	if err != nil {
		t.Fatal(err)
	}
	// Four pointers (32 bytes), three 8-byte values, then T.
	if want := []int{32, 40, 48, 56}; !equalInts(l.off, want) || l.size != 64 {
		t.Fatalf("offsets %v size %d, want %v size 64", l.off, l.size, want)
	}
	l, err = planArgs([]int{4, 8, 4})
	if err != nil {
		t.Fatal(err)
	}
	// 24 bytes of pointers; the 8-byte value after a 4-byte one is aligned.
	if want := []int{24, 32, 40}; !equalInts(l.off, want) || l.size != 48 {
		t.Fatalf("offsets %v size %d, want %v size 48", l.off, l.size, want)
	}
	if _, err := planArgs([]int{8, 2}); err == nil {
		t.Fatal("a 2-byte argument was accepted")
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
