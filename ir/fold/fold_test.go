package fold_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/ir/fold"
	"github.com/minerva-llm/minerva/quant"
)

type weights map[string][]byte

func (w weights) WeightBytes(name string) ([]byte, error) {
	b, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("no weight %q", name)
	}
	return b, nil
}

// TestAgainstInterpreter folds a concatenation of quantized rows, a gain
// multiplied into a quantized matrix and a reshape, and compares each with
// the reference interpreter's value for it: the concatenation must decode
// to exactly the interpreter's floats, and the float32 arithmetic must
// match it bit for bit (both compute x·g in float32 from the same decoded
// operands).
func TestAgainstInterpreter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	w := weights{}
	b := ir.NewBuilder("fold")
	weight := func(name string, dt ir.DType, dims ...int64) *ir.Value {
		n := int64(1)
		for _, d := range dims {
			n *= d
		}
		f := make([]float32, n)
		for i := range f {
			f[i] = float32(rng.Float64()*2-1) + 1e-3
		}
		raw := make([]byte, must(dt.RowBytes(n)))
		if err := quant.Quantize(dt, f, raw); err != nil {
			t.Fatal(err)
		}
		w[name] = raw
		s := ir.Shape{}
		for _, d := range dims {
			s = append(s, ir.D(d))
		}
		return b.Weight(name, ir.Type{DType: dt, Shape: s})
	}
	q := weight("q", ir.Q4_0, 4, 64)
	k := weight("k", ir.Q4_0, 2, 64)
	gain := weight("gain", ir.F32, 64)
	cat := b.Add(ir.OpConcat, nil, nil, q, k)
	scaled := b.Mul(weight("m", ir.F32, 3, 64), weight("g16", ir.F16, 64))
	plus := b.Add(ir.OpAdd, nil, nil, weight("a", ir.F32, 2, 64), gain)
	flat := b.Reshape(cat, ir.S(6*64))
	for name, v := range map[string]*ir.Value{"cat": cat, "scaled": scaled, "plus": plus, "flat": flat} {
		b.Output(name, v)
	}
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	m, err := eval.New(g, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	folded := map[*ir.Value][]byte{}
	for _, v := range g.Values {
		if v.Op == ir.OpWeight {
			folded[v] = w[v.Name()]
			continue
		}
		if !fold.Supports(v.Op) {
			continue
		}
		args := make([][]byte, len(v.Args))
		for i, a := range v.Args {
			args[i] = folded[a]
		}
		if folded[v], err = fold.Bytes(v, args); err != nil {
			t.Fatalf("%v: %v", v, err)
		}
	}
	for _, o := range g.Outputs {
		dt := o.Value.Type.DType
		ref := want[o.Name].F32
		got := make([]float32, len(ref))
		if err := quant.Dequantize(dt, folded[o.Value], got); err != nil {
			t.Fatalf("%s: %v", o.Name, err)
		}
		for i := range ref {
			if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("%s[%d] = %v, interpreter %v", o.Name, i, got[i], ref[i])
			}
		}
	}
}

func TestErrors(t *testing.T) {
	b := ir.NewBuilder("bad")
	x := b.Weight("x", ir.Type{DType: ir.F32, Shape: ir.S(4)})
	y := b.Weight("y", ir.Type{DType: ir.F16, Shape: ir.S(4)})
	cat := b.Add(ir.OpConcat, nil, nil, x, y)
	if _, err := fold.Bytes(cat, [][]byte{make([]byte, 16), make([]byte, 8)}); err == nil {
		t.Error("concat of f32 and f16 folded")
	}
	if _, err := fold.Elementwise(ir.OpMul, make([]float32, 5), make([]float32, 2)); err == nil {
		t.Error("5 elements by 2 folded")
	}
	if _, err := fold.Elementwise(ir.OpSiLU, make([]float32, 4), make([]float32, 2)); err == nil {
		t.Error("silu folded elementwise")
	}
	if fold.Supports(ir.OpSiLU) || !fold.Supports(ir.OpConcat) {
		t.Error("Supports is wrong")
	}
}

func must(n int64, err error) int64 {
	if err != nil {
		panic(err)
	}
	return n
}
