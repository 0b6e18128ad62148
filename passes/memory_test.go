package passes

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
)

var memCases = []string{"chain", "diamond", "reshape-views", "inplace-illegal", "llama", "llama-fused"}

// memPlanned loads a plan-memory golden input and plans it.
func memPlanned(t *testing.T, name string) *ir.Graph {
	t.Helper()
	g := taLoadCase(t, "plan-memory", name)
	require.NoError(t, PlanMemory(g))
	require.NoError(t, ir.Verify(g))
	return g
}

// memByID returns the value with the given ID.
func memByID(t *testing.T, g *ir.Graph, id int) *ir.Value {
	t.Helper()
	for _, v := range g.Values {
		if v.ID == id {
			return v
		}
	}
	t.Fatalf("no value %%%d", id)
	return nil
}

// memSimulate executes the plan on a model of the arena, one tag per byte
// per token: every value that lives in the arena writes its own tag over its
// bytes when it is computed (a view writes nothing and carries its operand's
// tag), and every read of an operand, and every graph output at the end,
// must find exactly the operand's tag on all of its bytes. An op may write
// over an operand only when it is marked in place and that operand is its
// first (or holds the same bytes). This is the meaning of a correct plan,
// stated without liveness, so it checks CheckMemoryPlan as much as the pass.
func memSimulate(g *ir.Graph) error {
	acts, err := memActivations(g)
	if err != nil {
		return err
	}
	arena, ok := g.Attrs[memAttrArena].(int64)
	if !ok {
		return fmt.Errorf("no arena size")
	}
	mem := make([]int, arena)
	tag := map[*ir.Value]int{}
	span := map[*ir.Value][2]int64{}
	for _, v := range g.Values {
		if _, ok := acts[v]; !ok {
			continue
		}
		off, ok := v.Attrs[memAttrOffset].(int64)
		if !ok {
			return fmt.Errorf("%v has no offset", v)
		}
		if off < 0 || off+acts[v] > arena {
			return fmt.Errorf("%v [%d, %d) is outside the arena of %d", v, off, off+acts[v], arena)
		}
		span[v] = [2]int64{off, off + acts[v]}
	}
	holds := func(v *ir.Value) error {
		for b := span[v][0]; b < span[v][1]; b++ {
			if mem[b] != tag[v] {
				return fmt.Errorf("byte %d of %v was overwritten (tag %d, want %d)", b, v, mem[b], tag[v])
			}
		}
		return nil
	}
	for i, v := range g.Values {
		for _, a := range v.Args {
			if _, ok := span[a]; ok {
				if err := holds(a); err != nil {
					return fmt.Errorf("%v reads %v: %w", v, a, err)
				}
			}
		}
		s, ok := span[v]
		if !ok {
			continue
		}
		if v.Op == ir.OpReshape {
			if span[v] != span[v.Args[0]] {
				return fmt.Errorf("view %v is not at its operand's bytes", v)
			}
			tag[v] = tag[v.Args[0]]
			continue
		}
		inPlace := v.Attrs.Int(memAttrInPlace, 0) == 1
		for _, a := range v.Args {
			as, ok := span[a]
			if !ok || as[1] <= s[0] || s[1] <= as[0] || as[0] == as[1] || s[0] == s[1] {
				continue
			}
			if !inPlace || as != span[v.Args[0]] {
				return fmt.Errorf("%v writes over its operand %v without running in place on it", v, a)
			}
		}
		tag[v] = i + 1
		for b := s[0]; b < s[1]; b++ {
			mem[b] = tag[v]
		}
	}
	for _, o := range g.Outputs {
		if _, ok := span[o.Value]; ok {
			if err := holds(o.Value); err != nil {
				return fmt.Errorf("output %q: %w", o.Name, err)
			}
		}
	}
	return nil
}

// TestPlanMemoryCases: every golden case is planned, checked, simulated,
// stays valid, reaches the lower bound, and the pass is idempotent (also
// over a stale plan with wrong attributes).
func TestPlanMemoryCases(t *testing.T) {
	for _, name := range memCases {
		t.Run(name, func(t *testing.T) {
			g := memPlanned(t, name)
			require.NoError(t, CheckMemoryPlan(g))
			require.NoError(t, memSimulate(g))
			once := ir.Print(g)
			require.NoError(t, PlanMemory(g))
			require.Equal(t, once, ir.Print(g), "second run changed the plan")

			// A stale, wrong plan is replaced, not merged.
			for _, v := range g.Values {
				if !v.Op.IsLeaf() {
					memSetAttr(v, memAttrOffset, int64(4096))
					memSetAttr(v, memAttrInPlace, int64(1))
				}
			}
			g.Attrs[memAttrArena] = int64(1)
			require.NoError(t, PlanMemory(g))
			require.Equal(t, once, ir.Print(g), "a stale plan changed the result")

			arena, naive, lb := g.Attrs.Int(memAttrArena, -1), g.Attrs.Int(memAttrNaive, -1), g.Attrs.Int(memAttrLowerBound, -1)
			require.Equal(t, lb, arena, "arena above the lower bound")
			require.LessOrEqual(t, arena, naive)
			t.Logf("%s: arena %d, lower bound %d, naive %d bytes per token", name, arena, lb, naive)
		})
	}
}

// TestPlanMemoryWhatIsAnActivation: leaves, constants (merged weights),
// kvwrite results and the logits (sized by the rows a step asks for) get no
// offset; qkv_rope's q does; views share.
func TestPlanMemoryWhatIsAnActivation(t *testing.T) {
	g := memPlanned(t, "llama-fused")
	logits := g.Output("logits")
	require.NotNil(t, logits)
	for _, v := range g.Values {
		_, has := v.Attrs[memAttrOffset]
		switch {
		case v.Op == ir.OpInput, v.Op == ir.OpWeight, v.Op == ir.OpState, v.Op == ir.OpConcat, v == logits:
			require.False(t, has, "%v (%s) has an offset", v, v.Op)
		default:
			require.True(t, has, "%v (%s) has no offset", v, v.Op)
		}
	}
	g = memPlanned(t, "llama")
	for _, v := range g.Values {
		if v.Op == ir.OpKVWrite {
			require.NotContains(t, v.Attrs, memAttrOffset)
		}
	}
}

// TestPlanMemoryInPlace pins the in-place decisions the golden cases show.
func TestPlanMemoryInPlace(t *testing.T) {
	for _, c := range []struct {
		name     string
		inPlace  []int
		notPlace []int
	}{
		{"chain", []int{3, 5, 8, 9}, []int{2, 7}},
		{"diamond", []int{4, 5}, []int{3}},
		{"reshape-views", []int{7, 9}, []int{5}},
		{"inplace-illegal", []int{4, 7}, []int{3, 6}},
		{"llama", []int{12, 13, 21, 26, 29, 32, 34}, []int{5, 23}},
	} {
		g := memPlanned(t, c.name)
		for _, id := range c.inPlace {
			v := memByID(t, g, id)
			require.Equal(t, int64(1), v.Attrs.Int(memAttrInPlace, 0), "%s: %v should be in place", c.name, v)
			require.Equal(t, v.Args[0].Attrs[memAttrOffset], v.Attrs[memAttrOffset])
		}
		for _, id := range c.notPlace {
			v := memByID(t, g, id)
			require.NotContains(t, v.Attrs, memAttrInPlace, "%s: %v must not be in place", c.name, v)
			require.NotEqual(t, v.Args[0].Attrs[memAttrOffset], v.Attrs[memAttrOffset], "%s: %v", c.name, v)
		}
		for _, v := range g.Values {
			if v.Op == ir.OpReshape {
				require.Equal(t, v.Args[0].Attrs[memAttrOffset], v.Attrs[memAttrOffset], "%s: view %v", c.name, v)
			}
		}
	}
}

// TestPlanMemoryShapeErrors: a graph with an activation whose size is not T
// times a constant is left unplanned, the reason naming the value; a view of
// any shape is fine.
func TestPlanMemoryShapeErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`graph "g" {
  %0 = input {name = "x"} : f32[T, 8]
  %1 = reshape %0 : f32[2, T, 4]
  %2 = silu %1 : f32[2, T, 4]
  output "y" = %2
}`, "%2 (silu): type f32[2, T, 4] is not [T, n...]"},
		{`graph "g" {
  %0 = input {name = "x"} : f32[P, 8]
  %1 = silu %0 : f32[P, 8]
  output "y" = %1
}`, "%1 (silu): type f32[P, 8] is not [T, n...]"},
		{`graph "g" {
  %0 = input {name = "x"} : f32[T, 8]
  %1 = weight {name = "w"} : f32[8, 8]
  %2 = matmul %0, %1 : f32[T, 8]
  %3 = reshape %2 : f32[T, T]
  %4 = silu %3 : f32[T, T]
  output "y" = %4
}`, "%4 (silu): type f32[T, T] is not [T, n...]"},
	} {
		g, err := ir.Parse(c.src)
		if err != nil {
			// A shape the IR itself rejects is no case for the pass.
			require.Contains(t, c.want, "[T, T]", "%v", err)
			continue
		}
		// The pass leaves such a graph unplanned and says why; the checker,
		// asked about it, names the same value.
		require.NoError(t, PlanMemory(g))
		reason := g.Attrs.Str("memory_unplanned", "")
		require.Contains(t, reason, c.want)
		require.Contains(t, reason, "bytes per token")
		require.NotContains(t, g.Attrs, "arena_bytes_per_token")
		for _, v := range g.Values {
			require.NotContains(t, v.Attrs, "arena_offset")
		}
		require.ErrorContains(t, CheckMemoryPlan(g), c.want)
	}
	g, err := ir.Parse(`graph "g" {
  %0 = input {name = "x"} : f32[T, 8]
  %1 = weight {name = "w"} : f32[8, 8]
  %2 = matmul %0, %1 : f32[T, 8]
  %3 = reshape %2 : f32[2, T, 4]
  %4 = reshape %3 : f32[T, 8]
  %5 = silu %4 : f32[T, 8]
  %6 = reshape %0 : f32[2, T, 4]
  output "y" = %5
  output "view of an input" = %6
}`)
	require.NoError(t, err)
	require.NoError(t, PlanMemory(g))
	require.Equal(t, int64(0), memByID(t, g, 3).Attrs.Int(memAttrOffset, -1))
	require.NotContains(t, memByID(t, g, 6).Attrs, memAttrOffset, "a view of an input is not in the arena")
	require.Equal(t, int64(32), g.Attrs.Int(memAttrArena, 0))
}

// TestCheckMemoryPlanRejects: hand-corrupted plans are rejected, and the
// error names the values involved.
func TestCheckMemoryPlanRejects(t *testing.T) {
	cases := []struct {
		name    string
		graph   string
		corrupt func(t *testing.T, g *ir.Graph)
		want    []string
	}{
		{"two live buffers share bytes", "llama", func(t *testing.T, g *ir.Graph) {
			// v (%11, live 11–17) onto k's buffer (%9 live 9–13).
			memSetAttr(memByID(t, g, 11), memAttrOffset, int64(512))
		}, []string{"%9 (matmul)", "%11 (matmul)", "overlap while both are live"}},
		{"partial overlap", "llama", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 11), memAttrOffset, int64(700))
		}, []string{"%9 (matmul)", "%11 (matmul)", "overlap"}},
		{"result over a live operand", "chain", func(t *testing.T, g *ir.Graph) {
			// The second matmul writes over its own input, without in place.
			for _, id := range []int{7, 8, 9} {
				memSetAttr(memByID(t, g, id), memAttrOffset, int64(0))
			}
		}, []string{"%5 (add)", "%7 (matmul)", "overlap"}},
		{"offset past the arena", "diamond", func(t *testing.T, g *ir.Graph) {
			g.Attrs[memAttrArena] = int64(384)
		}, []string{"%3 (silu)", "past the end of the arena (384)"}},
		{"negative offset", "diamond", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 7), memAttrOffset, int64(-4))
		}, []string{"%7 (matmul)", "negative"}},
		{"missing offset", "llama-fused", func(t *testing.T, g *ir.Graph) {
			v := memByID(t, g, 12)
			a := memCloneAttrs(v.Attrs)
			delete(a, memAttrOffset)
			v.Attrs = a
		}, []string{"%12 (flash_attention) has no arena_offset"}},
		{"offset of the wrong kind", "chain", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 2), memAttrOffset, 0.0)
		}, []string{"%2 (matmul)", "(float64), not an int64"}},
		{"missing arena size", "chain", func(t *testing.T, g *ir.Graph) {
			delete(g.Attrs, memAttrArena)
		}, []string{"arena_bytes_per_token is missing"}},
		{"false in-place claim: operand used later", "diamond", func(t *testing.T, g *ir.Graph) {
			v := memByID(t, g, 3) // silu %2, but gelu %4 reads %2 afterwards
			memSetAttr(v, memAttrInPlace, int64(1))
			memSetAttr(v, memAttrOffset, int64(0))
		}, []string{"%3 (silu) claims to run in place on %2 (matmul)", "still used later by %4 (gelu)"}},
		{"false in-place claim: operand is an output", "inplace-illegal", func(t *testing.T, g *ir.Graph) {
			v := memByID(t, g, 6) // rmsnorm of %4, which is output "sum"
			memSetAttr(v, memAttrInPlace, int64(1))
			memSetAttr(v, memAttrOffset, int64(128))
			memSetAttr(memByID(t, g, 7), memAttrOffset, int64(128))
		}, []string{"%6 (rmsnorm) claims to run in place on %4 (add)", `output "sum"`}},
		{"false in-place claim: a view is used later", "reshape-views", func(t *testing.T, g *ir.Graph) {
			v := memByID(t, g, 5) // softmax of view %3 of %2; view %4 of %2 is read by %7
			memSetAttr(v, memAttrInPlace, int64(1))
			for _, id := range []int{5, 6, 7, 8, 9, 10} {
				memSetAttr(memByID(t, g, id), memAttrOffset, int64(0))
			}
		}, []string{"%5 (softmax) claims to run in place on %3 (reshape)", "%4 (reshape) shares its bytes", "%7 (add)"}},
		{"in-place claim at another offset", "chain", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 8), memAttrOffset, int64(0))
		}, []string{"%8 (gelu) claims to run in place on %7 (matmul) but has bytes [0, 128)"}},
		{"in-place claim by an op that cannot", "chain", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 7), memAttrInPlace, int64(1))
		}, []string{"%7 (matmul) claims to run in place"}},
		{"view away from its operand", "reshape-views", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 4), memAttrOffset, int64(256))
		}, []string{"%4 (reshape) is a view of %2 (matmul)"}},
		{"offset on a constant", "llama-fused", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 8), memAttrOffset, int64(0))
		}, []string{"%8 (concat) is not an activation"}},
		{"offset on a cache write", "llama", func(t *testing.T, g *ir.Graph) {
			memSetAttr(memByID(t, g, 15), memAttrOffset, int64(0))
		}, []string{"%15 (kvwrite) is not an activation"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := memPlanned(t, c.graph)
			require.NoError(t, CheckMemoryPlan(g))
			c.corrupt(t, g)
			err := CheckMemoryPlan(g)
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
			t.Log(err)
		})
	}
}

// memRandomGraph builds a random graph of [T, n] activations: matmuls,
// elementwise and row-wise ops, reshapes, values used several times, dead
// values and extra outputs, so that every in-place and view situation comes
// up.
func memRandomGraph(r *rand.Rand, id int) *ir.Graph {
	b := ir.NewBuilder(fmt.Sprintf("random%d", id))
	widths := []int{4, 8, 16, 32}
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	vals := []*ir.Value{b.Input("x", ir.Type{DType: ir.F32, Shape: ir.S("T", widths[r.IntN(4)])})}
	nw := 0
	weight := func(shape ...any) *ir.Value {
		nw++
		return b.Weight(fmt.Sprintf("w%d", nw), ir.Type{DType: ir.F32, Shape: ir.S(shape...)})
	}
	pick := func() *ir.Value {
		// Prefer recent values, so chains form, but reach back too.
		n := len(vals)
		if r.IntN(3) > 0 {
			return vals[max(0, n-1-r.IntN(min(n, 3)))]
		}
		return vals[r.IntN(n)]
	}
	width := func(v *ir.Value) int64 {
		n := int64(1)
		for _, d := range v.Type.Shape[1:] {
			n *= d.N
		}
		return n
	}
	flat := func(v *ir.Value) *ir.Value {
		if len(v.Type.Shape) == 2 {
			return v
		}
		return b.Reshape(v, ir.S("T", width(v)))
	}
	steps := 4 + r.IntN(24)
	for i := 0; i < steps; i++ {
		x := pick()
		var y *ir.Value
		switch r.IntN(9) {
		case 0, 1:
			x = flat(x)
			y = b.MatMul(x, weight(widths[r.IntN(4)], width(x)), nil)
		case 2:
			y = b.SiLU(x)
		case 3:
			y = b.Softmax(x)
		case 4:
			y = b.RMSNorm(x, nil, 1e-5)
		case 5, 6:
			// A partner of the same type, else a broadcast weight row.
			var z *ir.Value
			for _, c := range vals {
				if c.Type.Equal(x.Type) && r.IntN(2) == 0 {
					z = c
				}
			}
			if z == nil {
				z = weight(x.Type.Shape.Last().N)
			}
			if r.IntN(2) == 0 {
				y = b.AddV(x, z)
			} else {
				y = b.Mul(x, z)
			}
		case 7:
			x = flat(x)
			y = b.RoPE(x, pos, ir.Attrs{"head_dim": width(x), "n_rot": width(x), "base": 10000.0})
		case 8:
			if w := width(x); w%2 == 0 && len(x.Type.Shape) == 2 {
				y = b.Reshape(x, ir.S("T", 2, w/2))
			} else {
				y = b.Reshape(x, ir.S("T", width(x)))
			}
		}
		vals = append(vals, y)
	}
	b.Output("y", vals[len(vals)-1])
	for i := 0; i < r.IntN(3); i++ {
		b.Output(fmt.Sprintf("extra%d", i), vals[1+r.IntN(len(vals)-1)])
	}
	g, err := b.Finish()
	if err != nil {
		panic(err)
	}
	return g
}

// TestPlanMemoryRandom: on random graphs the plan passes the checker and
// the simulation, stays within [lower bound, naive]; and for random
// corruptions of it, whenever the simulation sees data destroyed the
// checker rejects the plan (the checker is never fooled).
func TestPlanMemoryRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 7))
	var arenaSum, lbSum, naiveSum int64
	rejectedSafe, caught := 0, 0
	for i := 0; i < 400; i++ {
		g := memRandomGraph(r, i)
		require.NoError(t, PlanMemory(g), "%s", ir.Print(g))
		require.NoError(t, memSimulate(g), "%s", ir.Print(g))
		arena, lb, naive := g.Attrs.Int(memAttrArena, 0), g.Attrs.Int(memAttrLowerBound, 0), g.Attrs.Int(memAttrNaive, 0)
		require.GreaterOrEqual(t, arena, lb)
		require.LessOrEqual(t, arena, naive)
		arenaSum, lbSum, naiveSum = arenaSum+arena, lbSum+lb, naiveSum+naive

		acts, err := memActivations(g)
		require.NoError(t, err)
		var list []*ir.Value
		for _, v := range g.Values {
			if _, ok := acts[v]; ok {
				list = append(list, v)
			}
		}
		if len(list) == 0 {
			continue
		}
		saved := map[*ir.Value]ir.Attrs{}
		for _, v := range list {
			saved[v] = v.Attrs
		}
		for k := 0; k < 8; k++ {
			v := list[r.IntN(len(list))]
			switch r.IntN(3) {
			case 0: // move one value (and only it)
				memSetAttr(v, memAttrOffset, int64(4*r.IntN(int(max(arena-acts[v], 0)/4)+1)))
			case 1: // claim in place where the pass did not
				if memInPlaceOps[v.Op] {
					memSetAttr(v, memAttrInPlace, int64(1))
					if off, ok := v.Args[0].Attrs[memAttrOffset]; ok {
						memSetAttr(v, memAttrOffset, off)
					}
				}
			default: // a value and everything at its offset moves elsewhere
				old := v.Attrs[memAttrOffset]
				to := int64(4 * r.IntN(int(max(arena-acts[v], 0)/4)+1))
				for _, u := range list {
					if u.Attrs[memAttrOffset] == old && acts[u] == acts[v] {
						memSetAttr(u, memAttrOffset, to)
					}
				}
			}
			simErr, chkErr := memSimulate(g), CheckMemoryPlan(g)
			if simErr != nil {
				require.Error(t, chkErr, "the checker accepts a plan that destroys data: %v\n%s", simErr, ir.Print(g))
				caught++
			} else if chkErr != nil {
				rejectedSafe++
			}
			for _, u := range list {
				u.Attrs = saved[u]
			}
		}
	}
	t.Logf("random graphs: arena %d, lower bound %d, naive %d bytes per token in total", arenaSum, lbSum, naiveSum)
	t.Logf("corruptions: %d destroyed data and were rejected; %d destroyed nothing but were rejected (in-place claims on values outside the arena or at another offset)", caught, rejectedSafe)
	require.Greater(t, caught, 100, "the corruptions should often break plans")
}

// memLoadStories loads stories260K's graph.
func memLoadStories(t *testing.T, cache ir.DType) *ir.Graph {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, "models/gguf/stories260K.gguf"))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{CacheType: cache})
	require.NoError(t, err)
	return m.Graph
}

func memReport(t *testing.T, what string, g *ir.Graph) {
	t.Helper()
	require.NoError(t, CheckMemoryPlan(g))
	require.NoError(t, memSimulate(g))
	arena, lb, naive := g.Attrs.Int(memAttrArena, 0), g.Attrs.Int(memAttrLowerBound, 0), g.Attrs.Int(memAttrNaive, 0)
	require.Positive(t, arena)
	require.GreaterOrEqual(t, arena, lb)
	require.Less(t, arena, naive)
	inPlace := 0
	for _, v := range g.Values {
		if v.Attrs.Int(memAttrInPlace, 0) == 1 {
			inPlace++
		}
	}
	t.Logf("%s: arena %d bytes per token (lower bound %d), naive %d: %.1f%% of naive; %d values in place",
		what, arena, lb, naive, 100*float64(arena)/float64(naive), inPlace)
}

// TestPlanMemoryStories260K plans the real model: the frontend's graph as
// it is (f32 and f16 caches), and after the whole Pipeline().
func TestPlanMemoryStories260K(t *testing.T) {
	for _, cache := range []ir.DType{ir.F32, ir.F16} {
		g := memLoadStories(t, cache)
		_, err := Run(g, []Pass{{Name: "plan-memory", Run: PlanMemory}}, Options{VerifyEach: true})
		require.NoError(t, err)
		memReport(t, fmt.Sprintf("stories260K unfused, %s cache", cache), g)
	}

	list, err := Pipeline()
	require.NoError(t, err)
	g := memLoadStories(t, ir.F32)
	_, err = Run(g, list, Options{VerifyEach: true})
	require.NoError(t, err)
	memReport(t, "stories260K after Pipeline()", g)
	for _, v := range g.Values {
		require.NotEqual(t, ir.OpAttention, v.Op, "tile-attention ran")
	}
}
