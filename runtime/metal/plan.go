package metal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sort"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// The pure-Go half of the runtime: which device buffers a plan needs, where
// every graph value lives in them for a step of T tokens and slot s, what
// each dispatch binds, and how the weights are wrapped. None of it touches
// Metal, so it is tested on every platform; the darwin layer (objc_darwin.go)
// only allocates what this plans and issues what it lists.

// bufKind says where a device buffer's contents come from.
type bufKind int

const (
	bufWeight  bufKind = iota // a model tensor (wrapped without a copy where alignment allows)
	bufConst                  // a value folded from weights at load (concat, folded gains)
	bufInput                  // a step input (tokens, pos): maxT rows, written before each step
	bufState                  // a KV cache: Slots·Context rows
	bufArena                  // every activation, at the memory plan's offsets
	bufScratch                // the split-KV / moe scratch of the step
	bufT                      // the 4-byte constant T
)

// bufSpec is one device buffer.
type bufSpec struct {
	Kind  bufKind
	Value int    // the graph value it holds (weights, consts, inputs, states), else -1
	Name  string // the value's name, for errors
	Bytes int64  // its size
}

// binding is a buffer and a byte offset, bound at one argument index.
type binding struct {
	Buf    int
	Offset int64
}

// dispatch is one kernel launch of a step with everything bound: the buffers
// in argument order (T's buffer last) and the grid.
type dispatch struct {
	Kernel  string
	Args    []binding
	Grid    [3]uint64
	Threads uint64
}

// layout is a library's buffers and the map from graph values to them.
type layout struct {
	lib      *metal.Library
	g        *ir.Graph
	bufs     []bufSpec
	byValue  map[int]int   // value ID → buffer (weights, consts, inputs, states)
	arenaOff map[int]int64 // value ID → arena offset per token (activations)
	arenaPT  int64         // arena bytes per token
	scratch  int           // buffer index of the scratch, -1 if none
	tBuf     int           // buffer index of T
	maxT     int
	ctx      int // cache rows per slot
	slots    int
	stateRow map[int]int64 // state value ID → bytes per cache row
	logits   int           // value ID of the logits output

	// weightShift is, for a weight buffer the runtime placed inside a
	// larger no-copy region, the weight's offset in that region.
	weightShift map[int]int64
}

// shiftWeights adds each bound weight's offset inside its no-copy region.
func (l *layout) shiftWeights(ds []dispatch) {
	for i := range ds {
		for j, a := range ds[i].Args {
			ds[i].Args[j].Offset = a.Offset + l.weightShift[a.Buf]
		}
	}
}

// bytesPer returns the bytes of one leading row of t (its shape without the
// first dimension) and whether the first dimension is symbolic.
func rowBytes(t ir.Type) (int64, error) {
	n := int64(1)
	for _, d := range t.Shape[1:] {
		if !d.IsConst() {
			return 0, fmt.Errorf("%s: only the first dimension may be symbolic", t)
		}
		n *= d.N
	}
	return t.DType.RowBytes(n)
}

// planLayout lays out lib (emitted from g) for steps of up to maxT tokens
// and cfg's slots of ctx rows.
func planLayout(g *ir.Graph, lib *metal.Library, maxT, ctx, slots int) (*layout, error) {
	if maxT < 1 || ctx < 1 || slots < 1 {
		return nil, fmt.Errorf("metal: maxT %d, context %d, slots %d must be positive", maxT, ctx, slots)
	}
	l := &layout{lib: lib, g: g, byValue: map[int]int{}, arenaOff: map[int]int64{}, scratch: -1,
		maxT: maxT, ctx: ctx, slots: slots, stateRow: map[int]int64{}, logits: -1}
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	for _, o := range g.Outputs {
		if o.Name == "logits" {
			l.logits = o.Value.ID
		}
	}
	if l.logits < 0 {
		return nil, fmt.Errorf("metal: graph %s has no logits output", g.Name)
	}
	consts := ir.ConstValues(g)
	var scratchPT int64
	var private []*ir.Value // activations without an arena offset
	need := func(v *ir.Value) error {
		if _, ok := l.byValue[v.ID]; ok {
			return nil
		}
		if _, ok := l.arenaOff[v.ID]; ok {
			return nil
		}
		spec := bufSpec{Value: v.ID, Name: v.Name()}
		switch {
		case v.Op == ir.OpWeight || consts[v]:
			spec.Kind = bufWeight
			if v.Op != ir.OpWeight {
				spec.Kind = bufConst
			}
			shape, err := v.Type.Shape.Bind(nil)
			if err != nil {
				return fmt.Errorf("metal: weight %v: %w", v, err)
			}
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			if spec.Bytes, err = v.Type.DType.RowBytes(n); err != nil {
				return err
			}
		case v.Op == ir.OpInput:
			spec.Kind = bufInput
			rb, err := rowBytes(v.Type)
			if err != nil {
				return err
			}
			spec.Bytes = rb * int64(maxT)
		case v.Op == ir.OpState:
			spec.Kind = bufState
			rb, err := rowBytes(v.Type)
			if err != nil {
				return err
			}
			l.stateRow[v.ID] = rb
			spec.Bytes = rb * int64(ctx) * int64(slots)
		default:
			if o, ok := v.Attrs["arena_offset"]; ok && g.Attrs.Int("arena_bytes_per_token", 0) > 0 {
				l.arenaOff[v.ID] = toInt64(o)
				return nil
			}
			private = append(private, v)
			l.arenaOff[v.ID] = -1 // placed after the planned arena below
			return nil
		}
		l.byValue[v.ID] = len(l.bufs)
		l.bufs = append(l.bufs, spec)
		return nil
	}
	for _, ln := range lib.Launches {
		for _, a := range ln.Args {
			if a.Value < 0 {
				scratchPT = max(scratchPT, a.ScratchPerToken)
				continue
			}
			v := byID[a.Value]
			if v == nil {
				return nil, fmt.Errorf("metal: launch %s binds unknown value %d", ln.Kernel, a.Value)
			}
			if v.Op == ir.OpReshape {
				return nil, fmt.Errorf("metal: launch %s binds reshape %v", ln.Kernel, v)
			}
			if err := need(v); err != nil {
				return nil, err
			}
		}
	}
	if lv := byID[l.logits]; lv != nil {
		if err := need(lv); err != nil {
			return nil, err
		}
	}
	// The planned arena, then private activations (values the memory plan
	// did not place), each 256-byte aligned per token.
	l.arenaPT = g.Attrs.Int("arena_bytes_per_token", 0)
	sort.Slice(private, func(i, j int) bool { return private[i].ID < private[j].ID })
	for _, v := range private {
		rb, err := rowBytes(v.Type)
		if err != nil {
			return nil, err
		}
		off := alignUp(l.arenaPT, 256)
		l.arenaOff[v.ID] = off
		l.arenaPT = off + rb
	}
	if l.arenaPT > 0 {
		l.bufs = append(l.bufs, bufSpec{Kind: bufArena, Value: -1, Name: "arena", Bytes: l.arenaPT * int64(maxT)})
	}
	if scratchPT > 0 {
		l.scratch = len(l.bufs)
		l.bufs = append(l.bufs, bufSpec{Kind: bufScratch, Value: -1, Name: "scratch", Bytes: scratchPT * int64(maxT)})
	}
	l.tBuf = len(l.bufs)
	l.bufs = append(l.bufs, bufSpec{Kind: bufT, Value: -1, Name: "T", Bytes: 4})
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

func alignUp(x, a int64) int64 { return (x + a - 1) / a * a }

// arenaBuf is the index of the arena buffer (it precedes the scratch and T).
func (l *layout) arenaBuf() int {
	for i, b := range l.bufs {
		if b.Kind == bufArena {
			return i
		}
	}
	return -1
}

// bind resolves a value for a step of T tokens in slot `slot`: a state is
// bound at its slot's first row, an activation at T times its per-token
// arena offset (passes/memory.go).
func (l *layout) bind(id, T, slot int) (binding, error) {
	if b, ok := l.byValue[id]; ok {
		var off int64
		if rb, ok := l.stateRow[id]; ok {
			off = int64(slot) * int64(l.ctx) * rb
		}
		return binding{Buf: b, Offset: off}, nil
	}
	if o, ok := l.arenaOff[id]; ok {
		return binding{Buf: l.arenaBuf(), Offset: int64(T) * o}, nil
	}
	return binding{}, fmt.Errorf("metal: value %d has no buffer", id)
}

// dispatches lists the step's launches for T tokens in slot `slot`.
func (l *layout) dispatches(T, slot int) ([]dispatch, error) {
	if T < 1 || T > l.maxT {
		return nil, fmt.Errorf("metal: step of %d tokens, the plan allows 1..%d", T, l.maxT)
	}
	if slot < 0 || slot >= l.slots {
		return nil, fmt.Errorf("metal: slot %d outside 0..%d", slot, l.slots-1)
	}
	step := l.lib.Step(T) // the matrix-vector or the tiled launch of each product
	out := make([]dispatch, 0, len(step))
	for _, ln := range step {
		d := dispatch{Kernel: ln.Kernel, Threads: uint64(ln.Threads)}
		for i, gd := range ln.Grid {
			n := gd.Count(T)
			if n < 1 || n > math.MaxUint32 {
				return nil, fmt.Errorf("metal: launch %s grid dimension %d is %d", ln.Kernel, i, n)
			}
			d.Grid[i] = uint64(n)
		}
		for _, a := range ln.Args {
			if a.Value < 0 {
				d.Args = append(d.Args, binding{Buf: l.scratch})
				continue
			}
			b, err := l.bind(a.Value, T, slot)
			if err != nil {
				return nil, err
			}
			d.Args = append(d.Args, b)
		}
		d.Args = append(d.Args, binding{Buf: l.tBuf})
		out = append(out, d)
	}
	return out, nil
}

// maxBindings is the most buffers any dispatch binds (an indirect command
// buffer's maxKernelBufferBindCount).
func (l *layout) maxBindings() int {
	n := 0
	for _, ln := range l.lib.Launches {
		n = max(n, len(ln.Args)+1)
	}
	return n
}

// pipelineKey names a compiled library in the process-wide cache: the
// SHA-256 of its source, and whether its pipelines support indirect
// command buffers (a pipeline property fixed at creation).
func pipelineKey(source string, icb bool) string {
	h := sha256.Sum256([]byte(source))
	k := hex.EncodeToString(h[:])
	if icb {
		k += "+icb"
	}
	return k
}

// span is a weight's bytes in memory: start address and length.
type span struct {
	Addr, Len uintptr
}

// region is a page-aligned range of memory wrapped as one no-copy buffer.
type region struct {
	Base, Len uintptr
}

// placement says where a weight lives: in region Region at Offset, or, with
// Region = -1, in a buffer of its own (copied).
type placement struct {
	Region int
	Offset int64
}

// weightRegions groups weight spans into page-aligned regions that
// newBufferWithBytesNoCopy can wrap: each span is widened to whole pages,
// spans whose pages overlap (tensors packed in one mapped file) share a
// region, and a region is closed before it would exceed maxLen (the
// device's maxBufferLength). A span that alone exceeds maxLen, or is empty,
// is placed in its own copied buffer (Region −1).
func weightRegions(spans []span, page, maxLen uintptr) ([]region, []placement) {
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return spans[order[a]].Addr < spans[order[b]].Addr })
	var regs []region
	pl := make([]placement, len(spans))
	for _, i := range order {
		s := spans[i]
		lo := s.Addr &^ (page - 1)
		hi := (s.Addr + s.Len + page - 1) &^ (page - 1)
		if s.Len == 0 || hi-lo > maxLen {
			pl[i] = placement{Region: -1}
			continue
		}
		if n := len(regs); n > 0 {
			r := &regs[n-1]
			if lo < r.Base+r.Len && max(hi, r.Base+r.Len)-r.Base <= maxLen {
				r.Len = max(hi, r.Base+r.Len) - r.Base
				pl[i] = placement{Region: n - 1, Offset: int64(s.Addr - r.Base)}
				continue
			}
		}
		regs = append(regs, region{Base: lo, Len: hi - lo})
		pl[i] = placement{Region: len(regs) - 1, Offset: int64(s.Addr - lo)}
	}
	return regs, pl
}

// chunks splits a step of n tokens into runs of at most maxT, in order:
// a prompt longer than the activation buffers runs as several steps, each
// attending to the cache rows the earlier ones wrote.
func chunks(n, maxT int) [][2]int {
	var out [][2]int
	for i := 0; i < n; i += maxT {
		out = append(out, [2]int{i, min(n, i+maxT)})
	}
	return out
}

// foldConst computes a value that depends on weights only (ir.ConstValues)
// from its operands' bytes, as the CPU backend does at load: a reshape
// shares its operand's bytes, a concatenation of one dtype concatenates
// bytes (whole rows are whole blocks), and mul/add (folded norm gains,
// b broadcast over a's leading rows) are computed in float32 into an f32
// result.
func foldConst(v *ir.Value, args [][]byte) ([]byte, error) {
	switch v.Op {
	case ir.OpReshape:
		return args[0], nil
	case ir.OpConcat:
		var out []byte
		for i, a := range v.Args {
			if a.Type.DType != v.Args[0].Type.DType {
				return nil, fmt.Errorf("metal: concat of %s and %s", v.Args[0].Type.DType, a.Type.DType)
			}
			out = append(out, args[i]...)
		}
		return out, nil
	case ir.OpMul, ir.OpAdd:
		fs := make([][]float32, 2)
		for i, a := range v.Args[:2] {
			shape, err := a.Type.Shape.Bind(nil)
			if err != nil {
				return nil, err
			}
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			fs[i] = make([]float32, n)
			if err := quant.Dequantize(a.Type.DType, args[i], fs[i]); err != nil {
				return nil, fmt.Errorf("metal: folding %v: %w", v, err)
			}
		}
		a, b := fs[0], fs[1]
		if len(b) == 0 || len(a)%len(b) != 0 {
			return nil, fmt.Errorf("metal: folding %v: %d elements by %d", v, len(a), len(b))
		}
		out := make([]byte, 4*len(a))
		for i, x := range a {
			y := b[i%len(b)]
			r := x * y
			if v.Op == ir.OpAdd {
				r = x + y
			}
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("metal: cannot fold %s at load", v.Op)
}
