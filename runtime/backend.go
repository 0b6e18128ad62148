package runtime

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// A Backend turns a graph into something that runs on one kind of device:
// the reference interpreter now, CUDA, Metal and the Go-assembly CPU kernels
// later. Its life cycle is the one every device shares:
//
//	Compile   allocate the KV caches, upload (or dequantize) the weights,
//	          prepare the kernels for the graph's ops           → Program
//	Step      bind the symbolic dims (T from len(tokens), C from the
//	          config), upload tokens and positions, run the step,
//	          read the logits back
//	Close     free everything Compile allocated
//
// A backend sees nothing but an ir.Graph and its weights, so whatever the
// frontend or the pass pipeline produced (plain or fused graphs, f32 or f16
// caches) runs unchanged on every backend.
//
// The KV cache element type is the graph's: every state leaf declares its
// dtype (ir.F32, ir.F16 or ir.Q8_0), and a backend stores the cache in that
// type (the GPU backends refuse q8_0). To run a graph with other cache
// types, retype it first with WithCacheTypes.
// Keeping the type in the IR rather than in ProgramConfig means no backend
// ever has to reconcile a config field that disagrees with the graph it
// lowers, and a plan file records the cache type with the graph.
type Backend interface {
	// Name is the registry key ("reference").
	Name() string
	// Compile prepares graph g with weights w for cfg.Slots sequences of
	// cfg.Context positions each. Weights are read (uploaded) here, so a
	// missing or malformed tensor is a Compile error, and the weight source
	// may be released once Compile returns. g must not be modified while the
	// program is alive; Compile does not modify it.
	Compile(g *ir.Graph, w eval.Weights, cfg ProgramConfig) (Program, error)
}

// ProgramConfig sizes a program's KV caches.
type ProgramConfig struct {
	// Context is the number of positions (cache rows, the symbol C) of one
	// sequence. It comes from the caller: the plan or --ctx.
	Context int
	// Slots is the number of sequences the program holds at once; 0 means 1.
	// Every state is one contiguous buffer of Slots·Context rows, slot s
	// owning rows [s·Context, (s+1)·Context): the layout continuous batching
	// will step several slots through at once. Within a slot's part a
	// backend may order the elements as its kernels read them best (the
	// CPU backend keeps each KV head's rows together).
	Slots int
	// Options are the caller's settings of the backend (threads, kernel
	// variant, caches, libraries).
	Options Options
	// Kernels is the kernels section of the plan being run, for the
	// plan's target (a GPU backend's emitted library, JSON): the backend
	// runs it as stored. Nil when there is no plan (a model compiled in
	// memory): the backend emits the library from the graph itself.
	Kernels []byte
}

// Options are the settings a backend takes from its caller, never from the
// environment: cmd/minervac fills them from its flags (whose defaults read
// the MINERVA_* variables), a library user sets them. The zero value means
// each backend's defaults. Two programs with different Options can live in
// one process.
type Options struct {
	// Threads is the CPU backend's worker count; 0: the physical cores.
	Threads int
	// CPUKernels names the CPU kernel variant ("generic", "avx2", "avx512",
	// "neon"); "": the best this CPU runs.
	CPUKernels string
	// CacheDir holds compiled GPU modules (under cuda/); "": the user cache
	// directory's minerva folder.
	CacheDir string
	// CUDALib and NVRTCLib are the CUDA driver and NVRTC libraries to load;
	// "": the usual file names (libcuda.so.1, libnvrtc.so.13, …).
	CUDALib, NVRTCLib string
}

// Program is a graph compiled on a backend, with its weights resident and
// the KV caches of every slot allocated.
//
// Step must be safe to call from several goroutines for different slots (a
// backend may serialize them); steps of one slot must not overlap.
type Program interface {
	// Config returns the configuration the program was compiled with, with
	// defaults filled in (Slots ≥ 1).
	Config() ProgramConfig
	// VocabSize is the length of one logits row.
	VocabSize() int
	// CacheBytes is the storage the KV caches of all slots take on the
	// device, in bytes.
	CacheBytes() int64
	// Step runs tokens at positions pos (same length, at least 1) for
	// sequence slot `slot`: each token's keys and values are written into
	// row pos[i] of the slot's caches, and each token attends to the rows
	// ≤ its position. It returns the logits rows [len(tokens)][VocabSize()],
	// read back into memory the caller owns. Other slots are not touched.
	Step(slot int, tokens, pos []int32) ([][]float32, error)
	// ResetSlot clears the slot's cache rows, starting a new sequence there.
	ResetSlot(slot int) error
	// Close frees the program; later steps fail with ErrClosed. Closing
	// twice is not an error.
	Close() error
}

// Quiescer is implemented by programs whose worker threads keep polling
// for a while after a step (the CPU backend's, so that the next step finds
// them awake): Quiesce sends them to sleep at once, for a caller about to
// measure something their polling would take a core from (the bench's
// bandwidth probe between decode steps). The next step wakes them.
type Quiescer interface {
	Quiesce()
}

// Quiesce calls p's Quiesce when p is a Quiescer, and does nothing
// otherwise.
func Quiesce(p Program) {
	if q, ok := p.(Quiescer); ok {
		q.Quiesce()
	}
}

// GreedyProgram is implemented by programs that can pick the greedy token
// on the device: StepGreedy runs a step as Step does and returns the index
// of the largest logit of its last token (the smallest such index on a
// tie, as Argmax), without copying the logits back.
type GreedyProgram interface {
	StepGreedy(slot int, tokens, pos []int32) (int32, error)
}

// DeviceProgram is implemented by programs that run on an accelerator with
// memory of its own (the CUDA backend): benchmarks measure decode
// efficiency against that memory's bandwidth rather than the host's.
type DeviceProgram interface {
	// Device names the accelerator.
	Device() string
	// DeviceBandwidth measures the device's copy bandwidth in GB/s (1e9
	// bytes read plus written per second, the best of runs copies of
	// bytes).
	DeviceBandwidth(bytes int64, runs int) (float64, error)
}

// KernelTimer is a Program that can time its kernels: one step of T tokens
// at positions pos0..pos0+T-1 in a slot, each launch between two device
// events (a GPU) or each op between two clock readings (the CPU), the best
// of runs. A step at pos0 > 0 attends to the slot's first pos0 cache rows
// as they stand, so that a decode step is timed at the depth it runs at:
// its attention reads pos0+1 rows. The step writes the slot's KV cache at
// its positions; reset the slot before using it for text.
type KernelTimer interface {
	KernelTimes(slot, pos0, T, runs int) ([]KernelTime, error)
}

// KernelTime is what the launches of one kernel family took in a step.
type KernelTime struct {
	Family   string  `json:"family"`
	Launches int     `json:"launches"`
	Micros   float64 `json:"us"` // the family's launches together, per step
}

// KernelTimesStep checks a KernelTimes call against cfg and returns the
// step it times: token 1 at positions pos0..pos0+T-1. The arguments are
// checked before anything of size T is made.
func KernelTimesStep(cfg ProgramConfig, slot, pos0, T, runs int) (tokens, pos []int32, err error) {
	switch {
	case runs < 1:
		return nil, nil, fmt.Errorf("kernel times over %d runs (at least 1)", runs)
	case slot < 0 || slot >= cfg.Slots:
		return nil, nil, fmt.Errorf("kernel times in slot %d (the program has %d)", slot, cfg.Slots)
	case T < 1 || pos0 < 0 || pos0 > cfg.Context-T:
		return nil, nil, fmt.Errorf("kernel times of %d tokens at position %d (a context of %d)", T, pos0, cfg.Context)
	}
	tokens, pos = make([]int32, T), make([]int32, T)
	for i := range tokens {
		tokens[i], pos[i] = 1, int32(pos0+i)
	}
	return tokens, pos, nil
}

// SumKernelTimes adds up n timed launches (a GPU's) or ops (the CPU's) by
// family, the families in the order of their first launch: family(i) names
// launch i's family, micros(i) is its time.
func SumKernelTimes(n int, family func(i int) string, micros func(i int) float64) []KernelTime {
	var times []KernelTime
	at := map[string]int{}
	for i := range n {
		f := family(i)
		j, ok := at[f]
		if !ok {
			j = len(times)
			at[f] = j
			times = append(times, KernelTime{Family: f})
		}
		times[j].Launches++
		times[j].Micros += micros(i)
	}
	return times
}

// ErrClosed is returned by a Program (or a Session) used after Close.
var ErrClosed = errors.New("program is closed")

var (
	backendsMu sync.RWMutex
	backends   = map[string]Backend{}
)

// RegisterBackend makes b available under b.Name(). Backends register
// themselves from an init function; registering a name twice panics.
func RegisterBackend(b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	name := b.Name()
	if name == "" {
		panic("runtime: backend with an empty name")
	}
	if _, dup := backends[name]; dup {
		panic("runtime: backend " + name + " registered twice")
	}
	backends[name] = b
}

// Backends lists the registered backends, sorted by name.
func Backends() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupBackend returns the backend registered under name.
func LookupBackend(name string) (Backend, bool) {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	b, ok := backends[name]
	return b, ok
}

// DefaultBackend is the backend used when none is named.
const DefaultBackend = "reference"

// Signature is what a backend needs to know about a graph's interface,
// checked once by CheckGraph so that every backend rejects the same graphs
// with the same messages.
type Signature struct {
	VocabSize int
	// TokenLimit bounds the token ids: rows of the smallest table the
	// tokens input is embedded from (VocabSize when there is none).
	TokenLimit int
	// States lists the KV caches: state leaves of shape [C, Width].
	States []StateInfo
}

// StateInfo describes one state leaf.
type StateInfo struct {
	Name  string
	DType ir.DType // ir.F32, ir.F16 or ir.Q8_0
	Width int      // elements per cache row
}

// CheckGraph verifies that g can be stepped by a Program: it is a valid
// graph whose only inputs are "tokens" and "pos" (i32[T]), with an output
// "logits" of shape [T, n_vocab], whose states are [C, W] caches of f32,
// f16 or q8_0 (W a multiple of 32) written (by kvwrite or qkv_rope) at the
// rows given by "pos".
func CheckGraph(g *ir.Graph) (Signature, error) {
	var sig Signature
	if err := ir.Verify(g); err != nil {
		return sig, fmt.Errorf("invalid graph: %w", err)
	}
	out := g.Output("logits")
	if out == nil || len(out.Type.Shape) != 2 || out.Type.Shape[0] != ir.Sym("T") || !out.Type.Shape[1].IsConst() {
		return sig, fmt.Errorf("graph has no logits output of shape [T, n_vocab]")
	}
	sig.VocabSize = int(out.Type.Shape[1].N)
	sig.TokenLimit = sig.VocabSize
	var pos, tokens *ir.Value
	embeds := 0
	for _, v := range g.Values {
		switch v.Op {
		case ir.OpInput:
			name := v.Name()
			if name != "tokens" && name != "pos" {
				return sig, fmt.Errorf("graph input %q: a program is stepped with tokens and pos only", name)
			}
			if v.Type.DType != ir.I32 || !v.Type.Shape.Equal(ir.S("T")) {
				return sig, fmt.Errorf("graph input %q is %s, want i32[T]", name, v.Type)
			}
			if name == "pos" {
				pos = v
			} else {
				tokens = v
			}
		case ir.OpEmbed:
			if v.Args[1] == tokens && v.Args[0].Type.Shape[0].IsConst() {
				if n := int(v.Args[0].Type.Shape[0].N); embeds == 0 || n < sig.TokenLimit {
					sig.TokenLimit = n
				}
				embeds++
			}
		case ir.OpState:
			s := v.Type.Shape
			if len(s) != 2 || s[0] != ir.Sym("C") || !s[1].IsConst() {
				return sig, fmt.Errorf("state %q is %s, want [C, W]", v.Name(), v.Type)
			}
			if !ir.IsCacheType(v.Type.DType) {
				return sig, fmt.Errorf("state %q has dtype %s: KV caches are f32, f16 or q8_0", v.Name(), v.Type.DType)
			}
			if _, err := v.Type.DType.RowBytes(s[1].N); err != nil {
				return sig, fmt.Errorf("state %q: %w", v.Name(), err)
			}
			sig.States = append(sig.States, StateInfo{Name: v.Name(), DType: v.Type.DType, Width: int(s[1].N)})
		}
		if ir.WritesState(v.Op) {
			if at := ir.WritePos(v); at != pos || pos == nil {
				return sig, fmt.Errorf("%v (%s) writes the cache at rows other than the pos input", v, v.Op)
			}
		}
	}
	return sig, nil
}

// WithCacheType returns a copy of g whose KV caches (state leaves) have
// element type dt (ir.F32, ir.F16 or ir.Q8_0): WithCacheTypes(g, dt, dt).
func WithCacheType(g *ir.Graph, dt ir.DType) (*ir.Graph, error) {
	return WithCacheTypes(g, dt, dt)
}

// WithCacheTypes returns a copy of g whose key caches have element type kt
// and whose value caches (the states attention reads as values) have type
// vt, with the types of the values that depend on them inferred again.
// Values and attributes of g that do not change are shared with the copy; g
// itself is not modified. When every state already has its type, g itself
// is returned.
func WithCacheTypes(g *ir.Graph, kt, vt ir.DType) (*ir.Graph, error) {
	for _, dt := range []ir.DType{kt, vt} {
		if !ir.IsCacheType(dt) {
			return nil, fmt.Errorf("KV cache type %s is not f32, f16 or q8_0", dt)
		}
	}
	vals := ValueStates(g)
	typeOf := func(s *ir.Value) ir.DType {
		if vals[s] {
			return vt
		}
		return kt
	}
	same := true
	for _, s := range g.Values {
		if s.Op == ir.OpState && s.Type.DType != typeOf(s) {
			same = false
		}
	}
	if same {
		return g, nil
	}
	c := &ir.Graph{Name: g.Name, Attrs: g.Attrs, Values: make([]*ir.Value, len(g.Values))}
	m := make(map[*ir.Value]*ir.Value, len(g.Values))
	for i, v := range g.Values {
		nv := &ir.Value{ID: v.ID, Op: v.Op, Attrs: v.Attrs, Type: v.Type, Args: make([]*ir.Value, len(v.Args))}
		for j, a := range v.Args {
			if m[a] == nil {
				return nil, fmt.Errorf("%v (%s): operand is not defined before use", v, v.Op)
			}
			nv.Args[j] = m[a]
		}
		switch {
		case v.Op == ir.OpState:
			nv.Type.DType = typeOf(v)
		case v.Op.IsLeaf():
		case v.Op == ir.OpReshape:
			nv.Type.DType = nv.Args[0].Type.DType
		default:
			t, err := ir.Infer(v.Op, nv.Args, v.Attrs)
			if err != nil {
				return nil, fmt.Errorf("%v (%s) with %s/%s caches: %w", v, v.Op, kt, vt, err)
			}
			nv.Type = t
		}
		m[v] = nv
		c.Values[i] = nv
	}
	for _, o := range g.Outputs {
		c.Outputs = append(c.Outputs, ir.Output{Name: o.Name, Value: m[o.Value]})
	}
	if err := ir.Verify(c); err != nil {
		return nil, fmt.Errorf("graph with %s/%s caches: %w", kt, vt, err)
	}
	return c, nil
}

// ValueStates returns the state leaves that attention reads as values (its
// third operand, through kvwrite and reshape): the V caches. The other
// states are the K caches.
func ValueStates(g *ir.Graph) map[*ir.Value]bool {
	out := map[*ir.Value]bool{}
	for _, v := range g.Values {
		if v.Op != ir.OpAttention && v.Op != ir.OpFlashAttention {
			continue
		}
		a := v.Args[2]
		for a.Op != ir.OpState && len(a.Args) > 0 {
			a = a.Args[0]
		}
		if a.Op == ir.OpState {
			out[a] = true
		}
	}
	return out
}

// StatesBytes is the storage of the states at rows rows each (slots ×
// context), in their element types.
func StatesBytes(states []StateInfo, rows int) int64 {
	var n int64
	for _, st := range states {
		rb, _ := st.DType.RowBytes(int64(st.Width)) // CheckGraph checked it
		n += rb * int64(rows)
	}
	return n
}

// CacheTypeOf returns the element type of g's KV caches: the dtype its
// state leaves share (ir.F32 when it has none), or an error when they differ.
func CacheTypeOf(g *ir.Graph) (ir.DType, error) {
	dt, seen := ir.F32, false
	for _, v := range g.Values {
		if v.Op != ir.OpState {
			continue
		}
		if seen && v.Type.DType != dt {
			return 0, fmt.Errorf("the graph's states mix %s and %s", dt, v.Type.DType)
		}
		dt, seen = v.Type.DType, true
	}
	return dt, nil
}

// CheckStep validates the arguments of Program.Step; every backend calls it
// so that all reject bad slots, tokens and positions with the same errors.
func CheckStep(cfg ProgramConfig, tokenLimit, slot int, tokens, pos []int32) error {
	if slot < 0 || slot >= cfg.Slots {
		return fmt.Errorf("slot %d is out of range (the program has %d)", slot, cfg.Slots)
	}
	if len(tokens) == 0 {
		return fmt.Errorf("no tokens to evaluate")
	}
	if len(pos) != len(tokens) {
		return fmt.Errorf("%d tokens but %d positions", len(tokens), len(pos))
	}
	for i, id := range tokens {
		if id < 0 || int(id) >= tokenLimit {
			return fmt.Errorf("token %d (#%d) is outside the vocabulary of %d", id, i, tokenLimit)
		}
	}
	for i, p := range pos {
		if p < 0 || int(p) >= cfg.Context {
			return fmt.Errorf("%w: position %d (#%d) is outside the context of %d", ErrContextFull, p, i, cfg.Context)
		}
	}
	return nil
}
