// Package avoutil holds what the avo-based kernel generators share: writing
// a build context as a Go assembly file plus its stubs, and small emitted
// sequences used by several kernels.
package avoutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/pass"
	"github.com/mmcloughlin/avo/printer"
	"github.com/mmcloughlin/avo/reg"
)

// Write compiles c and writes dir/asmFile and dir/stubsFile for package
// kern, with a header naming the generator (fixed whatever dir is, so that a
// regeneration into a temporary directory compares equal).
func Write(c *build.Context, generator, dir, asmFile, stubsFile string) error {
	pc := printer.Config{Name: generator, Pkg: "kern"}
	asm, err := os.Create(filepath.Join(dir, asmFile))
	if err != nil {
		return err
	}
	defer asm.Close()
	stubs, err := os.Create(filepath.Join(dir, stubsFile))
	if err != nil {
		return err
	}
	defer stubs.Close()
	cfg := &build.Config{
		ErrOut:    os.Stderr,
		MaxErrors: 10,
		Passes: []pass.Interface{
			pass.Compile,
			&pass.Output{Writer: asm, Printer: printer.NewGoAsm(pc)},
			&pass.Output{Writer: stubs, Printer: printer.NewStubs(pc)},
		},
	}
	if build.Main(cfg, c) != 0 {
		return fmt.Errorf("generation failed")
	}
	return nil
}

// HSumFloat8 is ggml's hsum_float_8: the eight lanes of acc summed as
// (hi+lo), then pairs, then singles, left in the low lane of an XMM
// register.
func HSumFloat8(c *build.Context, acc reg.VecVirtual) reg.VecVirtual {
	r := c.XMM()
	c.VEXTRACTF128(Imm(1), acc, r)
	c.VADDPS(acc.AsX(), r, r) // hi + lo
	h := c.XMM()
	c.VMOVHLPS(r, r, h)
	c.VADDPS(h, r, r) // r0+r2, r1+r3
	c.VMOVSHDUP(r, h)
	c.VADDSS(h, r, r) // (r0+r2) + (r1+r3)
	return r
}
