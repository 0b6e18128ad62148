package gputest

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/minerva-llm/minerva/codegen/gpu"
	"github.com/minerva-llm/minerva/ir"
)

func TestRelErr(t *testing.T) {
	if e, err := RelErr([]float32{1, -2.5, 3}, []float32{1, -2, 4}); err != nil || e != 0.25 {
		t.Errorf("RelErr = %v, %v, want 0.25", e, err)
	}
	for _, c := range []struct {
		got, want []float32
		err       string
	}{
		{[]float32{1}, []float32{1, 2}, "1 values, want 2"},
		{[]float32{1, float32(math.NaN())}, []float32{1, 2}, "value 1 is NaN"},
		{[]float32{1, float32(math.Inf(-1))}, []float32{1, 2}, "value 1 is -Inf"},
		{[]float32{0, 0}, []float32{0, 0}, "all zeros"},
	} {
		if _, err := RelErr(c.got, c.want); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("RelErr(%v, %v): %v, want an error saying %q", c.got, c.want, err, c.err)
		}
	}
	// Per row, a small row is measured against its own magnitude.
	got, want := []float32{1e-3, 2e-3, 100, 200}, []float32{1.1e-3, 2e-3, 100, 200}
	if e, err := RowRelErr(got, want, 2); err != nil || math.Abs(e-0.05) > 1e-6 {
		t.Errorf("RowRelErr = %v, %v, want 0.05", e, err)
	}
	if e, _ := RelErr(got, want); e > 1e-6 {
		t.Errorf("RelErr of the whole = %v, want below 1e-6", e)
	}
	if _, err := RowRelErr(got, want, 3); err == nil {
		t.Error("RowRelErr accepted rows of 3 over 4 values")
	}
}

func TestKit(t *testing.T) {
	s := Seeds{Last: 10, Stream: 7}
	r := s.Next()
	if r != (Rand{11, 7}) || s.Next() != (Rand{12, 7}) {
		t.Fatalf("Seeds hands out %v then %v", r, s.Next())
	}
	a, b := r.Kit(t, "a").Vals(1000, 2), r.Kit(t, "b").Vals(1000, 2)
	if !slices.Equal(a, b) {
		t.Error("two kits of one Rand draw different values")
	}
	for i, v := range a {
		if v == 0 || math.Abs(float64(v)) > 2 {
			t.Fatalf("value %d is %v, want non-zero within ±2", i, v)
		}
	}
	k := r.Kit(t, "w")
	k.Weight("q", ir.Q8_0, 1, 2, 64)
	if n := len(k.W["q"]); n != 2*64/32*34 {
		t.Errorf("a [2, 64] Q8_0 weight has %d bytes", n)
	}
	cases := Cases(&Seeds{Last: 100, Stream: 7}, Embeds(ir.F16, ir.Q4_0)...)
	if len(cases) != 2 || cases[0].Name != "embed/f16" || cases[1].Name != "embed/q4_0" {
		t.Errorf("Cases built %v", cases)
	}
}

func TestScheduleCheck(t *testing.T) {
	lib := &gpu.Library{
		Kernels: []gpu.Kernel{{Name: "mv", Family: "matvec"}, {Name: "mm", Family: "matmul_tiled"}, {Name: "rope", Family: "rope_kv"}, {Name: "q", Family: "qkv_rope"}},
		Launches: []gpu.Launch{
			{Kernel: "mv", MaxT: 1}, {Kernel: "mm", MinT: 2}, {Kernel: "q"}, {Kernel: "rope", MinT: 2},
		},
	}
	metal := Schedule{MatVec: []string{"matvec", "swiglu"}}
	cuda := Schedule{MatVec: []string{"matvec", "swiglu", "qkv_rope"}, Prefill: []string{"rope_kv"}}
	for _, c := range []struct {
		s    Schedule
		T    int
		want string
	}{
		{metal, 1, ""},
		{metal, 2, ""}, // rope_kv is no prefill family of this schedule
		{cuda, 1, ""},
		{cuda, 3, "a step of 3 tokens runs q (qkv_rope)"},
	} {
		err := c.s.Check(lib, c.T)
		if (err == nil) != (c.want == "") || err != nil && err.Error() != c.want {
			t.Errorf("%+v at T = %d: %v, want %q", c.s, c.T, err, c.want)
		}
	}
	lib.Launches[0].MaxT = 0 // matvec at every T
	if err := metal.Check(lib, 2); err == nil || !strings.Contains(err.Error(), "runs mv (matvec)") {
		t.Errorf("a prefill step running matvec: %v", err)
	}
	lib.Launches[1].MinT = 0 // tiled at every T
	if err := (Schedule{}).Check(lib, 1); err == nil || !strings.Contains(err.Error(), "runs mm (matmul_tiled)") {
		t.Errorf("a step of one token running a tiled kernel: %v", err)
	}
}

// TestEmuHost builds a program on testdata/emuhost.h alone (it must stand
// by itself, with and without load slack) that round-trips binary16 values
// and a buffer file.
func TestEmuHost(t *testing.T) {
	clang := ClangXX(t, "building emuhost.h")
	const src = `
int main() {
    const float in[] = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f, 1e9f};
    const unsigned short want[] = {0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff, 0x0400, 0x0001, 0x7c00};
    for (int i = 0; i < 8; ++i) {
        const unsigned short h = emuhost::f2h(in[i]);
        if (h != want[i] || (i < 7 && emuhost::h2f(h) != in[i])) {
            std::printf("%g: %#x, want %#x\n", in[i], h, want[i]);
            return 1;
        }
    }
    emuhost::Buf b = emuhost::load("in.bin");
    if (b.data.size() != 5 || b.data.capacity() < 5 + EMUHOST_LOAD_SLACK) {
        std::printf("size %zu, capacity %zu\n", b.data.size(), b.data.capacity());
        return 1;
    }
    unsigned char* p = b.ptr();
    p[4] = 'x';
    emuhost::save("out.bin", b);
    std::printf("ok\n");
    return 0;
}
`
	inc, err := filepath.Abs(filepath.Join("testdata", "emuhost.h"))
	if err != nil {
		t.Fatal(err)
	}
	for _, slack := range []string{"0", "64"} {
		t.Run("slack="+slack, func(t *testing.T) {
			e := &Emulator{Compiler: clang, Flags: []string{"-std=c++17", "-Wall", "-Werror", "-DEMUHOST_LOAD_SLACK=" + slack, "-include", inc}}
			dir := t.TempDir()
			e.BuildAndRun(t, dir, map[string][]byte{"main.cpp": []byte(src), "in.bin": []byte("abcde")})
			if b, err := os.ReadFile(filepath.Join(dir, "out.bin")); err != nil || string(b) != "abcdx" {
				t.Errorf("out.bin: %q, %v", b, err)
			}
		})
	}
}
