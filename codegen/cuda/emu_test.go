package cuda_test

import (
	"path/filepath"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
)

// The emitted kernels also run on the CPU, through codegen/gpu/gputest's
// harness: the library is compiled as C++17 against testdata/cudaemu.h (the
// CUDA threads of a block run as fibers, with real barriers and warp
// shuffles over the 32 lanes of a warp; the prelude's MINERVA_CUDA_EMU hook
// swaps its inline-PTX half conversions for C++ ones), a generated main
// loads every buffer from a file, runs the library's launches in order with
// their grids and block sizes, and writes the buffers back; the outputs
// (and KV-cache writes) are compared with ir/eval on random inputs. Without
// clang++ the tests skip.

// target is CUDA for the runner: a step of one token runs the
// matrix-vector kernels (qkv_rope's included), a prefill step the tiled
// ones and rope_kv.
var target = gputest.Target{
	Emit:             cuda.Emit,
	Schedule:         gputest.Schedule{MatVec: []string{"matvec", "swiglu", "qkv_rope"}, Prefill: []string{"rope_kv"}},
	RoundActivations: cuda.RoundsActivations,
}

func clangxxOrSkip(t *testing.T) string {
	t.Helper()
	return gputest.ClangXX(t, "the CPU emulation of the CUDA kernels")
}

func emuArgs() []string {
	inc, _ := filepath.Abs("testdata")
	return []string{"-std=c++17", "-O0", "-pthread", "-Wall", "-Werror", "-include", filepath.Join(inc, "cudaemu.h")}
}

// emulator runs the launches on the CPU: the library and a generated main
// are compiled with clang++ against cudaemu.h; each launch runs its grid of
// blocks through cudaemu::launch.
func emulator(clang string) *gputest.Emulator {
	return &gputest.Emulator{Compiler: clang, Flags: emuArgs(), Source: "lib.cu",
		Launch: "cudaemu::launch(dim3{%d, %d, %d}, dim3{%d, 1, 1}, [&] { %s(%s, T); });"}
}

// emuCases are the cases TestEmulate and TestDeviceKernels run, on PCG
// stream 11 from seed 901. Tolerances (gputest.Tol) are relative to the
// largest reference magnitude: 1e-5 for float weights, 1e-4 for quantized
// ones.
func emuCases() []gputest.Case {
	seeds := &gputest.Seeds{Last: 900, Stream: 11}
	// Matrix-vector products: every weight dtype with the full prologue and
	// epilogue (RMSNorm, gain, bias, residual) at T = 1; N = 13 leaves the
	// last block of four warps with one active warp. Then prefill rows
	// (T = 3), an f16 bias, bare F32 and plain matmul with bias.
	full := func(dt ir.DType, T int) gputest.MatVec {
		return gputest.MatVec{DT: dt, Norm: true, Gain: true, Bias: true, Res: true, T: T, N: 13, K: 256}
	}
	var mvs []gputest.MatVec
	for _, dt := range cuda.WeightDTypes() {
		mvs = append(mvs, full(dt, 1))
	}
	mvs = append(mvs, full(ir.F32, 3), full(ir.Q4_K, 3),
		gputest.MatVec{DT: ir.Q8_0, Norm: true, Bias: true, BiasDT: ir.F16, T: 1, N: 45, K: 128},
		gputest.MatVec{DT: ir.F32, T: 1, N: 13, K: 256},
		gputest.MatVec{Op: ir.OpMatMul, DT: ir.Q4_0, Bias: true, T: 2, N: 45, K: 128})
	cases := gputest.Cases(seeds, mvs...)
	// swiglu: F = 18 (a partial block), RMSNorm and gain.
	cases = append(cases, gputest.Cases(seeds, []gputest.SwiGLU{{DT: ir.F32, T: 1, F: 18}, {DT: ir.Q4_K, T: 1, F: 18}, {DT: ir.Q4_0, T: 2, F: 41}}...)...)
	// qkv_rope, attention (the prefill-like step has a row at position 0,
	// shorter than the splits), embedding gathers and the row ops.
	cases = append(cases, gputest.Cases(seeds, gputest.RoPECases()...)...)
	cases = append(cases, gputest.Cases(seeds, gputest.AttentionCases([]int32{0, 3, 40, 79})...)...)
	cases = append(cases, attnPrefillCases()...)
	cases = append(cases, gputest.Cases(seeds, gputest.Embeds(ir.F16, ir.Q4_0, ir.Q4_K, ir.Q6_K)...)...)
	cases = append(cases, gputest.Cases(seeds, gputest.RowOps("", "rmsnorm", "rmsnorm_f16gain", "softmax", "add", "mul_broadcast", "silu", "gelu")...)...)
	// The vector-path cases and the gpt-oss ones both start from the seed
	// after the row ops.
	vec := *seeds
	cases = append(cases, vecEmuCases(&vec)...)
	cases = append(cases, moeEmuCases(seeds)...)
	// The newer families' projections (issue 15: per-head q/k norms, rope
	// frequency factors, and unfused rope/kvwrite), from their own seeds.
	fam := &gputest.Seeds{Last: 1900, Stream: 11}
	cases = append(cases, gputest.Cases(fam, gputest.QKNormCases()...)...)
	cases = append(cases, gputest.Cases(fam, gputest.UnfusedCases()...)...)
	// Embedding gathers of MLX affine rows (mlx-lm quantizes the
	// embedding too), from their own seeds.
	mlx := &gputest.Seeds{Last: 2900, Stream: 11}
	cases = append(cases, gputest.Cases(mlx, gputest.Embeds(ir.MLXQ4G64, ir.MLXQ8G32)...)...)
	// Steps of slot 2: the cache writes land at the slot's rows (the
	// step's cache bases), from their own seeds.
	return append(cases, gputest.SlotCases(&gputest.Seeds{Last: 3900, Stream: 11})...)
}

// TestEmulate runs every case's launches on the CPU through cudaemu.h and
// compares outputs and KV-cache writes with ir/eval.
func TestEmulate(t *testing.T) {
	target.Emulate(t, emuCases(), emulator(clangxxOrSkip(t)).Run)
}

// attnPrefillCases are prefill steps over f16 caches, which attn_prefill
// (templates_attn.go) computes on the tensor cores: two query tiles (70
// tokens, the second partial) of consecutive positions with GQA; a window
// with sinks and scattered positions; head_dim 128 and Dv 64 ≠ head_dim,
// with more splits than the kernel fills. From their own seeds, after
// every other case's.
func attnPrefillCases() []gputest.Case {
	seq := make([]int32, 70)
	for i := range seq {
		seq[i] = int32(60 + i)
	}
	return gputest.Cases(&gputest.Seeds{Last: 4900, Stream: 11},
		gputest.Attention{Name: "flash_attention/prefill/f16/hd64/T=70", Cache: ir.F16, Splits: 4, HD: 64, DV: 64, H: 4, KV: 2, Ctx: 160, Scale: 0.125, Pos: seq},
		gputest.Attention{Name: "flash_attention/prefill/f16/window/sinks", Cache: ir.F16, Splits: 2, Window: 20, Sinks: true, HD: 32, DV: 32, H: 2, KV: 1,
			Pos: []int32{0, 1, 2, 19, 20, 21, 40, 77, 78, 79}},
		gputest.Attention{Name: "flash_attention/prefill/f16/hd128/dv64", Cache: ir.F16, Splits: 5, HD: 128, DV: 64, H: 2, KV: 2, Scale: 0.09, Pos: []int32{0, 3, 40, 79, 33}},
	)
}
