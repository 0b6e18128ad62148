// Package amx makes Intel's Advanced Matrix Extensions usable from Go: the
// kernel's permission for the tile state (Enable), a tile configuration,
// and one int8 tile product (DotTile) held to a Go reference. It is the
// ground for AMX prefill kernels, which the CPU backend does not have yet.
//
// Why: a 2-core Intel Xeon VM with AMX ran TDPBUSD (16×16 int32 sums of
// 64 u8·s8 products each, 16,384 multiply-adds) at about 3.3 trillion
// multiply-adds a second on one core (BenchmarkTDPBUSD), where the
// backend's VNNI kernels peak near 0.2 (two 256-bit vpdpbusd a cycle);
// its prefill matmuls already run close to that VNNI peak.
//
// What did not pay (2026-12-06, same VM): a Q8_0 kernel of two packed
// groups against sixteen activation rows that loaded each 32-weight block's
// tiles straight from the packed weights and activations (TDPBSUD,
// activations signed, weights w+128), stored the two 16×8 sums and applied
// the block's scales in AVX-512, bit for bit the pair kernels: 138 GMAC/s
// on one core against their 186, and 222 with the scales left out (about
// 130 cycles a block for three tile loads, two products and two stores).
// A tile product pays where its sums stay in a tile across many blocks;
// a kernel for the 32-element scales of Q8_0, Q4_0 and the k-quants' sub
// blocks needs the loads, products and the scale arithmetic of several
// blocks in flight at once.
//
// Go's assembler knows no AMX mnemonics (nor does avo), so amx_amd64.s
// writes each instruction as its VEX bytes, with the encoding in a
// comment. Tile state is per thread: every function here loads its
// configuration and releases the tiles before it returns, so a goroutine
// that moves between threads between calls carries none. Go does not
// preempt assembly functions asynchronously, and the kernel saves the tile
// state of a thread interrupted by a signal (TestDotTileUnderPreemption).
package amx

import (
	"errors"
	"sync"

	"golang.org/x/sys/cpu"
)

// Rows, Bytes and Sums are a tile's shape in DotTile: 16 rows of 64 bytes,
// and the 16×16 int32 sums of a product.
const (
	Rows  = 16
	Bytes = 64
	Sums  = Rows * Rows
)

var (
	once    sync.Once
	errInit error
)

// Enable asks the kernel, once per process, for the AMX tile state
// (Linux's arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA). It returns an
// error naming what is missing where the CPU has no AMX-INT8 or the system
// refuses; then nothing else here may be called.
func Enable() error {
	once.Do(func() {
		if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 {
			errInit = errors.New("amx: this CPU has no AMX-INT8")
			return
		}
		errInit = requestTileData()
	})
	return errInit
}

// config is the 64-byte tile configuration (palette 1) with tiles 0–7 all
// Rows × Bytes.
var config = func() (c [64]byte) {
	c[0] = 1 // palette
	for t := range 8 {
		c[16+2*t] = Bytes // bytes per row, little-endian uint16
		c[48+t] = Rows
	}
	return c
}()

// DotTile sets c[m·16+n] = Σ_k a[m·64+k]·b[(k/4)·64+4n+k%4] for m, n < 16
// and k < 64: TDPBUSD's product of a 16×64 tile of unsigned bytes a by a
// 64×16 matrix of signed bytes b held four rows to a dword (AMX's "VNNI"
// layout: b's row k/4 holds column n's bytes 4n..4n+3). Enable must have
// succeeded.
func DotTile(c *[Sums]int32, a, b *[Rows * Bytes]byte) {
	dotTile(&config, a, b, c, 1)
}
