package passes

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

var update = flag.Bool("update", false, "rewrite testdata/passes/*/*.out.mir from the passes' output")

// randomWeights serves deterministic random bytes for every weight of a
// graph, seeded by the weight's name so that two graphs naming the same
// weight see the same values. Matrices are N(0, 1/K) for rows of K elements,
// the scale of trained weights, which keeps activations O(1) through a deep
// graph instead of growing with every matmul (a random graph whose
// activations grow is chaotic: any reordering of float32 work is amplified
// layer by layer). Norm-like 1-D weights are 1 + 0.1·N(0,1). Never zeros;
// quantized dtypes are encoded with quant.
type randomWeights map[string][]byte

func weightsFor(t testing.TB, graphs ...*ir.Graph) randomWeights {
	t.Helper()
	w := randomWeights{}
	for _, g := range graphs {
		for _, v := range g.Values {
			if v.Op != ir.OpWeight || w[v.Name()] != nil {
				continue
			}
			shape, err := v.Type.Shape.Bind(nil)
			require.NoError(t, err)
			n := int64(1)
			for _, d := range shape {
				n *= d
			}
			h := fnv.New64a()
			h.Write([]byte(v.Name()))
			rng := rand.New(rand.NewPCG(h.Sum64(), 7))
			vals := make([]float32, n)
			for i := range vals {
				if len(shape) == 1 {
					vals[i] = float32(1 + 0.1*rng.NormFloat64())
				} else {
					vals[i] = float32(rng.NormFloat64() / math.Sqrt(float64(shape[len(shape)-1])))
				}
			}
			size, err := v.Type.DType.RowBytes(n)
			require.NoError(t, err)
			buf := make([]byte, size)
			require.NoError(t, quant.Quantize(v.Type.DType, vals, buf), "weight %s", v.Name())
			w[v.Name()] = buf
		}
	}
	return w
}

func (w randomWeights) WeightBytes(name string) ([]byte, error) {
	b, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("no weight %q", name)
	}
	return b, nil
}

// step is one call of the graph: T tokens starting at position P.
type step struct{ P, T int }

// defaultSteps: a prefill of 5 tokens, then two decode steps, so that
// attention reads cache rows written by earlier steps.
var defaultSteps = []step{{0, 5}, {5, 1}, {6, 1}}

// randomInputs makes the inputs of one step: "pos" holds P..P+T-1; other i32
// inputs hold ids below the smallest embedding table they index; f32 inputs
// are N(0,1) (never zero), with a symbolic leading dim taken as T.
func randomInputs(t testing.TB, g *ir.Graph, s step, seed uint64) map[string]eval.Tensor {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, uint64(s.P)))
	limit := map[*ir.Value]int64{}
	for _, v := range g.Values {
		if v.Op == ir.OpEmbed {
			rows := v.Args[0].Type.Shape[0].N
			if l, ok := limit[v.Args[1]]; !ok || rows < l {
				limit[v.Args[1]] = rows
			}
		}
	}
	in := map[string]eval.Tensor{}
	for _, v := range g.Values {
		if v.Op != ir.OpInput {
			continue
		}
		shape, err := v.Type.Shape.Bind(map[string]int64{"T": int64(s.T)})
		require.NoError(t, err, "input %s", v.Name())
		x := eval.Tensor{Shape: shape}
		n := x.Len()
		switch {
		case v.Type.DType == ir.I32 && v.Name() == "pos":
			for i := 0; i < int(n); i++ {
				x.I32 = append(x.I32, int32(s.P+i))
			}
		case v.Type.DType == ir.I32:
			l := max(limit[v], 1)
			for i := 0; i < int(n); i++ {
				x.I32 = append(x.I32, int32(rng.Int64N(l)))
			}
		default:
			for i := 0; i < int(n); i++ {
				x.F32 = append(x.F32, float32(rng.NormFloat64()))
			}
		}
		in[v.Name()] = x
	}
	return in
}

// relErr is max|a−b| / max|ref|.
func relErr(got, ref []float32) float64 {
	var d, s float64
	for i := range ref {
		d = math.Max(d, math.Abs(float64(got[i])-float64(ref[i])))
		s = math.Max(s, math.Abs(float64(ref[i])))
	}
	if s == 0 {
		return d
	}
	return d / s
}

// requireSameMeaning runs both graphs on the same random weights and inputs
// over defaultSteps and requires every output and every final state buffer
// to agree within tol·max|ref|. It returns the largest difference.
//
//   - Both graphs get the inputs made for the original graph: randomInputs
//     draws ids input by input in graph order, so when dce removes an unused
//     i32 input that came before "tokens", the fused graph would otherwise
//     see other token ids and differ for no fault of its own.
//   - The outputs to compare are chosen by the original graph (every output
//     that is not a cache buffer there), so an output that a pass turned
//     into a cache buffer is a difference, not a skipped name.
func requireSameMeaning(t testing.TB, before, after *ir.Graph, tol float64, seed uint64) float64 {
	t.Helper()
	worst, where := compareResults(t, before, after, seed)
	require.LessOrEqualf(t, worst, tol, "%s differs by %.3g·max", where, worst)
	return worst
}

// compareResults runs both graphs as requireSameMeaning describes and returns
// the largest difference, relative to max|ref|, and where it is.
func compareResults(t testing.TB, before, after *ir.Graph, seed uint64) (float64, string) {
	t.Helper()
	var compared []string
	for _, o := range before.Outputs {
		// A kvwrite's result and a state are the cache buffer itself,
		// compared below as final state; qkv_rope's result is q.
		if o.Value.Op != ir.OpState && o.Value.Op != ir.OpKVWrite {
			compared = append(compared, o.Name)
		}
	}
	inputs := make([]map[string]eval.Tensor, len(defaultSteps))
	for i, s := range defaultSteps {
		inputs[i] = randomInputs(t, before, s, seed)
	}
	w := weightsFor(t, before, after)
	run := func(g *ir.Graph) ([]map[string][]float32, map[string][]float32) {
		m, err := eval.New(g, w, 16)
		require.NoError(t, err)
		var outs []map[string][]float32
		for i := range defaultSteps {
			res, err := m.Run(inputs[i])
			require.NoError(t, err)
			o := map[string][]float32{}
			for _, name := range compared {
				r, ok := res[name]
				require.True(t, ok, "output %q is missing", name)
				o[name] = append([]float32(nil), r.F32...)
			}
			outs = append(outs, o)
		}
		states := map[string][]float32{}
		for _, v := range g.Values {
			if v.Op == ir.OpState {
				states[v.Name()] = append([]float32(nil), m.State(v.Name()).F32...)
			}
		}
		return outs, states
	}
	o1, s1 := run(before)
	o2, s2 := run(after)
	worst, where := 0.0, ""
	for i := range o1 {
		for _, name := range compared {
			ref, got := o1[i][name], o2[i][name]
			for _, x := range ref {
				require.False(t, math.IsNaN(float64(x)) || math.IsInf(float64(x), 0), "step %d output %q of the original graph is not finite", i, name)
			}
			require.Len(t, got, len(ref), "step %d output %q", i, name)
			if e := relErr(got, ref); !(e <= worst) {
				worst, where = e, fmt.Sprintf("step %d output %q", i, name)
			}
		}
	}
	require.Equal(t, keys(s1), keys(s2), "state buffers")
	for name, ref := range s1 {
		if e := relErr(s2[name], ref); !(e <= worst) {
			worst, where = e, fmt.Sprintf("state %q", name)
		}
	}
	return worst, where
}

func keys(m map[string][]float32) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// goldenTol is the bound for golden-file cases: the fused graph must compute
// what the unfused one does up to float32 rounding in a different order.
const goldenTol = 1e-5

// TestGoldenPasses runs each pass on testdata/passes/<pass>/*.in.mir and
// compares the printed result with *.out.mir (go test ./passes -update
// rewrites them). Every case is also run on the interpreter before and after
// the pass, so a golden file cannot bless a rewrite that changes the meaning.
func TestGoldenPasses(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "testdata", "passes", "*"))
	require.NoError(t, err)
	for _, dir := range dirs {
		pass := filepath.Base(dir)
		p, ok := Lookup(pass)
		require.True(t, ok, "testdata/passes/%s names no registered pass", pass)
		ins, err := filepath.Glob(filepath.Join(dir, "*.in.mir"))
		require.NoError(t, err)
		require.NotEmpty(t, ins, "no cases in %s", dir)
		for _, in := range ins {
			name := strings.TrimSuffix(filepath.Base(in), ".in.mir")
			t.Run(pass+"/"+name, func(t *testing.T) {
				src, err := os.ReadFile(in)
				require.NoError(t, err)
				before, err := ir.Parse(string(src))
				require.NoError(t, err)
				g, err := ir.Parse(string(src))
				require.NoError(t, err)
				_, err = Run(g, []Pass{p}, Options{VerifyEach: true})
				require.NoError(t, err)
				got := ir.Print(g)
				outPath := strings.TrimSuffix(in, ".in.mir") + ".out.mir"
				if *update {
					require.NoError(t, os.WriteFile(outPath, []byte(got), 0o644))
				}
				want, err := os.ReadFile(outPath)
				require.NoError(t, err, "run go test ./passes -update to create it")
				require.Equal(t, string(want), got)
				requireSameMeaning(t, before, g, goldenTol, 1)
			})
		}
	}
}
