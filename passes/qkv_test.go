package passes_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/frontend/arch"
	"github.com/minerva-llm/minerva/frontend/gguf"
	"github.com/minerva-llm/minerva/internal/shared"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/passes"
	"github.com/minerva-llm/minerva/runtime"
)

// fusionPasses are the three projection fusions in pipeline order.
func fusionPasses(t *testing.T) []passes.Pass {
	t.Helper()
	var list []passes.Pass
	for _, name := range []string{"fuse-qkv", "fuse-swiglu", "fuse-rmsnorm"} {
		p, ok := passes.Lookup(name)
		require.True(t, ok, "pass %s is not registered", name)
		list = append(list, p)
	}
	return list
}

func loadModel(t *testing.T, rel string) *arch.Model {
	t.Helper()
	f, err := gguf.Open(shared.Path(t, rel))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	m, err := arch.Load(f, arch.Options{})
	require.NoError(t, err)
	return m
}

var layerName = regexp.MustCompile(`^blk\.(\d+)\.`)

// layerOf returns the layer of the first "blk.N." weight that v is computed
// from (through merged and rescaled weights), or -1.
func layerOf(v *ir.Value) int {
	if v.Op == ir.OpWeight {
		if m := layerName.FindStringSubmatch(v.Name()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return -1
	}
	if v.Op != ir.OpConcat && v.Op != ir.OpMul {
		return -1
	}
	for _, a := range v.Args {
		if l := layerOf(a); l >= 0 {
			return l
		}
	}
	return -1
}

// TestFuseRealModels runs fuse-qkv, fuse-swiglu and fuse-rmsnorm on real
// llama graphs and checks what each layer became: one qkv_rope and one
// swiglu, no rmsnorm left anywhere, attn_output and ffn_down still plain
// matmuls, the logits a fused_matmul; and that the interpreter gives the
// same logits as the unfused graph over a prefill and two decode steps.
func TestFuseRealModels(t *testing.T) {
	for _, c := range []struct {
		file      string
		foldGains bool // f32 weights: every gain is folded into a weight
	}{
		{"models/gguf/stories260K.gguf", true},
		{"models/gguf/synthetic/llama-p-Q8_0.gguf", false},
	} {
		t.Run(c.file, func(t *testing.T) {
			model := loadModel(t, c.file)
			ref := model.Graph
			g, err := ir.Parse(ir.Print(ref))
			require.NoError(t, err)
			_, err = passes.Run(g, fusionPasses(t), passes.Options{VerifyEach: true})
			require.NoError(t, err)

			nl := model.Config.NLayer
			count := map[ir.Op][]int{}
			for _, op := range []ir.Op{ir.OpQKVRoPE, ir.OpSwiGLU} {
				count[op] = make([]int, nl)
			}
			ops := map[ir.Op]int{}
			for _, v := range g.Values {
				ops[v.Op]++
				if _, ok := count[v.Op]; !ok {
					continue
				}
				p, err := ir.MatMulParts(v)
				require.NoError(t, err)
				require.True(t, p.Norm, "%v (%s) has no norm prologue", v, v.Op)
				require.Equal(t, !c.foldGains, p.Gain != nil, "%v (%s): gain operand", v, v.Op)
				l := layerOf(p.W)
				require.GreaterOrEqual(t, l, 0, "%v (%s): weight from no layer", v, v.Op)
				count[v.Op][l]++
			}
			for op, per := range count {
				for l, n := range per {
					require.Equal(t, 1, n, "layer %d: %d %s ops", l, n, op)
				}
			}
			require.Zero(t, ops[ir.OpRMSNorm], "rmsnorm left")
			require.Zero(t, ops[ir.OpRoPE], "rope left")
			require.Zero(t, ops[ir.OpKVWrite], "kvwrite left")
			require.Zero(t, ops[ir.OpSiLU], "silu left")
			require.Equal(t, nl, ops[ir.OpAttention])
			users := passes.Users(g)
			for l := 0; l < nl; l++ {
				for _, name := range []string{"attn_output", "ffn_down"} {
					w := g.Lookup(ir.OpWeight, fmt.Sprintf("blk.%d.%s.weight", l, name))
					require.NotNil(t, w)
					require.Len(t, users[w], 1)
					require.Equal(t, ir.OpMatMul, users[w][0].Op, "layer %d %s", l, name)
				}
			}
			require.Equal(t, ir.OpFusedMatMul, g.Output("logits").Op)

			// Same logits, prefill then decode.
			const ctx = 16
			s1, err := runtime.NewSession(ref, model.Weights, ctx)
			require.NoError(t, err)
			s2, err := runtime.NewSession(g, model.Weights, ctx)
			require.NoError(t, err)
			for i, step := range [][]int32{{1, 20, 37, 100, 250}, {42}, {7}} {
				want, err := s1.Eval(step)
				require.NoError(t, err)
				got, err := s2.Eval(step)
				require.NoError(t, err)
				for r := range want {
					var d, m float64
					for j, e := range want[r] {
						d = math.Max(d, math.Abs(float64(got[r][j])-float64(e)))
						m = math.Max(m, math.Abs(float64(e)))
					}
					require.LessOrEqualf(t, d, 1e-5*m, "step %d row %d: logits differ by %.3g (max %.3g)", i, r, d, m)
				}
			}
		})
	}
}

// TestFusionIdempotent: running a fusion pass again on its own golden output
// changes nothing (a fused op never matches its pass's pattern again).
func TestFusionIdempotent(t *testing.T) {
	for _, name := range []string{"fuse-qkv", "fuse-swiglu", "fuse-rmsnorm"} {
		p, ok := passes.Lookup(name)
		require.True(t, ok)
		outs, err := filepath.Glob(filepath.Join("..", "testdata", "passes", name, "*.out.mir"))
		require.NoError(t, err)
		require.NotEmpty(t, outs)
		for _, path := range outs {
			src, err := os.ReadFile(path)
			require.NoError(t, err)
			g, err := ir.Parse(string(src))
			require.NoError(t, err, path)
			_, err = passes.Run(g, []passes.Pass{p}, passes.Options{VerifyEach: true})
			require.NoError(t, err, path)
			require.Equal(t, string(src), ir.Print(g), "%s changed when %s ran again", path, name)
		}
	}
}
