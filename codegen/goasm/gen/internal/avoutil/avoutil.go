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

// ActRowPointers loads the activation rows of a group kernel: row r's Q8_0
// blocks at a[r*stride:] (parameters "a" and, for rows > 1, "stride") and
// its side data ({int32 8·Σq, float32 d} per block) blockBytes·nb past them,
// one register each.
func ActRowPointers(c *build.Context, nb reg.Register, rows, blockBytes int) (y, side []reg.Register) {
	y = make([]reg.Register, rows)
	side = make([]reg.Register, rows)
	y[0] = c.Load(c.Param("a").Base(), c.GP64())
	var stride reg.Register
	if rows > 1 {
		stride = c.Load(c.Param("stride"), c.GP64())
	}
	for r := range rows {
		if r > 0 {
			y[r] = c.GP64()
			c.LEAQ(Mem{Base: y[r-1], Index: stride, Scale: 1}, y[r])
		}
		side[r] = c.GP64()
		c.IMUL3Q(U32(blockBytes), nb, side[r])
		c.ADDQ(y[r], side[r])
	}
	return y, side
}

// RowPointers loads the activation rows of a multi-row kernel: row r at
// a[r*stride:] (parameters "a" and, for rows > 1, "stride"), one register
// each.
func RowPointers(c *build.Context, rows int) []reg.Register {
	y := make([]reg.Register, rows)
	y[0] = c.Load(c.Param("a").Base(), c.GP64())
	if rows > 1 {
		stride := c.Load(c.Param("stride"), c.GP64())
		for r := 1; r < rows; r++ {
			y[r] = c.GP64()
			c.LEAQ(Mem{Base: y[r-1], Index: stride, Scale: 1}, y[r])
		}
	}
	return y
}

// ZeroYMMs returns n zeroed YMM registers (accumulators).
func ZeroYMMs(c *build.Context, n int) []reg.VecVirtual {
	acc := make([]reg.VecVirtual, n)
	for r := range acc {
		acc[r] = c.YMM()
		c.VXORPS(acc[r], acc[r], acc[r])
	}
	return acc
}
