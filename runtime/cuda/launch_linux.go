//go:build linux

package cuda

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sort"
	"sync"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/runtime"
)

// The kernel harness: one library's launches run once on the GPU over
// buffers the caller fills. It is the device half of the kernel tests
// (codegen/cuda's TestDeviceKernels holds every kernel against ir/eval on
// random inputs, as the emulation tests do on the CPU), not a serving path:
// a Program plans memory and replays graphs; this copies every buffer in
// and out around one step.

var (
	harnessOnce sync.Once
	harnessErr  error
	harness     struct {
		a *api
		deviceInfo
		launchM sync.Mutex // one case's launches at a time: a fault names its case
	}
)

// openHarness loads the driver (o's libraries) and creates the harness's
// context on device 0, once per process: the first call's libraries stay.
func openHarness(o runtime.Options) error {
	harnessOnce.Do(func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		a, err := load(o)
		if err == nil {
			harness.deviceInfo, err = a.openDevice()
		}
		harness.a, harnessErr = a, err
	})
	return harnessErr
}

// DeviceName loads the driver and NVRTC (o's libraries) and names device 0
// with its compute capability; the error says why there is no usable GPU
// (no driver, no device, too old a device).
func DeviceName(o runtime.Options) (string, error) {
	if err := openHarness(o); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (compute capability %d.%d)", harness.name, harness.major, harness.minor), nil
}

// RunLaunches compiles lib with NVRTC for device 0, runs the launches of a
// step of T tokens once, in order, over bufs — the bytes of every buffer the
// launches name, by graph value ID, the scratch under -1 — and copies every
// buffer back into bufs. Compilation runs concurrently across callers; the
// launches of one call run alone. The driver is the one DeviceName loaded.
func RunLaunches(lib *cudagen.Library, bufs map[int][]byte, T int) (err error) {
	if err := openHarness(runtime.Options{}); err != nil {
		return err
	}
	a := harness.a
	ptx, err := a.compilePTX(lib.Source, "kernels.cu", harness.major, harness.minor)
	if err != nil {
		return err
	}
	harness.launchM.Lock()
	defer harness.launchM.Unlock()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := a.ctxSetCurrent(harness.ctx); err != nil {
		return err
	}
	mod, err := a.moduleLoadData(ptx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.moduleUnload(mod)) }()
	stream, err := a.streamCreate()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, a.streamDestroy(stream)) }()

	ids := make([]int, 0, len(bufs))
	for id := range bufs {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	dev := map[int]uint64{}
	defer func() {
		for _, p := range dev {
			err = errors.Join(err, a.memFree(p))
		}
	}()
	for _, id := range ids {
		b := bufs[id]
		p, err := a.memAlloc(int64(max(len(b), 1)))
		if err != nil {
			return fmt.Errorf("%w: buffer %d (%d bytes)", err, id, len(b))
		}
		dev[id] = p
		if err := a.memcpyHtoD(p, b); err != nil {
			return err
		}
	}
	drv, err := a.driverVersion()
	if err != nil {
		return err
	}
	pdl := a.pdlSupported(harness.major, drv, lib.Source)
	fns := map[string]uintptr{}
	for _, l := range lib.Step(T) {
		f, ok := fns[l.Kernel]
		if !ok {
			if f, err = a.moduleGetFunction(mod, l.Kernel); err != nil {
				return err
			}
			fns[l.Kernel] = f
		}
		blk, err := newArgBlock(launchArgSizes(len(l.Args)))
		if err != nil {
			return err
		}
		for j, arg := range l.Args {
			p, ok := dev[arg.Value]
			if !ok {
				blk.free()
				return fmt.Errorf("cuda: kernel %s: argument %d names buffer %d, which the caller did not give", l.Kernel, j, arg.Value)
			}
			blk.setPtr(j, p)
		}
		blk.setU32(len(l.Args), uint32(T))
		grid := [3]uint32{uint32(l.Grid[0].Count(T)), uint32(l.Grid[1].Count(T)), uint32(l.Grid[2].Count(T))}
		lerr := a.launchKernel(f, grid, [3]uint32{uint32(l.Threads), 1, 1}, 0, stream, blk, pdl)
		if lerr == nil {
			// The block must outlive the launch's argument copy only, but a
			// synchronisation per launch also pins a fault on its kernel.
			lerr = a.streamSynchronize(stream)
		}
		blk.free()
		if lerr != nil {
			return fmt.Errorf("%w: kernel %s", lerr, l.Kernel)
		}
	}
	for _, id := range ids {
		if err := a.memcpyDtoH(bufs[id], dev[id]); err != nil {
			return err
		}
	}
	return nil
}
