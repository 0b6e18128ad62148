package kern

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/minerva-llm/minerva/ir"
)

// TestNEONGroupKernelsExtremes runs the NEON group kernels on arbitrary
// bytes — every quant value (Q8_0 weights and activations -128 included),
// f16 scales of any finite exponent (subnormals included), blocks of
// saturated quants — and requires the emulated order bit for bit, for one
// to five activation rows with a padded stride.
func TestNEONGroupKernelsExtremes(t *testing.T) {
	useVariant(t, "neon")
	for _, wt := range []ir.DType{ir.Q4_0, ir.Q8_0} {
		for _, nb := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(nb), 7))
				scale := func(b []byte) { randF16(rng, b) }
				bb := wt.BlockBytes()
				rb := nb * bb
				data := make([]byte, 8*rb)
				for b := 0; b < 8*nb; b++ {
					blk := data[b*bb:][:bb]
					scale(blk)
					fill := byte(rng.IntN(256))
					for i := range blk[2:] {
						switch b % 3 {
						case 0:
							blk[2+i] = byte(rng.IntN(256))
						default: // saturated: all 0x00, 0xff, 0x80, 0x7f, ...
							blk[2+i] = fill
						}
					}
				}
				p := Pack(wt, 8, 32*nb, data)
				require.NotNil(t, p)
				ab := PackedActBytes(32 * nb)
				const R = 5
				stride := ab + 12
				a := make([]byte, R*stride)
				for r := 0; r < R; r++ {
					row := a[r*stride:][:ab]
					for b := 0; b < nb; b++ {
						blk := row[b*34:][:34]
						scale(blk)
						var s int32
						for i := range blk[2:] {
							q := int8(rng.IntN(256))
							if r == 1 {
								q = int8(-128 + 255*(i%2)) // -128, 127, ...
							}
							blk[2+i] = byte(q)
							s += int32(q)
						}
						side := row[nb*34+8*b:]
						binary.LittleEndian.PutUint32(side, uint32(8*s))
						binary.LittleEndian.PutUint32(side[4:], math.Float32bits(h16(blk)))
					}
				}
				requireGroupDots(t, p, data, rb, a, stride, ab, R, func(w, a []byte) float32 {
					emu, _ := emulateGroup(wt, nb, w, a)
					return emu
				})
			})
		}
	}
}

// TestNEONKQuantGroupExtremes runs the packed Q4_K, Q5_K and Q6_K NEON group
// kernels on arbitrary bytes — every code, scale and minimum (Q6_K scales
// -128 included), f16 d and dmin of any finite exponent, activations -128
// and 127, block sums that are not the sums of the quants (the kernels take
// them as they are, as the amd64 ones do) — and requires the emulated order
// bit for bit, for one to five activation rows with a padded stride.
func TestNEONKQuantGroupExtremes(t *testing.T) {
	useVariant(t, "neon")
	emu := map[ir.DType]func(nb int, w, a []byte) (float32, float64){
		ir.Q4_K: emulateQ4KGroup,
		ir.Q5_K: func(nb int, w, a []byte) (float32, float64) { return emulateQ45KGroup(ir.Q5_K, nb, w, a) },
		ir.Q6_K: emulateQ6KGroup,
	}
	for _, wt := range []ir.DType{ir.Q4_K, ir.Q5_K, ir.Q6_K} {
		for _, nb := range []int{1, 3, 16} {
			t.Run(fmt.Sprintf("%s/%d", wt, nb), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(uint64(nb), 11))
				f16 := func(b []byte) { randF16(rng, b) }
				bb := wt.BlockBytes()
				rb := nb * bb
				data := make([]byte, 8*rb)
				for i := range data {
					data[i] = byte(rng.IntN(256))
				}
				for b := 0; b < 8*nb; b++ {
					blk := data[b*bb:][:bb]
					if wt == ir.Q6_K {
						f16(blk[208:])
					} else {
						f16(blk)
						f16(blk[2:])
					}
				}
				p := Pack(wt, 8, 256*nb, data)
				require.NotNil(t, p)
				ab := p.ActBytes()
				const R = 5
				stride := ab + 12
				a := make([]byte, R*stride)
				for r := 0; r < R; r++ {
					for b := 0; b < nb; b++ {
						y := a[r*stride+b*292:][:292]
						var h [2]byte
						f16(h[:])
						binary.LittleEndian.PutUint32(y, math.Float32bits(h16(h[:])))
						for i := 0; i < 256; i++ {
							q := int8(rng.IntN(256))
							if r == 1 {
								q = int8(-128 + 255*(i%2)) // -128, 127, ...
							}
							y[4+i] = byte(q)
						}
						for j := 0; j < 16; j++ {
							s := int16(rng.IntN(8193) - 4096)
							if r == 2 { // the true sums
								s = 0
								for _, q := range y[4+16*j : 4+16*j+16] {
									s += int16(int8(q))
								}
							}
							binary.LittleEndian.PutUint16(y[260+2*j:], uint16(s))
						}
					}
				}
				requireGroupDots(t, p, data, rb, a, stride, ab, R, func(w, a []byte) float32 {
					want, _ := emu[wt](nb, w, a)
					return want
				})
			})
		}
	}
}

// randF16 writes a random finite f16 of any exponent (subnormals included)
// and either sign to b.
func randF16(rng *rand.Rand, b []byte) {
	binary.LittleEndian.PutUint16(b, uint16(rng.IntN(0x7c00))|uint16(rng.IntN(2))<<15)
}

// requireGroupDots runs p.Dots over the packed group of eight rows (data,
// rb bytes a row) against R activation rows stride bytes apart (ab bytes
// each) into a destination 11 floats a row, and requires emulate's bits
// for every row and activation row.
func requireGroupDots(t *testing.T, p *Packed, data []byte, rb int, a []byte, stride, ab, R int, emulate func(w, a []byte) float32) {
	t.Helper()
	dst := make([]float32, R*11)
	p.Dots(0, 8, a, stride, R, dst, 11)
	for r := 0; r < R; r++ {
		for j := 0; j < 8; j++ {
			want := emulate(data[j*rb:][:rb], a[r*stride:][:ab])
			require.Equal(t, math.Float32bits(want), math.Float32bits(dst[r*11+j]), "row %d act %d: kernel %v, emulated %v", j, r, dst[r*11+j], want)
		}
	}
}
