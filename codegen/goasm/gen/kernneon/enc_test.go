package main

import (
	"fmt"
	"strings"
	"testing"
)

// The expected words are LLVM's (llvm-mc -triple=aarch64 -mattr=+dotprod
// -show-encoding) for the mnemonics in the test names; they also agree with
// the field layouts in the ARM ARM quoted in enc.go.
func TestEncodings(t *testing.T) {
	for _, c := range []struct {
		asm  string
		got  uint32
		want uint32
	}{
		{"sdot v0.4s, v1.16b, v2.4b[0]", sdotElem(0, 1, 2, 0), 0x4f82e020},
		{"sdot v0.4s, v0.16b, v0.4b[0]", sdotElem(0, 0, 0, 0), 0x4f80e000},
		{"sdot v31.4s, v31.16b, v31.4b[3]", sdotElem(31, 31, 31, 3), 0x4fbfebff},
		{"sdot v31.4s, v17.16b, v30.4b[3]", sdotElem(31, 17, 30, 3), 0x4fbeea3f},
		{"sdot v8.4s, v26.16b, v16.4b[1]", sdotElem(8, 26, 16, 1), 0x4fb0e348},
		{"sdot v9.4s, v27.16b, v23.4b[2]", sdotElem(9, 27, 23, 2), 0x4f97eb69},
		{"sdot v11.4s, v29.16b, v17.4b[2]", sdotElem(11, 29, 17, 2), 0x4f91ebab},
		{"sdot v15.4s, v25.16b, v23.4b[3]", sdotElem(15, 25, 23, 3), 0x4fb7eb2f},
		{"fmul v19.4s, v16.4s, v18.s[1]", fmulElem(19, 16, 18, 1), 0x4fb29213},
		{"fmul v20.4s, v17.4s, v18.s[1]", fmulElem(20, 17, 18, 1), 0x4fb29234},
		{"fmul v0.4s, v1.4s, v2.s[0]", fmulElem(0, 1, 2, 0), 0x4f829020},
		{"fmul v31.4s, v30.4s, v29.s[3]", fmulElem(31, 30, 29, 3), 0x4fbd9bdf},
		{"fmul v2.4s, v3.4s, v17.s[2]", fmulElem(2, 3, 17, 2), 0x4f919862},
		{"fmul v5.4s, v9.4s, v31.s[2]", fmulElem(5, 9, 31, 2), 0x4f9f9925},
		{"scvtf v0.4s, v1.4s", scvtf4S(0, 1), 0x4e21d820},
		{"scvtf v13.4s, v29.4s", scvtf4S(13, 29), 0x4e21dbad},
		{"scvtf v31.4s, v31.4s", scvtf4S(31, 31), 0x4e21dbff},
		{"scvtf v8.4s, v8.4s", scvtf4S(8, 8), 0x4e21d908},
		{"fcvtl v16.4s, v30.4h", fcvtl(16, 30), 0x0e217bd0},
		{"fcvtl v0.4s, v0.4h", fcvtl(0, 0), 0x0e217800},
		{"fcvtl v31.4s, v1.4h", fcvtl(31, 1), 0x0e21783f},
		{"fcvtl2 v17.4s, v30.8h", fcvtl2(17, 30), 0x4e217bd1},
		{"fcvtl2 v0.4s, v31.8h", fcvtl2(0, 31), 0x4e217be0},
		{"mla v8.4s, v16.4s, v27.4s", mla4S(8, 16, 27), 0x4ebb9608},
		{"mla v0.4s, v0.4s, v0.4s", mla4S(0, 0, 0), 0x4ea09400},
		{"mla v31.4s, v31.4s, v31.4s", mla4S(31, 31, 31), 0x4ebf97ff},
		{"mla v10.4s, v27.4s, v14.s[0]", mlaElem4S(10, 27, 14, 0), 0x6f8e036a},
		{"mla v11.4s, v28.4s, v15.s[3]", mlaElem4S(11, 28, 15, 3), 0x6faf0b8b},
		{"mla v0.4s, v1.4s, v2.s[1]", mlaElem4S(0, 1, 2, 1), 0x6fa20020},
		{"mla v31.4s, v30.4s, v29.s[2]", mlaElem4S(31, 30, 29, 2), 0x6f9d0bdf},
		{"saddlp v14.4s, v12.8h", saddlp4S(14, 12), 0x4e60298e},
		{"saddlp v0.4s, v0.8h", saddlp4S(0, 0), 0x4e602800},
		{"saddlp v31.4s, v17.8h", saddlp4S(31, 17), 0x4e602a3f},
		{"sdot v14.4s, v10.16b, v12.16b", sdot4S(14, 10, 12), 0x4e8c954e},
		{"sdot v0.4s, v0.16b, v0.16b", sdot4S(0, 0, 0), 0x4e809400},
		{"sdot v31.4s, v31.16b, v31.16b", sdot4S(31, 31, 31), 0x4e9f97ff},
		{"sdot v15.4s, v11.16b, v13.16b", sdot4S(15, 11, 13), 0x4e8d956f},
		{"fadd v3.4s, v2.4s, v1.4s", fadd4S(3, 2, 1), 0x4e21d443},
		{"fadd v0.4s, v0.4s, v0.4s", fadd4S(0, 0, 0), 0x4e20d400},
		{"fadd v31.4s, v30.4s, v29.4s", fadd4S(31, 30, 29), 0x4e3dd7df},
		{"sxtl v17.8h, v16.8b", sxtl(17, 16, false, false), 0x0f08a611},
		{"sxtl2 v18.8h, v16.16b", sxtl(18, 16, false, true), 0x4f08a612},
		{"sxtl v20.4s, v17.4h", sxtl(20, 17, true, false), 0x0f10a634},
		{"sxtl2 v21.4s, v17.8h", sxtl(21, 17, true, true), 0x4f10a635},
		{"sxtl v0.8h, v0.8b", sxtl(0, 0, false, false), 0x0f08a400},
		{"sxtl2 v31.4s, v31.8h", sxtl(31, 31, true, true), 0x4f10a7ff},
		{"sshr v11.4s, v11.4s, #11", sshr4S(11, 11, 11), 0x4f35056b},
		{"sshr v11.4s, v10.4s, #16", sshr4S(11, 10, 16), 0x4f30054b},
		{"sshr v0.4s, v0.4s, #1", sshr4S(0, 0, 1), 0x4f3f0400},
		{"sshr v31.4s, v31.4s, #32", sshr4S(31, 31, 32), 0x4f2007ff},
		{"neg v11.4s, v11.4s", neg4S(11, 11), 0x6ea0b96b},
		{"neg v0.4s, v31.4s", neg4S(0, 31), 0x6ea0bbe0},
		{"neg v31.4s, v0.4s", neg4S(31, 0), 0x6ea0b81f},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %#08x, want %#08x", c.asm, c.got, c.want)
		}
	}
}

func TestEncodingOperandChecks(t *testing.T) {
	for name, f := range map[string]func(){
		"lane 4":   func() { sdotElem(0, 1, 2, 4) },
		"lane -1":  func() { fmulElem(0, 1, 2, -1) },
		"V32":      func() { scvtf4S(32, 0) },
		"V-1":      func() { fcvtl(0, -1) },
		"Vm V32":   func() { sdotElem(0, 1, 32, 0) },
		"fcvtl2 V": func() { fcvtl2(1, 40) },
		"sshr 0":   func() { sshr4S(0, 1, 0) },
		"sshr 33":  func() { sshr4S(0, 1, 33) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("no panic")
				}
			}()
			f()
		})
	}
}

// TestFrame: argument offsets and frame sizes as go vet's asmdecl checks
// them for the kernels' signatures.
func TestFrame(t *testing.T) {
	off, size := frame([]param{{"nb", "int"}, {"w", "[]byte"}, {"a", "[]byte"}, {"stride", "int"}, {"dst", "[]float32"}, {"ld", "int"}}, nil)
	want := map[string]int{"nb": 0, "w_base": 8, "w_len": 16, "w_cap": 24, "a_base": 32, "a_len": 40, "a_cap": 48,
		"stride": 56, "dst_base": 64, "dst_len": 72, "dst_cap": 80, "ld": 88}
	if fmt.Sprint(off) != fmt.Sprint(want) || size != 96 {
		t.Errorf("got %v, %d", off, size)
	}
	off, size = frame([]param{{"dst", "[]float32"}, {"alpha", "float32"}, {"x", "[]float32"}}, []param{{"s", "float32"}})
	// 60, not 64: go vet's asmdecl ends the frame at the float32 result
	// (the MLX kernels return one).
	if off["alpha"] != 24 || off["x_base"] != 32 || off["ret"] != 56 || size != 60 {
		t.Errorf("got %v, %d", off, size)
	}
}

// TestGenerate: the generator is deterministic and emits the group and
// k-quant kernels, each SDOT as a WORD, each stub with //go:noescape.
func TestGenerate(t *testing.T) {
	asm1, stubs1, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	asm2, stubs2, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	if string(asm1) != string(asm2) || string(stubs1) != string(stubs2) {
		t.Fatal("output differs between runs")
	}
	for _, k := range []string{"gemvQ4_0x8NEON", "gemmQ4_0x8x4NEON", "gemvQ8_0x8NEON", "gemmQ8_0x8x4NEON",
		"gemvMXFP4x8NEON", "gemmMXFP4x8x4NEON",
		"gemvQ4_Kx8NEON", "gemmQ4_Kx8x4NEON", "gemvQ5_Kx8NEON", "gemmQ5_Kx8x4NEON", "gemvQ6_Kx8NEON",
		"gemmQ6_Kx8x4NEON", "gemvQ3_Kx8NEON", "gemmQ3_Kx8x4NEON",
		"gemvQ2_Kx8NEON", "gemmQ2_Kx8x4NEON", "gemvQ2_KNEON", "gemvQ3_KNEON", "gemvQ4_KNEON", "gemvQ5_KNEON", "gemvQ6_KNEON"} {
		if !strings.Contains(string(asm1), "TEXT ·"+k+"(SB), NOSPLIT|NOFRAME") {
			t.Errorf("no TEXT for %s", k)
		}
		if !strings.Contains(string(stubs1), "//go:noescape\nfunc "+k+"(") {
			t.Errorf("no stub for %s", k)
		}
	}
	// Q4_0 and MXFP4: 4 vectors × 2 nibble halves × 2 register halves ×
	// rows; Q8_0: 8 vectors × 2 halves × rows; packed Q4_K and Q5_K: 4 groups × 8
	// vectors × 2 nibble halves × 2 register halves × rows; packed Q6_K,
	// Q3_K and Q2_K: 2 halves × 8 vectors × 4 chunks × 2 register halves ×
	// rows; rows = 1 + 4. The five k-quant row kernels: 8 chunks × 2 halves.
	want := 2*16*5 + 16*5 + 2*128*5 + 3*128*5 + 5*16
	if n := strings.Count(string(asm1), "// sdot "); n != want {
		t.Errorf("%d sdot, want %d", n, want)
	}
}
