// Package avoutil holds what the avo-based kernel generators share: writing
// a build context as a Go assembly file plus its stubs, and small emitted
// sequences used by several kernels.
package avoutil

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mmcloughlin/avo/attr"
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

// ScoresRows is how many rows TileScores's main loop scores at once: a
// row's dot is one chain of dependent FMAs (len(q)/8 of them, 16 at head
// dimension 128), so one row at a time waits on the FMA latency; four
// independent chains fill the pipes. Each row keeps its own accumulator
// and order, so the bits are those of one row at a time.
const ScoresRows = 4

// TileScores emits an attention tile-scores kernel: func name(q, k, stride,
// out) (types in sig) setting out[j] to the dot of q with row j of k, rows
// stride units apart (stride << strideShift bytes). Per row it zeroes an
// eight-lane accumulator, runs unit (which accumulates one unit of each
// row k[r] into acc[r], reading q at q; the kernel then advances q by
// qStep and the rows by kStep bytes) len(q) >> unitShift times, and stores
// the lanes summed as HSumFloat8. ScoresRows rows at a time while that
// many remain, then one. Labels start with prefix.
func TileScores(c *build.Context, name, sig, prefix string, doc []string, strideShift, unitShift uint64,
	qStep, kStep int, unit func(acc []reg.VecVirtual, q Mem, k []Mem)) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr(sig)
	c.Doc(doc...)
	d := c.Load(c.Param("q").Len(), c.GP64())
	qp := c.Load(c.Param("q").Base(), c.GP64())
	kp := c.Load(c.Param("k").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	if strideShift > 0 {
		c.SHLQ(Imm(strideShift), st)
	}
	n := c.Load(c.Param("out").Len(), c.GP64())
	op := c.Load(c.Param("out").Base(), c.GP64())
	c.SHRQ(Imm(unitShift), d)
	st3 := c.GP64() // three rows' bytes
	c.LEAQ(Mem{Base: st, Index: st, Scale: 2}, st3)
	// rows emits the loop body over R rows at kp, kp+st, …: their dots
	// into out[0:R], then out and kp advanced past them.
	rows := func(label string, R int) {
		acc := make([]reg.VecVirtual, R)
		for r := range acc {
			acc[r] = c.YMM()
			c.VXORPS(acc[r], acc[r], acc[r])
		}
		i, qi, ki := c.GP64(), c.GP64(), c.GP64()
		c.MOVQ(d, i)
		c.MOVQ(qp, qi)
		c.MOVQ(kp, ki)
		k := []Mem{{Base: ki}, {Base: ki, Index: st, Scale: 1}, {Base: ki, Index: st, Scale: 2}, {Base: ki, Index: st3, Scale: 1}}[:R]
		c.Label(label)
		unit(acc, Mem{Base: qi}, k)
		c.ADDQ(U32(qStep), qi)
		c.ADDQ(U32(kStep), ki)
		c.DECQ(i)
		c.JNZ(LabelRef(label))
		for r := range acc {
			c.VMOVSS(HSumFloat8(c, acc[r]), Mem{Base: op, Disp: 4 * r})
		}
		c.ADDQ(U32(4*R), op)
		if R == 1 {
			c.ADDQ(st, kp)
		} else {
			c.LEAQ(Mem{Base: kp, Index: st, Scale: 4}, kp)
		}
	}
	c.CMPQ(n, Imm(ScoresRows))
	c.JB(LabelRef(prefix + "_one"))
	c.Label(prefix + "_rows")
	rows(prefix+"_cols", ScoresRows)
	c.SUBQ(Imm(ScoresRows), n)
	c.CMPQ(n, Imm(ScoresRows))
	c.JAE(LabelRef(prefix + "_rows"))
	c.Label(prefix + "_one")
	c.TESTQ(n, n)
	c.JZ(LabelRef(prefix + "_done"))
	c.Label(prefix + "_row")
	rows(prefix+"_col", 1)
	c.DECQ(n)
	c.JNZ(LabelRef(prefix + "_row"))
	c.Label(prefix + "_done")
	c.VZEROUPPER()
	c.RET()
}

// TileAxpyRows emits an attention weighted-values kernel: func name(acc, w,
// v, stride) (types in sig) adding w[j]·row j of v (rows stride units
// apart, stride << strideShift bytes) to acc for every j. acc is cut into
// units of accBytes (len(acc) >> unitShift of them, each vBytes of a row of
// v); pass(label, units, ap, wp0, n0, vp0, st) emits one pass of every row
// over that many units at ap, big units at a time while they last, then one.
func TileAxpyRows(c *build.Context, name, sig, prefix string, doc []string, strideShift, unitShift uint64,
	big, accBytes, vBytes int, pass func(label string, units int, ap, wp0, n0, vp0, st reg.Register)) {
	c.Function(name)
	c.Attributes(attr.NOSPLIT)
	c.Pragma("noescape")
	c.SignatureExpr(sig)
	c.Doc(doc...)
	d := c.Load(c.Param("acc").Len(), c.GP64())
	ap := c.Load(c.Param("acc").Base(), c.GP64())
	wp0 := c.Load(c.Param("w").Base(), c.GP64())
	n0 := c.Load(c.Param("w").Len(), c.GP64())
	vp0 := c.Load(c.Param("v").Base(), c.GP64())
	st := c.Load(c.Param("stride"), c.GP64())
	if strideShift > 0 {
		c.SHLQ(Imm(strideShift), st)
	}
	c.SHRQ(Imm(unitShift), d)
	c.TESTQ(n0, n0)
	c.JZ(LabelRef(prefix + "_done"))
	c.Label(prefix + "_chunk")
	c.TESTQ(d, d)
	c.JZ(LabelRef(prefix + "_done"))
	c.CMPQ(d, Imm(uint64(big)))
	c.JL(LabelRef(prefix + "_small"))
	pass(prefix+"_rows", big, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(uint64(big*accBytes)), ap)
	c.ADDQ(U32(uint64(big*vBytes)), vp0)
	c.SUBQ(Imm(uint64(big)), d)
	c.JMP(LabelRef(prefix + "_chunk"))
	c.Label(prefix + "_small")
	pass(prefix+"_row1", 1, ap, wp0, n0, vp0, st)
	c.ADDQ(U32(uint64(accBytes)), ap)
	c.ADDQ(U32(uint64(vBytes)), vp0)
	c.DECQ(d)
	c.JMP(LabelRef(prefix + "_chunk"))
	c.Label(prefix + "_done")
	c.VZEROUPPER()
	c.RET()
}
