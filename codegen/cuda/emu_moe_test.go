package cuda_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
)

// The gpt-oss kernels: router selection (topk_softmax), the expert block
// (moe: selected experts only, biases, both activations) and YaRN RoPE,
// against ir/eval with emu_test.go's tolerances (1e-5 of max |ref| for
// float weights, 1e-4 for quantized ones); and the greedy argmax against
// its definition.
func moeEmuCases(seeds *gputest.Seeds) []gputest.Case {
	// topk_softmax: k = 1 and k = 4 of 32 experts, E = 8 (gpt-oss G1) and
	// E = 40 (two logits per lane), all with logits on a 0.5 grid.
	cases := gputest.Cases(seeds, []gputest.TopK{{E: 32, K: 1, T: 3}, {E: 32, K: 4, T: 3}, {E: 8, K: 2, T: 3}, {E: 40, K: 4, T: 5}}...)

	// moe: router logits → topk_softmax → moe, as the gpt-oss graph has it
	// (slots = k), for MXFP4, Q8_0 and F32 experts, with and without
	// biases, both activations, T = 1 and 3; and routes given as inputs
	// (slots = E): one whose rows select 0, 1 and 3 experts, and a dense
	// one (every weight non-zero). F and D of the float cases leave the
	// last block of four warps partly idle. The clamp limit is small enough
	// that both clamps of swiglu_oai bite on these inputs: with either
	// clamp removed from the kernel every swiglu_oai case fails, by 0.21 to
	// 1.2 of max |ref| (checked by hand, last with the f32 biases in).
	oai := ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 1.5}
	silu := ir.Attrs{"act": ir.MoEActSiLU}
	const topk, sparse, dense = gputest.RouteTopK, gputest.RouteSparse, gputest.RouteDense
	cases = append(cases, gputest.Cases(seeds, []gputest.MoE{
		{Name: "mxfp4/oai/bias", DT: ir.MXFP4, Down: ir.MXFP4, Biases: true, Attrs: oai, Route: topk, E: 8, K: 2, T: 3, F: 32, D: 32},
		{Name: "mxfp4/oai/nobias/T1", DT: ir.MXFP4, Down: ir.MXFP4, Attrs: oai, Route: topk, E: 8, K: 2, T: 1, F: 32, D: 64},
		{Name: "q8_0/oai/bias_f16", DT: ir.Q8_0, Down: ir.Q8_0, Biases: true, BiasDT: ir.F16, Attrs: oai, Route: topk, E: 6, K: 3, T: 3, F: 32, D: 32},
		{Name: "q8_0/silu/bias/T1", DT: ir.Q8_0, Down: ir.Q8_0, Biases: true, Attrs: silu, Route: topk, E: 5, K: 4, T: 1, F: 32, D: 64},
		{Name: "f32/oai/bias/T1", DT: ir.F32, Down: ir.F32, Biases: true, Attrs: oai, Route: topk, E: 8, K: 2, T: 1, F: 38, D: 22},
		{Name: "f32/silu/nobias", DT: ir.F32, Down: ir.F32, Attrs: silu, Route: topk, E: 8, K: 3, T: 3, F: 14, D: 10},
		{Name: "q8_0_mxfp4/silu/route_input", DT: ir.Q8_0, Down: ir.MXFP4, Attrs: silu, Route: sparse, E: 4, T: 3, F: 32, D: 32},
		{Name: "mxfp4/oai/bias/dense_route", DT: ir.MXFP4, Down: ir.MXFP4, Biases: true, Attrs: oai, Route: dense, E: 3, T: 2, F: 32, D: 32},
	}...)...)

	// qkv_rope with YaRN as gpt-oss configures it, positions up to 3071;
	// and with an attn_factor ≠ 1, normal mode, n_rot < head_dim, an f16
	// cache and MXFP4 weights. The caches are outputs too.
	return append(cases, gputest.Cases(seeds, gputest.YaRNCases()...)...)
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
func argmaxRows(k *gputest.Kit, V, threads int) [][]float32 {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := [][]float32{}
	row := func(f func(r []float32)) {
		r := k.Vals(V, 3)
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
	emu := emulator(clangxxOrSkip(t))
	for i, V := range []int{37, 1000, 9001} {
		t.Run(fmt.Sprintf("V=%d", V), func(t *testing.T) {
			t.Parallel()
			k := gputest.Rand{Seed: uint64(700 + i), Stream: 11}.Kit(t, "argmax")
			x := k.B.Input("x", gputest.F32("T", V))
			g := k.Finish(k.B.Mul(x, k.Weight("one", ir.F32, 1, V)))
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
    emuhost::Buf logits = emuhost::load("logits.bin");
    emuhost::Buf out;
    out.data.assign(4 * T, 0xee); // not a valid answer: every row must be written
    cudaemu::launch(dim3{1, T, 1}, dim3{%d, 1, 1}, [&] { %s(logits.ptr(), out.ptr(), T); });
    emuhost::save("out.bin", out);
    return 0;
}
`, T, a.Threads, a.Kernel)
			emu.BuildAndRun(t, dir, map[string][]byte{"lib.cu": []byte(lib.Source), "main.cpp": []byte(main), "logits.bin": logits})
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
