//go:build darwin

package metal

// The one layer that talks to Metal, through purego's objc package (no cgo).
// Everything here is a thin wrapper over one Objective-C message; the
// decisions (which buffers, which offsets, which grid) are made by the
// pure-Go planning in plan.go. NEVER RUN: written against Apple's Metal
// documentation and built and vetted for darwin/arm64 on Linux only.

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ebitengine/purego/objc"
)

// mtlSize is MTLSize (three NSUInteger).
type mtlSize struct{ Width, Height, Depth uint64 }

// nsRange is NSRange.
type nsRange struct{ Location, Length uint64 }

const (
	resourceStorageModeShared     = 0      // MTLResourceStorageModeShared
	resourceUsageReadWrite        = 1 | 2  // MTLResourceUsageRead | MTLResourceUsageWrite
	indirectCommandTypeConcurrent = 1 << 5 // MTLIndirectCommandTypeConcurrentDispatch
	commandBufferStatusCompleted  = 4      // MTLCommandBufferStatusCompleted
	pipelineOptionNone            = 0
)

var (
	loadOnce sync.Once
	loadErr  error

	mtlCreateSystemDefaultDevice func() objc.ID

	selAlloc                       = objc.RegisterName("alloc")
	selInit                        = objc.RegisterName("init")
	selRelease                     = objc.RegisterName("release")
	selStringWithUTF8String        = objc.RegisterName("stringWithUTF8String:")
	selUTF8String                  = objc.RegisterName("UTF8String")
	selLocalizedDescription        = objc.RegisterName("localizedDescription")
	selNewCommandQueue             = objc.RegisterName("newCommandQueue")
	selNewLibraryWithSource        = objc.RegisterName("newLibraryWithSource:options:error:")
	selNewFunctionWithName         = objc.RegisterName("newFunctionWithName:")
	selSetComputeFunction          = objc.RegisterName("setComputeFunction:")
	selSetSupportICB               = objc.RegisterName("setSupportIndirectCommandBuffers:")
	selNewComputePipelineWithDesc  = objc.RegisterName("newComputePipelineStateWithDescriptor:options:reflection:error:")
	selNewBufferWithLength         = objc.RegisterName("newBufferWithLength:options:")
	selNewBufferWithBytesNoCopy    = objc.RegisterName("newBufferWithBytesNoCopy:length:options:deallocator:")
	selContents                    = objc.RegisterName("contents")
	selMaxBufferLength             = objc.RegisterName("maxBufferLength")
	selCommandBuffer               = objc.RegisterName("commandBuffer")
	selComputeCommandEncoder       = objc.RegisterName("computeCommandEncoder")
	selSetComputePipelineState     = objc.RegisterName("setComputePipelineState:")
	selSetBufferOffsetAtIndex      = objc.RegisterName("setBuffer:offset:atIndex:")
	selDispatchThreadgroups        = objc.RegisterName("dispatchThreadgroups:threadsPerThreadgroup:")
	selEndEncoding                 = objc.RegisterName("endEncoding")
	selCommit                      = objc.RegisterName("commit")
	selWaitUntilCompleted          = objc.RegisterName("waitUntilCompleted")
	selStatus                      = objc.RegisterName("status")
	selError                       = objc.RegisterName("error")
	selSetCommandTypes             = objc.RegisterName("setCommandTypes:")
	selSetInheritBuffers           = objc.RegisterName("setInheritBuffers:")
	selSetInheritPipelineState     = objc.RegisterName("setInheritPipelineState:")
	selSetMaxKernelBufferBindCount = objc.RegisterName("setMaxKernelBufferBindCount:")
	selNewICB                      = objc.RegisterName("newIndirectCommandBufferWithDescriptor:maxCommandCount:options:")
	selIndirectComputeCommandAt    = objc.RegisterName("indirectComputeCommandAtIndex:")
	selSetKernelBuffer             = objc.RegisterName("setKernelBuffer:offset:atIndex:")
	selConcurrentDispatch          = objc.RegisterName("concurrentDispatchThreadgroups:threadsPerThreadgroup:")
	selSetBarrier                  = objc.RegisterName("setBarrier")
	selUseResource                 = objc.RegisterName("useResource:usage:")
	selExecuteCommandsInBuffer     = objc.RegisterName("executeCommandsInBuffer:withRange:")
)

// load opens Metal.framework and binds MTLCreateSystemDefaultDevice.
func load() error {
	loadOnce.Do(func() {
		h, err := purego.Dlopen("/System/Library/Frameworks/Metal.framework/Metal", purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			loadErr = fmt.Errorf("metal: loading Metal.framework: %w", err)
			return
		}
		// Foundation supplies NSString; Metal links it, but say so.
		if _, err := purego.Dlopen("/System/Library/Frameworks/Foundation.framework/Foundation", purego.RTLD_NOW|purego.RTLD_GLOBAL); err != nil {
			loadErr = fmt.Errorf("metal: loading Foundation.framework: %w", err)
			return
		}
		purego.RegisterLibFunc(&mtlCreateSystemDefaultDevice, h, "MTLCreateSystemDefaultDevice")
	})
	return loadErr
}

func nsString(s string) objc.ID {
	return objc.ID(objc.GetClass("NSString")).Send(selStringWithUTF8String, s)
}

// goString copies an NSString's UTF-8 bytes.
func goString(ns objc.ID) string {
	if ns == 0 {
		return ""
	}
	p := objc.Send[unsafe.Pointer](ns, selUTF8String) // a C string the NSString owns
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; ; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}

func nsError(what string, e objc.ID) error {
	if e == 0 {
		return fmt.Errorf("metal: %s failed", what)
	}
	return fmt.Errorf("metal: %s: %s", what, goString(e.Send(selLocalizedDescription)))
}

// device is the GPU and its command queue.
type device struct {
	dev, queue objc.ID
	maxBuffer  uintptr
}

func openDevice() (*device, error) {
	if err := load(); err != nil {
		return nil, err
	}
	d := mtlCreateSystemDefaultDevice()
	if d == 0 {
		return nil, errors.New("metal: no Metal device (MTLCreateSystemDefaultDevice returned nil)")
	}
	q := d.Send(selNewCommandQueue)
	if q == 0 {
		return nil, errors.New("metal: newCommandQueue failed")
	}
	return &device{dev: d, queue: q, maxBuffer: objc.Send[uintptr](d, selMaxBufferLength)}, nil
}

// pipelines are one compiled library's pipeline states by kernel name.
type pipelines struct {
	lib   objc.ID
	byFn  map[string]objc.ID
	icbOK bool
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*pipelines{} // pipelineKey → compiled library, for the process
)

// compileLibrary compiles source once per process (keyed by its hash) and
// builds a pipeline state for each named kernel, supporting indirect
// command buffers when icb is set.
func (d *device) compileLibrary(source string, kernels []string, icb bool) (*pipelines, error) {
	key := pipelineKey(source, icb)
	cacheMu.Lock()
	defer cacheMu.Unlock()
	p := cache[key]
	if p == nil {
		var errID objc.ID
		lib := d.dev.Send(selNewLibraryWithSource, nsString(source), objc.ID(0), unsafe.Pointer(&errID))
		if lib == 0 {
			return nil, nsError("compiling the MSL library", errID)
		}
		p = &pipelines{lib: lib, byFn: map[string]objc.ID{}, icbOK: icb}
		cache[key] = p
	}
	for _, name := range kernels {
		if p.byFn[name] != 0 {
			continue
		}
		fn := p.lib.Send(selNewFunctionWithName, nsString(name))
		if fn == 0 {
			return nil, fmt.Errorf("metal: the library has no kernel %s", name)
		}
		desc := objc.ID(objc.GetClass("MTLComputePipelineDescriptor")).Send(selAlloc).Send(selInit)
		desc.Send(selSetComputeFunction, fn)
		desc.Send(selSetSupportICB, icb)
		var errID objc.ID
		ps := d.dev.Send(selNewComputePipelineWithDesc, desc, uint64(pipelineOptionNone), objc.ID(0), unsafe.Pointer(&errID))
		desc.Send(selRelease)
		fn.Send(selRelease)
		if ps == 0 {
			return nil, nsError("pipeline "+name, errID)
		}
		p.byFn[name] = ps
	}
	return p, nil
}

// newBuffer allocates a shared-storage buffer of n bytes (zeroed by Metal).
func (d *device) newBuffer(n int64) (objc.ID, error) {
	b := d.dev.Send(selNewBufferWithLength, uint64(max(n, 16)), uint64(resourceStorageModeShared))
	if b == 0 {
		return 0, fmt.Errorf("metal: allocating a %d-byte buffer failed", n)
	}
	return b, nil
}

// wrap makes a shared buffer over [base, base+n) without a copy; base and
// n must be page multiples. It returns 0 where Metal refuses.
func (d *device) wrap(base, n uintptr) objc.ID {
	return d.dev.Send(selNewBufferWithBytesNoCopy, base, uint64(n), uint64(resourceStorageModeShared), objc.ID(0))
}

// contents is a buffer's CPU address (shared storage).
func contents(buf objc.ID) unsafe.Pointer {
	return objc.Send[unsafe.Pointer](buf, selContents) // memory Metal owns (or the wrapped mapping)
}

// bytesOf views n bytes of a buffer's contents from off.
func bytesOf(buf objc.ID, off, n int64) []byte {
	return unsafe.Slice((*byte)(unsafe.Add(contents(buf), off)), n)
}

// run encodes ds with one compute encoder in one command buffer, commits it
// and waits.
func (d *device) run(p *pipelines, bufs []objc.ID, ds []dispatch) error {
	cb := d.queue.Send(selCommandBuffer)
	enc := cb.Send(selComputeCommandEncoder)
	for _, x := range ds {
		enc.Send(selSetComputePipelineState, p.byFn[x.Kernel])
		for i, a := range x.Args {
			enc.Send(selSetBufferOffsetAtIndex, bufs[a.Buf], uint64(a.Offset), uint64(i))
		}
		enc.Send(selDispatchThreadgroups, mtlSize{x.Grid[0], x.Grid[1], x.Grid[2]}, mtlSize{x.Threads, 1, 1})
	}
	enc.Send(selEndEncoding)
	return d.commitWait(cb)
}

func (d *device) commitWait(cb objc.ID) error {
	cb.Send(selCommit)
	cb.Send(selWaitUntilCompleted)
	if st := objc.Send[uint64](cb, selStatus); st != commandBufferStatusCompleted {
		return nsError(fmt.Sprintf("command buffer (status %d)", st), cb.Send(selError))
	}
	return nil
}

// recordICB records ds once into an indirect command buffer, a barrier
// after every dispatch (each reads what the previous wrote).
func (d *device) recordICB(p *pipelines, bufs []objc.ID, ds []dispatch, maxBind int) (objc.ID, error) {
	desc := objc.ID(objc.GetClass("MTLIndirectCommandBufferDescriptor")).Send(selAlloc).Send(selInit)
	desc.Send(selSetCommandTypes, uint64(indirectCommandTypeConcurrent))
	desc.Send(selSetInheritBuffers, false)
	desc.Send(selSetInheritPipelineState, false)
	desc.Send(selSetMaxKernelBufferBindCount, uint64(maxBind))
	icb := d.dev.Send(selNewICB, desc, uint64(len(ds)), uint64(resourceStorageModeShared))
	desc.Send(selRelease)
	if icb == 0 {
		return 0, errors.New("metal: newIndirectCommandBufferWithDescriptor failed")
	}
	for i, x := range ds {
		cmd := icb.Send(selIndirectComputeCommandAt, uint64(i))
		cmd.Send(selSetComputePipelineState, p.byFn[x.Kernel])
		for j, a := range x.Args {
			cmd.Send(selSetKernelBuffer, bufs[a.Buf], uint64(a.Offset), uint64(j))
		}
		cmd.Send(selConcurrentDispatch, mtlSize{x.Grid[0], x.Grid[1], x.Grid[2]}, mtlSize{x.Threads, 1, 1})
		cmd.Send(selSetBarrier)
	}
	return icb, nil
}

// replay executes a recorded decode step: one encoder that declares every
// buffer resident and runs the indirect command buffer's n commands.
func (d *device) replay(icb objc.ID, n int, bufs []objc.ID) error {
	cb := d.queue.Send(selCommandBuffer)
	enc := cb.Send(selComputeCommandEncoder)
	for _, b := range bufs {
		enc.Send(selUseResource, b, uint64(resourceUsageReadWrite))
	}
	enc.Send(selExecuteCommandsInBuffer, icb, nsRange{0, uint64(n)})
	enc.Send(selEndEncoding)
	return d.commitWait(cb)
}

func release(id objc.ID) {
	if id != 0 {
		id.Send(selRelease)
	}
}
