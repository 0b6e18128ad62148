package cuda_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
)

// The matrix-vector kernels read full chunks of a weight row with 16-byte
// loads through shared memory when the row's chunks are 16-byte aligned
// (codegen/cuda/vecload.go). These tests pin down which kernels do, check
// the emulated vector path against ir/eval for every dtype (emuCases adds
// vecEmuCases), and compile it to PTX.

// chunkElems is the elements per vector-path chunk of each weight dtype:
// 32 units, or more where 32 units are not a multiple of 16 bytes (Q2_K's
// 336 bytes are, but fewer than one 16-byte load per lane) or would leave
// lanes without a load (the float types).
var chunkElems = map[ir.DType]int{
	ir.F32: 128, ir.F16: 256, ir.BF16: 256,
	ir.Q4_0: 1024, ir.Q4_1: 1024, ir.Q5_0: 1024, ir.Q5_1: 1024, ir.Q8_0: 1024, ir.MXFP4: 1024,
	ir.Q4_K: 1024, ir.Q5_K: 1024, ir.Q2_K: 2048, ir.Q3_K: 2048, ir.Q6_K: 2048,
	ir.MLXQ4G32: 1024, ir.MLXQ4G64: 1024, ir.MLXQ4G128: 1024, ir.MLXQ8G32: 1024, ir.MLXQ8G64: 1024, ir.MLXQ8G128: 1024,
}

// vecK returns a row length that takes the vector path with at least two
// full chunks and, where the dtype allows one, a tail: a multiple of 256
// if possible, else of 32. Q3_K and Q6_K rows are 16-byte multiples only
// in whole chunks (8 super-blocks), so they get no tail.
func vecK(dt ir.DType) (k int, tail bool) {
	c, ok := chunkElems[dt]
	if !ok {
		panic(fmt.Sprintf("no chunk size for %s: add it to chunkElems", dt))
	}
	for _, step := range []int{256, 32} {
		for k := 2*c + step; k < 3*c; k += step {
			rb, err := dt.RowBytes(int64(k))
			if err == nil && rb%16 == 0 && k%c != 0 {
				return k, true
			}
		}
	}
	return 2 * c, false
}

// wantVec says whether rows of k elements of dt should take the vector
// path: rows of 16-byte multiples, at least one chunk long.
func wantVec(dt ir.DType, k int) bool {
	rb, err := dt.RowBytes(int64(k))
	return err == nil && rb%16 == 0 && k >= chunkElems[dt]
}

var loadsRE = regexp.MustCompile(`// (vec16|direct) loads: [^\n]*`)

// kernelLoads returns the weight-path comment of kernel name in src.
func kernelLoads(src, name string) (string, error) {
	at := strings.Index(src, " "+name+"(\n")
	if at < 0 {
		return "", fmt.Errorf("kernel %s not in the source", name)
	}
	body := src[at:]
	if end := strings.Index(body, "\n}\n"); end >= 0 {
		body = body[:end]
	}
	m := loadsRE.FindString(body)
	if m == "" {
		return "", fmt.Errorf("kernel %s does not say how it loads weights", name)
	}
	return m, nil
}

// checkLoads fails t unless every matrix-vector kernel of lib takes the
// vector path (vec) or the direct path (!vec); where tail is given, the
// vector path must leave a tail to the direct loop or not.
func checkLoads(t *testing.T, lib *cuda.Library, vec bool, tail *bool) {
	t.Helper()
	n := 0
	for _, k := range lib.Kernels {
		switch k.Family {
		case "matvec", "swiglu", "qkv_rope":
		default:
			continue
		}
		n++
		m, err := kernelLoads(lib.Source, k.Name)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case vec != strings.HasPrefix(m, "// vec16"):
			t.Errorf("%s: %q, want the %s path", k.Name, m, map[bool]string{true: "vector", false: "direct"}[vec])
		case vec && tail != nil && *tail != strings.Contains(m, "directly"):
			t.Errorf("%s: %q, want a tail: %v", k.Name, m, *tail)
		}
	}
	if n == 0 {
		t.Errorf("no matrix-vector kernel in the library")
	}
}

// vecGraph declares a graph of the three matrix-vector families with [., k]
// weights of dtype dt: fused matmul with RMSNorm, gain, bias and residual,
// swiglu, and qkv_rope into f16 caches.
func vecGraph(t *testing.T, dt ir.DType, k int) *ir.Graph {
	t.Helper()
	const F, H, HKV, HD = 24, 2, 1, 16
	b := ir.NewBuilder("vecload")
	wt := func(name string, d ir.DType, dims ...any) *ir.Value {
		return b.Weight(name, ir.Type{DType: d, Shape: ir.S(dims...)})
	}
	x := b.Input("x", gputest.F32("T", k))
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	mm := b.Add(ir.OpFusedMatMul, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1), "residual": int64(1)}, nil,
		x, wt("w", dt, k, k), wt("gain", ir.F32, k), wt("bias", ir.F16, k), x)
	sw := b.Add(ir.OpSwiGLU, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil, mm, wt("w_up", dt, 2*F, k), wt("gain2", ir.F16, k))
	kc := b.State("cache.k", ir.Type{DType: ir.F16, Shape: ir.S("C", HKV*HD)})
	vc := b.State("cache.v", ir.Type{DType: ir.F16, Shape: ir.S("C", HKV*HD)})
	q := b.Add(ir.OpQKVRoPE, ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": int64(HD),
		"base": 10000.0, "freq_scale": 1.0, "mode": "neox", "norm": int64(1), "eps": 1e-5, "gain": int64(1)}, nil,
		mm, wt("wqkv", dt, (H+2*HKV)*HD, k), pos, kc, vc, wt("gain3", ir.F32, k))
	b.Output("sw", sw)
	b.Output("q", q)
	b.Output(kc.Name(), kc)
	b.Output(vc.Name(), vc)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestVecLoadPlan checks the path every matrix-vector kernel takes, per
// dtype: vector (with a tail where the dtype allows one) at vecK, direct
// for rows that are not 16-byte multiples (Q4_0 with 69 blocks, Q6_K with
// 22 super-blocks, as TinyLlama's 5632-wide down projection) or shorter
// than a chunk, and the exact chunk arithmetic for a few.
func TestVecLoadPlan(t *testing.T) {
	type plan struct {
		dt  ir.DType
		k   int
		vec bool
	}
	var plans []plan
	for _, dt := range cuda.WeightDTypes() {
		k, _ := vecK(dt)
		plans = append(plans, plan{dt, k, true}, plan{dt, chunkElems[dt] / 2, false})
	}
	plans = append(plans, plan{ir.Q4_0, 32 * 69, false}, plan{ir.Q6_K, 5632, false},
		plan{ir.MXFP4, 2304, false}, plan{ir.F16, 4096, true}, plan{ir.Q8_0, 5632, true})
	exact := map[string]string{
		"q4_0/2304": "// vec16 loads: 2 chunks of 32 units (576 bytes) per row through shared memory, then 8 units directly.",
		"q6_k/4096": "// vec16 loads: 2 chunks of 64 units (1680 bytes) per row through shared memory.",
		"q2_k/5120": "// vec16 loads: 2 chunks of 64 units (672 bytes) per row through shared memory, then 32 units directly.",
		"f16/544":   "// vec16 loads: 2 chunks of 256 units (512 bytes) per row through shared memory, then 32 units directly.",
		"q4_0/2208": "// direct loads: a q4_0 row is 1242 bytes, not a multiple of 16, so its chunks are not 16-byte aligned.",
		"q4_k/512":  "// direct loads: a row of 16 units is shorter than one 32-unit chunk.",
	}
	seen := map[string]bool{}
	for _, c := range plans {
		t.Run(fmt.Sprintf("%s/K=%d", c.dt, c.k), func(t *testing.T) {
			if c.vec != wantVec(c.dt, c.k) {
				t.Fatalf("test table: K=%d of %s takes the vector path: %v", c.k, c.dt, wantVec(c.dt, c.k))
			}
			lib, err := cuda.Emit(vecGraph(t, c.dt, c.k))
			if err != nil {
				t.Fatal(err)
			}
			tail := c.k%chunkElems[c.dt] != 0
			checkLoads(t, lib, c.vec, &tail)
			key := fmt.Sprintf("%s/%d", c.dt, c.k)
			if want, ok := exact[key]; ok {
				seen[key] = true
				for _, k := range lib.Kernels {
					if k.Family != "matvec" {
						continue
					}
					if got, _ := kernelLoads(lib.Source, k.Name); got != want {
						t.Errorf("%s: %q, want %q", k.Name, got, want)
					}
				}
			}
		})
	}
	if len(seen) != len(exact) {
		t.Errorf("%d of the %d exact plans were checked", len(seen), len(exact))
	}
}

// TestVecLoadCompile compiles the vector path of every dtype to PTX and
// checks that it became what it is for: 16-byte non-coherent global loads
// (ld.global.nc.v4.u32), 16-byte shared stores, warp barriers, and decoders
// reading shared memory (the generic stage pointer resolved to .shared).
func TestVecLoadCompile(t *testing.T) {
	clang := clangOrSkip(t)
	for _, dt := range cuda.WeightDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			k, _ := vecK(dt)
			lib, err := cuda.Emit(vecGraph(t, dt, k))
			if err != nil {
				t.Fatal(err)
			}
			ptx := compilePTX(t, clang, gputest.WriteTemp(t, "lib.cu", lib.Source))
			for _, want := range []string{"ld.global.nc.v4.u32", "st.shared.v4.u32", "bar.warp.sync", "ld.shared."} {
				if !strings.Contains(ptx, want) {
					t.Errorf("no %s in the PTX", want)
				}
			}
		})
	}
}

// vecEmuCases are the emulation cases of the vector path: every dtype's
// fused matmul (RMSNorm, gain, bias, residual) at vecK, two rows of one and
// a plain matmul with bias; swiglu and qkv_rope (both dot loops of a
// feature share the warp's stage) for several. Each checks that its
// kernels took the vector path.
func vecEmuCases(seeds *gputest.Seeds) []gputest.Case {
	vec := func(t *testing.T, lib *gpu.Library) {
		checkLoads(t, lib, true, nil)
		checkGridDepSync(t, lib.Source)
	}
	// A one-token product that multiplies Q8_0 activations waits for the
	// grid before it after its first weight loads (mvIds).
	vecQ8 := func(t *testing.T, lib *gpu.Library) {
		checkLoads(t, lib, true, nil)
		if checkGridDepSync(t, lib.Source) == 0 {
			t.Error("no kernel waits after its first weight loads")
		}
	}
	mv := func(op ir.Op, dt ir.DType, T, N int) gputest.MatVec {
		fused := op == ir.OpFusedMatMul
		K, _ := vecK(dt)
		check := vec
		if cuda.RoundsActivations(dt) {
			check = vecQ8
		}
		return gputest.MatVec{Name: fmt.Sprintf("vec/%s/%s/T=%d,N=%d", op, dt, T, N), Op: op, DT: dt,
			Norm: fused, Gain: fused, Bias: true, Res: fused, T: T, N: N, K: K, Check: check}
	}
	var mvs []gputest.MatVec
	for _, dt := range cuda.WeightDTypes() {
		mvs = append(mvs, mv(ir.OpFusedMatMul, dt, 1, 13))
	}
	mvs = append(mvs, mv(ir.OpFusedMatMul, ir.Q4_K, 2, 9), mv(ir.OpMatMul, ir.Q8_0, 1, 10))
	cases := gputest.Cases(seeds, mvs...)
	var sws []gputest.SwiGLU
	for _, c := range []struct {
		dt   ir.DType
		T, F int
	}{{ir.F16, 1, 9}, {ir.Q4_0, 2, 6}, {ir.Q4_K, 1, 9}, {ir.Q6_K, 1, 5}, {ir.MXFP4, 1, 6}, {ir.Q8_0, 1, 7}} {
		K, _ := vecK(c.dt)
		sws = append(sws, gputest.SwiGLU{Name: fmt.Sprintf("vec/swiglu/%s/T=%d,F=%d", c.dt, c.T, c.F), DT: c.dt, T: c.T, F: c.F, K: K, GainDT: ir.F16, Check: vec})
	}
	cases = append(cases, gputest.Cases(seeds, sws...)...)
	var qs []gputest.QKVRoPE
	for _, c := range []struct {
		dt, cache ir.DType
		mode      string
		bias      bool
	}{{ir.Q4_K, ir.F16, "neox", true}, {ir.Q5_0, ir.F32, "normal", false}, {ir.F32, ir.F32, "normal", true}, {ir.Q4_0, ir.F32, "neox", true}} {
		q := gputest.RoPE(c.dt, c.cache, c.mode, 16, c.bias)
		q.Name = fmt.Sprintf("vec/qkv_rope/%s/%s/cache=%s", c.dt, c.mode, c.cache)
		q.K, _ = vecK(c.dt)
		q.H, q.HKV, q.FreqScale, q.Pos, q.Check = 2, 1, 1, []int32{5, 1100}, vec
		qs = append(qs, q)
	}
	return append(cases, gputest.Cases(seeds, qs...)...)
}

// TestEmuSyncwarp checks the emulation's __syncwarp and vector load: lanes
// exchanging values through shared memory between warp barriers (three
// rounds, two warps of a block, so a missing or per-block barrier shows as
// stale values), a __syncwarp a lane never reaches (reported, as for the
// shuffles), and a vector load from a misaligned address (reported).
func TestEmuSyncwarp(t *testing.T) {
	clang := clangxxOrSkip(t)
	for _, c := range []struct {
		name, src, want string
		fails           bool
	}{
		{"rotate", syncwarpRotateSrc, "ok", false},
		{"divergent", syncwarpDivergentSrc, "non-uniform control flow", true},
		{"misaligned", misalignedLoadSrc, "misaligned", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "k.cpp")
			// The library prelude defines v16 and ld_nc16, as in an emitted library.
			if err := os.WriteFile(path, []byte(emittedPrelude(t)+c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			exe := filepath.Join(dir, "k")
			if out, err := exec.Command(clang, append(emuArgs(), "-o", exe, "-x", "c++", path)...).CombinedOutput(); err != nil {
				t.Fatalf("clang++: %v\n%s", err, out)
			}
			out, err := exec.Command(exe).CombinedOutput()
			if (err != nil) != c.fails || !strings.Contains(string(out), c.want) {
				t.Fatalf("want %q (failing: %v), got %v\n%s", c.want, c.fails, err, out)
			}
		})
	}
}

// emittedPrelude returns the prelude of an emitted library (everything
// before the first decoder).
func emittedPrelude(t *testing.T) string {
	t.Helper()
	lib, err := cuda.Emit(vecGraph(t, ir.F16, 512))
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(lib.Source, "\n// dq_")
	if at < 0 {
		t.Fatal("no decoder in the emitted library")
	}
	return lib.Source[:at]
}

// syncwarpRotateSrc: each lane of each warp writes its value to shared
// memory, waits at __syncwarp, takes its right neighbour's, and waits
// again before the next round overwrites the slots; after three rounds lane
// l holds the value of lane l+3 of its own warp.
const syncwarpRotateSrc = `
extern "C" __global__ void rotate(const float* x, float* out) {
    __shared__ float s[2][32];
    const unsigned tid = threadIdx.x, lane = tid & 31u, warp = tid >> 5;
    float v = x[blockIdx.x * 64 + tid];
    for (int r = 0; r < 3; ++r) {
        s[warp][lane] = v;
        __syncwarp();
        v = s[warp][(lane + 1) & 31u];
        __syncwarp();
    }
    out[blockIdx.x * 64 + tid] = v;
}

int main() {
    std::vector<float> x(192), out(192);
    for (unsigned i = 0; i < 192; ++i) {
        x[i] = float(i) * 0.5f - 7.0f;
    }
    cudaemu::launch(dim3{3, 1, 1}, dim3{64, 1, 1}, [&] { rotate(x.data(), out.data()); });
    for (unsigned i = 0; i < 192; ++i) {
        const unsigned w = i / 32 * 32, from = w + (i - w + 3) % 32;
        if (out[i] != x[from]) {
            std::printf("thread %u: %g, want %g\n", i, out[i], x[from]);
            return 1;
        }
    }
    std::printf("ok\n");
    return 0;
}
`

// syncwarpDivergentSrc: lane 3 returns before the warp barrier.
const syncwarpDivergentSrc = `
extern "C" __global__ void bad(float* out) {
    const unsigned lane = threadIdx.x & 31u;
    if (lane == 3) {
        return;
    }
    __syncwarp();
    out[threadIdx.x] = 1.0f;
}

int main() {
    std::vector<float> out(32);
    cudaemu::launch(dim3{1, 1, 1}, dim3{32, 1, 1}, [&] { bad(out.data()); });
    std::printf("no error\n");
    return 0;
}
`

// misalignedLoadSrc: a vector load 8 bytes past a 16-byte boundary.
const misalignedLoadSrc = `
int main() {
    alignas(16) unsigned char buf[64] = {};
    const v16 a = ld_nc16((const v16*)(buf + 16));
    std::printf("aligned %u\n", a.x);
    const v16 b = ld_nc16((const v16*)(buf + 8));
    std::printf("no error %u\n", b.x);
    return 0;
}
`
