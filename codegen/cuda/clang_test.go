package cuda_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/cuda"
	"github.com/minerva-llm/minerva/codegen/gpu/gputest"
	"github.com/minerva-llm/minerva/ir"
)

// The emitted CUDA C cannot run here (no GPU, no CUDA toolkit), so CI holds
// it to compiling: every emitted library goes through clang's CUDA mode
// (Debian's clang package; .ci/run installs it) to PTX for sm_80, against
// testdata/cudaprelude.h in place of the CUDA headers. A syntax error, a
// type error, a call of an undeclared function or a warning fails the test.
// Without clang the compile steps skip with a message saying so.

func clangPath() (string, bool) {
	p, err := exec.LookPath("clang")
	return p, err == nil
}

func clangOrSkip(t *testing.T) string {
	t.Helper()
	p, ok := clangPath()
	if !ok {
		t.Skip("clang not on PATH: compiling the emitted CUDA C to PTX needs it (apt-get install clang)")
	}
	return p
}

// clangArgs compile one .cu file to PTX. -nocudainc and -nocudalib because
// there is no CUDA installation: the prelude stands in for the headers. The
// target feature ptx70 enables the shuffle builtins, which clang otherwise
// gates on a CUDA version it detects from an installation (sm_80's PTX is
// 7.0 either way).
func clangArgs(src, out string) []string {
	inc, _ := filepath.Abs("testdata")
	return []string{"-x", "cuda", "--cuda-gpu-arch=sm_80", "--cuda-device-only", "-nocudainc", "-nocudalib",
		"-Xclang", "-target-feature", "-Xclang", "+ptx70",
		"-O2", "-Wall", "-Werror",
		"-S", "-o", out, "-include", filepath.Join(inc, "cudaprelude.h"), src}
}

var entryRE = regexp.MustCompile(`(?m)^\.visible \.entry (\w+)\(`)

// compilePTX compiles the library at path and checks that the PTX holds an
// entry point for every kernel the source defines, and nothing else.
func compilePTX(t *testing.T, clang, path string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.ptx")
	if b, err := exec.Command(clang, clangArgs(path, out)...).CombinedOutput(); err != nil {
		t.Fatalf("clang rejects %s: %v\n%s", path, err, b)
	}
	ptx, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, m := range regexp.MustCompile(`extern "C" __global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(`).FindAllStringSubmatch(string(src), -1) {
		want[m[1]] = true
	}
	got := map[string]bool{}
	for _, m := range entryRE.FindAllStringSubmatch(string(ptx), -1) {
		got[m[1]] = true
	}
	for k := range want {
		if !got[k] {
			t.Errorf("kernel %s has no PTX entry", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("PTX entry %s is no kernel of the source", k)
		}
	}
	if !strings.Contains(string(ptx), ".target sm_80") {
		t.Errorf("PTX is not for sm_80")
	}
	return string(ptx)
}

// TestCompile compiles the golden libraries and checks that the warp
// reductions became shfl.sync.down and the tiled kernels' mma is there.
func TestCompile(t *testing.T) {
	clang := clangOrSkip(t)
	for _, fx := range gputest.Fixtures {
		t.Run(fx.Golden(".cu"), func(t *testing.T) {
			t.Parallel()
			ptx := compilePTX(t, clang, filepath.Join("testdata", fx.Golden(".cu")))
			if !strings.Contains(ptx, "shfl.sync.down.b32") {
				t.Errorf("no shfl.sync.down in the PTX")
			}
			checkMMA(t, ptx, false, false)
		})
	}
}

// TestCompileDTypes emits a small graph per weight dtype (embed and a
// fused matmul with RMSNorm, gain, bias and residual; swiglu; qkv_rope with
// YaRN and an f16 cache; split-KV attention; rmsnorm, softmax, eltwise;
// topk_softmax and moe with f16 biases and swiglu_oai, and moe with silu
// under a dense route; argmax) and compiles it, so every decoder is
// compiled even where no fixture uses it.
func TestCompileDTypes(t *testing.T) {
	clang, haveClang := clangPath()
	for _, dt := range cuda.WeightDTypes() {
		t.Run(dt.String(), func(t *testing.T) {
			t.Parallel()
			lib, err := cuda.Emit(dtypeGraph(t, dt))
			if err != nil {
				t.Fatal(err)
			}
			families := map[string]bool{}
			for _, k := range lib.Kernels {
				families[k.Family] = true
			}
			for _, f := range []string{"embed", "matvec", "swiglu", "qkv_rope", "attn_split", "attn_merge", "rmsnorm",
				"softmax", "eltwise", "topk_softmax", "moe_up", "moe_down", "argmax"} {
				if !families[f] {
					t.Errorf("no %s kernel in the library", f)
				}
			}
			if !strings.Contains(lib.Source, "_expert(") || !strings.Contains(lib.Source, "fminf(g, 7.0f)") {
				t.Errorf("the moe kernels lack the expert lookup or the swiglu_oai clamp")
			}
			if !haveClang {
				t.Skip("clang not on PATH: compiling the emitted CUDA C to PTX needs it (apt-get install clang)")
			}
			s8 := cuda.MMQ(dt)
			checkMMA(t, compilePTX(t, clang, gputest.WriteTemp(t, "lib.cu", lib.Source)), !s8, s8)
		})
	}
}

// mmaInstr and mmaS8Instr are the tensor-core instructions of the tiled
// prefill kernels: f16 (templates_tiled.go) and, for Q4_0 and Q8_0 weights,
// s8 (templates_mmq.go).
const (
	mmaInstr   = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
	mmaS8Instr = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"
)

// checkMMA checks that the tiled kernels' inline PTX mma reached the PTX
// (every library these tests compile has tiled kernels): the s8 one where
// the library has Q4_0 or Q8_0 products (s8), the f16 one where it has
// others (f16).
func checkMMA(t *testing.T, ptx string, f16, s8 bool) {
	t.Helper()
	for _, c := range []struct {
		want  bool
		instr string
	}{{f16, mmaInstr}, {s8, mmaS8Instr}} {
		if c.want && !strings.Contains(ptx, c.instr) {
			t.Errorf("no %s in the PTX", c.instr)
		}
	}
	if !strings.Contains(ptx, mmaInstr) && !strings.Contains(ptx, mmaS8Instr) {
		t.Errorf("no tensor-core mma in the PTX")
	}
}

// dtypeGraph declares (no data: nothing runs) a graph that uses every
// kernel family with weights of dtype dt, and f16 small operands and an f16
// KV cache where the ops allow them.
func dtypeGraph(t *testing.T, dt ir.DType) *ir.Graph {
	t.Helper()
	const K, F, H, HKV, HD, C, E, FE = 256, 96, 4, 2, 32, 64, 4, 256
	b := ir.NewBuilder("dtypes")
	wt := func(name string, d ir.DType, dims ...any) *ir.Value {
		return b.Weight(name, ir.Type{DType: d, Shape: ir.S(dims...)})
	}
	ids := b.Input("ids", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	pos := b.Input("pos", ir.Type{DType: ir.I32, Shape: ir.S("T")})
	x := b.Embed(wt("table", dt, 10, K), ids)
	norm := ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1)}
	mm := b.Add(ir.OpFusedMatMul, ir.Attrs{"norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1), "residual": int64(1)}, nil,
		x, wt("w", dt, K, K), wt("gain", ir.F32, K), wt("bias", ir.F16, K), x)
	plain := b.MatMul(mm, wt("w2", dt, 40, K), nil)
	sw := b.Add(ir.OpSwiGLU, norm, nil, mm, wt("w_up", dt, 2*F, K), wt("gain2", ir.F16, K))
	kc := b.State("cache.k", ir.Type{DType: ir.F16, Shape: ir.S("C", HKV*HD)})
	vc := b.State("cache.v", ir.Type{DType: ir.F16, Shape: ir.S("C", HKV*HD)})
	qattrs := ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "n_rot": int64(HD),
		"base": 150000.0, "freq_scale": 1.0 / 32, "mode": "neox", "norm": int64(1), "eps": 1e-5, "gain": int64(1), "bias": int64(1),
		"ext_factor": 1.0, "orig_ctx": int64(4096), "beta_fast": 32.0, "beta_slow": 1.0}
	q := b.Add(ir.OpQKVRoPE, qattrs, nil, mm, wt("wqkv", dt, (H+2*HKV)*HD, K), pos, kc, vc, wt("gain3", ir.F32, K), wt("bqkv", ir.F32, (H+2*HKV)*HD))
	at := b.Add(ir.OpFlashAttention, ir.Attrs{"n_head": int64(H), "n_kv_head": int64(HKV), "head_dim": int64(HD), "scale": 0.2,
		"tile_q": int64(16), "tile_kv": int64(8), "kv_splits": int64(3), "window": int64(C / 2)}, nil,
		q, kc, vc, pos, wt("sinks", ir.F16, H))
	router := b.MatMul(mm, wt("router", ir.F32, E, K), wt("router_b", ir.F32, E))
	experts := func(p string) ir.MoEWeights {
		return ir.MoEWeights{Gate: wt(p+"gate", dt, E, FE, K), Up: wt(p+"up", dt, E, FE, K), Down: wt(p+"down", dt, E, K, FE)}
	}
	ew := experts("")
	ew.GateBias, ew.UpBias, ew.DownBias = wt("bg", ir.F16, E, FE), wt("bu", ir.F16, E, FE), wt("bd", ir.F16, E, K)
	moe := b.MoE(mm, b.TopKSoftmax(router, 2), ew, ir.Attrs{"act": ir.MoEActSwiGLUOAI, "alpha": 1.702, "limit": 7.0})
	moe = b.MoE(moe, b.Softmax(router), experts("dense_"), ir.Attrs{"act": ir.MoEActSiLU})
	b.Output("logits", b.MatMul(moe, wt("out", dt, 40, K), nil))
	b.Output("plain", b.Softmax(plain))
	b.Output("sw", b.GELU(b.SiLU(sw)))
	b.Output("attn", b.AddV(b.RMSNorm(at, wt("gain4", ir.F16, H*HD), 1e-6), b.Mul(at, wt("scale", ir.F16, H*HD))))
	b.Output(kc.Name(), kc)
	b.Output(vc.Name(), vc)
	g, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return g
}
