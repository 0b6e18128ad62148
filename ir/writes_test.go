package ir

import "testing"

// The table of in-place writes: kvwrite writes its cache operand at pos,
// qkv_rope its two caches at pos; other ops write nothing.
func TestStateWrites(t *testing.T) {
	b := NewBuilder("w")
	x := b.Input("x", Type{DType: F32, Shape: S("T", 4)})
	pos := b.Input("pos", Type{DType: I32, Shape: S("T")})
	kc := b.State("cache.k", Type{DType: F32, Shape: S("C", 4)})
	kw := b.Add(OpKVWrite, nil, nil, kc, x, pos)
	if got := WrittenOperands(kw); len(got) != 1 || got[0] != kc || WritePos(kw) != pos || !WritesState(OpKVWrite) {
		t.Fatalf("kvwrite: writes %v at %v", got, WritePos(kw))
	}
	s := b.SiLU(x)
	if WrittenOperands(s) != nil || WritePos(s) != nil || WritesState(OpSiLU) {
		t.Fatal("silu writes a state")
	}
	q := &Value{Op: OpQKVRoPE, Args: []*Value{x, x, pos, kc, kw}}
	if got := WrittenOperands(q); len(got) != 2 || got[0] != kc || got[1] != kw || WritePos(q) != pos {
		t.Fatalf("qkv_rope: writes %v at %v", got, WritePos(q))
	}
}
