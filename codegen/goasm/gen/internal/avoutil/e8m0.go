package avoutil

import (
	"github.com/mmcloughlin/avo/attr"
	"github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// E8M0Consts are the dword constants E8M0Half reads: 1 and the bits of
// 2^-128 (0x00200000), eight of each.
type E8M0Consts struct{ Ones, Tiny Mem }

// DefineE8M0Consts defines E8M0Half's constants as prefix+"Ones32" and
// prefix+"E8M0Tiny" (each generator's file has its own).
func DefineE8M0Consts(c *build.Context, prefix string) E8M0Consts {
	k := E8M0Consts{Ones: c.StaticGlobal(prefix + "Ones32")}
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 8; i++ {
		c.AddDatum(4*i, U32(1))
	}
	k.Tiny = c.StaticGlobal(prefix + "E8M0Tiny")
	c.DataAttributes(attr.RODATA | attr.NOPTR)
	for i := 0; i < 8; i++ {
		c.AddDatum(4*i, U32(0x00200000))
	}
	return k
}

// E8M0Half sets d to the eight rows' ggml_e8m0_to_fp32_half(e) = 2^(e-128)
// from the E8M0 bytes at m (an MXFP4 group block's head): the float bits
// (e-1)<<23 for e ≥ 2, and the subnormals 0x00200000<<e for e = 0, 1
// (quant's e8m0Half). AVX2 instructions only.
func E8M0Half(c *build.Context, k E8M0Consts, m Mem, d reg.VecVirtual) {
	e, norm, tiny, big := c.YMM(), c.YMM(), c.YMM(), c.YMM()
	c.VPMOVZXBD(m, e)
	c.VPSUBD(k.Ones, e, norm)
	c.VPSLLD(Imm(23), norm, norm)
	c.VMOVDQU(k.Tiny, tiny)
	c.VPSLLVD(e, tiny, tiny)
	c.VPCMPGTD(k.Ones, e, big) // e > 1
	c.VPBLENDVB(big, norm, tiny, d)
}
