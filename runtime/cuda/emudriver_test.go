//go:build linux

package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/minerva-llm/minerva/runtime"
)

// The emulated driver (testdata/emudriver/emudriver.cc) is one shared
// library standing in for libcuda.so.1 and libnvrtc: its "NVRTC" builds the
// CUDA C as C++ against codegen/cuda/testdata/cudaemu.h and its kernels run
// on CPU threads, so the Go side of the backend runs end to end here.

var (
	emuOnce sync.Once
	emuPath string
	emuErr  error
)

// emuDriver builds the emulated driver once per test binary (into a temp
// dir; skip the test when clang++ is missing), sets the emulator's own
// variables MINERVA_CUDAEMU_INCLUDE (absolute path of codegen/cuda/testdata)
// and MINERVA_CUDAEMU_CACHE with t.Setenv, and returns the Options a program
// on it takes: the .so as both libraries, and a fresh module cache dir (the
// emulator's "PTX" names an object in its own cache, and must never land in
// the user's module cache, where a real driver of the same version and
// compute capability would find it). The driver keeps the current context
// per OS thread, as CUDA does: a test calling it must hold
// runtime.LockOSThread (and t.Setenv rules out t.Parallel).
func emuDriver(t *testing.T) runtime.Options { return emuDriverTB(t) }

func emuDriverTB(t testing.TB) runtime.Options {
	t.Helper()
	cxx, err := exec.LookPath("clang++")
	if err != nil {
		t.Skip("clang++ not on PATH: the emulated CUDA driver needs it (apt-get install clang)")
	}
	emuOnce.Do(func() { emuPath, emuErr = buildEmuDriver(cxx) })
	if emuErr != nil {
		t.Fatal(emuErr)
	}
	inc, err := filepath.Abs(filepath.Join("..", "..", "codegen", "cuda", "testdata"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("MINERVA_CUDAEMU_INCLUDE", inc)
	t.Setenv("MINERVA_CUDAEMU_CXX", cxx)
	cache := os.Getenv("MINERVA_CUDAEMU_CACHE")
	if cache == "" {
		// Shared across runs: objects are keyed by everything they are
		// built from, cudaemu.h included.
		cache = filepath.Join(os.TempDir(), "minerva-cudaemu")
	}
	t.Setenv("MINERVA_CUDAEMU_CACHE", cache)
	// The program's module cache (keyed by source, arch and driver version)
	// would hand back an image naming an object built from an older
	// cudaemu.h: each test gets its own.
	return runtime.Options{CUDALib: emuPath, NVRTCLib: emuPath, CacheDir: t.TempDir()}
}

// buildEmuDriver compiles emudriver.cc into the temp dir, named by the
// hash of its source (so reruns reuse it), written under a temporary name
// and renamed into place (so concurrent test binaries never load half a
// file).
func buildEmuDriver(cxx string) (string, error) {
	src, err := filepath.Abs(filepath.Join("testdata", "emudriver", "emudriver.cc"))
	if err != nil {
		return "", err
	}
	text, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	flags := []string{"-std=c++17", "-O2", "-fPIC", "-shared", "-pthread", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror"}
	sum := sha256.Sum256([]byte(cxx + "\x00" + strings.Join(flags, "\x00") + "\x00" + string(text)))
	dir := filepath.Join(os.TempDir(), "minerva-emudriver")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	so := filepath.Join(dir, "libemucuda-"+hex.EncodeToString(sum[:12])+".so")
	if _, err := os.Stat(so); err == nil {
		return so, nil
	}
	tmp, err := os.CreateTemp(dir, "build-*.so")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	out, err := exec.Command(cxx, append(flags, "-o", tmp.Name(), src, "-ldl")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building the emulated CUDA driver: %v\n%s", err, out)
	}
	if err := os.Rename(tmp.Name(), so); err != nil {
		return "", err
	}
	return so, nil
}

// emu is a test's session with the emulated driver: the Go side's api, and
// the library handle for the entry points api does not wrap.
type emu struct {
	t   testing.TB
	a   *api
	lib uintptr
}

func newEmu(t testing.TB) *emu {
	t.Helper()
	opts := emuDriverTB(t)
	goruntime.LockOSThread()
	t.Cleanup(goruntime.UnlockOSThread)
	a, err := loadAPI(dlopen, opts)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := dlopen(opts.CUDALib)
	if err != nil {
		t.Fatal(err)
	}
	e := &emu{t: t, a: a, lib: lib}
	if err := a.init(); err != nil {
		t.Fatal(err)
	}
	dev, err := a.device(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := a.ctxCreate(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.must("cuCtxDestroy_v2", ctx) })
	return e
}

// call calls a driver entry point by name.
func (e *emu) call(name string, args ...uintptr) Result {
	e.t.Helper()
	fn, err := purego.Dlsym(e.lib, name)
	if err != nil {
		e.t.Fatalf("%s: %v", name, err)
	}
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

func (e *emu) must(name string, args ...uintptr) {
	e.t.Helper()
	if r := e.call(name, args...); r != Success {
		e.t.Fatalf("%s: %s", name, r.Name())
	}
}

// want checks that a call fails with code.
func (e *emu) want(code Result, name string, args ...uintptr) {
	e.t.Helper()
	if r := e.call(name, args...); r != code {
		e.t.Fatalf("%s = %s, want %s", name, r.Name(), code.Name())
	}
}

// module compiles src with the Go side's compilePTX and loads it.
func (e *emu) module(src string) uintptr {
	e.t.Helper()
	major, minor, err := e.a.computeCapability(0)
	if err != nil {
		e.t.Fatal(err)
	}
	ptx, err := e.a.compilePTX(src, "emu_test.cu", major, minor)
	if err != nil {
		e.t.Fatal(err)
	}
	mod, err := e.a.moduleLoadData(ptx)
	if err != nil {
		e.t.Fatal(err)
	}
	return mod
}

func (e *emu) fn(mod uintptr, name string) uintptr {
	e.t.Helper()
	f, err := e.a.moduleGetFunction(mod, name)
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

func (e *emu) alloc(n int) uint64 {
	e.t.Helper()
	p, err := e.a.memAlloc(int64(n))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.a.memFree(p) })
	return p
}

// pinned allocates n float32s of page-locked host memory (cuMemAllocHost).
func (e *emu) pinned(n int) []float32 {
	e.t.Helper()
	var p unsafe.Pointer
	e.must("cuMemAllocHost_v2", uintptr(unsafe.Pointer(&p)), uintptr(4*n))
	e.t.Cleanup(func() { e.call("cuMemFreeHost", uintptr(p)) })
	return unsafe.Slice((*float32)(p), n)
}

func (e *emu) upload(dst uint64, v []float32) {
	e.t.Helper()
	if err := e.a.memcpyHtoD(dst, f32Bytes(v)); err != nil {
		e.t.Fatal(err)
	}
}

func (e *emu) download(src uint64, n int) []float32 {
	e.t.Helper()
	b := make([]byte, 4*n)
	if err := e.a.memcpyDtoH(b, src); err != nil {
		e.t.Fatal(err)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), n)
}

// args builds a parameter block: uint64 values are device pointers,
// uint32 and float32 values 4-byte arguments.
func (e *emu) args(vals ...any) *argBlock {
	e.t.Helper()
	sizes := make([]int, len(vals))
	for i, v := range vals {
		sizes[i] = 4
		if _, ok := v.(uint64); ok {
			sizes[i] = 8
		}
	}
	b, err := newArgBlock(sizes)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { b.free() })
	for i, v := range vals {
		switch v := v.(type) {
		case uint64:
			b.setPtr(i, v)
		case uint32:
			b.setU32(i, v)
		case float32:
			b.setU32(i, math.Float32bits(v))
		default:
			e.t.Fatalf("argument %d: %T", i, v)
		}
	}
	return b
}

func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func randVals(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.Float64()*2-1) + 0.25
	}
	return v
}

// emuKernels: block_sum reduces each block of x (a warp tree of
// __shfl_down_sync, then the warp sums through shared memory after a
// __syncthreads); affine computes y = a·c + 1 over n elements.
const emuKernels = `
typedef unsigned int u32;

extern "C" __global__ void __launch_bounds__(128) block_sum(const float* __restrict__ x, float* __restrict__ out, const u32 n) {
    __shared__ float part[32];
    const u32 tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    const u32 i = blockIdx.x * blockDim.x + tid;
    float v = i < n ? x[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, o);
    }
    if (lane == 0) {
        part[warp] = v;
    }
    __syncthreads();
    if (tid == 0) {
        float s = 0.0f;
        for (u32 w = 0; w < blockDim.x / 32u; ++w) {
            s += part[w];
        }
        out[blockIdx.x] = s;
    }
}

/* extern "C" __global__ void commented_out(int x) {} */
extern "C" __global__ void affine(const float* a, float* y, const u32 n, const float c) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a[i] * c + 1.0f;
    }
}
`

// blockSums is block_sum in Go (float64 sums).
func blockSums(x []float32, n, threads, blocks int) []float64 {
	out := make([]float64, blocks)
	for b := range blocks {
		for i := b * threads; i < (b+1)*threads && i < n; i++ {
			out[b] += float64(x[i])
		}
	}
	return out
}

// checkClose compares got with want within tol relative to max|want|.
func checkClose(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	var maxDiff, maxRef float64
	for i := range got {
		g := float64(got[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, g, want[i])
		}
		maxDiff = max(maxDiff, math.Abs(g-want[i]))
		maxRef = max(maxRef, math.Abs(want[i]))
	}
	if maxRef == 0 {
		t.Fatalf("%s: the reference is all zeros", what)
	}
	t.Logf("%s: max error %.3g of max |ref| (tolerance %.0e)", what, maxDiff/maxRef, tol)
	if maxDiff/maxRef > tol {
		t.Fatalf("%s: max error %.3g of max |ref| > %.0e", what, maxDiff/maxRef, tol)
	}
}

// The device the driver reports, through the Go side's wrappers.
func TestEmuDriverDevice(t *testing.T) {
	e := newEmu(t)
	if v, err := e.a.driverVersion(); err != nil || v != 12040 {
		t.Fatalf("driverVersion = %d, %v", v, err)
	}
	if major, minor, err := e.a.computeCapability(0); err != nil || major != 8 || minor != 0 {
		t.Fatalf("computeCapability = %d.%d, %v", major, minor, err)
	}
	for _, c := range []struct{ attr, want int32 }{{1, 1024}, {8, 49152}, {16, 2}, {10, 32}} {
		var v int32
		e.must("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&v)), uintptr(c.attr), 0)
		if v != c.want {
			t.Errorf("attribute %d = %d, want %d", c.attr, v, c.want)
		}
	}
	var v int32
	e.want(ErrorInvalidValue, "cuDeviceGetAttribute", uintptr(unsafe.Pointer(&v)), 9999, 0)
	e.want(ErrorInvalidDevice, "cuDeviceGet", uintptr(unsafe.Pointer(&v)), 1)
	var free, total uint64
	e.must("cuMemGetInfo_v2", uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	p := e.alloc(1 << 20)
	var free2 uint64
	e.must("cuMemGetInfo_v2", uintptr(unsafe.Pointer(&free2)), uintptr(unsafe.Pointer(&total)))
	if free-free2 != 1<<20 || total < free {
		t.Fatalf("cuMemGetInfo: free %d then %d after a 1 MiB allocation, total %d", free, free2, total)
	}
	var name [64]byte
	e.must("cuDeviceGetName", uintptr(unsafe.Pointer(&name[0])), uintptr(len(name)), 0)
	if !strings.Contains(string(name[:]), "emulator") {
		t.Fatalf("device name %q", name)
	}
	var s unsafe.Pointer
	e.must("cuGetErrorName", uintptr(ErrorStreamCaptureUnsupported), uintptr(unsafe.Pointer(&s)))
	if got := goString(s); got != "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" {
		t.Fatalf("cuGetErrorName(900) = %q", got)
	}
	e.want(ErrorInvalidValue, "cuGetErrorName", 12345, uintptr(unsafe.Pointer(&s)))
	// Memory is freed once: an unknown pointer is rejected.
	if err := e.a.memFree(p + 4); err == nil {
		t.Fatal("cuMemFree of an address inside an allocation succeeded")
	}
	// Another thread has no current context, as in CUDA.
	done := make(chan Result)
	go func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		var p uint64
		fn, _ := purego.Dlsym(e.lib, "cuMemAlloc_v2")
		r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&p)), 256)
		done <- Result(int32(r))
	}()
	if r := <-done; r != ErrorInvalidContext {
		t.Fatalf("cuMemAlloc_v2 on a thread without a current context = %s", r.Name())
	}
}

// ErrorStreamCaptureUnsupported and the others below are the CUresult
// codes of stream capture and handles (cuda.h).
const (
	ErrorStreamCaptureUnsupported Result = 900
	ErrorStreamCaptureInvalidated Result = 901
	ErrorIllegalState             Result = 401
)

func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := uintptr(0); ; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			return string(b)
		}
		b = append(b, c)
	}
}

// A kernel with barriers and shuffles runs on device memory through the
// Go side's compile, load, upload, launch and download, and matches Go.
func TestEmuDriverKernel(t *testing.T) {
	e := newEmu(t)
	mod := e.module(emuKernels)
	sum := e.fn(mod, "block_sum")
	rng := rand.New(rand.NewPCG(1, 2))
	// Subtests would run on other goroutines, hence other OS threads,
	// where the context is not current: the cases run in this one.
	for _, c := range []struct{ n, threads int }{{1000, 128}, {64, 64}, {4097, 256}, {33, 32}} {
		blocks := (c.n + c.threads - 1) / c.threads
		x := randVals(rng, c.n)
		dx, dout := e.alloc(4*c.n), e.alloc(4*blocks)
		e.upload(dx, x)
		b := e.args(dx, dout, uint32(c.n))
		if err := e.a.launchKernel(sum, [3]uint32{uint32(blocks), 1, 1}, [3]uint32{uint32(c.threads), 1, 1}, 0, 0, b, false); err != nil {
			t.Fatal(err)
		}
		if err := e.a.streamSynchronize(0); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("block_sum n=%d threads=%d", c.n, c.threads)
		checkClose(t, name, e.download(dout, blocks), blockSums(x, c.n, c.threads, blocks), 1e-5)
	}
}

// What the driver refuses at launch: pointers outside live allocations
// (past the end, freed, never allocated) and shapes it cannot run.
func TestEmuDriverLaunchChecks(t *testing.T) {
	e := newEmu(t)
	f := e.fn(e.module(emuKernels), "affine")
	n := 100
	da, dy := e.alloc(4*n), e.alloc(4*n)
	e.upload(da, randVals(rand.New(rand.NewPCG(3, 4)), n))
	freed, err := e.a.memAlloc(256)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.a.memFree(freed); err != nil {
		t.Fatal(err)
	}
	if err := e.a.memFree(freed); err == nil {
		t.Fatal("freeing twice succeeded")
	}
	grid, block := [3]uint32{4, 1, 1}, [3]uint32{32, 1, 1}
	// A pointer inside an allocation (not its start) is fine.
	if err := e.a.launchKernel(f, grid, block, 0, 0, e.args(da+16, dy, uint32(n-4), float32(2)), false); err != nil {
		t.Fatalf("a pointer into the middle of an allocation: %v", err)
	}
	cases := []struct {
		name        string
		args        *argBlock
		grid, block [3]uint32
		shared      uint32
	}{
		{"past the end", e.args(da, dy+uint64(4*n), uint32(n), float32(2)), grid, block, 0},
		{"freed", e.args(freed, dy, uint32(n), float32(2)), grid, block, 0},
		{"never allocated", e.args(uint64(0x1000), dy, uint32(n), float32(2)), grid, block, 0},
		{"block of 48", e.args(da, dy, uint32(n), float32(2)), grid, [3]uint32{48, 1, 1}, 0},
		{"2-D block", e.args(da, dy, uint32(n), float32(2)), grid, [3]uint32{32, 2, 1}, 0},
		{"block of 2048", e.args(da, dy, uint32(n), float32(2)), grid, [3]uint32{2048, 1, 1}, 0},
		{"empty grid", e.args(da, dy, uint32(n), float32(2)), [3]uint32{0, 1, 1}, block, 0},
		{"dynamic shared memory", e.args(da, dy, uint32(n), float32(2)), grid, block, 1024},
	}
	for _, c := range cases {
		err := e.a.launchKernel(f, c.grid, c.block, c.shared, 0, c.args, false)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != ErrorInvalidValue {
			t.Errorf("%s: launch = %v, want CUDA_ERROR_INVALID_VALUE", c.name, err)
		}
	}
	// A null kernelParams.
	e.want(ErrorInvalidValue, "cuLaunchKernel", f, 1, 1, 1, 32, 1, 1, 0, 0, 0, 0)
	// Copies outside allocations.
	if err := e.a.memcpyHtoD(dy+4, make([]byte, 4*n)); err == nil {
		t.Error("a copy running past the end of an allocation succeeded")
	}
}

// The compiler's errors come back as NVRTC_ERROR_COMPILATION with its
// message in the program log; unknown options and kernel names are
// refused.
func TestEmuDriverCompileErrors(t *testing.T) {
	e := newEmu(t)
	_, err := e.a.compilePTX("extern \"C\" __global__ void k(float* x) { x[0] = undeclared_thing; }\n", "broken.cu", 8, 0)
	var ne *NVRTCError
	if !errors.As(err, &ne) || ne.Code != 6 {
		t.Fatalf("compile error = %v, want NVRTC_ERROR_COMPILATION", err)
	}
	if !strings.Contains(ne.Log, "undeclared_thing") || !strings.Contains(ne.Log, "broken.cu:1") {
		t.Fatalf("the log does not carry the compiler's message about broken.cu:\n%s", ne.Log)
	}
	t.Logf("compile error: %v", err)

	mod := e.module(emuKernels)
	for _, name := range []string{"no_such_kernel", "commented_out"} {
		_, err = e.a.moduleGetFunction(mod, name)
		var ce *Error
		if !errors.As(err, &ce) || ce.Code != ErrorNotFound {
			t.Fatalf("moduleGetFunction(%s) = %v, want CUDA_ERROR_NOT_FOUND", name, err)
		}
	}

	// Options: what the backend may pass is accepted, anything else is
	// NVRTC_ERROR_INVALID_OPTION with a log line naming it.
	nvrtc := func(name string, args ...uintptr) NVRTCResult {
		fn, err := purego.Dlsym(e.lib, name)
		if err != nil {
			t.Fatal(err)
		}
		r, _, _ := purego.SyscallN(fn, args...)
		return NVRTCResult(int32(r))
	}
	src, nm := cString(emuKernels), cString("opts.cu")
	for _, c := range []struct {
		opts []string
		want NVRTCResult
	}{
		{[]string{"--gpu-architecture=compute_80", "--std=c++17", "-default-device", "--use_fast_math", "-lineinfo"}, 0},
		{[]string{"-arch=compute_90"}, 0},
		{[]string{"-arch=compute_80", "-O3"}, 5},
		{[]string{"--gpu-architecture=compute_"}, 5},
		{[]string{"--std=c++20"}, 5},
	} {
		var prog uintptr
		if r := nvrtc("nvrtcCreateProgram", uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&nm[0])), 0, 0, 0); r != 0 {
			t.Fatal(r.Name())
		}
		var pin goruntime.Pinner
		ptrs := make([]uintptr, len(c.opts))
		for i, o := range c.opts {
			b := cString(o)
			pin.Pin(&b[0])
			ptrs[i] = uintptr(unsafe.Pointer(&b[0]))
		}
		pin.Pin(&ptrs[0])
		r := nvrtc("nvrtcCompileProgram", prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0])))
		log := e.a.programLog(prog)
		pin.Unpin()
		if r != c.want {
			t.Errorf("options %q: %s, want %s (log %q)", c.opts, r.Name(), c.want.Name(), log)
		}
		if r == 5 && !strings.Contains(log, "unsupported option") {
			t.Errorf("options %q: log %q does not name the option", c.opts, log)
		}
		nvrtc("nvrtcDestroyProgram", uintptr(unsafe.Pointer(&prog)))
	}

	// The "PTX" names the emulation's object, NUL-terminated; anything
	// else is not an image the driver loads.
	ptx, err := e.a.compilePTX(emuKernels, "x.cu", 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(ptx), "// minerva-cudaemu module v1\n") || ptx[len(ptx)-1] != 0 {
		t.Fatalf("image %q", ptx)
	}
	_, err = e.a.moduleLoadData([]byte(".version 8.0\n.target sm_80\n"))
	var ce *Error
	if !errors.As(err, &ce) || ce.Code != ErrorInvalidImage {
		t.Fatalf("loading real PTX text = %v, want CUDA_ERROR_INVALID_IMAGE", err)
	}
}

// Two launches and a copy from page-locked memory captured into a graph:
// nothing runs during the capture; each replay reads the pinned input as it
// is then and uses the argument values of the capture.
func TestEmuDriverGraph(t *testing.T) {
	e := newEmu(t)
	mod := e.module(emuKernels)
	sum, affine := e.fn(mod, "block_sum"), e.fn(mod, "affine")
	const n, threads = 1000, 128
	blocks := (n + threads - 1) / threads
	var stream uintptr
	e.must("cuStreamCreate", uintptr(unsafe.Pointer(&stream)), 0)
	defer e.must("cuStreamDestroy_v2", stream)
	in := e.pinned(n)
	dx, dsum, dy, dz := e.alloc(4*n), e.alloc(4*blocks), e.alloc(4*blocks), e.alloc(4*blocks+64)
	rng := rand.New(rand.NewPCG(5, 6))
	copy(in, randVals(rng, n))
	e.upload(dy, make([]float32, blocks))

	a1 := e.args(dx, dsum, uint32(n))
	a2 := e.args(dsum, dy, uint32(blocks), float32(-3))
	e.must("cuStreamBeginCapture_v2", stream, 0)
	e.must("cuMemcpyHtoDAsync_v2", uintptr(dx), uintptr(unsafe.Pointer(&in[0])), 4*n, stream)
	if err := e.a.launchKernel(sum, [3]uint32{uint32(blocks), 1, 1}, [3]uint32{threads, 1, 1}, 0, stream, a1, false); err != nil {
		t.Fatal(err)
	}
	if err := e.a.launchKernel(affine, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, stream, a2, false); err != nil {
		t.Fatal(err)
	}
	// z = y, then its tail of 64 bytes set to 0x3f3f3f3f.
	e.must("cuMemcpyDtoDAsync_v2", uintptr(dz), uintptr(dy), uintptr(4*blocks), stream)
	e.must("cuMemsetD8Async", uintptr(dz)+uintptr(4*blocks), 0x3f, 64, stream)
	var graph, exec uintptr
	e.must("cuStreamEndCapture", stream, uintptr(unsafe.Pointer(&graph)))
	e.want(ErrorIllegalState, "cuStreamEndCapture", stream, uintptr(unsafe.Pointer(&graph)))
	e.must("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&exec)), graph, 0)
	e.must("cuGraphDestroy", graph) // the exec keeps its own copy
	defer e.must("cuGraphExecDestroy", exec)
	for i, v := range e.download(dy, blocks) {
		if v != 0 {
			t.Fatalf("y[%d] = %v after the capture: a captured launch ran", i, v)
		}
	}
	// Changing the parameter blocks after the capture changes nothing.
	a1.setU32(2, 1)
	a2.setU32(3, math.Float32bits(100))

	var start, stop uintptr
	e.must("cuEventCreate", uintptr(unsafe.Pointer(&start)), 0)
	e.must("cuEventCreate", uintptr(unsafe.Pointer(&stop)), 0)
	defer e.must("cuEventDestroy_v2", start)
	defer e.must("cuEventDestroy_v2", stop)
	for replay := range 3 {
		copy(in, randVals(rng, n))
		e.must("cuEventRecord", start, stream)
		e.must("cuGraphLaunch", exec, stream)
		e.must("cuEventRecord", stop, stream)
		e.must("cuEventSynchronize", stop)
		var ms float32
		e.must("cuEventElapsedTime", uintptr(unsafe.Pointer(&ms)), start, stop)
		if ms < 0 || math.IsNaN(float64(ms)) {
			t.Fatalf("elapsed %v ms", ms)
		}
		if err := e.a.streamSynchronize(stream); err != nil {
			t.Fatal(err)
		}
		want := blockSums(in, n, threads, blocks)
		for i := range want {
			want[i] = float64(float32(want[i]))*-3 + 1
		}
		checkClose(t, fmt.Sprintf("replay %d (%.2f ms)", replay, ms), e.download(dy, blocks), want, 1e-5)
		z := e.download(dz, blocks+16)
		for i, v := range z[:blocks] {
			if y := e.download(dy, blocks)[i]; v != y {
				t.Fatalf("replay %d: z[%d] = %v, want y[%d] = %v", replay, i, v, i, y)
			}
		}
		for i, v := range z[blocks:] {
			if math.Float32bits(v) != 0x3f3f3f3f {
				t.Fatalf("replay %d: z[%d] = %#x, want the memset's 0x3f3f3f3f", replay, blocks+i, math.Float32bits(v))
			}
		}
	}
	// A replay touching freed memory is refused, not run.
	if err := e.a.memFree(dx); err != nil {
		t.Fatal(err)
	}
	e.want(ErrorInvalidValue, "cuGraphLaunch", exec, stream)
}

// What a capture refuses, as CUDA does: copies from pageable host memory,
// synchronous copies and synchronization; the first error invalidates the
// capture.
func TestEmuDriverCaptureRejects(t *testing.T) {
	e := newEmu(t)
	var stream uintptr
	e.must("cuStreamCreate", uintptr(unsafe.Pointer(&stream)), 0)
	defer e.must("cuStreamDestroy_v2", stream)
	d := e.alloc(1024)
	pageable := make([]byte, 1024)
	var pin goruntime.Pinner
	pin.Pin(&pageable[0])
	defer pin.Unpin()
	host := uintptr(unsafe.Pointer(&pageable[0]))
	pinned := e.pinned(256)
	pinnedPtr := uintptr(unsafe.Pointer(&pinned[0]))

	var graph uintptr
	cases := []struct {
		name string
		call func() Result
		want Result
	}{
		{"pageable HtoDAsync", func() Result { return e.call("cuMemcpyHtoDAsync_v2", uintptr(d), host, 1024, stream) }, ErrorStreamCaptureUnsupported},
		{"pageable DtoHAsync", func() Result { return e.call("cuMemcpyDtoHAsync_v2", host, uintptr(d), 1024, stream) }, ErrorStreamCaptureUnsupported},
		{"sync HtoD", func() Result { return e.call("cuMemcpyHtoD_v2", uintptr(d), pinnedPtr, 1024) }, ErrorStreamCaptureUnsupported},
		{"sync memset", func() Result { return e.call("cuMemsetD8_v2", uintptr(d), 0, 1024) }, ErrorStreamCaptureUnsupported},
		{"stream sync", func() Result { return e.call("cuStreamSynchronize", stream) }, ErrorStreamCaptureUnsupported},
		{"ctx sync", func() Result { return e.call("cuCtxSynchronize") }, ErrorStreamCaptureUnsupported},
		{"pinned copy past its allocation", func() Result { return e.call("cuMemcpyHtoDAsync_v2", uintptr(d), pinnedPtr+8, 1024, stream) }, ErrorStreamCaptureUnsupported},
	}
	for _, c := range cases {
		e.must("cuStreamBeginCapture_v2", stream, 0)
		// A valid operation first: the capture holds something.
		e.must("cuMemcpyHtoDAsync_v2", uintptr(d), pinnedPtr, 1024, stream)
		if r := c.call(); r != c.want {
			t.Errorf("%s during a capture = %s, want %s", c.name, r.Name(), c.want.Name())
		}
		// Once invalidated, the capture accepts nothing and ends in error.
		e.want(ErrorStreamCaptureInvalidated, "cuMemsetD8Async", uintptr(d), 0, 16, stream)
		e.want(ErrorStreamCaptureInvalidated, "cuStreamEndCapture", stream, uintptr(unsafe.Pointer(&graph)))
		if graph != 0 {
			t.Errorf("%s: an invalidated capture returned a graph", c.name)
		}
	}
	// Outside a capture the same calls are fine; pageable async copies run
	// at once.
	pageable[5] = 42
	e.must("cuMemcpyHtoDAsync_v2", uintptr(d), host, 1024, stream)
	e.must("cuMemsetD8Async", uintptr(d), 7, 4, stream)
	e.must("cuMemcpyDtoHAsync_v2", host, uintptr(d), 1024, stream)
	e.must("cuStreamSynchronize", stream)
	if pageable[3] != 7 || pageable[5] != 42 {
		t.Fatalf("memset and copies: %v", pageable[:8])
	}
	// The legacy stream cannot be captured.
	e.want(ErrorStreamCaptureUnsupported, "cuStreamBeginCapture_v2", 0, 0)
	// A handle of another kind, or a destroyed one, is an invalid handle.
	var ev, s2 uintptr
	e.must("cuEventCreate", uintptr(unsafe.Pointer(&ev)), 0)
	defer e.must("cuEventDestroy_v2", ev)
	e.want(ErrorInvalidHandle, "cuStreamSynchronize", ev)
	e.want(ErrorInvalidHandle, "cuEventRecord", stream, stream)
	e.must("cuStreamCreate", uintptr(unsafe.Pointer(&s2)), 0)
	e.must("cuStreamDestroy_v2", s2)
	e.want(ErrorInvalidHandle, "cuMemsetD8Async", uintptr(d), 0, 16, s2)
}

// The emitted library of a real model (codegen/cuda's golden file for
// stories260K) builds, and every kernel in it is registered with its
// parameter list: n pointers, then T.
func TestEmuDriverEmittedLibrary(t *testing.T) {
	e := newEmu(t)
	src, err := os.ReadFile(filepath.Join("..", "..", "codegen", "cuda", "testdata", "stories260K.cu"))
	if err != nil {
		t.Fatal(err)
	}
	mod := e.module(string(src))
	names := regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(`).FindAllStringSubmatch(string(src), -1)
	if len(names) < 5 {
		t.Fatalf("only %d kernels found in the golden library", len(names))
	}
	for _, m := range names {
		e.fn(mod, m[1])
	}
	t.Logf("%d kernels registered", len(names))
}

// A kernel reading one element past its buffer faults on the guard page
// instead of reading whatever lies there: run in a child process, which
// must die of the fault. The kernel runs on the calling Go thread (as
// fibers, cudaemu.h), so Go's signal handler reports the SIGSEGV in
// external code and exits with status 2; a fault on a thread Go does not
// know would kill the process with SIGSEGV itself. Either is a fault.
func TestEmuDriverGuardPage(t *testing.T) {
	if os.Getenv("MINERVA_EMUDRIVER_CHILD") == "overrun" {
		e := newEmu(t)
		f := e.fn(e.module(emuKernels), "affine")
		const n = 64 // 256 bytes: the buffer ends right at the guard page
		da, dy := e.alloc(4*n), e.alloc(4*(n+32))
		e.upload(da, randVals(rand.New(rand.NewPCG(7, 8)), n))
		fmt.Println("launching the overrun")
		err := e.a.launchKernel(f, [3]uint32{1, 1, 1}, [3]uint32{n + 32, 1, 1}, 0, 0, e.args(da, dy, uint32(n+1), float32(1)), false)
		fmt.Println("the overrun returned:", err)
		return
	}
	emuDriver(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestEmuDriverGuardPage$", "-test.v")
	// The child dies before its t.TempDir is removed: it makes it in
	// ours, which is.
	cmd.Env = append(os.Environ(), "MINERVA_EMUDRIVER_CHILD=overrun", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	faulted := errors.As(err, &exit) && (exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGSEGV ||
		exit.ExitCode() == 2 && strings.Contains(string(out), "SIGSEGV: segmentation violation") &&
			strings.Contains(string(out), "signal arrived during cgo execution"))
	if !faulted || !strings.Contains(string(out), "launching the overrun") || strings.Contains(string(out), "overrun returned") {
		t.Fatalf("a kernel reading past its buffer did not fault (err %v):\n%s", err, out)
	}
	t.Logf("the child died as it should: %v", err)
}

// BenchmarkEmuDriverLaunch measures launches of block_sum with 256 blocks
// of 128 threads through cuLaunchKernel (cudaemu.h runs each block's
// threads as fibers on the calling thread, on stacks it maps once).
func BenchmarkEmuDriverLaunch(b *testing.B) {
	e := newEmu(b)
	f := e.fn(e.module(emuKernels), "block_sum")
	const blocks, threads = 256, 128
	n := blocks * threads
	x := randVals(rand.New(rand.NewPCG(9, 10)), n)
	dx, dout := e.alloc(4*n), e.alloc(4*blocks)
	e.upload(dx, x)
	args := e.args(dx, dout, uint32(n))
	for b.Loop() {
		if err := e.a.launchKernel(f, [3]uint32{blocks, 1, 1}, [3]uint32{threads, 1, 1}, 0, 0, args, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "launches/s")
	want := blockSums(x, n, threads, blocks)
	got := e.download(dout, blocks)
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-4*math.Abs(want[i])+1e-4 {
			b.Fatalf("out[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}
