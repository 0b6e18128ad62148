package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// The gpt-oss kernels: router selection (topk_softmax), the expert block
// (moe: selected experts only, biases, both activations) and YaRN RoPE,
// against ir/eval with emu_test.go's tolerances (1e-5 of max |ref| for
// float weights, 1e-4 for quantized ones); and the greedy argmax against
// its definition.
func moeEmuCases(seed *uint64) []emuCase {
	var cases []emuCase
	next := func() uint64 { *seed++; return *seed }

	// topk_softmax: k = 1 and k = 4 of 32 experts, E = 8 (gpt-oss G1) and
	// E = 40 (two logits per lane), all with logits on a 0.5 grid, so equal
	// logits are common and the lower index must win as in ir/eval's
	// stable sort.
	for _, c := range []struct{ e, k, T int }{{32, 1, 3}, {32, 4, 3}, {8, 2, 3}, {40, 4, 5}} {
		s := next()
		cases = append(cases, emuCase{name: fmt.Sprintf("topk_softmax/e%d_k%d", c.e, c.k), ctx: 1, T: c.T, tol: 1e-5,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "topk", s)
				x := k.b.Input("x", f32T("T", c.e))
				logits := k.vals(c.T*c.e, 2)
				for i := range logits {
					logits[i] = float32(math.Round(float64(logits[i])*2) / 2)
				}
				return k.finish(k.b.TopKSoftmax(x, c.k)), k.w, map[string]eval.Tensor{
					"x": {Shape: []int64{int64(c.T), int64(c.e)}, F32: logits}}
			}})
	}

	// moe: router logits → topk_softmax → moe, as the gpt-oss graph has it
	// (slots = k), for MXFP4, Q8_0 and F32 experts, with and without
	// biases, both activations, T = 1 and 3; and routes given as inputs
	// (slots = E): one whose rows select 0, 1 and 3 experts, and a dense
	// one (every weight non-zero). F and D of the float cases leave the
	// last block of four warps partly idle. The clamp limit is small enough
	// that both clamps of swiglu_oai bite on these inputs: with either
	// clamp removed from the kernel every swiglu_oai case fails, by 0.18 to
	// 1.2 of max |ref| (checked by hand).
	oai := ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 1.5}
	silu := ir.Attrs{"act": ir.MoEActSiLU}
	const (
		topk = iota
		sparse
		dense
	)
	for _, c := range []struct {
		name     string
		dt, down ir.DType
		bias     ir.DType // 0: no biases
		attrs    ir.Attrs
		route    int
		e, k, T  int
		f, d     int
	}{
		{"mxfp4/oai/bias", ir.MXFP4, ir.MXFP4, ir.F32, oai, topk, 8, 2, 3, 32, 32},
		{"mxfp4/oai/nobias/T1", ir.MXFP4, ir.MXFP4, 0, oai, topk, 8, 2, 1, 32, 64},
		{"q8_0/oai/bias_f16", ir.Q8_0, ir.Q8_0, ir.F16, oai, topk, 6, 3, 3, 32, 32},
		{"q8_0/silu/bias/T1", ir.Q8_0, ir.Q8_0, ir.F32, silu, topk, 5, 4, 1, 32, 64},
		{"f32/oai/bias/T1", ir.F32, ir.F32, ir.F32, oai, topk, 8, 2, 1, 38, 22},
		{"f32/silu/nobias", ir.F32, ir.F32, 0, silu, topk, 8, 3, 3, 14, 10},
		{"q8_0_mxfp4/silu/route_input", ir.Q8_0, ir.MXFP4, 0, silu, sparse, 4, 0, 3, 32, 32},
		{"mxfp4/oai/bias/dense_route", ir.MXFP4, ir.MXFP4, ir.F32, oai, dense, 3, 0, 2, 32, 32},
	} {
		s := next()
		tol := 1e-4
		if c.dt == ir.F32 && c.down == ir.F32 {
			tol = 1e-5
		}
		cases = append(cases, emuCase{name: "moe/" + c.name, ctx: 1, T: c.T, tol: tol,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				k := newKit(t, "moe", s)
				x := k.b.Input("x", f32T("T", c.d))
				var route *ir.Value
				in := map[string]eval.Tensor{"x": {Shape: []int64{int64(c.T), int64(c.d)}, F32: k.vals(c.T*c.d, 2)}}
				switch c.route {
				case topk:
					route = k.b.TopKSoftmax(k.b.Input("logits", f32T("T", c.e)), c.k)
					in["logits"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.e)}, F32: k.vals(c.T*c.e, 3)}
				case sparse:
					route = k.b.Input("route", f32T("T", c.e))
					r := make([]float32, c.T*c.e)
					r[1*c.e+3] = 0.7                                       // row 1: one expert
					r[2*c.e+0], r[2*c.e+2], r[2*c.e+c.e-1] = 0.2, 0.5, 0.3 // row 2: three; row 0: none
					in["route"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.e)}, F32: r}
				case dense:
					route = k.b.Input("route", f32T("T", c.e))
					r := k.vals(c.T*c.e, 1) // never zero, some negative
					in["route"] = eval.Tensor{Shape: []int64{int64(c.T), int64(c.e)}, F32: r}
				}
				w := ir.MoEWeights{
					Gate: k.weight("gate", c.dt, 0.5, c.e, c.f, c.d),
					Up:   k.weight("up", c.dt, 0.5, c.e, c.f, c.d),
					Down: k.weight("down", c.down, 0.5, c.e, c.d, c.f),
				}
				if c.bias != 0 {
					w.GateBias = k.weight("bg", c.bias, 1, c.e, c.f)
					w.UpBias = k.weight("bu", c.bias, 1, c.e, c.f)
					w.DownBias = k.weight("bd", c.bias, 1, c.e, c.d)
				}
				out := k.b.MoE(x, route, w, c.attrs)
				return k.finish(out), k.w, in
			}})
	}

	// qkv_rope with YaRN as gpt-oss configures it (neox, base 150000,
	// freq_scale 1/32, orig_ctx 4096, beta_fast 32, beta_slow 1,
	// ext_factor 1, attn_factor 1 scaled by 1 + 0.1·ln 32), positions up to
	// 3071; and with an attn_factor ≠ 1, normal mode, n_rot < head_dim, an
	// f16 cache and MXFP4 weights. The caches are outputs too.
	for _, c := range []struct {
		dt, cache ir.DType
		mode      string
		nrot      int64
		af        float64
	}{{ir.F32, ir.F32, "neox", 16, 1}, {ir.MXFP4, ir.F16, "normal", 12, 0.8}} {
		s := next()
		cases = append(cases, emuCase{name: fmt.Sprintf("qkv_rope_yarn/%s/%s/cache=%s", c.dt, c.mode, c.cache), ctx: 3100, T: 3, tol: tolFor(c.dt),
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const K, H, HKV, HD = 64, 4, 2, 16
				k := newKit(t, "qkv", s)
				x := k.b.Input("x", f32T("T", K))
				pos := k.b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
				kc := k.b.State("cache.k", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				vc := k.b.State("cache.v", ir.Type{DType: c.cache, Shape: ir.S("C", HKV*HD)})
				attrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": c.nrot,
					"base": 150000.0, "freq_scale": 1.0 / 32, "mode": c.mode, "ext_factor": 1.0, "attn_factor": c.af,
					"beta_fast": 32.0, "beta_slow": 1.0, "orig_ctx": int64(4096), "norm": int64(1), "eps": 1e-5, "bias": int64(1)}
				args := []*ir.Value{x, k.weight("w", c.dt, 1, (H+2*HKV)*HD, K), pos, kc, vc, k.weight("bias", ir.F32, 1, (H+2*HKV)*HD)}
				out := k.b.Add(ir.OpQKVRoPE, attrs, nil, args...)
				return k.finish(out, kc, vc), k.w, map[string]eval.Tensor{
					"x":   {Shape: []int64{3, K}, F32: k.vals(3*K, 2)},
					"pos": {Shape: []int64{3}, I32: []int32{0, 45, 3071}},
				}
			}})
	}
	return cases
}

// argmaxRef is the argmax kernel's contract: the smallest index of the
// largest value, NaN never winning, 0 for a row of NaNs.
func argmaxRef(row []float32) int32 {
	bi := -1
	for i, x := range row {
		if x == x && (bi < 0 || x > row[bi]) {
			bi = i
		}
	}
	return int32(max(bi, 0))
}

// argmaxRows returns rows of width V that exercise the reduction: equal
// maxima in different threads and warps (the smallest index in the last
// thread), negative rows, +Inf twice, -Inf with NaNs, all NaN, all -Inf, a
// NaN first and the maximum last, and a random row.
func argmaxRows(k *graphKit, V, threads int) [][]float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{}
	row := func(f func(r []float32)) {
		r := k.vals(V, 3)
		f(r)
		rows = append(rows, r)
	}
	// Indices spread over threads and warps: the last thread's first
	// element, an element of thread 0's second round (when V allows),
	// and one near the end.
	spread := []int{min(threads-1, V-1), min(threads, V-1), V - 2, V / 3}
	row(func(r []float32) {
		for _, i := range spread {
			r[i] = 5
		}
	})
	row(func(r []float32) {
		for i := range r {
			r[i] = -float32(math.Abs(float64(r[i]))) - 0.5
		}
		for _, i := range spread {
			r[i] = -0.25
		}
	})
	row(func(r []float32) { r[V-1], r[V/2], r[1], r[0] = inf, inf, nan, nan })
	row(func(r []float32) {
		for i := range r {
			r[i] = -inf
			if i%3 == 0 {
				r[i] = nan
			}
		}
	})
	row(func(r []float32) {
		for i := range r {
			r[i] = nan
		}
	})
	row(func(r []float32) {
		for i := range r {
			r[i] = -inf
		}
	})
	row(func(r []float32) { r[0], r[V-1] = nan, 9 })
	row(func(r []float32) { r[V/2] = -inf })
	return rows
}

// TestEmulateArgmax runs the argmax kernel of a graph whose logits are an
// input on the CPU for several vocabularies (256 threads: V below, above
// and not a multiple of the block; 1024 threads: V past 8192) and compares
// each row's result with argmaxRef.
func TestEmulateArgmax(t *testing.T) {
	clang := clangxxOrSkip(t)
	for i, V := range []int{37, 1000, 9001} {
		t.Run(fmt.Sprintf("V=%d", V), func(t *testing.T) {
			t.Parallel()
			k := newKit(t, "argmax", uint64(700+i))
			x := k.b.Input("x", f32T("T", V))
			g := k.finish(k.b.Mul(x, k.weight("one", ir.F32, 1, V)))
			g.Outputs[0].Name = "logits"
			lib, err := cuda.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			a := lib.Argmax
			if a == nil || a.Value != g.Outputs[0].Value.ID {
				t.Fatalf("argmax %+v does not name the logits value", a)
			}
			rows := argmaxRows(k, V, a.Threads)
			T := len(rows)
			dir := t.TempDir()
			logits := make([]byte, 0, 4*T*V)
			for _, r := range rows {
				for _, x := range r {
					logits = binary.LittleEndian.AppendUint32(logits, math.Float32bits(x))
				}
			}
			main := fmt.Sprintf(`#include "lib.cu"

int main() {
    const u32 T = %d;
    cudaemu::Buf logits = cudaemu::load("logits.bin");
    cudaemu::Buf out;
    out.data.assign(4 * T, 0xee); // not a valid answer: every row must be written
    cudaemu::launch(dim3{1, T, 1}, dim3{%d, 1, 1}, [&] { %s(logits.ptr(), out.ptr(), T); });
    cudaemu::save("out.bin", out);
    return 0;
}
`, T, a.Threads, a.Kernel)
			buildAndRun(t, clang, dir, map[string][]byte{"lib.cu": []byte(lib.Source), "main.cpp": []byte(main), "logits.bin": logits})
			got, err := os.ReadFile(filepath.Join(dir, "out.bin"))
			if err != nil {
				t.Fatal(err)
			}
			for r, row := range rows {
				g, want := int32(binary.LittleEndian.Uint32(got[4*r:])), argmaxRef(row)
				if g != want {
					t.Errorf("row %d: argmax %d, want %d (values there: %v, %v)", r, g, want, at(row, g), row[want])
				}
			}
			t.Logf("%d rows of %d with %d threads: all match", T, V, a.Threads)
		})
	}
}

func at(row []float32, i int32) any {
	if i < 0 || int(i) >= len(row) {
		return "out of range"
	}
	return row[i]
}
