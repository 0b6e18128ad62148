package devplan

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/minerva-llm/minerva/ir"
)

func TestWeightRegions(t *testing.T) {
	const page = 16384
	spans := []Span{
		{Addr: 5*page + 100, Len: 3 * page},    // pages 5..8
		{Addr: 8*page + 200, Len: 50},          // shares page 8: same region
		{Addr: 1*page + 0, Len: page},          // page 1 alone (sorted first)
		{Addr: 20 * page, Len: 0},              // empty: copied
		{Addr: 30*page + 8, Len: 10 * page},    // too large for maxLen: copied
		{Addr: 9*page + 64, Len: 10},           // page 9: touches but does not share; new region
		{Addr: 9*page + 96, Len: 4*page - 200}, // overlaps page 9..12
	}
	regs, pl := WeightRegions(spans, page, 8*page)
	want := []Region{{1 * page, page}, {5 * page, 4 * page}, {9 * page, 4 * page}}
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

func TestChunks(t *testing.T) {
	got := Chunks(10, 4)
	want := [][2]int{{0, 4}, {4, 8}, {8, 10}}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
	if c := Chunks(1, 4); len(c) != 1 || c[0] != [2]int{0, 1} {
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
	got, err := FoldConst(m, [][]byte{f32(1, 2, 3, 4, 5, 6), f32(10, 100, 1000)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(f32(10, 200, 3000, 40, 500, 6000)) {
		t.Errorf("mul folded to %v", got)
	}
	c := b.Add(ir.OpConcat, nil, nil, w, w)
	got, err = FoldConst(c, [][]byte{f32(1, 2, 3, 4, 5, 6), f32(7, 8, 9, 10, 11, 12)})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(f32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)) {
		t.Errorf("concat folded to %v", got)
	}
}

func TestShiftWeights(t *testing.T) {
	l := &Layout{WeightShift: map[int]int64{2: 4096}}
	ds := []Dispatch{{Args: []Binding{{Buf: 1, Offset: 8}, {Buf: 2, Offset: 0}, {Buf: 2, Offset: 16}}}}
	l.ShiftWeights(ds)
	if got := ds[0].Args; got[0].Offset != 8 || got[1].Offset != 4096 || got[2].Offset != 4112 {
		t.Errorf("shifted bindings %+v", got)
	}
}
