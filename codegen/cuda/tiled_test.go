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
			family := map[string]string{}
			for _, k := range lib.Kernels {
				family[k.Name] = k.Family
			}
			tiled, mv := 0, 0
			for i, l := range lib.Launches {
				switch family[l.Kernel] {
				case "matvec", "swiglu":
					mv++
					next := lib.Launches[i+1]
					want := map[string]string{"matvec": "matmul_tiled", "swiglu": "swiglu_tiled"}[family[l.Kernel]]
					if l.MinT != 0 || l.MaxT != 1 || family[next.Kernel] != want || next.MinT != 2 || next.MaxT != 0 ||
						next.Value != l.Value || fmt.Sprint(next.Args) != fmt.Sprint(l.Args) {
						t.Errorf("launch %s (min %d, max %d) is not followed by its tiled launch: %+v", l.Kernel, l.MinT, l.MaxT, next)
					}
				case "matmul_tiled", "swiglu_tiled":
					tiled++
					if g := l.Grid[1]; !g.PerToken || g.Tile != 64 || g.N != 1 || l.Threads != 128 {
						t.Errorf("tiled launch %s: grid %+v, %d threads", l.Kernel, l.Grid, l.Threads)
					}
					if c := l.Grid[1].Count(65); c != 2 {
						t.Errorf("tiled launch %s: %d token tiles for T = 65, want 2", l.Kernel, c)
					}
				case "qkv_rope":
					// T = 1 only; prefill is a tiled product into the
					// scratch, then rope_kv with the launch's pos, caches
					// and output.
					mv++
					mm, rope := lib.Launches[i+1], lib.Launches[i+2]
					n := len(l.Args)
					if l.MinT != 0 || l.MaxT != 1 || family[mm.Kernel] != "matmul_tiled" || mm.MinT != 2 || mm.Value != l.Value ||
						mm.Args[len(mm.Args)-1].Value != -1 || family[rope.Kernel] != "rope_kv" || rope.MinT != 2 || rope.Value != l.Value ||
						fmt.Sprint(rope.Args[1:]) != fmt.Sprint([]cuda.Arg{l.Args[2], l.Args[3], l.Args[4], l.Args[n-1]}) {
						t.Errorf("qkv_rope launch %s (min %d, max %d) is not followed by its tiled product and rope_kv: %+v, %+v", l.Kernel, l.MinT, l.MaxT, mm, rope)
					}
				}
			}
			if tiled != mv || tiled < 4 {
				t.Errorf("%d tiled launches for %d matrix-vector ones (at least fused_matmul, matmul, swiglu, qkv_rope)", tiled, mv)
			}
			for _, T := range []int{1, 2, 64, 65} {
				if err := checkSchedule(lib, T); err != nil {
					t.Error(err)
				}
				seen := map[string]int{}
				for _, l := range lib.Step(T) {
					// attention and moe are two launches of one value each
					if f := family[l.Kernel]; f != "attn_split" && f != "attn_merge" && f != "moe_up" && f != "moe_down" && f != "rope_kv" {
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
func tiledCases() []emuCase {
	var cases []emuCase
	seed := uint64(7000)
	Ts := []int{2, 3, 9, 33, 65}
	const tol = 1e-5
	for i, dt := range cuda.WeightDTypes() {
		T := Ts[i%len(Ts)]
		seed++
		s := seed
		cases = append(cases, emuCase{name: fmt.Sprintf("tiled/%s/fused+swiglu/T=%d", dt, T), ctx: 1, T: T, tol: tol,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const N, F = 45, 41
				K := 128 // 4 chunks; the K-quants need a whole super-block
				switch dt {
				case ir.Q2_K, ir.Q3_K, ir.Q4_K, ir.Q5_K, ir.Q6_K:
					K = 256
				}
				k := newKit(t, "tiled", s)
				x := k.b.Input("x", f32T("T", K))
				mm := k.b.Add(ir.OpFusedMatMul, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1), "residual": int64(1)}, nil,
					x, k.weight("w", dt, 1, N, K), k.weight("gain", ir.F32, 1, K), k.weight("bias", ir.F32, 1, N), k.b.Input("res", f32T("T", N)))
				sw := k.b.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
					x, k.weight("w_up", dt, 1, 2*F, K), k.weight("gain2", ir.F16, 1, K))
				k.b.Output("sw", sw)
				return k.finish(mm), k.w, map[string]eval.Tensor{
					"x":   {Shape: []int64{int64(T), int64(K)}, F32: k.vals(T*K, 2)},
					"res": {Shape: []int64{int64(T), N}, F32: k.vals(T*N, 1)},
				}
			}})
	}
	type mm struct {
		dt                    ir.DType
		norm, gain, bias, res bool
		biasDT                ir.DType
		T, N, K               int
		op                    ir.Op
	}
	for _, c := range []mm{
		{ir.F32, true, false, false, true, ir.F32, 33, 7, 100, ir.OpFusedMatMul},
		{ir.F16, true, true, true, false, ir.F16, 9, 45, 100, ir.OpFusedMatMul},
		{ir.BF16, false, false, false, false, ir.F32, 65, 130, 100, ir.OpFusedMatMul},
		{ir.Q4_0, true, true, true, true, ir.F32, 65, 130, 128, ir.OpFusedMatMul},
		{ir.Q8_0, false, false, true, false, ir.F16, 9, 45, 128, ir.OpMatMul},
		{ir.Q6_K, false, false, false, true, ir.F32, 2, 64, 256, ir.OpFusedMatMul},
	} {
		seed++
		s := seed
		name := fmt.Sprintf("tiled/%s/%s/norm=%v,gain=%v,bias=%v(%s),res=%v/T=%d,N=%d,K=%d", c.op, c.dt, c.norm, c.gain, c.bias, c.biasDT, c.res, c.T, c.N, c.K)
		cases = append(cases, emuCase{name: name, ctx: 1, T: c.T, tol: tol, build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
			k := newKit(t, "tiled", s)
			x := k.b.Input("x", f32T("T", c.K))
			args := []*ir.Value{x, k.weight("w", c.dt, 1, c.N, c.K)}
			var attrs ir.Attrs
			if c.op == ir.OpFusedMatMul {
				attrs = ir.Attrs{"norm": bit(c.norm), "gain": bit(c.gain), "bias": bit(c.bias), "residual": bit(c.res)}
				if c.norm {
					attrs["eps"] = 1e-5
				}
			}
			if c.gain {
				args = append(args, k.weight("gain", ir.F32, 1, c.K))
			}
			if c.bias {
				args = append(args, k.weight("bias", c.biasDT, 1, c.N))
			}
			if c.res {
				args = append(args, k.b.Input("res", f32T("T", c.N)))
			}
			g := k.finish(k.b.Add(c.op, attrs, nil, args...))
			return g, k.w, map[string]eval.Tensor{
				"x":   {Shape: []int64{int64(c.T), int64(c.K)}, F32: k.vals(c.T*c.K, 2)},
				"res": {Shape: []int64{int64(c.T), int64(c.N)}, F32: k.vals(c.T*c.N, 1)},
			}
		}})
	}
	// swiglu without the RMSNorm prologue, F16 weights, two token tiles.
	seed++
	swSeed := seed
	cases = append(cases, emuCase{name: "tiled/swiglu/f16/no-norm/T=65,F=70", ctx: 1, T: 65, tol: tol,
		build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
			const T, K, F = 65, 64, 70
			k := newKit(t, "tiled", swSeed)
			x := k.b.Input("x", f32T("T", K))
			out := k.b.Add(ir.OpSwiGLU, ir.Attrs{}, nil, x, k.weight("w", ir.F16, 1, 2*F, K))
			return k.finish(out), k.w, map[string]eval.Tensor{"x": {Shape: []int64{T, K}, F32: k.vals(T*K, 1)}}
		}})
	// Row magnitudes 1e-6 .. 1e5 without RMSNorm: only the row scale keeps
	// the f16 operands in range (1e5 overflows f16; 1e-6·2^-11 is below its
	// subnormals). Compared row by row.
	for _, dt := range []ir.DType{ir.F32, ir.Q4_K} {
		seed++
		s := seed
		cases = append(cases, emuCase{name: fmt.Sprintf("tiled/matmul/%s/row-magnitudes/T=12,N=40", dt), ctx: 1, T: 12, tol: tol, perRow: true,
			build: func(t *testing.T) (*ir.Graph, weightMap, map[string]eval.Tensor) {
				const T, K, N = 12, 256, 40
				k := newKit(t, "tiled", s)
				x := k.b.Input("x", f32T("T", K))
				out := k.b.MatMul(x, k.weight("w", dt, 1, N, K), nil)
				xv := k.vals(T*K, 1)
				for r := 0; r < T; r++ {
					m := float32(math.Pow(10, float64(r%12)-6)) // 1e-6 .. 1e5
					for i := r * K; i < (r+1)*K; i++ {
						xv[i] *= m
					}
				}
				return k.finish(out), k.w, map[string]eval.Tensor{"x": {Shape: []int64{T, K}, F32: xv}}
			}})
	}
	return cases
}

// TestEmulateTiled runs tiledCases through the CPU emulation.
func TestEmulateTiled(t *testing.T) {
	clang := clangxxOrSkip(t)
	for _, c := range tiledCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runEmuCase(t, c, emulator(clang))
		})
	}
}
