package cuda_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// The emitted kernels also run on the CPU, following codegen/metal's
// harness: the library is compiled as C++17 against testdata/cudaemu.h (the
// CUDA threads of a block run as fibers, with real barriers and warp
// shuffles over the 32 lanes of a warp; the prelude's MINERVA_CUDA_EMU hook
// swaps its inline-PTX half conversions for C++ ones), a generated main
// loads every buffer from a file, runs the library's launches in order with
// their grids and block sizes, and writes the buffers back; the outputs
// (and KV-cache writes) are compared with ir/eval on random inputs. Without
// clang++ the tests skip.

func clangxxOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("clang++")
	if err != nil {
		t.Skip("clang++ not on PATH: the CPU emulation of the CUDA kernels needs it (apt-get install clang)")
	}
	return p
}

func emuArgs() []string {
	inc, _ := filepath.Abs("testdata")
	return []string{"-std=c++17", "-O0", "-pthread", "-Wall", "-Werror", "-include", filepath.Join(inc, "cudaemu.h")}
}

// emuCase is one small graph run both by ir/eval and by the emulated
// kernels. Tolerances are codegen/metal's, relative to the largest reference
// magnitude: 1e-5 for float weights, 1e-4 for quantized ones (the kernels
// multiply float activations by dequantized weights in float32; the bound
// covers float32 against float64 accumulation).
type emuCase struct {
	name   string
	ctx, T int
	tol    float64
	vec    bool // every matrix-vector kernel must take the vector path (vecload_test.go)
	perRow bool // the tolerance holds per output row, relative to the row's largest |ref|
	build  func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor)
}

// weightMap serves raw weight bytes by name (eval.Weights).
type weightMap map[string][]byte

func (w weightMap) WeightBytes(name string) ([]byte, error) {
	b, ok := w[name]
	if !ok {
		return nil, fmt.Errorf("no weight %q", name)
	}
	return b, nil
}

// graphKit builds a test graph with random weights.
type graphKit struct {
	t   *testing.T
	b   *ir.Builder
	rng *rand.Rand
	w   weightMap
}

func newKit(t *testing.T, name string, seed uint64) *graphKit {
	return &graphKit{t: t, b: ir.NewBuilder(name), rng: rand.New(rand.NewPCG(seed, 11)), w: weightMap{}}
}

// vals returns n random values in ±scale, never exactly zero.
func (k *graphKit) vals(n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((k.rng.Float64()*2 - 1) * scale)
		if out[i] == 0 {
			out[i] = float32(scale) / 3
		}
	}
	return out
}

// weight quantizes random values into a weight of dtype dt.
func (k *graphKit) weight(name string, dt ir.DType, scale float64, dims ...int) *ir.Value {
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
	if err := quant.Quantize(dt, k.vals(n, scale), raw); err != nil {
		k.t.Fatal(err)
	}
	k.w[name] = raw
	return k.b.Weight(name, ir.Type{DType: dt, Shape: shape})
}

func (k *graphKit) finish(out *ir.Value, states ...*ir.Value) *ir.Graph {
	k.b.Output("out", out)
	for _, s := range states {
		k.b.Output(s.Name(), s)
	}
	g, err := k.b.Finish()
	if err != nil {
		k.t.Fatal(err)
	}
	return g
}

func f32T(dims ...any) ir.Type { return ir.Type{DType: ir.F32, Shape: ir.S(dims...)} }

func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func tolFor(dt ir.DType) float64 {
	if dt == ir.F32 {
		return 1e-5
	}
	return 1e-4
}

func emuCases() []emuCase {
	var cases []emuCase
	seed := uint64(900)
	// Matrix-vector products: every weight dtype with the full prologue and
	// epilogue (RMSNorm, gain, bias, residual) at T = 1; N = 13 leaves the
	// last block of four warps with one active warp. Then prefill rows
	// (T = 3), an f16 bias, bare F32 and plain matmul with bias.
	type mv struct {
		dt                    ir.DType
		norm, gain, bias, res bool
		biasDT                ir.DType
		T, N, K               int
		op                    ir.Op
	}
	var mvs []mv
	for _, dt := range cuda.WeightDTypes() {
		mvs = append(mvs, mv{dt, true, true, true, true, ir.F32, 1, 13, 256, ir.OpFusedMatMul})
	}
	mvs = append(mvs,
		mv{ir.F32, true, true, true, true, ir.F32, 3, 13, 256, ir.OpFusedMatMul},
		mv{ir.Q4_K, true, true, true, true, ir.F32, 3, 13, 256, ir.OpFusedMatMul},
		mv{ir.Q8_0, true, false, true, false, ir.F16, 1, 45, 128, ir.OpFusedMatMul},
		mv{ir.F32, false, false, false, false, ir.F32, 1, 13, 256, ir.OpFusedMatMul},
		mv{ir.Q4_0, false, false, true, false, ir.F32, 2, 45, 128, ir.OpMatMul})
	for _, c := range mvs {
		seed++
		s := seed
		name := fmt.Sprintf("%s/%s/norm=%v,gain=%v,bias=%v(%s),res=%v/T=%d,N=%d,K=%d", c.op, c.dt, c.norm, c.gain, c.bias, c.biasDT, c.res, c.T, c.N, c.K)
		cases = append(cases, emuCase{name: name, ctx: 1, T: c.T, tol: tolFor(c.dt), build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
			T, N, K := c.T, c.N, c.K
			k := newKit(t, "mv", s)
			x := k.b.Input("x", f32T("T", K))
			args := []*ir.Value{x, k.weight("w", c.dt, 1, N, K)}
			var attrs ir.Attrs
			if c.op == ir.OpFusedMatMul {
				attrs = ir.Attrs{"norm": bit(c.norm), "gain": bit(c.gain), "bias": bit(c.bias), "residual": bit(c.res)}
				if c.norm {
					attrs["eps"] = 1e-5
				}
			}
			if c.gain {
				args = append(args, k.weight("gain", ir.F32, 1, K))
			}
			if c.bias {
				args = append(args, k.weight("bias", c.biasDT, 1, N))
			}
			if c.res {
				args = append(args, k.b.Input("res", f32T("T", N)))
			}
			g := k.finish(k.b.Add(c.op, attrs, nil, args...))
			return g, k.w, map[string]eval.Tensor{
				"x":   {Shape: []int64{int64(T), int64(K)}, F32: k.vals(T*K, 2)},
				"res": {Shape: []int64{int64(T), int64(N)}, F32: k.vals(T*N, 1)},
			}
		}})
	}
	// swiglu: F = 18 (a partial block), RMSNorm and gain.
	for _, c := range []struct {
		dt   ir.DType
		T, F int
	}{{ir.F32, 1, 18}, {ir.Q4_K, 1, 18}, {ir.Q4_0, 2, 41}} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: fmt.Sprintf("swiglu/%s/T=%d,F=%d", c.dt, c.T, c.F), ctx: 1, T: c.T, tol: tolFor(c.dt),
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K = 256
				k := newKit(t, "swiglu", s)
				x := k.b.Input("x", f32T("T", K))
				out := k.b.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
					x, k.weight("w", c.dt, 1, 2*c.F, K), k.weight("gain", ir.F32, 1, K))
				return k.finish(out), k.w, map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), K}, F32: k.vals(c.T*K, 2)}}
			}})
	}
	// qkv_rope: normal RoPE into an f32 cache, neox with partial rotation
	// and bias into an f16 cache; a position past 1000 (where a float32
	// angle would lose 1e-4); GQA. The caches are outputs too.
	for _, c := range []struct {
		dt    ir.DType
		cache ir.DType
		mode  string
		nrot  int64
		bias  bool
	}{{ir.F32, ir.F32, "normal", 16, false}, {ir.Q8_0, ir.F16, "neox", 8, true}} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: fmt.Sprintf("qkv_rope/%s/%s/cache=%s", c.dt, c.mode, c.cache), ctx: 1200, T: 3, tol: tolFor(c.dt),
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K, H, HKV, HD = 64, 4, 2, 16
				k := newKit(t, "qkv", s)
				x := k.b.Input("x", f32T("T", K))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.b.State("cache.k", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				vc := k.b.State("cache.v", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": c.nrot,
					"base": 10000.0, "freq_scale": 0.5, "mode": c.mode, "norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": bit(c.bias)}
				args := []*ir.Value{x, k.weight("w", c.dt, 1, (H+2*HKV)*HD, K), pos, kc, vc, k.weight("gain", ir.F32, 1, K)}
				if c.bias {
					args = append(args, k.weight("bias", ir.F32, 1, (H+2*HKV)*HD))
				}
				out := k.b.Add(ir.OpQKVRoPE, attrs, nil, args...)
				return k.finish(out, kc, vc), k.w, map[string]eval.Tensor{
					"x":   {Shape: []int64{3, K}, F32: k.vals(3*K, 2)},
					"pos": {Shape: []int64{3}, I32: []int32{0, 7, 1187}},
				}
			}})
	}
	// Attention over a filled cache (given as weights, so an f16 cache holds
	// real f16 values): split-KV decode and merge, GQA, a window, sinks, and
	// a prefill-like step (T = 4) with a row shorter than the splits.
	for _, c := range []struct {
		name          string
		cache         ir.DType
		T             int
		splits        int64
		window        int64
		sinks         bool
		hd, dv, h, kv int
	}{
		{"decode/f32/s4", ir.F32, 1, 4, 0, false, 32, 32, 4, 2},
		{"decode/f16/s3/window", ir.F16, 1, 3, 20, false, 16, 16, 4, 1},
		{"prefill/f32/s2/sinks", ir.F32, 4, 2, 0, true, 16, 24, 2, 2},
	} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: "flash_attention/" + c.name, ctx: 80, T: c.T, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const C = 80
				k := newKit(t, "attn", s)
				q := k.b.Input("q", f32T("T", c.h*c.hd))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.weight("k", c.cache, 1, C, c.kv*c.hd)
				vc := k.weight("v", c.cache, 1, C, c.kv*c.dv)
				attrs := ir.Attrs{"n_head": int64(c.h), "n_kv_head": int64(c.kv), "head_dim": int64(c.hd), "scale": 0.3,
					"tile_q": int64(16), "tile_kv": int64(8), "kv_splits": c.splits}
				if c.window > 0 {
					attrs["window"] = c.window
				}
				args := []*ir.Value{q, kc, vc, pos}
				if c.sinks {
					args = append(args, k.weight("sinks", ir.F32, 2, c.h))
				}
				out := k.b.Add(ir.OpFlashAttention, attrs, nil, args...)
				ps := []int32{77}
				if c.T == 4 {
					ps = []int32{0, 3, 40, 79}
				}
				return k.finish(out), k.w, map[string]eval.Tensor{
					"q":   {Shape: []int64{int64(c.T), int64(c.h * c.hd)}, F32: k.vals(c.T*c.h*c.hd, 1)},
					"pos": {Shape: []int64{int64(c.T)}, I32: ps},
				}
			}})
	}
	// Embedding gathers.
	for _, dt := range []ir.DType{ir.F16, ir.Q4_0, ir.Q4_K, ir.Q6_K} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: "embed/" + dt.String(), ctx: 1, T: 3, tol: 1e-6, // fp contraction may differ in the last bit
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "embed", s)
				ids := k.b.Input("ids", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				out := k.b.Embed(k.weight("table", dt, 1, 10, 256), ids)
				return k.finish(out), k.w, map[string]eval.Tensor{"ids": {Shape: []int64{3}, I32: []int32{9, 0, 4}}}
			}})
	}
	// The row ops, width 70 (two partial lane rounds).
	rowOps := []struct {
		name string
		op   func(k *graphKit, x *ir.Value) *ir.Value
	}{
		{"rmsnorm", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.RMSNorm(x, k.weight("g", ir.F32, 1, 70), 1e-6) }},
		{"rmsnorm_f16gain", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.RMSNorm(x, k.weight("g", ir.F16, 1, 70), 1e-6) }},
		{"softmax", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.Softmax(x) }},
		{"add", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.AddV(x, k.b.Input("y", f32T("T", 70))) }},
		{"mul_broadcast", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.Mul(x, k.weight("g", ir.F32, 1, 70)) }},
		{"silu", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.SiLU(x) }},
		{"gelu", func(k *graphKit, x *ir.Value) *ir.Value { return k.b.GELU(x) }},
	}
	for _, c := range rowOps {
		seed++
		s := seed
		cases = append(cases, emuCase{name: c.name, ctx: 1, T: 3, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, c.name, s)
				x := k.b.Input("x", f32T("T", 70))
				out := c.op(k, x)
				return k.finish(out), k.w, map[string]eval.Tensor{
					"x": {Shape: []int64{3, 70}, F32: k.vals(210, 3)},
					"y": {Shape: []int64{3, 70}, F32: k.vals(210, 1)},
				}
			}})
	}
	cases = append(cases, vecEmuCases(seed)...)
	return append(cases, moeEmuCases(&seed)...)
}

// TestEmulate runs every case's launches on the CPU through cudaemu.h and
// compares outputs and KV-cache writes with ir/eval.
func TestEmulate(t *testing.T) {
	clang := clangxxOrSkip(t)
	for _, c := range emuCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runEmuCase(t, c, emulator(clang))
		})
	}
}

// runEmuCase emulates one case and compares it with ir/eval. It also checks
// the schedule: a step of one token runs the matrix-vector kernels and a
// prefill step the tiled ones (and rope_kv), never both.
func runEmuCase(t *testing.T, c emuCase, run executor) {
	t.Helper()
	g, w, inputs := c.build(t)
	used := map[string]eval.Tensor{}
	for _, v := range g.Values {
		if v.Op == ir.OpInput {
			used[v.Name()] = inputs[v.Name()]
		}
	}
	lib, err := cuda.Emit(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSchedule(lib, c.T); err != nil {
		t.Error(err)
	}
	if c.vec {
		checkLoads(t, lib, true, nil)
	}
	m, err := eval.New(g, w, int64(c.ctx))
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Run(used)
	if err != nil {
		t.Fatal(err)
	}
	got := run(t, g, lib, stepBuffers(t, g, lib, w, used, c.ctx, c.T), c.T)
	for _, o := range g.Outputs {
		ref := want[o.Name].F32
		b, ok := got[o.Value.ID]
		if !ok {
			t.Fatalf("output %s (%v) was never written by a launch", o.Name, o.Value)
		}
		gotF := floats(b, o.Value.Type.DType)
		var e float64
		if c.perRow {
			e, err = rowRelErr(gotF, ref, int(o.Value.Type.Shape.Last().N))
		} else {
			e, err = relErr(gotF, ref)
		}
		if err != nil {
			t.Fatalf("output %s: %v", o.Name, err)
		}
		t.Logf("output %s: max error %.3g of max |ref|%s (tolerance %.0e)", o.Name, e, map[bool]string{true: " per row"}[c.perRow], c.tol)
		if e > c.tol {
			t.Errorf("output %s: max error %.3g of max |ref| > %.0e", o.Name, e, c.tol)
		}
	}
}

// checkSchedule checks that Step(T) runs the tiled kernels only for T > 1
// (with rope_kv) and the matrix-vector matmul/swiglu/qkv_rope kernels only
// for T = 1.
func checkSchedule(lib *cuda.Library, T int) error {
	family := map[string]string{}
	for _, k := range lib.Kernels {
		family[k.Name] = k.Family
	}
	for _, l := range lib.Step(T) {
		f := family[l.Kernel]
		if T == 1 && (strings.HasSuffix(f, "_tiled") || f == "rope_kv") || T > 1 && (f == "matvec" || f == "swiglu" || f == "qkv_rope") {
			return fmt.Errorf("a step of %d tokens runs %s (%s)", T, l.Kernel, f)
		}
	}
	return nil
}

// executor runs lib's launches for one step of T tokens over bufs (every
// buffer the launches name, by value ID; -1 the scratch) and returns the
// final bytes of every buffer that is not a weight, by value ID: on the CPU
// through cudaemu.h (emulator) or on a GPU (device_test.go).
type executor func(t *testing.T, g *ir.Graph, lib *cuda.Library, bufs map[int][]byte, T int) map[int][]byte

// stepBuffers gives every buffer lib's launches name its contents for a
// step of T tokens: weights and inputs their bytes, everything else zeros.
func stepBuffers(t *testing.T, g *ir.Graph, lib *cuda.Library, w weightMap, inputs map[string]eval.Tensor, ctx, T int) map[int][]byte {
	t.Helper()
	byID := valuesByID(g)
	env := map[string]int64{"T": int64(T), "C": int64(ctx)}
	bufs := map[int][]byte{}
	var scratch int64
	for _, l := range lib.Launches {
		for _, a := range l.Args {
			if a.Value < 0 {
				scratch = max(scratch, a.ScratchPerToken*int64(T))
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
				bufs[v.ID] = make([]byte, n*size)
			}
		}
	}
	if scratch > 0 {
		bufs[-1] = make([]byte, scratch)
	}
	return bufs
}

func valuesByID(g *ir.Graph) map[int]*ir.Value {
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
	return byID
}

// emulator runs the launches on the CPU: the library and a generated main
// are compiled with clang++ against cudaemu.h.
func emulator(clang string) executor {
	return func(t *testing.T, g *ir.Graph, lib *cuda.Library, bufs map[int][]byte, T int) map[int][]byte {
		t.Helper()
		dir := t.TempDir()
		byID := valuesByID(g)
		var m strings.Builder
		m.WriteString("#include \"lib.cu\"\n\nint main() {\n    const u32 T = " + fmt.Sprint(T) + ";\n")
		for id, b := range bufs {
			if err := os.WriteFile(filepath.Join(dir, bufName(id)), b, 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&m, "    cudaemu::Buf %s = cudaemu::load(%q);\n", varName(id), bufName(id))
		}
		for _, l := range lib.Step(T) {
			var args []string
			for _, a := range l.Args {
				args = append(args, varName(a.Value)+".ptr()")
			}
			fmt.Fprintf(&m, "    cudaemu::launch(dim3{%d, %d, %d}, dim3{%d, 1, 1}, [&] { %s(%s, T); });\n",
				l.Grid[0].Count(T), l.Grid[1].Count(T), l.Grid[2].Count(T), l.Threads, l.Kernel, strings.Join(args, ", "))
		}
		for id := range bufs {
			if v := byID[id]; v == nil || v.Op != ir.OpWeight {
				fmt.Fprintf(&m, "    cudaemu::save(%q, %s);\n", bufName(id), varName(id))
			}
		}
		m.WriteString("    return 0;\n}\n")
		buildAndRun(t, clang, dir, map[string][]byte{"lib.cu": []byte(lib.Source), "main.cpp": []byte(m.String())})
		res := map[int][]byte{}
		for id := range bufs {
			if v := byID[id]; v != nil && v.Op == ir.OpWeight {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, bufName(id)))
			if err != nil {
				t.Fatal(err)
			}
			res[id] = b
		}
		return res
	}
}

// buildAndRun writes files into dir (lib.cu, main.cpp and any inputs),
// builds main.cpp against cudaemu.h and runs it there.
func buildAndRun(t *testing.T, clang, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(emuArgs(), "-o", filepath.Join(dir, "emu"), "-x", "c++", filepath.Join(dir, "main.cpp"))
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang++ (emulation build): %v\n%s", err, out)
	}
	run := exec.Command(filepath.Join(dir, "emu"))
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("emulation run: %v\n%s", err, out)
	}
}

func bufName(id int) string {
	if id < 0 {
		return "scratch.bin"
	}
	return fmt.Sprintf("v%d.bin", id)
}

func varName(id int) string {
	if id < 0 {
		return "scratch"
	}
	return fmt.Sprintf("v%d", id)
}

// floats decodes f32 (or f16) little-endian bytes.
func floats(b []byte, dt ir.DType) []float32 {
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

// relErr returns max|got − want| / max|want|, and an error for NaNs, a
// length mismatch or an all-zero reference (a test input that proves
// nothing).
func relErr(got, want []float32) (float64, error) {
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

// rowRelErr is relErr of every row of width w; it returns the largest.
func rowRelErr(got, want []float32, w int) (float64, error) {
	if len(got) != len(want) || w <= 0 || len(want)%w != 0 {
		return 0, fmt.Errorf("%d values, want %d in rows of %d", len(got), len(want), w)
	}
	var worst float64
	for i := 0; i < len(want); i += w {
		e, err := relErr(got[i:i+w], want[i:i+w])
		if err != nil {
			return 0, fmt.Errorf("row %d: %v", i/w, err)
		}
		worst = max(worst, e)
	}
	return worst, nil
}
