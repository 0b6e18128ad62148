//go:build linux

package cuda

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	cudagen "github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/runtime"
	"github.com/minerva-llm/minerva/runtime/internal/devplan"
)

// maxStepTokens bounds the activation arena: a longer prompt runs as
// several steps (devplan.Chunks). 512 covers the prefill the benchmarks
// time in one step.
const maxStepTokens = 512

// stagingBytes is the size of each of the two pinned buffers weights are
// uploaded through: one is filled while the other's copy runs.
const stagingBytes = 32 << 20

// deviceAlign aligns every buffer inside the two device allocations (the
// kernels' widest loads are 16 bytes; 256 matches cuMemAlloc's alignment).
const deviceAlign = 256

// program is a plan's library on the GPU:
//
//   - one device allocation holds every weight and load-time folded
//     constant, uploaded once through two pinned staging buffers;
//   - one device arena holds the step inputs (tokens, pos), the KV caches
//     of every slot, the activations (at the memory plan's per-token
//     offsets, scaled by T) and the split-KV/MoE scratch;
//   - each launch of the schedule has its own parameter block outside the
//     Go heap, rewritten before each launch (cuLaunchKernel copies the
//     values, and so does stream capture);
//   - a step writes tokens, positions and cache bases (each row's slot's
//     first cache row: the caches are bound whole, so one step carries rows
//     of several slots) into pinned memory, copies them in, runs its
//     launches on one stream, copies the logits rows asked for back into
//     pinned memory and synchronises once;
//   - the decode step (T = 1) is captured once as a CUDA graph — the input
//     copies, every launch, the logits copy — and replayed for every slot:
//     at T = 1 every pointer of every launch is fixed and the only thing
//     that changes between tokens is the contents of the pinned input
//     buffer, which the graph's copy nodes read at replay, so no kernel
//     parameter needs updating.
type program struct {
	mu    sync.Mutex
	cfg   runtime.ProgramConfig
	vocab int
	lib   *cudagen.Library
	l     *devplan.Layout
	a     *api

	ctx, stream, mod uintptr
	fns              []uintptr   // per launch of lib.Launches
	blocks           []*argBlock // per launch
	weights, arena   uint64      // the two device allocations
	addr             []uint64    // device address of each layout buffer
	inputs           map[string]int

	// host is pinned memory: tokens, positions and cache bases (MaxT int32
	// each), then the logits of a step (MaxT·vocab float32).
	host      unsafe.Pointer
	hostBytes int64

	graphs   map[output]uintptr // output → instantiated decode graph
	graphDef []uintptr          // the captured graphs, destroyed at Close

	// The greedy path: the library's argmax kernel, its parameter block,
	// and the device int32 it writes (in the arena allocation).
	argmaxFn    uintptr
	argmaxBlock *argBlock
	argmaxOut   uint64
	device      string
	closed      bool
	pdl         bool // launches allow programmatic stream serialization (api.pdlSupported)
}

// enter binds the calling goroutine to its OS thread and makes the
// program's context current there: a CUDA context is current per thread,
// and a goroutine may change threads between calls. leave undoes it.
func (pr *program) enter() error {
	goruntime.LockOSThread()
	if err := pr.a.ctxSetCurrent(pr.ctx); err != nil {
		goruntime.UnlockOSThread()
		return err
	}
	return nil
}

func (pr *program) leave() { goruntime.UnlockOSThread() }

func compile(g *ir.Graph, w eval.Weights, cfg runtime.ProgramConfig) (runtime.Program, error) {
	a, err := load(cfg.Options)
	if err != nil {
		return nil, err
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 1
	}
	if cfg.Context <= 0 {
		return nil, fmt.Errorf("cuda: context %d must be positive", cfg.Context)
	}
	lib, err := library(g, cfg.Kernels)
	if err != nil {
		return nil, err
	}
	l, err := planLayout(g, lib, min(maxStepTokens, cfg.Context), cfg.Context, cfg.Slots)
	if err != nil {
		return nil, err
	}
	pr := &program{cfg: cfg, lib: lib, l: l, a: a, inputs: map[string]int{}, graphs: map[output]uintptr{}}
	for _, v := range g.Values {
		if v.ID == l.Logits {
			pr.vocab = int(v.Type.Shape.Last().N)
		}
	}
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := pr.open(); err != nil {
		pr.release()
		return nil, err
	}
	if err := pr.allocate(g, w); err != nil {
		pr.release()
		return nil, err
	}
	return pr, nil
}

// open creates the context, stream and module (from the disk cache or
// NVRTC) and resolves every kernel. The caller holds its OS thread.
func (pr *program) open() error {
	a := pr.a
	d, err := a.openDevice()
	if err != nil {
		return err
	}
	pr.device, pr.ctx = d.name, d.ctx
	major, minor := d.major, d.minor
	if pr.stream, err = a.streamCreate(); err != nil {
		return err
	}
	drv, err := a.driverVersion()
	if err != nil {
		return err
	}
	pr.pdl = a.pdlSupported(major, drv, pr.lib.Source)
	cache := defaultModuleCache(pr.cfg.Options.CacheDir)
	key := cacheKey(pr.lib.Source, major, minor, drv)
	ptx, cached, err := cache.load(key)
	if err != nil {
		cached = false // an unreadable cache is a miss
	}
	if cached {
		pr.mod, err = a.moduleLoadData(ptx)
		if err != nil { // a stale or damaged entry: compile again
			cached = false
		}
	}
	if !cached {
		if ptx, err = a.compilePTX(pr.lib.Source, "minerva.cu", major, minor); err != nil {
			return err
		}
		if pr.mod, err = a.moduleLoadData(ptx); err != nil {
			return err
		}
		_ = cache.store(key, ptx) // best effort: the next load compiles again
	}
	byName := map[string]uintptr{}
	for _, ln := range pr.lib.Launches {
		f, ok := byName[ln.Kernel]
		if !ok {
			if f, err = a.moduleGetFunction(pr.mod, ln.Kernel); err != nil {
				return err
			}
			byName[ln.Kernel] = f
		}
		b, err := newArgBlock(launchArgSizes(len(ln.Args)))
		if err != nil {
			return err
		}
		pr.fns = append(pr.fns, f)
		pr.blocks = append(pr.blocks, b)
	}
	if am := pr.lib.Argmax; am != nil {
		if pr.argmaxFn, err = a.moduleGetFunction(pr.mod, am.Kernel); err != nil {
			return err
		}
		if pr.argmaxBlock, err = newArgBlock(launchArgSizes(2)); err != nil {
			return err
		}
	}
	return nil
}

// allocate places every layout buffer in the two device allocations,
// uploads the weights and folded constants, and zeroes the arena.
func (pr *program) allocate(g *ir.Graph, w eval.Weights) error {
	a, l := pr.a, pr.l
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	pr.addr = make([]uint64, len(l.Bufs))
	off := make([]int64, len(l.Bufs))
	var wBytes, aBytes int64
	for i, b := range l.Bufs {
		switch b.Kind {
		case devplan.Weight, devplan.Const:
			off[i] = wBytes
			wBytes = devplan.AlignUp(wBytes+b.Bytes, deviceAlign)
		default:
			off[i] = aBytes
			aBytes = devplan.AlignUp(aBytes+b.Bytes, deviceAlign)
			if b.Kind == devplan.Input {
				pr.inputs[b.Name] = i
			}
		}
	}
	argmaxAt := aBytes // the greedy token (one int32)
	aBytes += deviceAlign
	var err error
	if pr.weights, err = a.memAlloc(max(wBytes, deviceAlign)); err != nil {
		return fmt.Errorf("%w: %d bytes of weights", err, wBytes)
	}
	if pr.arena, err = a.memAlloc(max(aBytes, deviceAlign)); err != nil {
		return fmt.Errorf("%w: %d bytes of KV cache and activations", err, aBytes)
	}
	pr.argmaxOut = pr.arena + uint64(argmaxAt)
	for i, b := range l.Bufs {
		base := pr.arena
		if b.Kind == devplan.Weight || b.Kind == devplan.Const {
			base = pr.weights
		}
		pr.addr[i] = base + uint64(off[i])
	}
	pr.hostBytes = 12*int64(l.MaxT) + 4*int64(l.MaxT)*int64(pr.vocab) + 4
	if pr.host, err = a.memAllocHost(pr.hostBytes); err != nil {
		return err
	}
	if err := a.memsetD8Async(pr.arena, 0, max(aBytes, deviceAlign), pr.stream); err != nil {
		return err
	}
	if err := pr.upload(byID, w); err != nil {
		return err
	}
	return a.streamSynchronize(pr.stream)
}

// upload copies every weight and folded constant to the device through two
// pinned staging buffers: while one buffer's copy runs, the other is
// filled; an event per buffer says when it may be refilled.
func (pr *program) upload(byID map[int]*ir.Value, w eval.Weights) error {
	a := pr.a
	get := devplan.Contents(w)
	var total int64
	for _, b := range pr.l.Bufs {
		if b.Kind == devplan.Weight || b.Kind == devplan.Const {
			total += b.Bytes
		}
	}
	if total == 0 {
		return nil
	}
	chunk := min(int64(stagingBytes), total)
	var stage [2]unsafe.Pointer
	var done [2]uintptr
	var used [2]bool
	defer func() {
		for i := range stage {
			if stage[i] != nil {
				_ = a.streamSynchronize(pr.stream) // the copies read the staging buffers
				_ = a.memFreeHost(stage[i])
			}
			if done[i] != 0 {
				_ = a.eventDestroy(done[i])
			}
		}
	}()
	for i := range stage {
		var err error
		if stage[i], err = a.memAllocHost(chunk); err != nil {
			return err
		}
		if done[i], err = a.eventCreate(); err != nil {
			return err
		}
	}
	k := 0
	for i, b := range pr.l.Bufs {
		if b.Kind != devplan.Weight && b.Kind != devplan.Const {
			continue
		}
		src, err := get(byID[b.Value])
		if err != nil {
			return fmt.Errorf("cuda: %w", err)
		}
		if int64(len(src)) != b.Bytes {
			return fmt.Errorf("cuda: weight %s has %d bytes, want %d", b.Name, len(src), b.Bytes)
		}
		for at := int64(0); at < b.Bytes; at += chunk {
			n := min(chunk, b.Bytes-at)
			s := k % 2
			if used[s] {
				if err := a.eventSynchronize(done[s]); err != nil {
					return err
				}
			}
			copy(unsafe.Slice((*byte)(stage[s]), n), src[at:at+n])
			if err := a.memcpyHtoDAsync(pr.addr[i]+uint64(at), stage[s], n, pr.stream); err != nil {
				return err
			}
			if err := a.eventRecord(done[s], pr.stream); err != nil {
				return err
			}
			used[s] = true
			k++
		}
	}
	return nil
}

func (pr *program) Config() runtime.ProgramConfig { return pr.cfg }
func (pr *program) Device() string                { return pr.device }

// DeviceBandwidth times device-to-device copies of bytes between two
// scratch allocations with events and returns the best rate, counting the
// bytes read and the bytes written.
func (pr *program) DeviceBandwidth(bytes int64, runs int) (gbs float64, err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return 0, runtime.ErrClosed
	}
	if bytes < 1 || runs < 1 {
		return 0, fmt.Errorf("cuda: bandwidth of %d bytes over %d runs", bytes, runs)
	}
	if err := pr.enter(); err != nil {
		return 0, err
	}
	defer pr.leave()
	a := pr.a
	var bufs [2]uint64
	var ev [2]uintptr
	defer func() {
		for _, b := range bufs {
			if b != 0 {
				err = errors.Join(err, a.memFree(b))
			}
		}
		for _, e := range ev {
			if e != 0 {
				err = errors.Join(err, a.eventDestroy(e))
			}
		}
	}()
	for i := range bufs {
		if bufs[i], err = a.memAlloc(bytes); err != nil {
			return 0, err
		}
		if ev[i], err = a.eventCreate(); err != nil {
			return 0, err
		}
	}
	if err := a.memsetD8Async(bufs[0], 1, bytes, pr.stream); err != nil {
		return 0, err
	}
	best := float32(0)
	for r := 0; r <= runs; r++ { // run 0 warms up
		if err := a.eventRecord(ev[0], pr.stream); err != nil {
			return 0, err
		}
		if err := a.memcpyDtoDAsync(bufs[1], bufs[0], bytes, pr.stream); err != nil {
			return 0, err
		}
		if err := a.eventRecord(ev[1], pr.stream); err != nil {
			return 0, err
		}
		if err := a.eventSynchronize(ev[1]); err != nil {
			return 0, err
		}
		ms, err := a.eventElapsed(ev[0], ev[1])
		if err != nil {
			return 0, err
		}
		if r > 0 && ms > 0 && (best == 0 || ms < best) {
			best = ms
		}
	}
	if best == 0 {
		return 0, nil
	}
	return 2 * float64(bytes) / (float64(best) * 1e6), nil
}
func (pr *program) VocabSize() int    { return pr.vocab }
func (pr *program) CacheBytes() int64 { return pr.l.CacheBytes() }

// Step runs tokens in chunks of at most the layout's MaxT; a one-token step
// replays the decode graph.
func (pr *program) Step(slot int, tokens, pos []int32) ([][]float32, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil, runtime.ErrClosed
	}
	if err := runtime.CheckStep(pr.cfg, pr.vocab, slot, tokens, pos); err != nil {
		return nil, err
	}
	return pr.stepRows(runtime.Rows{Slots: sameSlot(slot, len(tokens)), Tokens: tokens, Pos: pos})
}

// StepRows runs rows of several slots in one step (runtime.BatchProgram):
// the weights are read once for all of them, each row writing and reading
// its own slot's cache rows through the step's cache bases. A step of more
// rows than the layout's MaxT runs in chunks, in order.
//
// Unlike the CPU backend's, a row's logits may differ in the last bits
// between a step of one row and a longer one: a step of one token runs the
// matrix-vector kernels, a longer one the tiled products.
func (pr *program) StepRows(r runtime.Rows) ([][]float32, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil, runtime.ErrClosed
	}
	if err := runtime.CheckRows(pr.cfg, pr.vocab, r); err != nil {
		return nil, err
	}
	return pr.stepRows(r)
}

func sameSlot(slot, n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(slot)
	}
	return s
}

// stepRows runs checked rows in chunks and returns the logits rows r.Logits
// names (every row when nil); a chunk copies back only the rows asked of
// it.
func (pr *program) stepRows(r runtime.Rows) ([][]float32, error) {
	if err := pr.enter(); err != nil {
		return nil, err
	}
	defer pr.leave()
	n := r.Len()
	want := r.Logits
	if want == nil {
		want = make([]int, n)
		for i := range want {
			want[i] = i
		}
	}
	out := make([][]float32, 0, len(want))
	k := 0 // the next entry of want
	for _, c := range devplan.Chunks(n, pr.l.MaxT) {
		var rows []int // rows of this chunk to copy back, relative to it
		for ; k < len(want) && want[k] < c[1]; k++ {
			rows = append(rows, want[k]-c[0])
		}
		pr.setInputs(r.Tokens[c[0]:c[1]], r.Pos[c[0]:c[1]], r.Slots[c[0]:c[1]])
		o := outLogits
		if len(rows) == 0 {
			o = outNone
		}
		if err := pr.run(c[1]-c[0], o, rows); err != nil {
			return nil, err
		}
		logits := pr.hostLogits()
		for _, t := range rows {
			out = append(out, append([]float32(nil), logits[t*pr.vocab:(t+1)*pr.vocab]...))
		}
	}
	return out, nil
}

// hostTokens, hostPos, hostBases and hostLogits are the pinned input and
// output areas.
func (pr *program) hostTokens() []int32 {
	return unsafe.Slice((*int32)(pr.host), pr.l.MaxT)
}

func (pr *program) hostPos() []int32 {
	return unsafe.Slice((*int32)(unsafe.Add(pr.host, 4*pr.l.MaxT)), pr.l.MaxT)
}

func (pr *program) hostBases() []int32 {
	return unsafe.Slice((*int32)(unsafe.Add(pr.host, 8*pr.l.MaxT)), pr.l.MaxT)
}

func (pr *program) hostLogits() []float32 {
	return unsafe.Slice((*float32)(unsafe.Add(pr.host, 12*pr.l.MaxT)), pr.l.MaxT*pr.vocab)
}

// hostGreedy is where the greedy token of a step lands.
func (pr *program) hostGreedy() *int32 {
	return (*int32)(unsafe.Add(pr.host, 12*pr.l.MaxT+4*pr.l.MaxT*pr.vocab))
}

// setInputs writes a step's tokens, positions and cache bases (from each
// row's slot) into pinned memory.
func (pr *program) setInputs(tokens, pos, slots []int32) {
	copy(pr.hostTokens(), tokens)
	copy(pr.hostPos(), pos)
	pr.l.KVBases(pr.hostBases(), slots)
}

// output says what a step copies back: logits rows, the greedy token of
// the last row (argmax on the device), or nothing (a chunk of a prompt
// whose later chunk gives the answer).
type output int

const (
	outLogits output = iota
	outGreedy
	outNone
)

// StepGreedy runs a step as Step does and returns the greedy token after
// the last one, computed on the device: only 4 bytes come back.
func (pr *program) StepGreedy(slot int, tokens, pos []int32) (int32, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return 0, runtime.ErrClosed
	}
	if err := runtime.CheckStep(pr.cfg, pr.vocab, slot, tokens, pos); err != nil {
		return 0, err
	}
	if pr.argmaxBlock == nil {
		return 0, fmt.Errorf("cuda: the library has no argmax kernel")
	}
	if err := pr.enter(); err != nil {
		return 0, err
	}
	defer pr.leave()
	cs := devplan.Chunks(len(tokens), pr.l.MaxT)
	slots := sameSlot(slot, len(tokens))
	for i, c := range cs {
		out := outNone
		if i == len(cs)-1 {
			out = outGreedy
		}
		pr.setInputs(tokens[c[0]:c[1]], pos[c[0]:c[1]], slots[c[0]:c[1]])
		if err := pr.run(c[1]-c[0], out, nil); err != nil {
			return 0, err
		}
	}
	return *pr.hostGreedy(), nil
}

// run issues a step of T tokens whose inputs are in pinned memory (a
// one-token step replays its decode graph) and waits for it. With
// outLogits it copies back the logits rows rows (nil: all T).
func (pr *program) run(T int, out output, rows []int) error {
	var err error
	if T == 1 {
		err = pr.replayDecode(out)
	} else {
		err = pr.enqueue(T, out, rows)
	}
	if err != nil {
		return err
	}
	return pr.a.streamSynchronize(pr.stream)
}

// launch issues launch i of the schedule as dispatched for a step of T
// tokens (d: its bound buffers and grid) on the stream, through the
// launch's parameter block.
func (pr *program) launch(i int, d devplan.Dispatch, T int) error {
	b := pr.blocks[i]
	for j, arg := range d.Args {
		b.setPtr(j, pr.addr[arg.Buf]+uint64(arg.Offset))
	}
	b.setU32(len(d.Args), uint32(T))
	grid := [3]uint32{uint32(d.Grid[0]), uint32(d.Grid[1]), uint32(d.Grid[2])}
	if err := pr.a.launchKernel(pr.fns[i], grid, [3]uint32{uint32(d.Threads), 1, 1}, 0, pr.stream, b, pr.pdl); err != nil {
		return fmt.Errorf("%w: kernel %s", err, d.Kernel)
	}
	return nil
}

// copyInputs enqueues the copies of the step's tokens, positions and cache
// bases (T of each) from pinned memory to the device.
func (pr *program) copyInputs(T int) error {
	for _, in := range [...]struct {
		buf int
		src unsafe.Pointer
	}{{pr.input("tokens"), pr.host}, {pr.input("pos"), unsafe.Add(pr.host, 4*pr.l.MaxT)}, {pr.l.KVBaseI, unsafe.Add(pr.host, 8*pr.l.MaxT)}} {
		if in.buf >= 0 {
			if err := pr.a.memcpyHtoDAsync(pr.addr[in.buf], in.src, int64(4*T), pr.stream); err != nil {
				return err
			}
		}
	}
	return nil
}

// input is the buffer of the step input name, -1 if the library reads
// none.
func (pr *program) input(name string) int {
	if i, ok := pr.inputs[name]; ok {
		return i
	}
	return -1
}

// enqueue issues one step of T tokens on the stream: the input copies from
// pinned memory, every launch, and the copy back of out (with outLogits,
// the rows rows, nil for all).
func (pr *program) enqueue(T int, out output, rows []int) error {
	a := pr.a
	if err := pr.copyInputs(T); err != nil {
		return err
	}
	ds, err := pr.l.Dispatches(T)
	if err != nil {
		return err
	}
	k := 0
	for i, ln := range pr.l.Launches {
		if !ln.Runs(T) {
			continue
		}
		if err := pr.launch(i, ds[k], T); err != nil {
			return err
		}
		k++
	}
	lb, err := pr.l.Bind(pr.l.Logits, T)
	if err != nil {
		return err
	}
	logits := pr.addr[lb.Buf] + uint64(lb.Offset)
	switch out {
	case outLogits:
		if rows == nil {
			return a.memcpyDtoHAsync(unsafe.Add(pr.host, 12*pr.l.MaxT), logits, int64(4*T*pr.vocab), pr.stream)
		}
		// One copy per run of consecutive rows, each to its row's place.
		row := int64(4 * pr.vocab)
		for i := 0; i < len(rows); {
			j := i + 1
			for j < len(rows) && rows[j] == rows[j-1]+1 {
				j++
			}
			at := int64(rows[i]) * row
			if err := a.memcpyDtoHAsync(unsafe.Add(pr.host, 12*int64(pr.l.MaxT)+at), logits+uint64(at), int64(j-i)*row, pr.stream); err != nil {
				return err
			}
			i = j
		}
		return nil
	case outGreedy:
		// argmax over the last row only: one block, T = 1.
		b := pr.argmaxBlock
		b.setPtr(0, logits+uint64(4*(T-1)*pr.vocab))
		b.setPtr(1, pr.argmaxOut)
		b.setU32(2, 1)
		if err := a.launchKernel(pr.argmaxFn, [3]uint32{1, 1, 1}, [3]uint32{uint32(pr.lib.Argmax.Threads), 1, 1}, 0, pr.stream, b, pr.pdl); err != nil {
			return fmt.Errorf("%w: kernel %s", err, pr.lib.Argmax.Kernel)
		}
		return a.memcpyDtoHAsync(unsafe.Pointer(pr.hostGreedy()), pr.argmaxOut, 4, pr.stream)
	}
	return nil
}

// replayDecode launches the decode graph for out, capturing it first. One
// graph serves every slot: the caches are bound whole and the row's slot
// is its cache base, an input the graph's copy node reads from pinned
// memory at replay.
func (pr *program) replayDecode(out output) error {
	exec, ok := pr.graphs[out]
	if !ok {
		a := pr.a
		if err := a.streamBeginCapture(pr.stream); err != nil {
			return err
		}
		qerr := pr.enqueue(1, out, nil)
		g, err := a.streamEndCapture(pr.stream)
		if qerr != nil {
			if g != 0 {
				_ = a.graphDestroy(g)
			}
			return qerr
		}
		if err != nil {
			return err
		}
		pr.graphDef = append(pr.graphDef, g)
		if exec, err = a.graphInstantiate(g); err != nil {
			return fmt.Errorf("%w (decode graph; current context %#x, the program's %#x)", err, a.ctxCurrent(), pr.ctx)
		}
		pr.graphs[out] = exec
	}
	return pr.a.graphLaunch(exec, pr.stream)
}

func (pr *program) ResetSlot(slot int) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return runtime.ErrClosed
	}
	if slot < 0 || slot >= pr.cfg.Slots {
		return fmt.Errorf("cuda: slot %d outside 0..%d", slot, pr.cfg.Slots-1)
	}
	if err := pr.enter(); err != nil {
		return err
	}
	defer pr.leave()
	for i, b := range pr.l.Bufs {
		if b.Kind == devplan.State {
			rb := pr.l.StateRow[b.Value] * int64(pr.cfg.Context)
			if err := pr.a.memsetD8Async(pr.addr[i]+uint64(int64(slot)*rb), 0, rb, pr.stream); err != nil {
				return err
			}
		}
	}
	return pr.a.streamSynchronize(pr.stream)
}

func (pr *program) Close() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil
	}
	pr.closed = true
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := pr.a.ctxSetCurrent(pr.ctx); err != nil {
		return err
	}
	return pr.release()
}

// release frees whatever exists, in reverse order of creation, and
// returns the first error. The caller holds its OS thread with the
// context current (or none created).
func (pr *program) release() error {
	a := pr.a
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if pr.stream != 0 {
		add(a.streamSynchronize(pr.stream))
	}
	for _, e := range pr.graphs {
		add(a.graphExecDestroy(e))
	}
	for _, g := range pr.graphDef {
		add(a.graphDestroy(g))
	}
	pr.graphs, pr.graphDef = nil, nil
	for _, b := range pr.blocks {
		add(b.free())
	}
	pr.blocks = nil
	if pr.argmaxBlock != nil {
		add(pr.argmaxBlock.free())
		pr.argmaxBlock = nil
	}
	if pr.host != nil {
		add(a.memFreeHost(pr.host))
		pr.host = nil
	}
	for _, p := range []*uint64{&pr.arena, &pr.weights} {
		if *p != 0 {
			add(a.memFree(*p))
			*p = 0
		}
	}
	if pr.mod != 0 {
		add(a.moduleUnload(pr.mod))
		pr.mod = 0
	}
	if pr.stream != 0 {
		add(a.streamDestroy(pr.stream))
		pr.stream = 0
	}
	if pr.ctx != 0 {
		add(a.ctxDestroy(pr.ctx))
		pr.ctx = 0
	}
	return errors.Join(errs...)
}

// KernelTimes runs a step of T tokens (runtime.KernelTimesStep: token 1
// at positions pos0..pos0+T-1) in slot runs+1 times, launch by launch with
// an event recorded between launches, and returns per kernel family the
// sum over its launches of each launch's best time (the first run warms
// up).
func (pr *program) KernelTimes(slot, pos0, T, runs int) (times []runtime.KernelTime, err error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.closed {
		return nil, runtime.ErrClosed
	}
	if T > pr.l.MaxT {
		return nil, fmt.Errorf("cuda: kernel times of %d tokens (the plan's steps have at most %d)", T, pr.l.MaxT)
	}
	tok, pos, err := runtime.KernelTimesStep(pr.cfg, slot, pos0, T, runs)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if err := pr.enter(); err != nil {
		return nil, err
	}
	defer pr.leave()
	a := pr.a
	var launches []int
	for i, ln := range pr.l.Launches {
		if ln.Runs(T) {
			launches = append(launches, i)
		}
	}
	ev := make([]uintptr, len(launches)+1)
	defer func() {
		for _, e := range ev {
			if e != 0 {
				err = errors.Join(err, a.eventDestroy(e))
			}
		}
	}()
	for i := range ev {
		if ev[i], err = a.eventCreate(); err != nil {
			return nil, err
		}
	}
	pr.setInputs(tok, pos, sameSlot(slot, T))
	if err := pr.copyInputs(T); err != nil {
		return nil, err
	}
	ds, err := pr.l.Dispatches(T)
	if err != nil {
		return nil, err
	}
	best := make([]float32, len(launches))
	for r := 0; r <= runs; r++ {
		if err := a.eventRecord(ev[0], pr.stream); err != nil {
			return nil, err
		}
		for k, i := range launches {
			if err := pr.launch(i, ds[k], T); err != nil {
				return nil, err
			}
			if err := a.eventRecord(ev[k+1], pr.stream); err != nil {
				return nil, err
			}
		}
		if err := a.eventSynchronize(ev[len(launches)]); err != nil {
			return nil, err
		}
		for k := range launches {
			ms, err := a.eventElapsed(ev[k], ev[k+1])
			if err != nil {
				return nil, err
			}
			if r > 0 && (best[k] == 0 || ms < best[k]) {
				best[k] = ms
			}
		}
	}
	family := map[string]string{}
	for _, k := range pr.lib.Kernels {
		family[k.Name] = k.Family
	}
	return runtime.SumKernelTimes(len(launches),
		func(k int) string { return family[pr.l.Launches[launches[k]].Kernel] },
		func(k int) float64 { return float64(best[k]) * 1e3 }), nil
}
