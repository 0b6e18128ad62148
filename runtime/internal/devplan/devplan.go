// Package devplan is the pure-Go half of the GPU runtimes (runtime/metal,
// runtime/cuda): which device buffers a plan needs, where every graph value
// lives in them for a step of T tokens, what each kernel launch
// binds, how weights are grouped into page-aligned regions, and how values
// computed from weights alone are folded at load. None of it touches a
// device, so it is tested on every platform; a backend only allocates what
// this plans and issues what it lists.
//
// A backend plans its emitted library's launch schedule (codegen/sched)
// as it is.
package devplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/minerva-llm/minerva/codegen/sched"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/ir/fold"
)

// Launch is one launch of the schedule (codegen/sched, which both GPU
// emitters produce).
type Launch = sched.Launch

// BufKind says where a device buffer's contents come from.
type BufKind int

const (
	Weight  BufKind = iota // a model tensor
	Const                  // a value folded from weights at load (concat, folded gains)
	Input                  // a step input (tokens, pos): MaxT rows, written before each step
	State                  // a KV cache: Slots·Context rows, bound whole
	KVBase                 // the step's cache bases (sched.KVBase): MaxT int32, written before each step
	Arena                  // every activation, at the memory plan's offsets
	Scratch                // the split-KV / MoE scratch of the step
	TBuf                   // the 4-byte constant T (backends that bind T as a buffer)
)

// Buf is one device buffer.
type Buf struct {
	Kind  BufKind
	Value int    // the graph value it holds (weights, consts, inputs, states), else -1
	Name  string // the value's name, for errors
	Bytes int64  // its size
}

// Binding is a buffer and a byte offset, bound at one argument index.
type Binding struct {
	Buf    int
	Offset int64
}

// Dispatch is one kernel launch of a step with everything bound: the
// buffers in argument order (T's buffer last when the backend binds T as a
// buffer) and the grid.
type Dispatch struct {
	Kernel  string
	Args    []Binding
	Grid    [3]uint64
	Threads uint64
}

// Options are a layout's sizes and conventions.
type Options struct {
	Backend string // prefix of error messages: "metal", "cuda"
	MaxT    int    // tokens of the largest step (activation rows)
	Context int    // cache rows per slot
	Slots   int
	TBuffer bool // T is bound as a 4-byte buffer after the others (Metal); else it is a kernel argument
}

// Layout is a library's buffers and the map from graph values to them.
type Layout struct {
	Options
	G        *ir.Graph
	Launches []Launch
	Bufs     []Buf
	ByValue  map[int]int   // value ID → buffer (weights, consts, inputs, states)
	ArenaOff map[int]int64 // value ID → arena offset per token (activations)
	ArenaPT  int64         // arena bytes per token
	ScratchI int           // buffer index of the scratch, -1 if none
	KVBaseI  int           // buffer index of the cache bases, -1 if no launch binds them
	TBufI    int           // buffer index of T, -1 unless TBuffer
	StateRow map[int]int64 // state value ID → bytes per cache row
	Logits   int           // value ID of the logits output

	// WeightShift is, for a weight buffer the runtime placed inside a
	// larger region, the weight's offset in that region.
	WeightShift map[int]int64
}

func (l *Layout) errorf(format string, args ...any) error {
	return fmt.Errorf(l.Backend+": "+format, args...)
}

// ShiftWeights adds each bound weight's offset inside its region.
func (l *Layout) ShiftWeights(ds []Dispatch) {
	for i := range ds {
		for j, a := range ds[i].Args {
			ds[i].Args[j].Offset = a.Offset + l.WeightShift[a.Buf]
		}
	}
}

// RowBytes returns the bytes of one leading row of t (its shape without
// the first dimension), which must be the only symbolic dimension.
func RowBytes(t ir.Type) (int64, error) {
	n := int64(1)
	for _, d := range t.Shape[1:] {
		if !d.IsConst() {
			return 0, fmt.Errorf("%s: only the first dimension may be symbolic", t)
		}
		n *= d.N
	}
	return t.DType.RowBytes(n)
}

// Plan lays out launches (emitted from g) for o.
func Plan(g *ir.Graph, launches []Launch, o Options) (*Layout, error) {
	l := &Layout{Options: o, G: g, Launches: launches, ByValue: map[int]int{}, ArenaOff: map[int]int64{},
		ScratchI: -1, KVBaseI: -1, TBufI: -1, StateRow: map[int]int64{}, Logits: -1}
	if o.MaxT < 1 || o.Context < 1 || o.Slots < 1 {
		return nil, l.errorf("maxT %d, context %d, slots %d must be positive", o.MaxT, o.Context, o.Slots)
	}
	if int64(o.Context)*int64(o.Slots) > math.MaxInt32 {
		return nil, l.errorf("%d slots of %d rows: the cache bases are int32", o.Slots, o.Context)
	}
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	for _, out := range g.Outputs {
		if out.Name == "logits" {
			l.Logits = out.Value.ID
		}
	}
	if l.Logits < 0 {
		return nil, l.errorf("graph %s has no logits output", g.Name)
	}
	consts := ir.ConstValues(g)
	var scratchPT int64
	var private []*ir.Value // activations without an arena offset
	need := func(v *ir.Value) error {
		if _, ok := l.ByValue[v.ID]; ok {
			return nil
		}
		if _, ok := l.ArenaOff[v.ID]; ok {
			return nil
		}
		spec := Buf{Value: v.ID, Name: v.Name()}
		switch {
		case v.Op == ir.OpWeight || consts[v]:
			spec.Kind = Weight
			if v.Op != ir.OpWeight {
				spec.Kind = Const
			}
			shape, err := v.Type.Shape.Bind(nil)
			if err != nil {
				return l.errorf("weight %v: %w", v, err)
			}
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			if spec.Bytes, err = v.Type.DType.RowBytes(n); err != nil {
				return err
			}
		case v.Op == ir.OpInput:
			spec.Kind = Input
			rb, err := RowBytes(v.Type)
			if err != nil {
				return err
			}
			spec.Bytes = rb * int64(o.MaxT)
		case v.Op == ir.OpState:
			spec.Kind = State
			rb, err := RowBytes(v.Type)
			if err != nil {
				return err
			}
			l.StateRow[v.ID] = rb
			spec.Bytes = rb * int64(o.Context) * int64(o.Slots)
		default:
			if off, ok := v.Attrs["arena_offset"]; ok && g.Attrs.Int("arena_bytes_per_token", 0) > 0 {
				l.ArenaOff[v.ID] = toInt64(off)
				return nil
			}
			private = append(private, v)
			l.ArenaOff[v.ID] = -1 // placed after the planned arena below
			return nil
		}
		l.ByValue[v.ID] = len(l.Bufs)
		l.Bufs = append(l.Bufs, spec)
		return nil
	}
	for _, ln := range launches {
		state, bases := false, false
		for _, a := range ln.Args {
			switch a.Value {
			case sched.Scratch:
				scratchPT = max(scratchPT, a.ScratchPerToken)
				continue
			case sched.KVBase:
				if l.KVBaseI < 0 {
					l.KVBaseI = len(l.Bufs)
					l.Bufs = append(l.Bufs, Buf{Kind: KVBase, Value: -1, Name: "kvbase", Bytes: 4 * int64(o.MaxT)})
				}
				bases = true
				continue
			}
			v := byID[a.Value]
			if v == nil {
				return nil, l.errorf("launch %s binds unknown value %d", ln.Kernel, a.Value)
			}
			if v.Op == ir.OpReshape {
				return nil, l.errorf("launch %s binds reshape %v", ln.Kernel, v)
			}
			state = state || v.Op == ir.OpState
			if err := need(v); err != nil {
				return nil, err
			}
		}
		if state && !bases {
			// A library emitted before batched steps indexes each slot's
			// cache from its own binding; this layout binds the caches whole.
			return nil, l.errorf("kernel %s indexes a KV cache without the step's cache bases: the library predates batched steps, compile the plan again", ln.Kernel)
		}
	}
	if err := need(byID[l.Logits]); err != nil {
		return nil, err
	}
	// The planned arena, then private activations (values the memory plan
	// did not place), each 256-byte aligned per token.
	l.ArenaPT = g.Attrs.Int("arena_bytes_per_token", 0)
	sort.Slice(private, func(i, j int) bool { return private[i].ID < private[j].ID })
	for _, v := range private {
		rb, err := RowBytes(v.Type)
		if err != nil {
			return nil, err
		}
		off := AlignUp(l.ArenaPT, 256)
		l.ArenaOff[v.ID] = off
		l.ArenaPT = off + rb
	}
	if l.ArenaPT > 0 {
		l.Bufs = append(l.Bufs, Buf{Kind: Arena, Value: -1, Name: "arena", Bytes: l.ArenaPT * int64(o.MaxT)})
	}
	if scratchPT > 0 {
		l.ScratchI = len(l.Bufs)
		l.Bufs = append(l.Bufs, Buf{Kind: Scratch, Value: -1, Name: "scratch", Bytes: scratchPT * int64(o.MaxT)})
	}
	if o.TBuffer {
		l.TBufI = len(l.Bufs)
		l.Bufs = append(l.Bufs, Buf{Kind: TBuf, Value: -1, Name: "T", Bytes: 4})
	}
	return l, nil
}

func toInt64(a any) int64 {
	switch x := a.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}

// AlignUp rounds x up to a multiple of a.
func AlignUp(x, a int64) int64 { return (x + a - 1) / a * a }

// ArenaBuf is the index of the arena buffer, -1 if there is none.
func (l *Layout) ArenaBuf() int {
	for i, b := range l.Bufs {
		if b.Kind == Arena {
			return i
		}
	}
	return -1
}

// CacheBytes is the size of every KV cache of every slot.
func (l *Layout) CacheBytes() int64 {
	var n int64
	for _, b := range l.Bufs {
		if b.Kind == State {
			n += b.Bytes
		}
	}
	return n
}

// Bind resolves a value for a step of T tokens: a state is bound whole
// (every slot's rows; a kernel adds the row's cache base), an activation
// at T times its per-token arena offset (passes/memory.go).
func (l *Layout) Bind(id, T int) (Binding, error) {
	if b, ok := l.ByValue[id]; ok {
		return Binding{Buf: b}, nil
	}
	if o, ok := l.ArenaOff[id]; ok {
		return Binding{Buf: l.ArenaBuf(), Offset: int64(T) * o}, nil
	}
	return Binding{}, l.errorf("value %d has no buffer", id)
}

// Dispatches lists the step's launches for T tokens. They do not depend
// on the rows' slots: the caches are bound whole and each row's slot is
// its cache base (KVBases).
func (l *Layout) Dispatches(T int) ([]Dispatch, error) {
	if T < 1 || T > l.MaxT {
		return nil, l.errorf("step of %d tokens, the plan allows 1..%d", T, l.MaxT)
	}
	var out []Dispatch
	for _, ln := range l.Launches {
		if !ln.Runs(T) {
			continue
		}
		d := Dispatch{Kernel: ln.Kernel, Threads: uint64(ln.Threads)}
		for i, gd := range ln.Grid {
			n := gd.Count(T)
			if n < 1 || n > math.MaxUint32 {
				return nil, l.errorf("launch %s grid dimension %d is %d", ln.Kernel, i, n)
			}
			d.Grid[i] = uint64(n)
		}
		for _, a := range ln.Args {
			switch a.Value {
			case sched.Scratch:
				d.Args = append(d.Args, Binding{Buf: l.ScratchI})
				continue
			case sched.KVBase:
				d.Args = append(d.Args, Binding{Buf: l.KVBaseI})
				continue
			}
			b, err := l.Bind(a.Value, T)
			if err != nil {
				return nil, err
			}
			d.Args = append(d.Args, b)
		}
		if l.TBuffer {
			d.Args = append(d.Args, Binding{Buf: l.TBufI})
		}
		out = append(out, d)
	}
	return out, nil
}

// KVBases writes the cache base of each row of a step into dst (the
// KVBase buffer's contents, int32 per row): slot·Context for the slot of
// each row.
func (l *Layout) KVBases(dst []int32, slots []int32) {
	for i, s := range slots {
		dst[i] = s * int32(l.Context)
	}
}

// MaxBindings is the most buffers any launch binds (T's buffer included
// when it is one).
func (l *Layout) MaxBindings() int {
	n := 0
	for _, ln := range l.Launches {
		k := len(ln.Args)
		if l.TBuffer {
			k++
		}
		n = max(n, k)
	}
	return n
}

// Contents returns a function giving the bytes of a weight or of a value
// folded from weights (FoldConst), memoised, from w.
func Contents(w eval.Weights) func(v *ir.Value) ([]byte, error) {
	raw := map[int][]byte{}
	var get func(v *ir.Value) ([]byte, error)
	get = func(v *ir.Value) ([]byte, error) {
		if b, ok := raw[v.ID]; ok {
			return b, nil
		}
		var b []byte
		var err error
		if v.Op == ir.OpWeight {
			b, err = w.WeightBytes(v.Name())
		} else {
			args := make([][]byte, len(v.Args))
			for i, a := range v.Args {
				if args[i], err = get(a); err != nil {
					return nil, err
				}
			}
			b, err = FoldConst(v, args)
		}
		if err != nil {
			return nil, err
		}
		raw[v.ID] = b
		return b, nil
	}
	return get
}

// Span is a weight's bytes in memory: start address and length.
type Span struct {
	Addr, Len uintptr
}

// Region is a page-aligned range of memory wrapped as one buffer.
type Region struct {
	Base, Len uintptr
}

// Placement says where a weight lives: in region Region at Offset, or, with
// Region = -1, in a buffer of its own (copied).
type Placement struct {
	Region int
	Offset int64
}

// WeightRegions groups weight spans into page-aligned regions that a
// no-copy buffer can wrap: each span is widened to whole pages, spans whose
// pages overlap (tensors packed in one mapped file) share a region, and a
// region is closed before it would exceed maxLen (the device's largest
// buffer). A span that alone exceeds maxLen, or is empty, is placed in its
// own copied buffer (Region −1).
func WeightRegions(spans []Span, page, maxLen uintptr) ([]Region, []Placement) {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].Addr < spans[order[b]].Addr })
	var regs []Region
	pl := make([]Placement, len(spans))
	for _, i := range order {
		s := spans[i]
		lo := s.Addr &^ (page - 1)
		hi := (s.Addr + s.Len + page - 1) &^ (page - 1)
		if s.Len == 0 || hi-lo > maxLen {
			pl[i] = Placement{Region: -1}
			continue
		}
		if n := len(regs); n > 0 {
			r := &regs[n-1]
			if lo < r.Base+r.Len && max(hi, r.Base+r.Len)-r.Base <= maxLen {
				r.Len = max(hi, r.Base+r.Len) - r.Base
				pl[i] = Placement{Region: n - 1, Offset: int64(s.Addr - r.Base)}
				continue
			}
		}
		regs = append(regs, Region{Base: lo, Len: hi - lo})
		pl[i] = Placement{Region: len(regs) - 1, Offset: int64(s.Addr - lo)}
	}
	return regs, pl
}

// Chunks splits a step of n tokens into runs of at most maxT, in order: a
// prompt longer than the activation buffers runs as several steps, each
// attending to the cache rows the earlier ones wrote.
func Chunks(n, maxT int) [][2]int {
	var out [][2]int
	for i := 0; i < n; i += maxT {
		out = append(out, [2]int{i, min(n, i+maxT)})
	}
	return out
}

// FoldConst computes a value that depends on weights only (ir.ConstValues)
// from its operands' bytes, as ir/fold defines it for every backend.
func FoldConst(v *ir.Value, args [][]byte) ([]byte, error) { return fold.Bytes(v, args) }

// Check verifies the dispatches of a step of T tokens against the
// launches and the buffers: one dispatch per launch that runs at T, the
// launch's grid, T's buffer last when it is one, every value bound inside
// its buffer (offset plus the bytes the value takes at T and the context),
// states whole (every slot's rows) and the cache bases to their buffer.
// The tests run it over whole models; a backend may run it once per step
// size as an assertion.
func (l *Layout) Check(ds []Dispatch, T int) error {
	var step []Launch
	for _, ln := range l.Launches {
		if ln.Runs(T) {
			step = append(step, ln)
		}
	}
	if len(ds) != len(step) {
		return l.errorf("%d dispatches for %d launches at T = %d", len(ds), len(step), T)
	}
	byID := map[int]*ir.Value{}
	for _, v := range l.G.Values {
		byID[v.ID] = v
	}
	env := map[string]int64{"T": int64(T), "C": int64(l.Context)}
	for i, d := range ds {
		ln := step[i]
		if d.Kernel != ln.Kernel {
			return l.errorf("dispatch %d is %s, launch is %s", i, d.Kernel, ln.Kernel)
		}
		for j := range 3 {
			if d.Grid[j] != uint64(ln.Grid[j].Count(T)) {
				return l.errorf("%s: grid %v at T = %d", d.Kernel, d.Grid, T)
			}
		}
		want := len(ln.Args)
		if l.TBuffer {
			want++
			if last := d.Args[len(d.Args)-1]; last.Buf != l.TBufI || l.Bufs[last.Buf].Kind != TBuf {
				return l.errorf("%s: last binding %+v is not T", d.Kernel, last)
			}
		}
		if len(d.Args) != want {
			return l.errorf("%s: %d bindings for %d arguments", d.Kernel, len(d.Args), want)
		}
		for j, a := range ln.Args {
			b := d.Args[j]
			if b.Buf < 0 || b.Buf >= len(l.Bufs) {
				return l.errorf("%s arg %d: buffer %d", d.Kernel, j, b.Buf)
			}
			size := l.Bufs[b.Buf].Bytes
			var need int64
			switch a.Value {
			case sched.Scratch:
				need = a.ScratchPerToken * int64(T)
			case sched.KVBase:
				if b.Buf != l.KVBaseI {
					return l.errorf("%s arg %d: the cache bases bound to buffer %s", d.Kernel, j, l.Bufs[b.Buf].Name)
				}
				need = 4 * int64(T)
			default:
				v := byID[a.Value]
				shape, err := v.Type.Shape.Bind(env)
				if err != nil {
					return err
				}
				n := int64(1)
				for _, x := range shape {
					n *= x
				}
				if need, err = v.Type.DType.RowBytes(n); err != nil {
					return err
				}
				if v.Op == ir.OpState {
					if b.Offset != 0 {
						return l.errorf("%s: state %v at offset %d, not bound whole", d.Kernel, v, b.Offset)
					}
					need *= int64(l.Slots)
				}
			}
			if b.Offset < 0 || b.Offset+need > size {
				return l.errorf("%s arg %d (value %d) at T=%d: [%d, %d) outside buffer %s of %d bytes",
					d.Kernel, j, a.Value, T, b.Offset, b.Offset+need, l.Bufs[b.Buf].Name, size)
			}
		}
	}
	return nil
}

// DecodeLibrary decodes the kernels section of a plan (an emitted library,
// JSON) into lib, strictly: a field the library type lacks, trailing data
// or no kernel source is an error naming the backend. The section's bytes
// were checksummed when the plan was opened.
func DecodeLibrary(backend string, section []byte, lib any, source func() string) error {
	dec := json.NewDecoder(bytes.NewReader(section))
	dec.DisallowUnknownFields()
	if err := dec.Decode(lib); err != nil {
		return fmt.Errorf("%s: the plan's kernels section: %w", backend, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: the plan's kernels section has data after the library", backend)
	}
	if source() == "" {
		return fmt.Errorf("%s: the plan's kernels section holds no kernel source", backend)
	}
	return nil
}
