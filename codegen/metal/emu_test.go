package metal_test

import (
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
)

// target is Metal for the runner: a step of one token runs the
// matrix-vector matvec and swiglu kernels, a prefill step the tiled ones;
// qkv_rope runs its matrix-vector kernel at every T.
var target = gputest.Target{Emit: metal.Emit, Schedule: gputest.Schedule{MatVec: []string{"matvec", "swiglu"}}}

// emulator runs the launches on the CPU through mslshim.h: one std::thread
// per Metal thread of a threadgroup, mslemu::launch walking the grid.
func emulator(clang string) *gputest.Emulator {
	return &gputest.Emulator{Compiler: clang, Flags: append(clangArgs(), "-O0", "-pthread"), Source: "lib.metal",
		Launch: "mslemu::launch(%d, %d, %d, %d, [&](uint3 tg, uint tid, uint lane, uint sg) { %s(%s, T, tg, tid, lane, sg); });"}
}

// emuCases are the cases TestEmulate runs (and TestTypeCheck compiles), on
// PCG stream 7 from seed 801. Tolerances (gputest.Tol) are relative to the
// largest reference magnitude, as in the CPU backend's tests: 1e-5 for
// float weights; 1e-4 for quantized weights (the Metal kernels multiply
// float activations by the dequantized weights, so the reference is the
// float product, not ggml's 8-bit activation path; the bound covers
// float32 against float64 accumulation).
func emuCases() []gputest.Case {
	seeds := &gputest.Seeds{Last: 800, Stream: 7}
	// Matrix products: every dtype with the full prologue and epilogue
	// (norm, gain, bias, residual); F32 and Q4_0 also bare. At T = 1 the
	// schedule runs the matrix-vector kernels (N = 13 leaves a threadgroup
	// with idle simdgroups); at T = 3 the tiled prefill kernels.
	full := func(dt ir.DType, T, N int) gputest.MatVec {
		return gputest.MatVec{DT: dt, Norm: true, Gain: true, Bias: true, Res: true, T: T, N: N, K: 256}
	}
	var mvs []gputest.MatVec
	for _, dt := range metal.WeightDTypes() {
		mvs = append(mvs, full(dt, 1, 13), full(dt, 3, 13))
	}
	mvs = append(mvs, gputest.MatVec{DT: ir.F32, T: 1, N: 13, K: 256}, gputest.MatVec{DT: ir.Q4_0, Res: true, T: 1, N: 13, K: 256},
		gputest.MatVec{DT: ir.Q8_0, Norm: true, T: 1, N: 13, K: 256})
	// The tiled kernels at T = 2, 9 (one partial token tile) and 33 (a full
	// tile and a partial one), with odd output sizes (N = 45: a full feature
	// tile and a partial one; N = 7: one partial), for F32 (also K = 100, a
	// partial K chunk), Q4_0, Q8_0 and Q4_K; and plain matmul (bias only).
	for _, T := range []int{2, 9, 33} {
		for _, dt := range []ir.DType{ir.F32, ir.Q4_0, ir.Q8_0, ir.Q4_K} {
			mvs = append(mvs, full(dt, T, 45))
		}
		mvs = append(mvs, gputest.MatVec{DT: ir.F32, Norm: true, Res: true, T: T, N: 7, K: 100},
			gputest.MatVec{Op: ir.OpMatMul, DT: ir.Q8_0, Bias: true, T: T, N: 45, K: 128})
	}
	cases := gputest.Cases(seeds, mvs...)
	// swiglu: matrix-vector at T = 1, tiled at T = 2 and 33 (F = 18 and 41:
	// partial feature tiles).
	cases = append(cases, gputest.Cases(seeds, []gputest.SwiGLU{{DT: ir.F32, T: 1, F: 18}, {DT: ir.Q4_K, T: 1, F: 18},
		{DT: ir.F32, T: 2, F: 18}, {DT: ir.Q4_K, T: 2, F: 18}, {DT: ir.F32, T: 33, F: 41}, {DT: ir.Q4_0, T: 33, F: 41}}...)...)
	// qkv_rope, attention (in the prefill-like step, row 2 has fewer rows
	// than splits·32), embedding gathers and the small row ops.
	cases = append(cases, gputest.Cases(seeds, gputest.RoPECases()...)...)
	cases = append(cases, gputest.Cases(seeds, gputest.AttentionCases([]int32{2, 3, 40, 79})...)...)
	cases = append(cases, gputest.Cases(seeds, gputest.Embeds(ir.F16, ir.Q4_K, ir.Q6_K)...)...)
	cases = append(cases, gputest.Cases(seeds, gputest.RowOps("", "rmsnorm", "softmax", "add", "mul_broadcast", "silu", "gelu")...)...)
	cases = append(cases, moeEmuCases(seeds)...)
	// The newer families' projections (issue 15: per-head q/k norms, rope
	// frequency factors, and unfused rope/kvwrite), from their own seeds.
	fam := &gputest.Seeds{Last: 1800, Stream: 7}
	cases = append(cases, gputest.Cases(fam, gputest.QKNormCases()...)...)
	cases = append(cases, gputest.Cases(fam, gputest.UnfusedCases()...)...)
	// Embedding gathers of MLX affine rows (mlx-lm quantizes the
	// embedding too), from their own seeds.
	mlx := &gputest.Seeds{Last: 2800, Stream: 7}
	cases = append(cases, gputest.Cases(mlx, gputest.Embeds(ir.MLXQ4G64, ir.MLXQ8G32)...)...)
	// Steps of slot 2: the cache writes land at the slot's rows (the
	// step's cache bases), from their own seeds.
	return append(cases, gputest.SlotCases(&gputest.Seeds{Last: 3800, Stream: 7})...)
}

// TestEmulate runs every case's kernels on the CPU through the shim and
// compares outputs and KV-cache writes with ir/eval.
func TestEmulate(t *testing.T) {
	target.Emulate(t, emuCases(), emulator(clangOrSkip(t)).Run)
}
