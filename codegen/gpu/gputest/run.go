package gputest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/sched"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// Target is a language as the runner sees it: how it emits a library and
// which kernel families its schedule keeps apart.
type Target struct {
	Emit     func(*ir.Graph) (*gpu.Library, error)
	Schedule Schedule
	// RoundActivations names the weight dtypes whose products the target
	// computes with activations rounded to Q8_0, at every step size; the
	// reference (ir/eval) then rounds them too. Nil: none.
	RoundActivations func(w ir.DType) bool
}

// Schedule says which kernel families a step may run: a step of one token
// runs the matrix-vector kernels, a prefill step (T > 1) the tiled ones,
// never both.
type Schedule struct {
	// MatVec are the families only a step of one token may run.
	MatVec []string
	// Prefill are the families only a prefill step may run, besides every
	// family named *_tiled.
	Prefill []string
}

// Check returns an error naming the first launch of lib's step of T tokens
// that runs a family the schedule keeps out of that step.
func (s Schedule) Check(lib *gpu.Library, T int) error {
	family := map[string]string{}
	for _, k := range lib.Kernels {
		family[k.Name] = k.Family
	}
	for _, l := range lib.Step(T) {
		f := family[l.Kernel]
		prefill := strings.HasSuffix(f, "_tiled") || slices.Contains(s.Prefill, f)
		if T == 1 && prefill || T > 1 && slices.Contains(s.MatVec, f) {
			return fmt.Errorf("a step of %d tokens runs %s (%s)", T, l.Kernel, f)
		}
	}
	return nil
}

// Executor runs lib's launches for one step of T tokens over bufs (every
// buffer the launches name, by value ID; -1 the scratch) and returns the
// final bytes of every buffer that is not a weight, by value ID: on the CPU
// (Emulator.Run) or on a device.
type Executor func(t *testing.T, g *ir.Graph, lib *gpu.Library, bufs map[int][]byte, T int) map[int][]byte

// Emulate runs every case as a parallel subtest through run.
func (tg Target) Emulate(t *testing.T, cases []Case, run Executor) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			tg.Run(t, c, run)
		})
	}
}

// Run builds and emits c, checks the schedule of its step (and c.Check),
// runs the step through run and compares every output (KV-cache writes
// included) with ir/eval's, logging the error of each.
func (tg Target) Run(t *testing.T, c Case, run Executor) {
	t.Helper()
	g, w, inputs := c.Build(t)
	// eval ignores inputs the graph does not declare; drop them so that
	// both sides see the same set.
	used := map[string]eval.Tensor{}
	for _, v := range g.Values {
		if v.Op == ir.OpInput {
			used[v.Name()] = inputs[v.Name()]
		}
	}
	lib, err := tg.Emit(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.Schedule.Check(lib, c.T); err != nil {
		t.Error(err)
	}
	if c.Check != nil {
		c.Check(t, lib)
	}
	m, err := eval.New(g, w, int64(c.Ctx))
	if err != nil {
		t.Fatal(err)
	}
	m.RoundActivations = tg.RoundActivations
	want, err := m.Run(used)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, g, lib, StepBuffers(t, g, lib, w, used, c.Ctx, c.T, c.Slot), c.T)
	for _, o := range g.Outputs {
		ref := want[o.Name].F32
		b, ok := got[bufferOf(o.Value).ID]
		if !ok {
			t.Fatalf("output %s (%v) was never written by a launch", o.Name, o.Value)
		}
		if bufferOf(o.Value).Op == ir.OpState {
			b = slotRows(t, o.Name, b, c.Slot)
		}
		gotF := Floats(b, o.Value.Type.DType)
		var e float64
		if c.PerRow {
			e, err = RowRelErr(gotF, ref, int(o.Value.Type.Shape.Last().N))
		} else {
			e, err = RelErr(gotF, ref)
		}
		if err != nil {
			t.Fatalf("output %s: %v", o.Name, err)
		}
		t.Logf("output %s: max error %.3g of max |ref|%s (tolerance %.0e)", o.Name, e, map[bool]string{true: " per row"}[c.PerRow], c.Tol)
		if e > c.Tol {
			t.Errorf("output %s: max error %.3g of max |ref| > %.0e", o.Name, e, c.Tol)
		}
	}
}

// slotRows returns the rows of slot of a state's bytes (slot+1 slots of
// equal size), after checking that the other slots' rows are zero: a step
// of one slot writes into no other.
func slotRows(t *testing.T, name string, b []byte, slot int) []byte {
	t.Helper()
	n := len(b) / (slot + 1)
	for i, x := range b {
		if x != 0 && (i < slot*n || i >= (slot+1)*n) {
			t.Fatalf("output %s: byte %d, outside the rows of slot %d, was written", name, i, slot)
		}
	}
	return b[slot*n : (slot+1)*n]
}

// StepBuffers gives every buffer lib's launches name its contents for a
// step of T tokens of slot over a context of ctx: weights (copied) and
// inputs their bytes, everything else zeros, the states slot+1 slots of
// ctx rows; the scratch (sched.Scratch) and the cache bases (sched.KVBase,
// every row's slot·ctx) where a launch names them.
func StepBuffers(t *testing.T, g *ir.Graph, lib *gpu.Library, w WeightMap, inputs map[string]eval.Tensor, ctx, T, slot int) map[int][]byte {
	t.Helper()
	byID := ValuesByID(g)
	env := map[string]int64{"T": int64(T), "C": int64(ctx)}
	bufs := map[int][]byte{}
	scratch := int64(-1)
	for _, l := range lib.Launches {
		for _, a := range l.Args {
			switch a.Value {
			case sched.Scratch:
				scratch = max(scratch, a.ScratchPerToken*int64(T))
				continue
			case sched.KVBase:
				bufs[a.Value] = make([]byte, 4*T)
				for i := range T {
					binary.LittleEndian.PutUint32(bufs[a.Value][4*i:], uint32(slot*ctx))
				}
				continue
			}
			if _, ok := bufs[a.Value]; ok {
				continue
			}
			v := byID[a.Value]
			switch v.Op {
			case ir.OpWeight:
				bufs[v.ID] = append([]byte(nil), w[v.Name()]...)
			case ir.OpInput:
				in := inputs[v.Name()]
				var b bytes.Buffer
				if in.I32 != nil {
					binary.Write(&b, binary.LittleEndian, in.I32) //nolint:errcheck // bytes.Buffer
				} else {
					binary.Write(&b, binary.LittleEndian, in.F32) //nolint:errcheck
				}
				bufs[v.ID] = b.Bytes()
			default:
				shape, err := v.Type.Shape.Bind(env)
				if err != nil {
					t.Fatal(err)
				}
				n := int64(1)
				for _, d := range shape {
					n *= d
				}
				size := int64(4)
				if v.Type.DType == ir.F16 {
					size = 2
				}
				if v.Op == ir.OpState {
					n *= int64(slot + 1)
				}
				bufs[v.ID] = make([]byte, n*size)
			}
		}
	}
	if scratch >= 0 {
		bufs[sched.Scratch] = make([]byte, scratch)
	}
	return bufs
}

// ValuesByID indexes g's values by ID.
func ValuesByID(g *ir.Graph) map[int]*ir.Value {
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	return byID
}

// Floats decodes f32 (or f16) little-endian bytes.
func Floats(b []byte, dt ir.DType) []float32 {
	if dt == ir.F16 {
		out := make([]float32, len(b)/2)
		for i := range out {
			out[i] = quant.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
		return out
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// RelErr returns max|got − want| / max|want|, and an error for NaNs, a
// length mismatch or an all-zero reference (a test input that proves
// nothing).
func RelErr(got, want []float32) (float64, error) {
	if len(got) != len(want) {
		return 0, fmt.Errorf("%d values, want %d", len(got), len(want))
	}
	var maxDiff, maxRef float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return 0, fmt.Errorf("value %d is %v (want %v)", i, g, w)
		}
		maxDiff = max(maxDiff, math.Abs(g-w))
		maxRef = max(maxRef, math.Abs(w))
	}
	if maxRef == 0 {
		return 0, fmt.Errorf("the reference is all zeros")
	}
	return maxDiff / maxRef, nil
}

// RowRelErr is RelErr of every row of width w; it returns the largest.
func RowRelErr(got, want []float32, w int) (float64, error) {
	if len(got) != len(want) || w <= 0 || len(want)%w != 0 {
		return 0, fmt.Errorf("%d values, want %d in rows of %d", len(got), len(want), w)
	}
	var worst float64
	for i := 0; i < len(want); i += w {
		e, err := RelErr(got[i:i+w], want[i:i+w])
		if err != nil {
			return 0, fmt.Errorf("row %d: %v", i/w, err)
		}
		worst = max(worst, e)
	}
	return worst, nil
}

// bufferOf is the value whose buffer holds v, as the lowering binds it: a
// reshape's operand's, and the cache a kvwrite wrote into.
func bufferOf(v *ir.Value) *ir.Value {
	for v.Op == ir.OpKVWrite || v.Op == ir.OpReshape {
		v = v.Args[0]
	}
	return v
}
