// Command kernneon generates runtime/cpu/kern/neon_arm64.s and
// neon_arm64_stubs.go: the group kernels of kern's Packed (eight interleaved
// Q4_0, Q8_0 or MXFP4 weight rows against packed Q8_0 activation rows, and eight
// Q4_K, Q5_K or Q6_K rows against Q8_K rows, kquant.go and kquant6.go; one
// and four activation rows) for arm64 CPUs with AdvSIMD and the ARMv8.2 dot
// product (SDOT). They compute the amd64 group kernels' integer and float
// steps in the same order, so their results equal those kernels' bit for
// bit (see gemv.go); and the one-head attention tile kernels over f16 KV
// caches (attn.go), bit for bit the amd64 ones.
//
// avo emits only amd64, so this generator writes Go arm64 assembly with its
// own small emitter (emit.go); the AdvSIMD instructions Go's assembler
// lacks (SDOT by element, SCVTF, FCVTL, FMUL by element, SSHR, NEG, ...)
// are WORDs encoded by the unit-tested helpers of enc.go.
//
// Usage (from runtime/cpu/kern, see its go:generate line in neon.go):
//
//	go run ../../../codegen/goasm/gen/kernneon -dir .
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/minerva-llm/minerva/quant"
)

func main() {
	dir := flag.String("dir", ".", "directory that receives neon_arm64.s and neon_arm64_stubs.go")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "kernneon:", err)
		os.Exit(1)
	}
}

// generate returns the contents of neon_arm64.s and neon_arm64_stubs.go.
func generate() (asm, stubs []byte, err error) {
	f := &file{gen: "codegen/goasm/gen/kernneon", constraints: "arm64"}
	consts := map[string]string{
		"nibbleMask": f.u64Data("neonNibbleMask", 0x0f0f0f0f0f0f0f0f, 0x0f0f0f0f0f0f0f0f),
	}
	var lut [2]uint64 // ggml's kvalues_mxfp4, as bytes
	for i, x := range quant.MXFP4Values {
		lut[i/8] |= uint64(uint8(x)) << (8 * (i % 8))
	}
	consts["mxfp4Values"] = f.u64Data("neonMXFP4Values", lut[0], lut[1])
	for _, typ := range []string{"Q4_0", "Q8_0", "MXFP4"} {
		gemv(f, consts, typ, 1)
		gemv(f, consts, typ, 4)
	}
	for _, typ := range []string{"Q4_K", "Q5_K"} {
		kq45Group(f, consts, typ, 1)
		kq45Group(f, consts, typ, 4)
	}
	for _, k := range []offsetCodes{q6Codes, q3Codes, q2Codes} {
		offsetGroup(f, consts, k, 1)
		offsetGroup(f, consts, k, 4)
	}
	for _, typ := range []string{"Q6_K", "Q3_K", "Q2_K"} {
		kqSmallGemv(f, consts, typ)
	}
	kq45Gemv(f, consts, "Q4_K")
	kq45Gemv(f, consts, "Q5_K")
	mlx(f, consts)
	attnF16(f)
	stubs, err = f.goStubs()
	if err != nil {
		return nil, nil, err
	}
	return f.asm(), stubs, nil
}

func run(dir string) error {
	asm, stubs, err := generate()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "neon_arm64.s"), asm, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "neon_arm64_stubs.go"), stubs, 0o644)
}
