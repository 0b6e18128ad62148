//go:build linux

package cuda

import (
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/runtime"
)

// libSpec is a shared library the backend needs: the file names tried in
// order, and the flag (with its environment variable) that names the file
// instead, for the error message.
type libSpec struct {
	what  string
	env   string
	names []string
}

var (
	cudaLib = libSpec{"the CUDA driver", "--cuda-lib or MINERVA_CUDA_LIB", []string{"libcuda.so.1", "libcuda.so"}}
	// NVRTC carries its major.minor in the soname; libnvrtc.so exists only
	// with the toolkit's development files.
	nvrtcLib = libSpec{"NVRTC", "--nvrtc-lib or MINERVA_NVRTC_LIB", []string{
		"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so.11.1", "libnvrtc.so.11.0",
		"/usr/local/cuda/lib64/libnvrtc.so",
	}}
)

// openLib dlopens path, or when it is empty the first of s's names that
// loads. On failure the error is one line naming every file tried and how
// to name the file, with the loader's reason for any file that exists but
// did not load.
func openLib(s libSpec, path string, dlopen func(string) (uintptr, error)) (uintptr, error) {
	names := s.names
	if path != "" {
		names = []string{path}
	}
	var reasons []string
	for _, n := range names {
		h, err := dlopen(n)
		if err == nil {
			return h, nil
		}
		if r := oneLine(err.Error()); !strings.Contains(r, "No such file") && !strings.Contains(r, "not found") {
			reasons = append(reasons, r)
		}
	}
	msg := fmt.Sprintf("cuda: cannot load %s: tried %s; name the library's path with %s", s.what, strings.Join(names, ", "), s.env)
	if len(reasons) > 0 {
		msg += " (" + strings.Join(reasons, "; ") + ")"
	}
	return 0, errors.New(msg)
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func dlopen(name string) (uintptr, error) {
	return purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

// api holds the resolved entry points, called through purego.SyscallN.
type api struct {
	cuInit, cuDriverGetVersion, cuDeviceGet, cuDeviceGetAttribute, cuCtxCreate uintptr
	cuModuleLoadData, cuModuleGetFunction, cuMemAlloc, cuMemFree               uintptr
	cuMemcpyHtoD, cuMemcpyDtoH, cuLaunchKernel, cuStreamSynchronize            uintptr
	nvrtcCreateProgram, nvrtcDestroyProgram, nvrtcCompileProgram               uintptr
	nvrtcGetPTXSize, nvrtcGetPTX, nvrtcGetProgramLogSize, nvrtcGetProgramLog   uintptr

	cuCtxDestroy, cuCtxSetCurrent, cuModuleUnload, cuDeviceGetName, cuDeviceTotalMem uintptr
	cuMemAllocHost, cuMemFreeHost, cuMemsetD8Async                                   uintptr
	cuMemcpyHtoDAsync, cuMemcpyDtoHAsync, cuMemcpyDtoDAsync                          uintptr
	cuStreamCreate, cuStreamDestroy, cuStreamBeginCapture, cuStreamEndCapture        uintptr
	cuGraphInstantiate, cuGraphLaunch, cuGraphExecDestroy, cuGraphDestroy            uintptr
	cuEventCreate, cuEventRecord, cuEventSynchronize, cuEventElapsedTime             uintptr
	cuEventDestroy                                                                   uintptr

	// Optional entry points (0 when the library lacks them): diagnostics,
	// and the launch with attributes (CUDA 12.0) that programmatic
	// dependent launch needs.
	cuCtxGetCurrent, cuLaunchKernelEx uintptr
}

var (
	loadMu sync.Mutex
	loaded = map[[2]string]*api{}
)

// load opens both libraries (Options.CUDALib and NVRTCLib, or the usual
// names) and resolves every entry point, once per process and pair of paths
// (the tests load the emulated driver); a failure is not remembered, so a
// later call with other paths tries again.
func load(o runtime.Options) (*api, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	key := [2]string{o.CUDALib, o.NVRTCLib}
	if a, ok := loaded[key]; ok {
		return a, nil
	}
	a, err := loadAPI(dlopen, o)
	if err != nil {
		return nil, err
	}
	loaded[key] = a
	return a, nil
}

func loadAPI(open func(string) (uintptr, error), o runtime.Options) (*api, error) {
	cu, err := openLib(cudaLib, o.CUDALib, open)
	if err != nil {
		return nil, err
	}
	nv, err := openLib(nvrtcLib, o.NVRTCLib, open)
	if err != nil {
		return nil, err
	}
	a := &api{}
	syms := []struct {
		lib  uintptr
		name string
		p    *uintptr
	}{
		{cu, "cuInit", &a.cuInit},
		{cu, "cuDriverGetVersion", &a.cuDriverGetVersion},
		{cu, "cuDeviceGet", &a.cuDeviceGet},
		{cu, "cuDeviceGetAttribute", &a.cuDeviceGetAttribute},
		{cu, "cuCtxCreate_v2", &a.cuCtxCreate},
		{cu, "cuModuleLoadData", &a.cuModuleLoadData},
		{cu, "cuModuleGetFunction", &a.cuModuleGetFunction},
		{cu, "cuMemAlloc_v2", &a.cuMemAlloc},
		{cu, "cuMemFree_v2", &a.cuMemFree},
		{cu, "cuMemcpyHtoD_v2", &a.cuMemcpyHtoD},
		{cu, "cuMemcpyDtoH_v2", &a.cuMemcpyDtoH},
		{cu, "cuLaunchKernel", &a.cuLaunchKernel},
		{cu, "cuStreamSynchronize", &a.cuStreamSynchronize},
		{cu, "cuCtxDestroy_v2", &a.cuCtxDestroy},
		{cu, "cuCtxSetCurrent", &a.cuCtxSetCurrent},
		{cu, "cuModuleUnload", &a.cuModuleUnload},
		{cu, "cuDeviceGetName", &a.cuDeviceGetName},
		{cu, "cuDeviceTotalMem_v2", &a.cuDeviceTotalMem},
		{cu, "cuMemAllocHost_v2", &a.cuMemAllocHost},
		{cu, "cuMemFreeHost", &a.cuMemFreeHost},
		{cu, "cuMemsetD8Async", &a.cuMemsetD8Async},
		{cu, "cuMemcpyHtoDAsync_v2", &a.cuMemcpyHtoDAsync},
		{cu, "cuMemcpyDtoHAsync_v2", &a.cuMemcpyDtoHAsync},
		{cu, "cuMemcpyDtoDAsync_v2", &a.cuMemcpyDtoDAsync},
		{cu, "cuStreamCreate", &a.cuStreamCreate},
		{cu, "cuStreamDestroy_v2", &a.cuStreamDestroy},
		{cu, "cuStreamBeginCapture_v2", &a.cuStreamBeginCapture},
		{cu, "cuStreamEndCapture", &a.cuStreamEndCapture},
		{cu, "cuGraphInstantiateWithFlags", &a.cuGraphInstantiate},
		{cu, "cuGraphLaunch", &a.cuGraphLaunch},
		{cu, "cuGraphExecDestroy", &a.cuGraphExecDestroy},
		{cu, "cuGraphDestroy", &a.cuGraphDestroy},
		{cu, "cuEventCreate", &a.cuEventCreate},
		{cu, "cuEventRecord", &a.cuEventRecord},
		{cu, "cuEventSynchronize", &a.cuEventSynchronize},
		{cu, "cuEventElapsedTime", &a.cuEventElapsedTime},
		{cu, "cuEventDestroy_v2", &a.cuEventDestroy},
		{nv, "nvrtcCreateProgram", &a.nvrtcCreateProgram},
		{nv, "nvrtcDestroyProgram", &a.nvrtcDestroyProgram},
		{nv, "nvrtcCompileProgram", &a.nvrtcCompileProgram},
		{nv, "nvrtcGetPTXSize", &a.nvrtcGetPTXSize},
		{nv, "nvrtcGetPTX", &a.nvrtcGetPTX},
		{nv, "nvrtcGetProgramLogSize", &a.nvrtcGetProgramLogSize},
		{nv, "nvrtcGetProgramLog", &a.nvrtcGetProgramLog},
	}
	for _, s := range syms {
		p, err := purego.Dlsym(s.lib, s.name)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("cuda: symbol %s missing from the loaded library (driver or NVRTC too old?)", s.name)
		}
		*s.p = p
	}
	if p, err := purego.Dlsym(cu, "cuCtxGetCurrent"); err == nil {
		a.cuCtxGetCurrent = p
	}
	if p, err := purego.Dlsym(cu, "cuLaunchKernelEx"); err == nil {
		a.cuLaunchKernelEx = p
	}
	return a, nil
}

// The wrappers below are the thin typed layer over the entry points. Out
// parameters are locals whose address is passed as a uintptr, so call and
// nvcall carry go:uintptrescapes themselves: the directive acts only where
// the conversion is written in the call's own arguments, and the one on
// purego.SyscallN (which a wrapper calls with a slice) does not reach
// them. Without it such a local stays on the goroutine stack, and a stack
// that grows before the C call moves it: the driver then writes the result
// into the old stack. On an H100 that left cuModuleLoadData's module handle
// unset, and cuModuleGetFunction failed with CUDA_ERROR_INVALID_HANDLE. Go
// buffers handed to C are kept alive for the call.

//go:uintptrescapes
func (a *api) call(fn uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(fn, args...)
	return Result(int32(r))
}

//go:uintptrescapes
func (a *api) nvcall(fn uintptr, args ...uintptr) NVRTCResult {
	r, _, _ := purego.SyscallN(fn, args...)
	return NVRTCResult(int32(r))
}

func (a *api) init() error { return check("cuInit", a.call(a.cuInit, 0)) }

func (a *api) driverVersion() (int, error) {
	var v int32
	err := check("cuDriverGetVersion", a.call(a.cuDriverGetVersion, uintptr(unsafe.Pointer(&v))))
	return int(v), err
}

func (a *api) device(ordinal int) (int32, error) {
	var d int32
	err := check("cuDeviceGet", a.call(a.cuDeviceGet, uintptr(unsafe.Pointer(&d)), uintptr(ordinal)))
	return d, err
}

// The CUdevice_attribute values of the compute capability.
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
)

func (a *api) computeCapability(dev int32) (major, minor int, err error) {
	var v [2]int32
	for i, attr := range []uintptr{attrComputeCapabilityMajor, attrComputeCapabilityMinor} {
		if err := check("cuDeviceGetAttribute", a.call(a.cuDeviceGetAttribute, uintptr(unsafe.Pointer(&v[i])), attr, uintptr(dev))); err != nil {
			return 0, 0, err
		}
	}
	return int(v[0]), int(v[1]), nil
}

// deviceInfo is device 0 as a program or the kernel harness opens it.
type deviceInfo struct {
	name         string
	major, minor int     // compute capability
	ctx          uintptr // a context created on it, current on the calling thread
}

// openDevice initialises the driver, checks that device 0 can run the
// kernels and creates a context on it. The caller holds its OS thread.
func (a *api) openDevice() (deviceInfo, error) {
	var d deviceInfo
	if err := a.init(); err != nil {
		return d, err
	}
	dev, err := a.device(0)
	if err != nil {
		return d, err
	}
	if d.major, d.minor, err = a.computeCapability(dev); err != nil {
		return d, err
	}
	if d.name, err = a.deviceName(dev); err != nil {
		return d, err
	}
	if d.major < 8 {
		// The prefill kernels use mma.sync.m16n8k16 with f16 operands (sm_80).
		return d, fmt.Errorf("cuda: %s has compute capability %d.%d; the kernels need 8.0 (Ampere) or newer", d.name, d.major, d.minor)
	}
	d.ctx, err = a.ctxCreate(dev)
	return d, err
}

func (a *api) ctxCreate(dev int32) (uintptr, error) {
	var ctx uintptr
	err := check("cuCtxCreate_v2", a.call(a.cuCtxCreate, uintptr(unsafe.Pointer(&ctx)), 0, uintptr(dev)))
	return ctx, err
}

// moduleLoadData loads a PTX image; it is NUL-terminated here.
func (a *api) moduleLoadData(ptx []byte) (uintptr, error) {
	img := cString(string(ptx))
	var mod uintptr
	err := check("cuModuleLoadData", a.call(a.cuModuleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&img[0]))))
	goruntime.KeepAlive(img)
	return mod, err
}

func (a *api) moduleGetFunction(mod uintptr, name string) (uintptr, error) {
	n := cString(name)
	var f uintptr
	err := check("cuModuleGetFunction", a.call(a.cuModuleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&n[0]))))
	goruntime.KeepAlive(n)
	if err != nil {
		return 0, fmt.Errorf("%w: kernel %s", err, name)
	}
	return f, nil
}

func (a *api) memAlloc(bytes int64) (uint64, error) {
	var p uint64
	err := check("cuMemAlloc_v2", a.call(a.cuMemAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)))
	return p, err
}

func (a *api) memFree(p uint64) error { return check("cuMemFree_v2", a.call(a.cuMemFree, uintptr(p))) }

func (a *api) memcpyHtoD(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	var pin goruntime.Pinner
	pin.Pin(&src[0])
	defer pin.Unpin()
	return check("cuMemcpyHtoD_v2", a.call(a.cuMemcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))))
}

func (a *api) memcpyDtoH(dst []byte, src uint64) error {
	if len(dst) == 0 {
		return nil
	}
	var pin goruntime.Pinner
	pin.Pin(&dst[0])
	defer pin.Unpin()
	return check("cuMemcpyDtoH_v2", a.call(a.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst))))
}

// launchKernel issues f on stream with the parameter block b (memory outside
// the Go heap, see argBlock). With pdl, through cuLaunchKernelEx with
// programmatic stream serialization allowed: the grid may start while the
// previous kernel on the stream drains, and waits for it in grid_dep_sync
// (codegen/cuda's prelude); a program asks for it where pdlSupported.
func (a *api) launchKernel(f uintptr, grid, block [3]uint32, sharedBytes uint32, stream uintptr, b *argBlock, pdl bool) error {
	if pdl {
		return check("cuLaunchKernelEx", a.call(a.cuLaunchKernelEx, b.launchConfig(grid, block, sharedBytes, stream), f, b.params(), 0))
	}
	return check("cuLaunchKernel", a.call(a.cuLaunchKernel, f,
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]),
		uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(sharedBytes), stream, b.params(), 0))
}

// pdlSupported reports whether kernels on a device of compute capability
// major, under a driver of version driver (cuDriverGetVersion's 1000·major
// + 10·minor), can be launched with programmatic stream serialization:
// sm_90 and newer (griddepcontrol), a driver with cuLaunchKernelEx that can
// also capture such launches into the decode graphs (CUDA 12.3), and
// MINERVA_CUDA_PDL not "0" (the switch that measures without it); and a
// library src whose every kernel waits (cudagen.KernelsWait: a plan
// compiled before grid_dep_sync keeps the ordinary launches).
func (a *api) pdlSupported(major, driver int, src string) bool {
	return major >= 9 && driver >= pdlMinDriver && a.cuLaunchKernelEx != 0 && os.Getenv("MINERVA_CUDA_PDL") != "0" &&
		cudagen.KernelsWait(src)
}

// pdlMinDriver is CUDA 12.3, the release that brought graph edge data (the
// programmatic ports a captured dependent launch becomes); an older driver
// keeps the ordinary launches rather than risk a capture it rejects.
const pdlMinDriver = 12030

func (a *api) streamSynchronize(stream uintptr) error {
	return check("cuStreamSynchronize", a.call(a.cuStreamSynchronize, stream))
}

// compilePTX compiles source with NVRTC for compute capability major.minor
// and returns the PTX (NUL-terminated, as cuModuleLoadData wants it). A
// compilation error carries NVRTC's log.
func (a *api) compilePTX(source, name string, major, minor int) ([]byte, error) {
	src, nm := cString(source), cString(name)
	var prog uintptr
	r := a.nvcall(a.nvrtcCreateProgram, uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&src[0])), uintptr(unsafe.Pointer(&nm[0])), 0, 0, 0)
	goruntime.KeepAlive(src)
	goruntime.KeepAlive(nm)
	if err := checkNVRTC("nvrtcCreateProgram", r); err != nil {
		return nil, err
	}
	defer func() { a.nvcall(a.nvrtcDestroyProgram, uintptr(unsafe.Pointer(&prog))) }()

	opts := [][]byte{cString(fmt.Sprintf("--gpu-architecture=compute_%d%d", major, minor)), cString("--std=c++17")}
	var pin goruntime.Pinner
	defer pin.Unpin()
	ptrs := make([]uintptr, len(opts))
	for i, o := range opts {
		pin.Pin(&o[0])
		ptrs[i] = uintptr(unsafe.Pointer(&o[0]))
	}
	pin.Pin(&ptrs[0])
	if r := a.nvcall(a.nvrtcCompileProgram, prog, uintptr(len(ptrs)), uintptr(unsafe.Pointer(&ptrs[0]))); r != 0 {
		return nil, &NVRTCError{Call: "nvrtcCompileProgram", Code: r, Log: a.programLog(prog)}
	}
	var n uintptr
	if err := checkNVRTC("nvrtcGetPTXSize", a.nvcall(a.nvrtcGetPTXSize, prog, uintptr(unsafe.Pointer(&n)))); err != nil {
		return nil, err
	}
	ptx := make([]byte, max(n, 1))
	pin.Pin(&ptx[0])
	if err := checkNVRTC("nvrtcGetPTX", a.nvcall(a.nvrtcGetPTX, prog, uintptr(unsafe.Pointer(&ptx[0])))); err != nil {
		return nil, err
	}
	return ptx, nil
}

func (a *api) programLog(prog uintptr) string {
	var n uintptr
	if a.nvcall(a.nvrtcGetProgramLogSize, prog, uintptr(unsafe.Pointer(&n))) != 0 || n == 0 {
		return ""
	}
	buf := make([]byte, n)
	var pin goruntime.Pinner
	pin.Pin(&buf[0])
	defer pin.Unpin()
	if a.nvcall(a.nvrtcGetProgramLog, prog, uintptr(unsafe.Pointer(&buf[0]))) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}

// cString is s with a terminating NUL.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// The wrappers of the runtime proper: context, pinned host memory, streams,
// asynchronous copies, CUDA graphs and events. A CUDA context is current per
// OS thread, so callers hold runtime.LockOSThread around a sequence of calls
// and make the context current first (see program.enter).

func (a *api) ctxDestroy(ctx uintptr) error {
	return check("cuCtxDestroy_v2", a.call(a.cuCtxDestroy, ctx))
}

// ctxCurrent is the calling thread's current context, for error messages
// (0 when unknown).
func (a *api) ctxCurrent() uintptr {
	if a.cuCtxGetCurrent == 0 {
		return 0
	}
	var c uintptr
	if a.call(a.cuCtxGetCurrent, uintptr(unsafe.Pointer(&c))) != Success {
		return 0
	}
	return c
}

func (a *api) ctxSetCurrent(ctx uintptr) error {
	return check("cuCtxSetCurrent", a.call(a.cuCtxSetCurrent, ctx))
}

func (a *api) moduleUnload(mod uintptr) error {
	return check("cuModuleUnload", a.call(a.cuModuleUnload, mod))
}

func (a *api) deviceName(dev int32) (string, error) {
	var buf [256]byte
	if err := check("cuDeviceGetName", a.call(a.cuDeviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(dev))); err != nil {
		return "", err
	}
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return string(buf[:n]), nil
}

func (a *api) deviceTotalMem(dev int32) (int64, error) {
	var n uintptr
	err := check("cuDeviceTotalMem_v2", a.call(a.cuDeviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(dev)))
	return int64(n), err
}

// memAllocHost returns page-locked host memory (the staging buffers of
// asynchronous copies and of copies captured in a graph). It is C memory:
// the Go collector neither moves nor frees it.
func (a *api) memAllocHost(bytes int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := check("cuMemAllocHost_v2", a.call(a.cuMemAllocHost, uintptr(unsafe.Pointer(&p)), uintptr(bytes)))
	return p, err
}

func (a *api) memFreeHost(p unsafe.Pointer) error {
	return check("cuMemFreeHost", a.call(a.cuMemFreeHost, uintptr(p)))
}

func (a *api) memsetD8Async(dst uint64, v byte, n int64, stream uintptr) error {
	return check("cuMemsetD8Async", a.call(a.cuMemsetD8Async, uintptr(dst), uintptr(v), uintptr(n), stream))
}

// memcpyHtoDAsync copies from pinned host memory (memAllocHost).
func (a *api) memcpyHtoDAsync(dst uint64, src unsafe.Pointer, n int64, stream uintptr) error {
	return check("cuMemcpyHtoDAsync_v2", a.call(a.cuMemcpyHtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream))
}

// memcpyDtoHAsync copies into pinned host memory (memAllocHost).
func (a *api) memcpyDtoHAsync(dst unsafe.Pointer, src uint64, n int64, stream uintptr) error {
	return check("cuMemcpyDtoHAsync_v2", a.call(a.cuMemcpyDtoHAsync, uintptr(dst), uintptr(src), uintptr(n), stream))
}

func (a *api) memcpyDtoDAsync(dst, src uint64, n int64, stream uintptr) error {
	return check("cuMemcpyDtoDAsync_v2", a.call(a.cuMemcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), stream))
}

// streamNonBlocking is CU_STREAM_NON_BLOCKING: the stream does not
// synchronise with the legacy default stream (and may be captured).
const streamNonBlocking = 1

func (a *api) streamCreate() (uintptr, error) {
	var s uintptr
	err := check("cuStreamCreate", a.call(a.cuStreamCreate, uintptr(unsafe.Pointer(&s)), streamNonBlocking))
	return s, err
}

func (a *api) streamDestroy(s uintptr) error {
	return check("cuStreamDestroy_v2", a.call(a.cuStreamDestroy, s))
}

// captureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED: a capture does not
// forbid other threads' unsafe calls. Goroutines change OS threads, so the
// thread-local and global modes' bookkeeping would not follow the caller.
const captureRelaxed = 2

func (a *api) streamBeginCapture(s uintptr) error {
	return check("cuStreamBeginCapture_v2", a.call(a.cuStreamBeginCapture, s, captureRelaxed))
}

func (a *api) streamEndCapture(s uintptr) (uintptr, error) {
	var g uintptr
	err := check("cuStreamEndCapture", a.call(a.cuStreamEndCapture, s, uintptr(unsafe.Pointer(&g))))
	return g, err
}

func (a *api) graphInstantiate(g uintptr) (uintptr, error) {
	var e uintptr
	err := check("cuGraphInstantiateWithFlags", a.call(a.cuGraphInstantiate, uintptr(unsafe.Pointer(&e)), g, 0))
	return e, err
}

func (a *api) graphLaunch(exec, s uintptr) error {
	return check("cuGraphLaunch", a.call(a.cuGraphLaunch, exec, s))
}

func (a *api) graphExecDestroy(exec uintptr) error {
	return check("cuGraphExecDestroy", a.call(a.cuGraphExecDestroy, exec))
}

func (a *api) graphDestroy(g uintptr) error {
	return check("cuGraphDestroy", a.call(a.cuGraphDestroy, g))
}

func (a *api) eventCreate() (uintptr, error) {
	var e uintptr
	err := check("cuEventCreate", a.call(a.cuEventCreate, uintptr(unsafe.Pointer(&e)), 0))
	return e, err
}

func (a *api) eventRecord(e, s uintptr) error {
	return check("cuEventRecord", a.call(a.cuEventRecord, e, s))
}

func (a *api) eventSynchronize(e uintptr) error {
	return check("cuEventSynchronize", a.call(a.cuEventSynchronize, e))
}

// eventElapsed is the time between two completed events, in milliseconds.
func (a *api) eventElapsed(start, end uintptr) (float32, error) {
	var ms float32
	err := check("cuEventElapsedTime", a.call(a.cuEventElapsedTime, uintptr(unsafe.Pointer(&ms)), start, end))
	return ms, err
}

func (a *api) eventDestroy(e uintptr) error {
	return check("cuEventDestroy_v2", a.call(a.cuEventDestroy, e))
}
