package metal

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
)

// The pure-Go logic of the runtime, tested where Metal does not exist.

func fusedGraph(t *testing.T, path string) *ir.Graph {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("model %s not available: %v", path, err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := passes.Pipeline()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := passes.Run(m.Graph, list, passes.Options{}); err != nil {
		t.Fatal(err)
	}
	return m.Graph
}

// TestLayoutBindsInBounds: for the golden llama and gpt-oss fixtures, at
// several step sizes and slots, every dispatch binds every value inside its
// buffer (offset + the bytes the value takes at T ≤ the buffer's size), the
// last binding is T, states are bound at their slot's rows, and the grids
// are the schedule's.
func TestLayoutBindsInBounds(t *testing.T) {
	for _, model := range []string{"stories260K.gguf", "synthetic/gptoss-g1-mxfp4.gguf"} {
		t.Run(model, func(t *testing.T) {
			g := fusedGraph(t, "../../../shared/models/gguf/"+model)
			lib, err := metal.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			const maxT, ctx, slots = 16, 64, 3
			l, err := planLayout(g, lib, maxT, ctx, slots)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[int]*ir.Value{}
			for _, v := range g.Values {
				byID[v.ID] = v
			}
			for _, T := range []int{1, 7, maxT} {
				for _, slot := range []int{0, slots - 1} {
					ds, err := l.dispatches(T, slot)
					if err != nil {
						t.Fatal(err)
					}
					step := lib.Step(T)
					if len(ds) != len(step) {
						t.Fatalf("%d dispatches for %d launches", len(ds), len(step))
					}
					for i, d := range ds {
						ln := step[i]
						if !ln.Runs(T) {
							t.Fatalf("%s (min_t %d, max_t %d) dispatched for T = %d", d.Kernel, ln.MinT, ln.MaxT, T)
						}
						if last := d.Args[len(d.Args)-1]; last.Buf != l.tBuf || l.bufs[last.Buf].Kind != bufT {
							t.Fatalf("%s: last binding %+v is not T", d.Kernel, last)
						}
						for j := range 3 {
							if d.Grid[j] != uint64(ln.Grid[j].Count(T)) {
								t.Fatalf("%s: grid %v", d.Kernel, d.Grid)
							}
						}
						for j, a := range ln.Args {
							b := d.Args[j]
							size := l.bufs[b.Buf].Bytes
							var need int64
							if a.Value < 0 {
								need = a.ScratchPerToken * int64(T)
							} else {
								v := byID[a.Value]
								env := map[string]int64{"T": int64(T), "C": ctx}
								shape, err := v.Type.Shape.Bind(env)
								if err != nil {
									t.Fatal(err)
								}
								n := int64(1)
								for _, x := range shape {
									n *= x
								}
								if need, err = v.Type.DType.RowBytes(n); err != nil {
									t.Fatal(err)
								}
								if v.Op == ir.OpState && b.Offset != int64(slot)*need {
									t.Fatalf("%s: state %v of slot %d at offset %d, want %d", d.Kernel, v, slot, b.Offset, int64(slot)*need)
								}
							}
							if b.Offset < 0 || b.Offset+need > size {
								t.Fatalf("%s arg %d (value %d) at T=%d: [%d, %d) outside buffer %s of %d bytes",
									d.Kernel, j, a.Value, T, b.Offset, b.Offset+need, l.bufs[b.Buf].Name, size)
							}
						}
					}
				}
			}
			if _, err := l.dispatches(maxT+1, 0); err == nil {
				t.Error("a step larger than maxT was accepted")
			}
			if _, err := l.dispatches(1, slots); err == nil {
				t.Error("a slot past the last was accepted")
			}
			if n := l.maxBindings(); n < 4 || n > 31 {
				t.Errorf("maxBindings %d: Metal allows 31 buffer arguments", n)
			}
		})
	}
}

func TestWeightRegions(t *testing.T) {
	const page = 16384
	spans := []span{
		{Addr: 5*page + 100, Len: 3 * page},    // pages 5..8
		{Addr: 8*page + 200, Len: 50},          // shares page 8: same region
		{Addr: 1*page + 0, Len: page},          // page 1 alone (sorted first)
		{Addr: 20 * page, Len: 0},              // empty: copied
		{Addr: 30*page + 8, Len: 10 * page},    // too large for maxLen: copied
		{Addr: 9*page + 64, Len: 10},           // page 9: touches but does not share; new region
		{Addr: 9*page + 96, Len: 4*page - 200}, // overlaps page 9..12
	}
	regs, pl := weightRegions(spans, page, 8*page)
	want := []region{{1 * page, page}, {5 * page, 4 * page}, {9 * page, 4 * page}}
	if len(regs) != len(want) {
		t.Fatalf("regions %v, want %v", regs, want)
	}
	for i := range want {
		if regs[i] != want[i] {
			t.Fatalf("regions %v, want %v", regs, want)
		}
	}
	for i, s := range spans {
		p := pl[i]
		if p.Region < 0 {
			if s.Len != 0 && s.Len <= 8*page-page {
				t.Errorf("span %d copied", i)
			}
			continue
		}
		r := regs[p.Region]
		if r.Base+uintptr(p.Offset) != s.Addr || s.Addr+s.Len > r.Base+r.Len || r.Base%page != 0 || r.Len%page != 0 {
			t.Errorf("span %d %+v placed %+v in %+v", i, s, p, r)
		}
	}
	if pl[3].Region != -1 || pl[4].Region != -1 {
		t.Errorf("empty or oversized spans not copied: %+v %+v", pl[3], pl[4])
	}
}

func TestPipelineKey(t *testing.T) {
	a, b := pipelineKey("kernel void f() {}", false), pipelineKey("kernel void f() {} ", false)
	if a == b || len(a) != 64 {
		t.Errorf("keys %q %q", a, b)
	}
	if a != pipelineKey("kernel void f() {}", false) {
		t.Error("key is not deterministic")
	}
	if pipelineKey("x", true) == pipelineKey("x", false) {
		t.Error("ICB and plain pipelines share a key")
	}
}

func TestChunks(t *testing.T) {
	got := chunks(10, 4)
	want := [][2]int{{0, 4}, {4, 8}, {8, 10}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if c := chunks(1, 4); len(c) != 1 || c[0] != [2]int{0, 1} {
		t.Errorf("%v", c)
	}
}

func TestFoldConst(t *testing.T) {
	b := ir.NewBuilder("fold")
	w := b.Weight("w", ir.Type{DType: ir.F32, Shape: ir.S(2, 3)})
	g := b.Weight("g", ir.Type{DType: ir.F32, Shape: ir.S(3)})
	m := b.Mul(w, g)
	f32 := func(xs ...float32) []byte {
		out := make([]byte, 4*len(xs))
		for i, x := range xs {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
		return out
	}
	got, err := foldConst(m, [][]byte{f32(1, 2, 3, 4, 5, 6), f32(10, 100, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(f32(10, 200, 3000, 40, 500, 6000)) {
		t.Errorf("mul folded to %v", got)
	}
	c := b.Add(ir.OpConcat, nil, nil, w, w)
	got, err = foldConst(c, [][]byte{f32(1, 2, 3, 4, 5, 6), f32(7, 8, 9, 10, 11, 12)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(f32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)) {
		t.Errorf("concat folded to %v", got)
	}
}

func TestShiftWeights(t *testing.T) {
	l := &layout{weightShift: map[int]int64{2: 4096}}
	ds := []dispatch{{Args: []binding{{Buf: 1, Offset: 8}, {Buf: 2, Offset: 0}, {Buf: 2, Offset: 16}}}}
	l.shiftWeights(ds)
	if got := ds[0].Args; got[0].Offset != 8 || got[1].Offset != 4096 || got[2].Offset != 4112 {
		t.Errorf("shifted bindings %+v", got)
	}
}
