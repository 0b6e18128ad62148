package cuda_test

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
)

// The tiled prefill kernels (templates_tiled.go): the emulated tensor-core
// mma against a plain matrix product, the schedule (tiled launches only for
// T ≥ 2), and the kernels against ir/eval for every weight dtype.

// mmaTestSrc runs the prelude's mma_16816 in two warps, each loading its
// fragments of A (16×16), B (16×8) and C (16×8) by the formulas of the PTX
// ISA, section 9.7.14.5.8 ("Matrix Fragments for mma.m16n8k16 with floating
// point type"), written out literally, and compares D with a plain product.
// Every element of A, B and C is distinct and every sum is exact in f32, so
// D must match exactly, and any transposition or permutation of a layout
// changes it: the test checks that loading A transposed fails.
const mmaTestSrc = `
extern "C" __global__ void mma_test(const float* A, const float* B, const float* C, float* D, const int transposeA) {
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    const unsigned groupID = lane >> 2, threadID_in_group = lane % 4;
    const float* a_ = A + warp * 256;
    const float* b_ = B + warp * 128;
    const float* c_ = C + warp * 128;
    u32 a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
    float c[4];
    for (unsigned i = 0; i < 8; ++i) {
        const unsigned row = (i < 2 || (4 <= i && i < 6)) ? groupID : groupID + 8;
        const unsigned col = i < 4 ? (threadID_in_group * 2) + (i & 0x1) : (threadID_in_group * 2) + (i & 0x1) + 8;
        const float v = transposeA ? a_[col * 16 + row] : a_[row * 16 + col];
        a[i / 2] |= u32(f2h(v)) << (16 * (i % 2));
    }
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = i < 2 ? (threadID_in_group * 2) + (i & 0x1) : (threadID_in_group * 2) + (i & 0x1) + 8;
        const unsigned col = groupID;
        b[i / 2] |= u32(f2h(b_[row * 8 + col])) << (16 * (i % 2));
    }
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = i < 2 ? groupID : groupID + 8;
        const unsigned col = (threadID_in_group * 2) + (i & 0x1);
        c[i] = c_[row * 8 + col];
    }
    mma_16816(c, a, b);
    for (unsigned i = 0; i < 4; ++i) {
        const unsigned row = i < 2 ? groupID : groupID + 8;
        const unsigned col = (threadID_in_group * 2) + (i & 0x1);
        D[warp * 128 + row * 8 + col] = c[i];
    }
}

int main() {
    // A[r][k] = ±(16r + k + 1)/64 (+ 4 in warp 1), B[k][n] = (8k + n + 1)/128 (− 1 in warp 1),
    // C[r][n] = (8r + n)/4 − 10 (+ 100 in warp 1): f16-exact, distinct, sums exact in f32.
    std::vector<float> A(512), B(256), C(256), D(256);
    for (unsigned w = 0; w < 2; ++w) {
        for (unsigned r = 0; r < 16; ++r) {
            for (unsigned k = 0; k < 16; ++k) {
                A[w * 256 + r * 16 + k] = ((r + k) % 3 == 0 ? -1.0f : 1.0f) * float(16 * r + k + 1) / 64.0f + 4.0f * float(w);
            }
        }
        for (unsigned k = 0; k < 16; ++k) {
            for (unsigned n = 0; n < 8; ++n) {
                B[w * 128 + k * 8 + n] = float(8 * k + n + 1) / 128.0f - float(w);
            }
        }
        for (unsigned r = 0; r < 16; ++r) {
            for (unsigned n = 0; n < 8; ++n) {
                C[w * 128 + r * 8 + n] = float(8 * r + n) / 4.0f - 10.0f + 100.0f * float(w);
            }
        }
    }
    int bad = 0;
    for (int transposeA = 0; transposeA < 2; ++transposeA) {
        cudaemu::launch(dim3{1, 1, 1}, dim3{64, 1, 1}, [&] { mma_test(A.data(), B.data(), C.data(), D.data(), transposeA); });
        int wrong = 0;
        for (unsigned w = 0; w < 2; ++w) {
            for (unsigned r = 0; r < 16; ++r) {
                for (unsigned n = 0; n < 8; ++n) {
                    double want = C[w * 128 + r * 8 + n];
                    for (unsigned k = 0; k < 16; ++k) {
                        want += double(A[w * 256 + r * 16 + k]) * double(B[w * 128 + k * 8 + n]);
                    }
                    const double got = D[w * 128 + r * 8 + n];
                    if (got != want) {
                        ++wrong;
                        if (!transposeA && wrong <= 5) {
                            std::printf("warp %u D[%u][%u] = %.9g, want %.9g\n", w, r, n, got, want);
                        }
                    }
                }
            }
        }
        if (!transposeA && wrong > 0) {
            std::printf("%d of 256 elements differ\n", wrong);
            bad = 1;
        }
        if (transposeA && wrong == 0) {
            std::printf("loading A transposed gives the same D: the test cannot see a transposed layout\n");
            bad = 1;
        }
    }
    if (!bad) {
        std::printf("ok\n");
    }
    return bad;
}
`

// TestMMAEmu runs mmaTestSrc against the prelude of an emitted library
// (mma_16816, f2h) and cudaemu.h's emulated mma.
func TestMMAEmu(t *testing.T) {
	clang := clangxxOrSkip(t)
	lib, err := cuda.Emit(dtypeGraph(t, ir.F16))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "mma.cpp")
	if err := os.WriteFile(src, []byte(lib.Source+mmaTestSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "mma")
	if out, err := exec.Command(clang, append(emuArgs(), "-o", exe, "-x", "c++", src)...).CombinedOutput(); err != nil {
		t.Fatalf("clang++: %v\n%s", err, out)
	}
	out, err := exec.Command(exe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestTiledSchedule checks every dtype's launches: fused_matmul, matmul and
// swiglu have a matrix-vector launch for T = 1 and a tiled one (same
// arguments, grid of 64-feature × 64-token tiles) for T ≥ 2; qkv_rope's
// T ≥ 2 steps are a tiled product into the scratch and a rope_kv launch;
// each step computes every value exactly once (rope_kv finishing qkv_rope's).
func TestTiledSchedule(t *testing.T) {
	for _, dt := range cuda.WeightDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			lib, err := cuda.Emit(dtypeGraph(t, dt))
			if err != nil {
				t.Fatal(err)
			}
			family, dtype := map[string]string{}, map[string]string{}
			for _, k := range lib.Kernels {
				family[k.Name], dtype[k.Name] = k.Family, k.DType
			}
			tiled, mv, quant := 0, 0, 0
			// A Q4_0 or Q8_0 product (matrix-vector or integer tiled)
			// reads its rows from the scratch, where the q8_quant launch
			// before it (same value and steps) rounded them; effective
			// gives a launch's arguments with that launch's x in place of
			// the scratch, which are the float path's.
			effective := func(i int) []cuda.Arg {
				l := lib.Launches[i]
				if i == 0 || family[lib.Launches[i-1].Kernel] != "q8_quant" {
					return l.Args
				}
				q := lib.Launches[i-1]
				if q.Value != l.Value || q.MinT != l.MinT || q.MaxT != l.MaxT || l.Args[0].Value != -1 ||
					fmt.Sprint(q.Args[len(q.Args)-1]) != fmt.Sprint(l.Args[0]) {
					t.Errorf("q8_quant launch %+v does not feed %+v", q, l)
				}
				return append([]cuda.Arg{q.Args[0]}, l.Args[1:]...)
			}
			// after returns the launch index after i, past a q8_quant.
			after := func(i int) int {
				if family[lib.Launches[i+1].Kernel] == "q8_quant" {
					return i + 2
				}
				return i + 1
			}
			for i, l := range lib.Launches {
				args := effective(i)
				switch family[l.Kernel] {
				case "q8_quant":
					quant++
				case "matvec", "swiglu":
					mv++
					n := after(i)
					next := lib.Launches[n]
					want := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled"}[family[l.Kernel]]
					if l.MinT != 0 || l.MaxT != 1 || family[next.Kernel] != want || next.MinT != 2 || next.MaxT != 0 ||
						next.Value != l.Value || fmt.Sprint(effective(n)) != fmt.Sprint(args) {
						t.Errorf("launch %s (min %d, max %d) is not followed by its tiled launch: %+v", l.Kernel, l.MinT, l.MaxT, next)
					}
				case "matmul_tiled", "swiglu_tiled":
					tiled++
					// 64 tokens and 4 warps per block (f16 kernels), or the
					// integer kernels' 32 tokens per warp row (mmqShape).
					tile, threads := int64(64), 128
					if d, ok := ir.ParseDType(dtype[l.Kernel]); ok && cuda.MMQ(d) {
						tile, threads = cuda.MMQTile()
					}
					if g := l.Grid[1]; !g.PerToken || g.Tile != tile || g.N != 1 || l.Threads != threads {
						t.Errorf("tiled launch %s: grid %+v, %d threads, want tiles of %d tokens, %d threads", l.Kernel, l.Grid, l.Threads, tile, threads)
					}
					if c, want := l.Grid[1].Count(int(tile)+1), int64(2); c != want {
						t.Errorf("tiled launch %s: %d token tiles for T = %d, want %d", l.Kernel, c, tile+1, want)
					}
				case "qkv_rope":
					// T = 1 only; prefill is a tiled product into the
					// scratch, then rope_kv with the launch's pos, cache
					// bases, caches and output.
					mv++
					m := after(i)
					mm, rope := lib.Launches[m], lib.Launches[m+1]
					n := len(l.Args)
					if l.MinT != 0 || l.MaxT != 1 || family[mm.Kernel] != "matmul_tiled" || mm.MinT != 2 || mm.Value != l.Value ||
						mm.Args[len(mm.Args)-1].Value != -1 || family[rope.Kernel] != "rope_kv" || rope.MinT != 2 || rope.Value != l.Value ||
						fmt.Sprint(rope.Args[1:]) != fmt.Sprint([]cuda.Arg{l.Args[2], l.Args[3], l.Args[4], l.Args[5], l.Args[n-1]}) {
						t.Errorf("qkv_rope launch %s (min %d, max %d) is not followed by its tiled product and rope_kv: %+v, %+v", l.Kernel, l.MinT, l.MaxT, mm, rope)
					}
				}
			}
			if q8 := cuda.RoundsActivations(dt); q8 != (quant > 0) {
				t.Errorf("%d q8_quant launches", quant)
			}
			if tiled != mv || tiled < 4 {
				t.Errorf("%d tiled launches for %d matrix-vector ones (at least fused_matmul, matmul, swiglu, qkv_rope)", tiled, mv)
			}
			for _, T := range []int{1, 2, 64, 65} {
				if err := target.Schedule.Check(lib, T); err != nil {
					t.Error(err)
				}
				seen := map[string]int{}
				for _, l := range lib.Step(T) {
					// attention and moe are two launches of one value each
					if f := family[l.Kernel]; f != "attn_split" && f != "attn_merge" && f != "moe_up" && f != "moe_down" && f != "rope_kv" && f != "q8_quant" {
						seen[fmt.Sprint(l.Value)]++
					}
				}
				for v, n := range seen {
					if n != 1 {
						t.Errorf("T = %d: value %s computed by %d launches", T, v, n)
					}
				}
			}
		})
	}
}

// tiledCases: every weight dtype with one graph holding a fused_matmul
// (RMSNorm, gain, bias, residual; N = 45: a partial feature tile) and a
// swiglu (RMSNorm, f16 gain; F = 41), at T cycling through 2, 3, 9, 33, 65
// (partial token tiles; 65 is a full tile and one token), K = 128 (256 for
// the K-quants' super-blocks); then
// partial K chunks (F32/F16/BF16 with K = 100), several feature tiles
// (N = 130), plain matmul with an f16 bias, no prologue at all, and token
// rows whose magnitudes span 1e-6 to 1e5 (outside f16's range either way:
// the per-row power-of-two scale), checked row by row.
//
// Tolerance 1e-5 of the largest |ref| for every dtype: the split makes each
// product exact to 2^-22 relative (≈2.4e-7) and the rest is f32
// accumulation over K ≤ 256, as in the matrix-vector kernels; measured
// maxima are a few 1e-7. A kernel that dropped the lo products would round
// every activation (or weight) to f16, 2^-11 relative, ≈1e-4 here.
func tiledCases() []gputest.Case {
	seeds := &gputest.Seeds{Last: 7000, Stream: 11}
	var cases []gputest.Case
	Ts := []int{2, 3, 9, 33, 65}
	const tol = 1e-5
	for i, dt := range cuda.WeightDTypes() {
		T := Ts[i%len(Ts)]
		r := seeds.Next()
		cases = append(cases, gputest.Case{Name: fmt.Sprintf("tiled/%s/fused+swiglu/T=%d", dt, T), Ctx: 1, T: T, Tol: tol,
			Build: func(t *testing.T) (*ir.Graph, gputest.WeightMap, map[string]eval.Tensor) {
				const N, F = 45, 41
				K := 128 // 4 chunks; the K-quants need a whole super-block
				switch dt {
				case ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
					K = 256
				}
				k := r.Kit(t, "tiled")
				x := k.B.Input("x", gputest.F32("T", K))
				mm := k.B.Add(ir.OpFusedMatMul, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1), "residual": int64(1)}, nil,
					x, k.Weight("w", dt, 1, N, K), k.Weight("gain", ir.F32, 1, K), k.Weight("bias", ir.F32, 1, N), k.B.Input("res", gputest.F32("T", N)))
				sw := k.B.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
					x, k.Weight("w_up", dt, 1, 2*F, K), k.Weight("gain2", ir.F16, 1, K))
				k.B.Output("sw", sw)
				return k.Finish(mm), k.W, map[string]eval.Tensor{
					"x":   {Shape: []int64{int64(T), int64(K)}, F32: k.Vals(T*K, 2)},
					"res": {Shape: []int64{int64(T), N}, F32: k.Vals(T*N, 1)},
				}
			}})
	}
	mms := []gputest.MatVec{
		{DT: ir.F32, Norm: true, Res: true, T: 33, N: 7, K: 100},
		{DT: ir.F16, Norm: true, Gain: true, Bias: true, BiasDT: ir.F16, T: 9, N: 45, K: 100},
		{DT: ir.BF16, T: 65, N: 130, K: 100},
		{DT: ir.Q4_0, Norm: true, Gain: true, Bias: true, Res: true, T: 65, N: 130, K: 128},
		{Op: ir.OpMatMul, DT: ir.Q8_0, Bias: true, BiasDT: ir.F16, T: 9, N: 45, K: 128},
		{DT: ir.Q6_K, Res: true, T: 2, N: 64, K: 256},
		// The integer kernels (templates_mmq.go) over several stages of
		// four blocks, the last one half full (K/32 = 6 and 10), and two
		// feature tiles (N > 128).
		{DT: ir.Q4_0, Norm: true, Gain: true, GainDT: ir.F16, T: 70, N: 200, K: 192},
		{DT: ir.Q8_0, Norm: true, Res: true, T: 17, N: 140, K: 320},
	}
	for i := range mms {
		mms[i].Prefix, mms[i].Tol = "tiled/", tol
	}
	cases = append(cases, gputest.Cases(seeds, mms...)...)
	// swiglu without the RMSNorm prologue, F16 weights, two token tiles.
	sw := seeds.Next()
	cases = append(cases, gputest.Case{Name: "tiled/swiglu/f16/no-norm/T=65,F=70", Ctx: 1, T: 65, Tol: tol,
		Build: func(t *testing.T) (*ir.Graph, gputest.WeightMap, map[string]eval.Tensor) {
			const T, K, F = 65, 64, 70
			k := sw.Kit(t, "tiled")
			x := k.B.Input("x", gputest.F32("T", K))
			out := k.B.Add(ir.OpSwiGLU, ir.Attrs{}, nil, x, k.Weight("w", ir.F16, 1, 2*F, K))
			return k.Finish(out), k.W, map[string]eval.Tensor{"x": {Shape: []int64{T, K}, F32: k.Vals(T*K, 1)}}
		}})
	// swiglu of Q4_0, Q8_0 and Q5_0 weights over two stages (K/32 = 6), two
	// token tiles and a partial feature tile (F = 70 of 64 per tile).
	for _, dt := range []ir.DType{ir.Q4_0, ir.Q8_0, ir.Q5_0} {
		r := seeds.Next()
		cases = append(cases, gputest.Case{Name: fmt.Sprintf("tiled/swiglu/%s/stages/T=66,F=70", dt), Ctx: 1, T: 66, Tol: tol,
			Build: func(t *testing.T) (*ir.Graph, gputest.WeightMap, map[string]eval.Tensor) {
				const T, K, F = 66, 192, 70
				k := r.Kit(t, "tiled")
				x := k.B.Input("x", gputest.F32("T", K))
				out := k.B.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
					x, k.Weight("w", dt, 1, 2*F, K), k.Weight("gain", ir.F32, 1, K))
				return k.Finish(out), k.W, map[string]eval.Tensor{"x": {Shape: []int64{T, K}, F32: k.Vals(T*K, 1)}}
			}})
	}
	// Row magnitudes 1e-6 .. 1e5 without RMSNorm: only the row scale keeps
	// the f16 operands in range (1e5 overflows f16; 1e-6·2^-11 is below its
	// subnormals). Compared row by row.
	for _, dt := range []ir.DType{ir.F32, ir.Q4_K} {
		r := seeds.Next()
		cases = append(cases, gputest.Case{Name: fmt.Sprintf("tiled/matmul/%s/row-magnitudes/T=12,N=40", dt), Ctx: 1, T: 12, Tol: tol, PerRow: true,
			Build: func(t *testing.T) (*ir.Graph, gputest.WeightMap, map[string]eval.Tensor) {
				const T, K, N = 12, 256, 40
				k := r.Kit(t, "tiled")
				x := k.B.Input("x", gputest.F32("T", K))
				out := k.B.MatMul(x, k.Weight("w", dt, 1, N, K), nil)
				xv := k.Vals(T*K, 1)
				for r := 0; r < T; r++ {
					m := float32(math.Pow(10, float64(r%12)-6)) // 1e-6 .. 1e5
					for i := r * K; i < (r+1)*K; i++ {
						xv[i] *= m
					}
				}
				return k.Finish(out), k.W, map[string]eval.Tensor{"x": {Shape: []int64{T, K}, F32: xv}}
			}})
	}
	return cases
}

// TestEmulateTiled runs tiledCases through the CPU emulation.
func TestEmulateTiled(t *testing.T) {
	target.Emulate(t, tiledCases(), emulator(clangxxOrSkip(t)).Run)
}
