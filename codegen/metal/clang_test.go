package metal_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/metal"
	"github.com/minerva-llm/minerva/ir"
	"github.com/minerva-llm/minerva/ir/eval"
	"github.com/minerva-llm/minerva/quant"
)

// The emitted MSL cannot run here, so the tests hold it to two checks that
// need only clang (Debian's package; .ci/run installs it):
//
//   - type-check: every emitted library compiles as C++17 against
//     testdata/mslshim.h, which declares the MSL types, address spaces and
//     built-ins the kernels use;
//   - emulation: the kernels run on the CPU through the same header, one
//     std::thread per Metal thread with real barriers, launched exactly as
//     the library's schedule says, and their outputs (and KV-cache writes)
//     are compared with ir/eval on random inputs.
//
// Without clang++ both skip with a message saying so.

func clangOrSkip(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("clang++")
	if err != nil {
		t.Skip("clang++ not on PATH: the MSL type-check and CPU emulation need it (apt-get install clang)")
	}
	return p
}

// clangArgs are the flags shared by the type-check and the emulation:
// unknown attributes ([[buffer(n)]] and the thread-position built-ins) are
// MSL's, so they are the one warning allowed.
func clangArgs() []string {
	inc, _ := filepath.Abs("testdata")
	return []string{"-std=c++17", "-Wall", "-Werror", "-Wno-unknown-attributes", "-I", inc, "-include", filepath.Join(inc, "mslshim.h")}
}

func typeCheck(t *testing.T, clang, path string) {
	t.Helper()
	args := append(clangArgs(), "-fsyntax-only", "-x", "c++", path)
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang++ rejects %s: %v\n%s", path, err, out)
	}
}

// TestTypeCheck compiles the golden libraries and the library of every
// emulation case (which between them use every kernel family and every
// weight dtype) as C++ against the shim.
func TestTypeCheck(t *testing.T) {
	clang := clangOrSkip(t)
	for _, fx := range fixtures {
		t.Run(fx.golden, func(t *testing.T) {
			t.Parallel()
			typeCheck(t, clang, filepath.Join("testdata", fx.golden))
		})
	}
	for _, c := range emuCases() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			g, _, _ := c.build(t)
			lib, err := metal.Emit(g)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "lib.metal")
			if err := os.WriteFile(path, []byte(lib.Source), 0o644); err != nil {
				t.Fatal(err)
			}
			typeCheck(t, clang, path)
		})
	}
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

// emulate runs lib's launches for one step on the CPU and returns the final
// bytes of every buffer that is not a weight, by value ID.
func emulate(t *testing.T, clang string, g *ir.Graph, lib *metal.Library, w weightMap, inputs map[string]eval.Tensor, ctx, T int) map[int][]byte {
	t.Helper()
	dir := t.TempDir()
	byID := map[int]*ir.Value{}
	for _, v := range g.Values {
		byID[v.ID] = v
	}
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
				bufs[v.ID] = w[v.Name()]
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
	bufs[-1] = make([]byte, scratch)
	var m strings.Builder
	m.WriteString("#include \"lib.metal\"\n\nint main() {\n    uint T = " + fmt.Sprint(T) + ";\n")
	for id, b := range bufs {
		if err := os.WriteFile(filepath.Join(dir, bufName(id)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&m, "    mslemu::Buf %s = mslemu::load(%q);\n", varName(id), bufName(id))
	}
	for _, l := range lib.Step(T) {
		var args []string
		for _, a := range l.Args {
			args = append(args, varName(a.Value)+".ptr()")
		}
		fmt.Fprintf(&m, "    mslemu::launch(%d, %d, %d, %d, [&](uint3 tg, uint tid, uint lane, uint sg) { %s(%s, T, tg, tid, lane, sg); });\n",
			l.Grid[0].Count(T), l.Grid[1].Count(T), l.Grid[2].Count(T), l.Threads, l.Kernel, strings.Join(args, ", "))
	}
	for id := range bufs {
		if v := byID[id]; v == nil || v.Op != ir.OpWeight {
			fmt.Fprintf(&m, "    mslemu::save(%q, %s);\n", bufName(id), varName(id))
		}
	}
	m.WriteString("    return 0;\n}\n")
	for name, src := range map[string]string{"lib.metal": lib.Source, "main.cpp": m.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(clangArgs(), "-O0", "-pthread", "-o", filepath.Join(dir, "emu"), "-x", "c++", filepath.Join(dir, "main.cpp"))
	if out, err := exec.Command(clang, args...).CombinedOutput(); err != nil {
		t.Fatalf("clang++ (emulation build): %v\n%s", err, out)
	}
	run := exec.Command(filepath.Join(dir, "emu"))
	run.Dir = dir
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("emulation run: %v\n%s", err, out)
	}
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

// relErr returns max|got − want| / max|want|, and an error for NaNs or a
// length mismatch.
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
		return maxDiff, nil
	}
	return maxDiff / maxRef, nil
}
