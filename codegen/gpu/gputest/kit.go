// Package gputest is the test harness of the GPU languages, shared by the
// tests of codegen/cuda and codegen/metal and imported by nothing else: no
// production package may import it (it imports testing, the reference
// interpreter and the model loaders).
//
// It holds, once for every language:
//   - the graph kit: small graphs with random weights and inputs (never
//     exactly zero) from a PCG source per case (Kit, Rand, Seeds);
//   - the emulation case builders: matrix products, swiglu, qkv_rope (with
//     and without YaRN), attention, embeddings, row ops, topk_softmax and
//     moe, each a spec whose Case method builds one case, so that every
//     language lists the cases it wants and keeps its own seeds (cases.go);
//   - the runner: a step's buffers, the launch schedule check, ir/eval as
//     the reference, and the error measure against it (run.go);
//   - the emulator: a generated C++ main that loads every buffer from a
//     file, runs the library's launches in order and writes the buffers
//     back, compiled with clang++ against the language's shim header,
//     which includes testdata/emuhost.h, the buffer files and binary16
//     conversions both shims use (emulator.go);
//   - the golden files: fixture models through the pass pipeline to the
//     emitted source, compared with the language's testdata (golden.go).
//
// The language packages keep only what is theirs: which cases they run, the
// shim header, the launch statement and compiler flags of their emulation,
// and the checks no other language has.
package gputest

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/quant"
)

// WeightMap serves raw weight bytes by name (eval.Weights).
type WeightMap map[string][]byte

// WeightBytes returns the bytes of weight name.
func (w WeightMap) WeightBytes(name string) ([]byte, error) {
	b, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("no weight %q", name)
	}
	return b, nil
}

// Rand is the random source of one case: PCG(Seed, Stream).
type Rand struct{ Seed, Stream uint64 }

// Seeds hands out consecutive seeds on one PCG stream: each language keeps
// its own start and stream, so that its cases draw the inputs they always
// have.
type Seeds struct{ Last, Stream uint64 }

// Next returns the source of the next case.
func (s *Seeds) Next() Rand {
	s.Last++
	return Rand{s.Last, s.Stream}
}

// Kit builds a test graph with random weights.
type Kit struct {
	t   testing.TB
	B   *ir.Builder
	W   WeightMap
	rng *rand.Rand
}

// Kit returns a kit for a graph named name drawing from r.
func (r Rand) Kit(t testing.TB, name string) *Kit {
	return &Kit{t: t, B: ir.NewBuilder(name), W: WeightMap{}, rng: rand.New(rand.NewPCG(r.Seed, r.Stream))}
}

// Vals returns n random values in ±scale, never exactly zero.
func (k *Kit) Vals(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((k.rng.Float64()*2 - 1) * scale)
		if out[i] == 0 {
			out[i] = float32(scale) / 3
		}
	}
	return out
}

// Weight quantizes random values into a weight of dtype dt.
func (k *Kit) Weight(name string, dt ir.DType, scale float64, dims ...int) *ir.Value {
	k.t.Helper()
	n := 1
	shape := ir.Shape{}
	for _, d := range dims {
		n *= d
		shape = append(shape, ir.D(int64(d)))
	}
	nb, err := dt.RowBytes(int64(n))
	if err != nil {
		k.t.Fatal(err)
	}
	raw := make([]byte, nb)
	if err := quant.Quantize(dt, k.Vals(n, scale), raw); err != nil {
		k.t.Fatal(err)
	}
	k.W[name] = raw
	return k.B.Weight(name, ir.Type{DType: dt, Shape: shape})
}

// Gains is an f32 [n] weight of norm gains, 1 + 0.1·(a value in ±1).
func (k *Kit) Gains(name string, n int) *ir.Value {
	k.t.Helper()
	raw := make([]byte, 4*n)
	for i, v := range k.Vals(n, 1) {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(1+0.1*v))
	}
	k.W[name] = raw
	return k.B.Weight(name, ir.Type{DType: ir.F32, Shape: ir.S(n)})
}

// Finish declares out (as "out") and each state as outputs and finishes the
// graph.
func (k *Kit) Finish(out *ir.Value, states ...*ir.Value) *ir.Graph {
	k.t.Helper()
	k.B.Output("out", out)
	for _, s := range states {
		k.B.Output(s.Name(), s)
	}
	g, err := k.B.Finish()
	if err != nil {
		k.t.Fatal(err)
	}
	return g
}

// F32 is an f32 type of the given dimensions (ir.S's).
func F32(dims ...any) ir.Type { return ir.Type{DType: ir.F32, Shape: ir.S(dims...)} }

// Bit is a boolean attribute's value.
func Bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Tol is the tolerance of a product with weights of dtype dt, relative to
// the largest reference magnitude: 1e-5 for f32 weights, 1e-4 for the rest
// (the kernels multiply float activations by dequantized weights in
// float32, or activations rounded as Target.RoundActivations says, which
// the reference then rounds alike; the bound covers float32 against
// float64 accumulation).
func Tol(dt ir.DType) float64 {
	if dt == ir.F32 {
		return 1e-5
	}
	return 1e-4
}
